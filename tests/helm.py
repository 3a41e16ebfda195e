"""The real ``helm`` binary, built from its Go module through the pinned wrapper
``harness/realcluster/go/helm/`` (go.mod/go.sum only; its ``tool`` line names the
main package).

The binary goes to the real-cluster tier's cache layout, once per version::

    ${XDG_CACHE_HOME:-~/.cache}/gpu-quota-portal/realcluster/helm-<version>/bin/helm

with a ``stamp`` file beside ``bin/`` (a hash of the wrapper's go.mod, go.sum, the
ldflags and the binary map, computed as the tier's component builder does), so a
second call builds nothing. :func:`helm_binary` builds it when it is missing; without
a Go toolchain it fails (``CI=true``) or skips (see :func:`tests.services.unavailable`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from tests.services import REPO_ROOT, unavailable

WRAPPER = REPO_ROOT / "harness" / "realcluster" / "go" / "helm"
MODULE = "helm.sh/helm/v4"
PACKAGE = "helm.sh/helm/v4/cmd/helm"
BINARIES = {"helm": PACKAGE}
VERSION_VARS = ("helm.sh/helm/v4/internal/version.version={version}",)


def cache_root() -> Path:
    """The real-cluster tier's binary cache (``REALCLUSTER_CACHE`` overrides it)."""
    override = os.environ.get("REALCLUSTER_CACHE")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpu-quota-portal" / "realcluster"


def version() -> str:
    """The version of helm the wrapper's go.mod pins."""
    text = (WRAPPER / "go.mod").read_text()
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(MODULE)}\s+(v\S+)", text, re.M)
    if not match:
        raise RuntimeError(f"{WRAPPER}/go.mod does not require {MODULE}")
    return match.group(1)


def home() -> Path:
    return cache_root() / f"helm-{version()}"


def ldflags() -> str:
    parts = ["-s", "-w"]
    for var in VERSION_VARS:
        parts += ["-X", var.format(version=version())]
    return " ".join(parts)


def stamp() -> str:
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((WRAPPER / name).read_bytes())
    digest.update(ldflags().encode())
    digest.update(json.dumps(BINARIES, sort_keys=True).encode())
    return digest.hexdigest()


def binary_path() -> Path:
    return home() / "bin" / "helm"


def is_built() -> bool:
    stamp_file = home() / "stamp"
    return (stamp_file.is_file() and stamp_file.read_text().strip() == stamp()
            and binary_path().is_file())


def build(*, force: bool = False) -> Path:
    """Build helm into its cache folder (nothing when it is already built); its path.

    Raises RuntimeError with go's message when the build fails.
    """
    if not force and is_built():
        return binary_path()
    go = shutil.which("go")
    if go is None:
        raise FileNotFoundError("the Go toolchain is needed to build helm from its module")
    target = binary_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("CGO_ENABLED", "0")
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=readonly").strip()
    tmp = target.with_suffix(".tmp")
    started = time.monotonic()
    proc = subprocess.run(  # noqa: S603 - our own arguments
        [go, "build", "-trimpath", "-ldflags", ldflags(), "-o", str(tmp), PACKAGE],
        cwd=WRAPPER, env=env, capture_output=True, text=True,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"building helm {version()} failed:\n{proc.stderr.strip()}")
    tmp.replace(target)
    (home() / "stamp").write_text(stamp() + "\n")
    print(f"built helm {version()} in {time.monotonic() - started:.0f} s: {target}")
    return target


def helm_binary() -> Path:
    """The helm binary, built if missing; fail (CI) or skip without a Go toolchain."""
    try:
        return build()
    except FileNotFoundError as error:
        unavailable(str(error))
        raise  # unreachable: unavailable() raises


if __name__ == "__main__":  # python -m tests.helm: build it ahead of the tests
    print(build())
