"""The real components, built from the pinned wrapper modules under ``go/``.

Each wrapper folder holds only a ``go.mod``/``go.sum`` whose ``tool`` lines name
the main packages to build; the version of a component is the version its
wrapper requires of the upstream module. Binaries go to a cache outside the
work tree, one folder per component and version::

    ${XDG_CACHE_HOME:-~/.cache}/gpu-quota-portal/realcluster/<component>-<version>/bin/

A ``stamp`` file beside ``bin/`` records a hash of the wrapper's go.mod, go.sum
and build flags: a second build with the same stamp builds nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

GO_DIR = Path(__file__).resolve().parent / "go"


def cache_root() -> Path:
    """Where built binaries and control-plane state live (outside the work tree)."""
    override = os.environ.get("REALCLUSTER_CACHE")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpu-quota-portal" / "realcluster"


@dataclass(frozen=True)
class Component:
    """One upstream Go module and the binaries built from it."""

    name: str
    module: str
    #: binary name -> main package path
    binaries: dict[str, str]
    #: ``-X`` assignments; ``{version}`` is replaced by the module's version
    version_vars: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)

    @property
    def wrapper(self) -> Path:
        return GO_DIR / self.name

    @property
    def version(self) -> str:
        """The version the wrapper's go.mod requires of :attr:`module`."""
        text = (self.wrapper / "go.mod").read_text()
        match = re.search(rf"^\s*(?:require\s+)?{re.escape(self.module)}\s+(v\S+)", text, re.M)
        if not match:
            raise RuntimeError(f"{self.wrapper}/go.mod does not require {self.module}")
        return match.group(1)

    @property
    def home(self) -> Path:
        return cache_root() / f"{self.name}-{self.version}"

    @property
    def bin_dir(self) -> Path:
        return self.home / "bin"

    def binary(self, name: str) -> Path:
        return self.bin_dir / name

    def ldflags(self) -> str:
        version = self.version
        parts = ["-s", "-w"]
        for var in self.version_vars:
            parts += ["-X", var.format(version=version, minor=_minor(version))]
        return " ".join(parts)

    def stamp(self) -> str:
        digest = hashlib.sha256()
        for name in ("go.mod", "go.sum"):
            digest.update((self.wrapper / name).read_bytes())
        digest.update(self.ldflags().encode())
        digest.update(json.dumps(self.binaries, sort_keys=True).encode())
        return digest.hexdigest()

    def is_built(self) -> bool:
        stamp = self.home / "stamp"
        return (stamp.is_file() and stamp.read_text().strip() == self.stamp()
                and all(self.binary(b).is_file() for b in self.binaries))

    def module_dir(self) -> Path:
        """The upstream module's source folder in the Go module cache (CRDs, configs)."""
        out = subprocess.run(
            ["go", "mod", "download", "-json", f"{self.module}@{self.version}"],
            cwd=self.wrapper, check=True, capture_output=True, text=True, env=go_env(),
        ).stdout
        return Path(json.loads(out)["Dir"])


def _minor(version: str) -> str:
    parts = version.lstrip("v").split(".")
    return parts[1] if len(parts) > 1 else "0"


_K8S_VERSION_VARS = (
    "k8s.io/component-base/version.gitVersion={version}",
    "k8s.io/component-base/version.gitMajor=1",
    "k8s.io/component-base/version.gitMinor={minor}",
    "k8s.io/component-base/version.gitTreeState=clean",
)

ETCD = Component("etcd", "go.etcd.io/etcd/server/v3", {"etcd": "go.etcd.io/etcd/server/v3"})
KUBERNETES = Component(
    "kubernetes", "k8s.io/kubernetes",
    {name: f"k8s.io/kubernetes/cmd/{name}"
     for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")},
    version_vars=_K8S_VERSION_VARS,
)
KUEUE = Component("kueue", "sigs.k8s.io/kueue", {"kueue": "sigs.k8s.io/kueue/cmd/kueue"},
                  version_vars=("sigs.k8s.io/kueue/pkg/version.GitVersion={version}",))
JOBSET = Component("jobset", "sigs.k8s.io/jobset", {"jobset": "sigs.k8s.io/jobset"})
KWOK = Component("kwok", "sigs.k8s.io/kwok", {"kwok": "sigs.k8s.io/kwok/cmd/kwok"},
                 version_vars=("sigs.k8s.io/kwok/pkg/consts.Version={version}",))

#: Build order: the small ones first, so a developer sees progress early.
COMPONENTS = (ETCD, KWOK, JOBSET, KUEUE, KUBERNETES)
BY_NAME = {c.name: c for c in COMPONENTS}


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=readonly").strip()
    return env


def _say(message: str) -> None:
    print(f"[realcluster build] {message}", flush=True)


def build(components=COMPONENTS, *, force: bool = False) -> dict[str, float]:
    """Build each component into its cache folder; returns seconds spent per component.

    Already-built components (same stamp) are skipped. Raises RuntimeError naming
    the component and go's error when a build fails.
    """
    if shutil.which("go") is None:
        raise RuntimeError("the Go toolchain (go 1.25+) is needed to build the real "
                           "control plane: install golang-go or put go on PATH")
    spent: dict[str, float] = {}
    for component in components:
        version = component.version
        if not force and component.is_built():
            _say(f"{component.name} {version}: cached in {component.bin_dir}")
            spent[component.name] = 0.0
            continue
        component.bin_dir.mkdir(parents=True, exist_ok=True)
        start = time.monotonic()
        for binary, package in component.binaries.items():
            _say(f"{component.name} {version}: building {binary} ({package}) ...")
            t0 = time.monotonic()
            target = component.binary(binary)
            tmp = target.with_suffix(".tmp")
            proc = subprocess.run(
                ["go", "build", "-trimpath", "-ldflags", component.ldflags(),
                 "-o", str(tmp), package],
                cwd=component.wrapper, env=go_env(), capture_output=True, text=True,
            )
            if proc.returncode != 0:
                raise RuntimeError(f"building {binary} of {component.name} {version} failed:\n"
                                   f"{proc.stderr.strip()}")
            tmp.replace(target)
            _say(f"{component.name} {version}: {binary} built in {time.monotonic() - t0:.0f} s")
        (component.home / "stamp").write_text(component.stamp() + "\n")
        spent[component.name] = time.monotonic() - start
    return spent


def missing() -> list[str]:
    """Names of the components not built yet (at their pinned versions)."""
    return [c.name for c in COMPONENTS if not c.is_built()]


def main_build(argv: list[str]) -> int:
    force = "--force" in argv
    names = [a for a in argv if not a.startswith("-")]
    try:
        chosen = [BY_NAME[n] for n in names] if names else list(COMPONENTS)
    except KeyError as exc:
        print(f"unknown component {exc}; known: {', '.join(BY_NAME)}", file=sys.stderr)
        return 2
    start = time.monotonic()
    try:
        build(chosen, force=force)
    except RuntimeError as exc:
        print(f"[realcluster build] FAILED: {exc}", file=sys.stderr)
        return 1
    _say(f"done in {time.monotonic() - start:.0f} s; binaries under {cache_root()}")
    return 0
