"""Test controls: injected faults and request counters (thread-safe)."""

from __future__ import annotations

import itertools
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
#: Longest a request waits on a fault's ``gate`` (seconds) before it goes on anyway.
GATE_TIMEOUT = 60.0


@dataclass
class Fault:
    """A fault applied to requests whose method and path match.

    ``method``: HTTP method or "*"; ``path``: regex searched in the URL path (no
    query); ``status``: HTTP code to answer with a Status body (None = no error,
    only the delay); ``count``: how many matching requests it hits (None = until
    cleared); ``delay``: seconds to sleep before answering; ``drop``: close the
    connection without answering; ``retry_after``: seconds for a Retry-After
    header; ``reason``/``message``: the Status fields; ``gate``: a
    :class:`threading.Event` the request waits for (at most :data:`GATE_TIMEOUT`
    seconds) before it is served or faulted - a test holds a request in flight
    at a known point and releases it with ``gate.set()`` (Python only, not
    settable over the /_emulator/faults endpoint). ``hits`` counts the matching
    requests so far (a gated request has arrived once ``hits`` grows).
    """

    method: str = "*"
    path: str = ".*"
    status: int | None = None
    count: int | None = 1
    delay: float = 0.0
    drop: bool = False
    retry_after: int | None = None
    reason: str | None = None
    message: str | None = None
    id: int = 0
    hits: int = field(default=0)
    gate: threading.Event | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, gate: threading.Event | None = None) -> Fault:
        """Build from the JSON the /_emulator/faults endpoint accepts (same field names);
        ``gate`` only from Python (see :class:`Fault`)."""
        allowed = {"method", "path", "status", "count", "delay", "drop", "retry_after",
                   "reason", "message"}
        unknown = set(data) - allowed - {"retryAfter"}
        if unknown:
            raise ValueError(f"unknown fault fields: {sorted(unknown)}")
        kwargs = {k: v for k, v in data.items() if k in allowed}
        if "retryAfter" in data:
            kwargs["retry_after"] = data["retryAfter"]
        fault = cls(**kwargs, gate=gate)
        re.compile(fault.path)
        if fault.status is None and not fault.drop and not fault.delay and gate is None:
            raise ValueError("a fault needs status, drop, delay or gate")
        return fault

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready description including ``id`` and ``hits`` (``gate``: whether one is set)."""
        data = dict(self.__dict__)
        data["gate"] = self.gate is not None
        return data


class Faults:
    """The set of active faults. Use :meth:`add`, :meth:`clear`, :meth:`list`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._ids = itertools.count(1)

    def add(self, method: str = "*", path: str = ".*", status: int | None = None, *,
            count: int | None = 1, delay: float = 0.0, drop: bool = False,
            retry_after: int | None = None, reason: str | None = None,
            message: str | None = None, gate: threading.Event | None = None) -> Fault:
        """Register a fault (see :class:`Fault`); returns it (with its ``id``)."""
        fault = Fault.from_dict({
            "method": method, "path": path, "status": status, "count": count, "delay": delay,
            "drop": drop, "retry_after": retry_after, "reason": reason, "message": message,
        }, gate=gate)
        return self.add_fault(fault)

    def add_fault(self, fault: Fault) -> Fault:
        """Register an already built Fault; returns it with its ``id`` set."""
        with self._lock:
            fault.id = next(self._ids)
            self._faults.append(fault)
        return fault

    def clear(self) -> None:
        """Remove every fault."""
        with self._lock:
            self._faults.clear()

    def list(self) -> list[dict[str, Any]]:
        """Active faults as dicts."""
        with self._lock:
            return [f.to_dict() for f in self._faults]

    def take(self, method: str, path: str) -> Fault | None:
        """The first fault matching this request, consuming one of its ``count``."""
        with self._lock:
            for fault in self._faults:
                if fault.method not in ("*", method.upper()):
                    continue
                if not re.search(fault.path, path):
                    continue
                fault.hits += 1
                if fault.count is not None:
                    fault.count -= 1
                    if fault.count <= 0:
                        self._faults.remove(fault)
                return fault
        return None


class Counters:
    """Request counts by verb and resource, and the access each request needed.

    ``verb`` is the Kubernetes verb (get, list, create, update, patch, delete,
    deletecollection) or "discovery"; ``resource`` is ``<group>/<plural>`` with an
    empty group for core ("/namespaces") and ``/status`` appended for the
    subresource. Faulted requests are counted too; /_emulator/ requests are not.

    :meth:`access` counts what an RBAC authorizer would check for each resource
    request: ``(verb, apiGroup, resource)`` with ``resource`` as RBAC names it
    (``"clusterqueues"``, ``"clusterqueues/status"``). A server-side apply that
    creates its object is checked as ``patch`` and also ``create``, as the
    Kubernetes API server does
    (https://kubernetes.io/docs/reference/using-api/server-side-apply/#rbac-and-permissions).
    Each check is recorded under the user the request authenticated as (see
    :meth:`Emulator.user_of`), so a test can tell the portal's access from what
    it did itself while playing a controller.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_verb: Counter[str] = Counter()
        self._by_resource: dict[str, Counter[str]] = {}
        self._access: Counter[tuple[str, str, str, str]] = Counter()  # (user, verb, group, res)
        self._writes = 0
        self._total = 0

    def record_access(self, verb: str, group: str, resource: str, *, user: str = "") -> None:
        """Count one authorization check of ``verb`` on ``group``/``resource`` for ``user``."""
        with self._lock:
            self._access[(user, verb, group, resource)] += 1

    def access(self, user: str | None = None) -> dict[tuple[str, str, str], int]:
        """``{(verb, apiGroup, resource): n}``: the authorization checks since the last reset,
        of every user (``user=None``) or of that one user only."""
        out: Counter[tuple[str, str, str]] = Counter()
        with self._lock:
            for (who, verb, group, resource), n in self._access.items():
                if user is None or who == user:
                    out[(verb, group, resource)] += n
        return dict(out)

    def record(self, verb: str, resource: str | None) -> None:
        """Count one request."""
        with self._lock:
            self._total += 1
            self._by_verb[verb] += 1
            if resource:
                self._by_resource.setdefault(resource, Counter())[verb] += 1
            if verb in WRITE_VERBS:
                self._writes += 1

    @property
    def writes(self) -> int:
        """Number of write requests (create/update/patch/delete/deletecollection)."""
        with self._lock:
            return self._writes

    def snapshot(self) -> dict[str, Any]:
        """``{"total", "writes", "by_verb": {verb: n}, "by_resource": {res: {verb: n}},
        "access": [{"user", "verb", "apiGroup", "resource", "count"}]}``."""
        with self._lock:
            return {
                "total": self._total,
                "writes": self._writes,
                "by_verb": dict(self._by_verb),
                "by_resource": {r: dict(c) for r, c in self._by_resource.items()},
                "access": [{"user": u, "verb": v, "apiGroup": g, "resource": r, "count": n}
                           for (u, v, g, r), n in sorted(self._access.items())],
            }

    def reset(self) -> None:
        """Zero every counter."""
        with self._lock:
            self._by_verb.clear()
            self._by_resource.clear()
            self._access.clear()
            self._writes = 0
            self._total = 0
