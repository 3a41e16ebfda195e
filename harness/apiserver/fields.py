"""Field ownership (``metadata.managedFields``) and server-side apply.

Simplifications against the real structured-merge-diff:

* every list is atomic (``x-kubernetes-list-type: map``/``set`` are not honoured):
  a list is owned and replaced as one field;
* maps are granular: each leaf (a scalar, a list or an empty map) is one field;
* fieldsV1 is rendered from the owned leaf paths as nested ``f:<key>`` maps;
* a manager's Update entry and its Apply entry never conflict with each other.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .errors import ApiError

Path = tuple[str, ...]
OwnerKey = tuple[str, str, str]  # (manager, operation "Apply"|"Update", subresource "" | "status")

_MISSING = object()
_TRACKED_METADATA = ("labels", "annotations", "finalizers", "ownerReferences")


@dataclass
class Owner:
    """One ``managedFields`` entry: the paths a manager owns, and when it last wrote."""

    paths: frozenset[Path]
    api_version: str
    time: str
    extra: dict[str, Any] = field(default_factory=dict)


def leaf_paths(value: Any, prefix: Path = ()) -> set[Path]:
    """Every leaf path of ``value`` (non-empty dicts are descended, all else is a leaf)."""
    if isinstance(value, dict) and value:
        out: set[Path] = set()
        for key, item in value.items():
            out |= leaf_paths(item, (*prefix, key))
        return out
    return {prefix}


def tracked_view(obj: dict[str, Any], *, status_subresource: bool, subresource: str) -> dict:
    """The part of ``obj`` whose fields are owned by managers.

    For the main resource: everything but apiVersion/kind, identity metadata and
    (when the kind has a status subresource) status. For ``status``: only status.
    """
    if subresource == "status":
        return {"status": obj["status"]} if "status" in obj else {}
    out = {}
    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "status" and status_subresource:
            continue
        if key == "metadata":
            meta = {k: v for k, v in (value or {}).items() if k in _TRACKED_METADATA}
            if meta:
                out["metadata"] = meta
            continue
        out[key] = value
    return out


def get_path(obj: Any, path: Path) -> Any:
    """The value at ``path`` or the module's private _MISSING marker."""
    cur = obj
    for part in path:
        if not isinstance(cur, dict) or part not in cur:
            return _MISSING
        cur = cur[part]
    return cur


def delete_path(obj: dict[str, Any], path: Path) -> None:
    """Remove ``path`` from ``obj`` and any maps it leaves empty (below top level)."""
    parents = []
    cur: Any = obj
    for part in path[:-1]:
        if not isinstance(cur, dict) or part not in cur:
            return
        parents.append((cur, part))
        cur = cur[part]
    if isinstance(cur, dict):
        cur.pop(path[-1], None)
    for parent, key in reversed(parents[1:]):
        if parent[key] == {}:
            del parent[key]
        else:
            break


