"""The API resource types the emulator serves: built-in core kinds and CRDs.

A :class:`ResourceType` describes one (group, version, plural). Built-in kinds are
listed in :data:`BUILTIN_TYPES`; CRDs are read from YAML files by :func:`load_crds`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~10x faster on big CRDs

ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update"]


@dataclass(frozen=True)
class ResourceType:
    """One served resource.

    ``group`` is "" for the core group; ``schema`` is the CRD's openAPIV3Schema for
    this version (None for built-in kinds, which are validated by kubernetes_validate).
    """

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    has_status: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    storage_version: bool = True

    @property
    def api_version(self) -> str:
        """``group/version`` or just ``version`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        """``<Kind>List``."""
        return f"{self.kind}List"

    @property
    def storage_key(self) -> tuple[str, str]:
        """(group, plural): all served versions of a kind share one store."""
        return (self.group, self.plural)

    def api_resources(self) -> list[dict[str, Any]]:
        """The APIResourceList entries (resource and ``/status``) for discovery."""
        entry: dict[str, Any] = {
            "name": self.plural,
            "singularName": self.singular,
            "namespaced": self.namespaced,
            "kind": self.kind,
            "verbs": list(ALL_VERBS),
        }
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.categories:
            entry["categories"] = list(self.categories)
        out = [entry]
        if self.has_status:
            out.append({
                "name": f"{self.plural}/status",
                "singularName": "",
                "namespaced": self.namespaced,
                "kind": self.kind,
                "verbs": ["get", "patch", "update"],
            })
        return out


def _core(group: str, plural: str, kind: str, namespaced: bool, has_status: bool,
          short: tuple[str, ...] = (), version: str = "v1") -> ResourceType:
    return ResourceType(group=group, version=version, plural=plural, singular=kind.lower(),
                        kind=kind, namespaced=namespaced, has_status=has_status,
                        short_names=short)


BUILTIN_TYPES: tuple[ResourceType, ...] = (
    _core("", "namespaces", "Namespace", False, True, ("ns",)),
    _core("", "resourcequotas", "ResourceQuota", True, True, ("quota",)),
    _core("", "pods", "Pod", True, True, ("po",)),
    _core("", "services", "Service", True, True, ("svc",)),
    _core("", "events", "Event", True, False, ("ev",)),
    _core("", "configmaps", "ConfigMap", True, False, ("cm",)),
    _core("", "limitranges", "LimitRange", True, False, ("limits",)),
    _core("scheduling.k8s.io", "priorityclasses", "PriorityClass", False, False, ("pc",)),
    _core("batch", "jobs", "Job", True, True),
)


def load_crds(crd_dir: str | Path) -> list[ResourceType]:
    """Read every ``*.yaml``/``*.yml`` CustomResourceDefinition under ``crd_dir``.

    Returns one ResourceType per served version. Raises FileNotFoundError if the
    directory does not exist and ValueError if a file holds no CRD.
    """
    root = Path(crd_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"CRD directory not found: {root}")
    out: list[ResourceType] = []
    files = sorted([*root.rglob("*.yaml"), *root.rglob("*.yml")])
    for path in files:
        with path.open() as fh:
            docs = [d for d in yaml.load_all(fh, Loader=_LOADER) if d]
        for doc in docs:
            if doc.get("kind") != "CustomResourceDefinition":
                continue
            out.extend(_types_from_crd(doc))
    if not out:
        raise ValueError(f"no CustomResourceDefinition found under {root}")
    return out


def _types_from_crd(crd: dict[str, Any]) -> list[ResourceType]:
    spec = crd["spec"]
    names = spec["names"]
    out = []
    for ver in spec["versions"]:
        if not ver.get("served", True):
            continue
        out.append(ResourceType(
            group=spec["group"],
            version=ver["name"],
            plural=names["plural"],
            singular=names.get("singular") or names["kind"].lower(),
            kind=names["kind"],
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            has_status="status" in (ver.get("subresources") or {}),
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
            schema=(ver.get("schema") or {}).get("openAPIV3Schema"),
            storage_version=bool(ver.get("storage", False)),
        ))
    return out


class Registry:
    """Index of served ResourceTypes by (group, version, plural).

    Group versions are ordered: the storage version of a group is its preferred one.
    """

    def __init__(self, types: list[ResourceType]) -> None:
        self._by_gvp: dict[tuple[str, str, str], ResourceType] = {}
        self._groups: dict[str, list[str]] = {}
        for rt in types:
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        """Serve ``rt`` (replaces a type with the same group/version/plural)."""
        self._by_gvp[(rt.group, rt.version, rt.plural)] = rt
        versions = self._groups.setdefault(rt.group, [])
        if rt.version not in versions:
            versions.append(rt.version)

    def add_group_version(self, group: str, version: str) -> None:
        """Announce a group/version in discovery even if it has no stored types."""
        versions = self._groups.setdefault(group, [])
        if version not in versions:
            versions.append(version)

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        """The type served at group/version/plural, or None."""
        return self._by_gvp.get((group, version, plural))

    def for_kind(self, api_version: str, kind: str) -> ResourceType | None:
        """The type for an object's apiVersion and kind, or None."""
        group, _, version = api_version.rpartition("/")
        for rt in self._by_gvp.values():
            if rt.group == group and rt.version == version and rt.kind == kind:
                return rt
        return None

    def types(self, group: str | None = None, version: str | None = None) -> list[ResourceType]:
        """Served types, optionally restricted to one group and version."""
        return [rt for rt in self._by_gvp.values()
                if (group is None or rt.group == group)
                and (version is None or rt.version == version)]

    def groups(self) -> dict[str, list[str]]:
        """{group: [versions, preferred first]} excluding the core group."""
        out = {}
        for group, versions in self._groups.items():
            if not group:
                continue
            ordered = sorted(versions, key=lambda v: not self._is_preferred(group, v))
            out[group] = ordered
        return out

    def _is_preferred(self, group: str, version: str) -> bool:
        return any(rt.storage_version for rt in self.types(group, version))
