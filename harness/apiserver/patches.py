"""Patch formats: JSON merge patch (RFC 7386) and JSON patch (RFC 6902).

Strategic merge patch is served as a JSON merge patch: patchMergeKey directives
(``$patch``, merge-by-key lists) are not implemented, lists are replaced whole.
"""

from __future__ import annotations

import copy
from typing import Any

from .errors import ApiError, bad_request


def merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 merge patch; returns a new value (inputs untouched)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith("$"):
            continue  # strategic-merge directives are ignored
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _container(doc: Any, parts: list[str]) -> Any:
    cur = doc
    for part in parts:
        cur = _child(cur, part)
    return cur


def _child(cur: Any, part: str) -> Any:
    try:
        if isinstance(cur, list):
            return cur[int(part)]
        return cur[part]
    except (KeyError, IndexError, ValueError, TypeError):
        raise _unprocessable(f"path component {part!r} not found") from None


def _unprocessable(msg: str) -> ApiError:
    return ApiError(422, f"the server rejected our request due to an error in our request: {msg}",
                    reason="Invalid")


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    parent = _container(doc, parts[:-1])
    last = parts[-1]
    if isinstance(parent, list):
        idx = len(parent) if last == "-" else int(last)
        if idx > len(parent):
            raise _unprocessable(f"index {idx} out of range")
        parent.insert(idx, value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise _unprocessable(f"cannot add to {type(parent).__name__}")
    return doc


def _remove(doc: Any, parts: list[str]) -> Any:
    if not parts:
        raise _unprocessable("cannot remove the root")
    parent = _container(doc, parts[:-1])
    last = parts[-1]
    try:
        if isinstance(parent, list):
            return parent.pop(int(last))
        return parent.pop(last)
    except (KeyError, IndexError, ValueError):
        raise _unprocessable(f"unable to remove nonexistent key: {last}") from None


def json_patch(doc: Any, ops: Any) -> Any:
    """Apply an RFC 6902 operation list; returns a new document.

    Raises ApiError(400) for a malformed patch and ApiError(422) for a failed
    ``test`` or a missing path.
    """
    if not isinstance(ops, list):
        raise bad_request("json patch must be a list of operations")
    doc = copy.deepcopy(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(f"invalid json patch operation {op!r}")
        kind, parts = op["op"], _pointer(op["path"])
        if kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind == "remove":
            _remove(doc, parts)
        elif kind == "replace":
            _container(doc, parts)  # must exist
            if parts:
                _remove(doc, parts)
            doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind in ("move", "copy"):
            src = _pointer(op.get("from", ""))
            value = copy.deepcopy(_container(doc, src))
            if kind == "move":
                _remove(doc, src)
            doc = _add(doc, parts, value)
        elif kind == "test":
            if _container(doc, parts) != op.get("value"):
                raise _unprocessable(f"test operation failed at {op['path']}")
        else:
            raise bad_request(f"unknown json patch operation {kind!r}")
    return doc