def overlaps(a: Path, b: Path) -> bool:
    """True if one path is a prefix of the other (same field or nested)."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def changed_paths(old: Any, new: Any, prefix: Path = ()) -> tuple[set[Path], set[Path]]:
    """(added_or_changed, removed) leaf paths going from ``old`` to ``new``."""
    if isinstance(old, dict) and old and isinstance(new, dict) and new:
        changed: set[Path] = set()
        removed: set[Path] = set()
        for key in old.keys() | new.keys():
            p = (*prefix, key)
            if key not in new:
                removed |= leaf_paths(old[key], p)
            elif key not in old:
                changed |= leaf_paths(new[key], p)
            else:
                c, r = changed_paths(old[key], new[key], p)
                changed |= c
                removed |= r
        return changed, removed
    if old == new:
        return set(), set()
    return leaf_paths(new, prefix), set()


def deep_merge(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    """Merge ``overlay`` into a copy of ``base``: maps recursively, all else replaced."""
    out = copy.deepcopy(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and value and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def dot_path(path: Path) -> str:
    """``("spec", "x")`` -> ``.spec.x`` (the fieldpath style conflict messages use)."""
    return "".join(f".{p}" for p in path)


def record_update(
    owners: dict[OwnerKey, Owner], old_view: dict, new_view: dict, manager: str,
    subresource: str, api_version: str, now: str,
) -> dict[OwnerKey, Owner]:
    """Ownership after an Update (create/PUT/patch) by ``manager``.

    The manager takes every added or changed field; other managers lose those
    fields; removed fields leave every owner.
    """
    changed, removed = changed_paths(old_view, new_view)
    touched = changed | removed
    out: dict[OwnerKey, Owner] = {}
    key = (manager, "Update", subresource)
    for k, owner in owners.items():
        if k == key:
            continue
        kept = frozenset(p for p in owner.paths if not any(overlaps(p, t) for t in touched))
        if kept:
            out[k] = owner if kept == owner.paths else Owner(kept, owner.api_version, now)
    mine = owners.get(key)
    prev = mine.paths if mine else frozenset()
    paths = frozenset(
        {p for p in prev if not any(overlaps(p, t) for t in removed)} | changed
    )
    if paths:
        out[key] = mine if (mine and paths == mine.paths) else Owner(paths, api_version, now)
    return out


def server_side_apply(
    current: dict[str, Any], config_view: dict[str, Any], owners: dict[OwnerKey, Owner], *,
    manager: str, force: bool, subresource: str, api_version: str, now: str,
) -> tuple[dict[str, Any], dict[OwnerKey, Owner]]:
    """Apply ``config_view`` (the tracked part of an apply config) to ``current``.

    Returns (new object, new owners). Raises ApiError(409, reason Conflict) when a
    field owned by another manager would change value and ``force`` is false;
    with ``force`` the applier takes those fields over. Fields this manager applied
    before and no longer applies are removed unless another manager owns them.
    """
    new_paths = leaf_paths(config_view) if config_view else set()
    my_key = (manager, "Apply", subresource)
    conflicts: list[tuple[OwnerKey, Path]] = []
    for key, owner in owners.items():
        if key[0] == manager:
            continue
        for owned in owner.paths:
            for p in new_paths:
                if not overlaps(owned, p):
                    continue
                short = owned if len(owned) <= len(p) else p
                if get_path(current, short) != get_path(config_view, short):
                    conflicts.append((key, short))
    if conflicts and not force:
        raise _conflict_error(conflicts, api_version)

    out_owners: dict[OwnerKey, Owner] = {}
    conflicted = {(k, p) for k, p in conflicts}
    for key, owner in owners.items():
        if key == my_key:
            continue
        if force and any(k == key for k, _ in conflicted):
            lost = [p for k, p in conflicted if k == key]
            kept = frozenset(q for q in owner.paths if not any(overlaps(q, c) for c in lost))
            if kept:
                out_owners[key] = Owner(kept, owner.api_version, owner.time, owner.extra)
        else:
            out_owners[key] = owner

    result = copy.deepcopy(current)
    previous = owners[my_key].paths if my_key in owners else frozenset()
    for p in previous:
        if any(overlaps(p, n) for n in new_paths):
            continue
        if any(overlaps(p, q) for o in out_owners.values() for q in o.paths):
            continue  # someone else still owns it: only relinquish
        delete_path(result, p)
    result = deep_merge(result, config_view)
    if new_paths:
        unchanged = my_key in owners and owners[my_key].paths == frozenset(new_paths)
        out_owners[my_key] = (owners[my_key] if unchanged
                              else Owner(frozenset(new_paths), api_version, now))
    return result, out_owners


def _conflict_error(conflicts: list[tuple[OwnerKey, Path]], api_version: str) -> ApiError:
    causes = []
    lines = []
    for (manager, _op, sub), path in sorted(set(conflicts)):
        who = f'conflict with "{manager}"'
        if sub:
            who += f' with subresource "{sub}"'
        who += f" using {api_version}"
        causes.append({"reason": "FieldManagerConflict", "message": who,
                       "field": dot_path(path)})
        lines.append(f"{who}: {dot_path(path)}")
    n = len(causes)
    noun = "conflict" if n == 1 else "conflicts"
    message = f"Apply failed with {n} {noun}: " + "; ".join(lines)
    return ApiError(409, message, reason="Conflict", details={"causes": causes})


def render_managed_fields(owners: dict[OwnerKey, Owner]) -> list[dict[str, Any]]:
    """``metadata.managedFields`` entries for ``owners`` (fieldsV1 as nested f: maps)."""
    out = []
    for (manager, operation, sub), owner in owners.items():
        entry: dict[str, Any] = {
            "manager": manager,
            "operation": operation,
            "apiVersion": owner.api_version,
            "time": owner.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": _fields_v1(owner.paths),
        }
        if sub:
            entry["subresource"] = sub
        out.append(entry)
    return out


def _fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for path in sorted(paths):
        cur = root
        for part in path:
            cur = cur.setdefault(f"f:{part}", {})
    return root
