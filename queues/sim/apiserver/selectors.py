"""Label and field selectors as the Kubernetes API server parses them.

Label selector grammar (comma = AND): ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``,
``a notin (x,y)``, ``a`` (exists), ``!a`` (does not exist).
Field selectors support ``metadata.name`` and ``metadata.namespace`` with
``=``, ``==`` and ``!=``.
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


_FIELDS = {"metadata.name": "name", "metadata.namespace": "namespace"}


def parse_field_selector(selector: str | None) -> Predicate:
    """Predicate for ``metadata.name``/``metadata.namespace`` selectors.

    Raises ApiError(400) for other fields, like a real server does for fields a
    resource does not index.
    """
    if not selector or not selector.strip():
        return lambda obj: True
    preds: list[Predicate] = []
    for term in _split_terms(selector):
        m = _EQ_RE.match(term)
        if not m or m.group(1) not in _FIELDS:
            raise bad_request(f'"{term.strip()}" is not a known field selector: only '
                              '"metadata.name", "metadata.namespace"')
        attr, op, value = _FIELDS[m.group(1)], m.group(2), m.group(3)

        def pred(obj: dict[str, Any], attr: str = attr, op: str = op, value: str = value) -> bool:
            actual = (obj.get("metadata") or {}).get(attr, "")
            return (actual != value) if op == "!=" else (actual == value)

        preds.append(pred)
    return lambda obj: all(p(obj) for p in preds)
