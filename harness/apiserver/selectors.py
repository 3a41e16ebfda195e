"""Label and field selectors as the Kubernetes API server parses them.

Label selector grammar (comma = AND): ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``,
``a notin (x,y)``, ``a`` (exists), ``!a`` (does not exist).
Field selectors support ``metadata.name`` and ``metadata.namespace``, plus the
per-kind fields of :data:`KIND_FIELDS` (events: ``involvedObject.name`` ...),
with ``=``, ``==`` and ``!=``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .errors import bad_request

Predicate = Callable[[dict[str, Any]], bool]

_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9./_-]+)\s+(in|notin)\s*\((.*)\)\s*$")
_EQ_RE = re.compile(r"^\s*([A-Za-z0-9./_-]+)\s*(==|=|!=)\s*([A-Za-z0-9._-]*)\s*$")
_EXISTS_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9./_-]+)\s*$")


def _split_terms(selector: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    terms, depth, cur = [], 0, []
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    terms.append("".join(cur))
    return [t for t in terms if t.strip()]


def _label_term(term: str) -> Predicate:
    m = _SET_RE.match(term)
    if m and not m.group(1):
        key, op = m.group(2), m.group(3)
        values = {v.strip() for v in m.group(4).split(",") if v.strip()}
        if op == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    m = _EQ_RE.match(term)
    if m:
        key, op, value = m.groups()
        if op == "!=":
            return lambda labels: labels.get(key) != value
        return lambda labels: labels.get(key) == value
    m = _EXISTS_RE.match(term)
    if m:
        negate, key = m.groups()
        if negate:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise bad_request(f"unable to parse requirement: {term!r}")


def parse_label_selector(selector: str | None) -> Predicate:
    """Return a predicate over an object dict. Raises ApiError(400) if unparsable."""
    if not selector or not selector.strip():
        return lambda obj: True
    preds = [_label_term(t) for t in _split_terms(selector)]

    def match(obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(p(labels) for p in preds)

    return match


#: Fields every kind indexes.
_COMMON_FIELDS = ("metadata.name", "metadata.namespace")

#: Extra fields the real API server indexes per (group, plural) (the kinds'
#: ``AddFieldLabelConversionFunc`` in kubernetes/pkg/apis/*/v1/conversion.go),
#: limited to those the portal uses.
KIND_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "events"): (
        "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
        "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
        "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type",
    ),
    ("", "pods"): ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                   "spec.serviceAccountName", "status.phase", "status.podIP"),
    ("batch", "jobs"): ("status.successful",),
}


def _lookup(obj: dict[str, Any], path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    if isinstance(value, dict) and path == "source":
        return str(value.get("component") or "")
    return str(value)


def parse_field_selector(selector: str | None, fields: tuple[str, ...] = ()) -> Predicate:
    """Predicate for a field selector with ``=``, ``==`` and ``!=`` terms.

    ``metadata.name`` and ``metadata.namespace`` always, plus ``fields`` (the
    kind's indexed fields, :data:`KIND_FIELDS`; dotted paths into the object).
    Raises ApiError(400) for other fields, like a real server does for fields a
    resource does not index.
    """
    if not selector or not selector.strip():
        return lambda obj: True
    known = (*_COMMON_FIELDS, *fields)
    preds: list[Predicate] = []
    for term in _split_terms(selector):
        m = _EQ_RE.match(term)
        if not m or m.group(1) not in known:
            names = ", ".join(f'"{name}"' for name in known)
            raise bad_request(f'"{term.strip()}" is not a known field selector: only {names}')
        path, op, value = m.group(1), m.group(2), m.group(3)

        def pred(obj: dict[str, Any], path: str = path, op: str = op, value: str = value) -> bool:
            actual = _lookup(obj, path)
            return (actual != value) if op == "!=" else (actual == value)

        preds.append(pred)
    return lambda obj: all(p(obj) for p in preds)
