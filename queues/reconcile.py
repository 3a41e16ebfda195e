"""Desired set vs observed cluster -> the fewest writes, then a labelled prune.

Level-triggered and idempotent (no Django here): :func:`reconcile` looks at
what is on the cluster now, whatever happened before, and converges it. Run
it twice and the second run writes nothing.

First each managed kind is listed once by our managed-by label. Then for
each desired object, in the given (dependency) order:

1. find the live object in that listing;
2. write (server-side apply) only when the desired content differs from what
   was last applied (its :func:`content_hash` changed) **or** from what is
   observed: every field we set must be present in the live object with the
   same value (:func:`is_subset`). Fields the server or controllers add
   (defaults, ``status``, ``managedFields``, extra labels) never cause a
   write. A field of ours changed by hand while our content did not change
   is *drift*: it is corrected and reported (``drift=True``);
3. read the observed state (a ClusterQueue's ``Active`` condition).

Then prune: of the listed objects (they carry our managed-by label) of each
managed kind of *either* backend (:data:`MANAGED_KINDS`), delete those not
desired (dependents first; Volcano child Queues before their parents).
Pruning the other backend's kinds is what makes switching a cluster's backend
converge: the old backend's labelled objects are no longer desired, so they
go. A kind the cluster does not serve (Volcano's CRDs on a Kueue-only cluster)
holds no objects and is skipped. Objects without the
label are never listed, so never touched. Namespaces are *retained*, not
deleted: deleting a Namespace deletes everything in it, including objects
that are not ours (a team's Secrets, PVCs, ConfigMaps).

Errors: a :class:`~queues.errors.TransientError` on an object is recorded
on it and makes the run ``retry_later``; a
:class:`~queues.errors.PermanentError` (e.g. 422 Invalid) is recorded on
that object with the API's message; neither stops the other objects.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from queues import quantity
from queues.backends import MANAGED_KINDS
from queues.errors import ClusterError, TransientError
from queues.render.labels import TEAM_LABEL, managed_selector

__all__ = [
    "RETAINED_KINDS",
    "ClusterPort",
    "Key",
    "ObjectResult",
    "ReconcileResult",
    "content_hash",
    "is_subset",
    "key_of",
    "observe",
    "reconcile",
    "strip_server_fields",
]

#: (apiVersion, kind, namespace or "", name) of an object.
Key = tuple[str, str, str, str]

#: Kinds that are never pruned (reported as ``retained``): deleting them
#: would delete objects that are not ours.
RETAINED_KINDS = frozenset({("v1", "Namespace")})

CREATED, UPDATED, UNCHANGED, PRUNED, RETAINED, FAILED = (
    "created", "updated", "unchanged", "pruned", "retained", "failed",
)


class ClusterPort(Protocol):
    """What :func:`reconcile` needs from a cluster (:class:`queues.cluster.KubernetesCluster`)."""

    def apply(self, obj: dict) -> dict: ...

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None
            ) -> dict | None: ...

    def list(self, api_version: str, kind: str, label_selector: str = "",
             namespace: str | None = None) -> list[dict]: ...

    def delete(self, api_version: str, kind: str, name: str, namespace: str | None = None,
               *, missing_ok: bool = True) -> bool: ...


@dataclass
class ObjectResult:
    """What happened to one object.

    * ``key``: (apiVersion, kind, namespace or "", name);
    * ``action``: created / updated / unchanged / pruned / retained / failed;
    * ``hash``: :func:`content_hash` of the desired object (``""`` when pruned);
    * ``applied``: the desired content is known to be on the cluster
      (written now or found in sync);
    * ``observed``: ``{"state": "applied" | "not-active" | "pending" | "failed"
      | "pruned", "reason": str, "message": str, "resourceVersion": str,
      "generation": int | None}``;
    * ``error``: the API's message when ``action == "failed"``; ``transient``
      tells a retryable failure from a permanent one; ``retry_after``: the
      seconds the API asked to wait (``Retry-After`` of a 429/503), if any;
    * ``drift``: a field we own was changed on the cluster and was restored;
    * ``desired``: the desired manifest (``None`` for pruned objects);
    * ``team``: the object's team label, if any;
    * ``live``: the object as last read from the cluster (after our write,
      if any), through :func:`strip_server_fields`; ``None`` when it does not
      exist; ``live_known`` is false when it could not be read (then
      ``live`` says nothing).
    """

    key: Key
    action: str
    hash: str = ""
    applied: bool = False
    observed: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    transient: bool = False
    retry_after: float | None = None
    drift: bool = False
    desired: dict | None = None
    team: str | None = None
    live: dict | None = None
    live_known: bool = False


@dataclass
class ReconcileResult:
    """Per-object results in apply order, then prune results.

    ``retry_later`` is true when any object failed transiently (the run must
    be repeated); ``writes`` counts apply and delete requests sent.
    """

    objects: list[ObjectResult] = field(default_factory=list)
    writes: int = 0

    @property
    def retry_later(self) -> bool:
        """True if any object failed with a :class:`TransientError`."""
        return any(r.action == FAILED and r.transient for r in self.objects)

    @property
    def retry_after(self) -> float | None:
        """The longest ``Retry-After`` (seconds) the API asked for in this run, if any."""
        waits = [r.retry_after for r in self.objects if r.retry_after is not None]
        return max(waits) if waits else None

    @property
    def failed(self) -> list[ObjectResult]:
        """Objects whose action is ``failed``."""
        return [r for r in self.objects if r.action == FAILED]

    @property
    def drifted(self) -> list[ObjectResult]:
        """Objects whose drift was corrected."""
        return [r for r in self.objects if r.drift]

    def by_key(self) -> dict[Key, ObjectResult]:
        """Results keyed by object key."""
        return {r.key: r for r in self.objects}


def key_of(obj: Mapping[str, Any]) -> Key:
    """The :data:`Key` of a manifest or live object."""
    meta = obj.get("metadata") or {}
    return (obj["apiVersion"], obj["kind"], meta.get("namespace") or "", meta["name"])


#: Fields whose value is one Kubernetes quantity (Kueue's per-flavor quota).
QUANTITY_FIELDS = frozenset({"nominalQuota", "borrowingLimit", "lendingLimit"})
#: Fields holding a ResourceList (resource name -> quantity): ResourceQuota
#: ``spec.hard``, container ``requests``/``limits``, Volcano Queue
#: ``capability``/``deserved``/``guarantee.resource``.
RESOURCE_LIST_FIELDS = frozenset({"hard", "requests", "limits", "capability", "deserved",
                                  "resource"})


def _is_quantity_field(key: str | None, parent: str | None) -> bool:
    return key in QUANTITY_FIELDS or parent in RESOURCE_LIST_FIELDS


def _by_value(obj: Any, key: str | None = None, parent: str | None = None) -> Any:
    """``obj`` with every quantity field replaced by :func:`queues.quantity.value_key`."""
    if isinstance(obj, Mapping):
        return {k: _by_value(v, k, key) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_by_value(v, None, parent) for v in obj]
    if _is_quantity_field(key, parent) and isinstance(obj, int | str):
        try:
            return quantity.value_key(obj)
        except ValueError:
            return obj
    return obj


def content_hash(obj: Mapping[str, Any]) -> str:
    """SHA-256 hex digest of ``obj`` as canonical JSON (sorted keys, no spaces).

    Quantity fields (:data:`QUANTITY_FIELDS`, entries of
    :data:`RESOURCE_LIST_FIELDS`) are hashed by value
    (:func:`queues.quantity.value_key`), so ``"64Gi"`` and ``"68719476736"``,
    or ``"1"`` and ``"1000m"``, give the same hash: re-spelling a quantity is
    not a change and causes no write.
    """
    text = json.dumps(_by_value(obj), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def is_subset(desired: Any, live: Any) -> bool:
    """True if every field set in ``desired`` has the same value in ``live``.

    Mappings: each key of ``desired`` must be in ``live`` with a matching value
    (extra keys in ``live`` are ignored: server defaults, status, other
    managers' labels), or be missing from ``live`` when desired as a Go zero
    value (``false``, ``0``, ``""``, empty list or map), which the API server
    omits. Lists: same length, items matched in order (our lists
    are ours entirely). Scalars: equal, where a number and its decimal string
    are equal (``8`` vs ``"8"``: an int-or-string quantity read back).
    Quantity fields (:data:`QUANTITY_FIELDS`, entries of
    :data:`RESOURCE_LIST_FIELDS`) compare by value with
    :func:`queues.quantity.equal`: ``"64Gi"`` matches ``"68719476736"``,
    ``"1000m"`` matches ``"1"``, ``"0"`` matches ``"0m"`` (the API server may
    answer with its own canonical spelling).
    """
    return _subset(desired, live, None, None)


def _omitted_zero(value: Any) -> bool:
    """A Go zero value that the API server leaves out of what it returns (``omitempty``):
    ``false``, ``0``, ``""``, ``[]``, ``{}``. Desired that way, a missing field is in sync
    (the real apiserver drops ``globalDefault: false`` of a PriorityClass)."""
    return value is False or (value in (0, "") and not isinstance(value, bool)) or (
        isinstance(value, list | tuple | Mapping) and not value)


def _subset(desired: Any, live: Any, key: str | None, parent: str | None) -> bool:
    if isinstance(desired, Mapping):
        if not isinstance(live, Mapping):
            return False
        return all(_subset(v, live[k], k, key) if k in live else _omitted_zero(v)
                   for k, v in desired.items())
    if isinstance(desired, list | tuple):
        if not isinstance(live, list | tuple) or len(desired) != len(live):
            return False
        return all(_subset(d, v, None, parent) for d, v in zip(desired, live, strict=True))
    if desired == live:
        return True
    if isinstance(desired, bool) or isinstance(live, bool):
        return False
    if isinstance(desired, int | str) and isinstance(live, int | str):
        if str(desired) == str(live):
            return True
        return _is_quantity_field(key, parent) and quantity.equal(desired, live)
    return False


def observe(live: Mapping[str, Any] | None) -> dict[str, Any]:
    """The observed state of a live object (see :class:`ObjectResult` ``observed``).

    ClusterQueues report their ``Active`` condition: ``applied`` when
    ``status == "True"``, ``not-active`` with its reason and message when
    ``"False"``, ``pending`` while the controller has not reported it.
    Other kinds are ``applied`` once they exist.
    """
    if live is None:
        return {"state": "pending", "reason": "NotFound", "message": ""}
    meta = live.get("metadata") or {}
    result: dict[str, Any] = {
        "state": "applied", "reason": "", "message": "",
        "resourceVersion": meta.get("resourceVersion") or "",
        "generation": meta.get("generation"),
    }
    if live.get("kind") == "ClusterQueue":
        conditions = (live.get("status") or {}).get("conditions") or []
        active = next((c for c in conditions if c.get("type") == "Active"), None)
        if active is None:
            result.update(state="pending", reason="NoActiveCondition",
                          message="the Kueue controller has not reported the queue yet")
        else:
            result.update(
                state="applied" if active.get("status") == "True" else "not-active",
                reason=active.get("reason") or "", message=active.get("message") or "",
            )
    return result


#: ``metadata`` fields the API server sets on every object: bookkeeping, not content.
SERVER_METADATA = ("managedFields", "resourceVersion", "uid", "creationTimestamp",
                   "generation", "selfLink")


def strip_server_fields(obj: Mapping[str, Any] | None) -> dict | None:
    """A copy of a live object without the API server's bookkeeping (:data:`SERVER_METADATA`).

    What remains is the content (``spec``, labels, annotations, server
    defaults) and the controllers' ``status``: what a person compares with
    the desired manifest. Keys whose value is ``None`` (the client's
    ``to_dict`` fills unset fields with them) are dropped. ``None`` -> ``None``.
    """
    if obj is None:
        return None
    meta = {k: v for k, v in (obj.get("metadata") or {}).items()
            if k not in SERVER_METADATA and v is not None}
    return {**{k: v for k, v in obj.items() if v is not None}, "metadata": meta}


def _team(obj: Mapping[str, Any]) -> str | None:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(TEAM_LABEL)


def _failure(key: Key, exc: ClusterError, **kwargs: Any) -> ObjectResult:
    return ObjectResult(
        key=key, action=FAILED, error=exc.message, transient=isinstance(exc, TransientError),
        retry_after=exc.retry_after,
        observed={"state": "failed", "reason": exc.reason, "message": exc.message}, **kwargs,
    )


#: Live objects of each managed kind, listed once per run by our managed-by
#: label: (apiVersion, kind) -> {Key: object}, or ``None`` when the list failed.
Listing = dict[tuple[str, str], dict[Key, dict] | None]


def _list_managed(port: ClusterPort, kinds: Sequence[tuple[str, str]],
                  result: ReconcileResult) -> Listing:
    listing: Listing = {}
    for api_version, kind in kinds:
        try:
            items = port.list(api_version, kind, managed_selector())
        except ClusterError as exc:
            if exc.reason == "UnknownKind":  # not served here: none of it to compare or prune
                listing[(api_version, kind)] = {}
                continue
            result.objects.append(_failure((api_version, kind, "", "*"), exc))
            listing[(api_version, kind)] = None
            continue
        listing[(api_version, kind)] = {
            key_of({**item, "apiVersion": api_version, "kind": kind}): item for item in items}
    return listing


def _live(port: ClusterPort, listing: Listing, key: Key) -> dict | None:
    """The live object from the run's listing; a ``get`` for kinds not listed (or whose
    list failed). A desired object missing its managed-by label on the cluster is
    not listed: it is then applied, which puts the label back."""
    api_version, kind, namespace, name = key
    listed = listing.get((api_version, kind))
    if listed is not None:
        return listed.get(key)
    return port.get(api_version, kind, name, namespace or None)


def _sync_one(port: ClusterPort, desired: dict, last_hash: str | None,
              result: ReconcileResult, listing: Listing) -> ObjectResult:
    key = key_of(desired)
    digest = content_hash(desired)
    common = {"hash": digest, "desired": desired, "team": _team(desired)}
    try:
        live = _live(port, listing, key)
    except ClusterError as exc:
        return _failure(key, exc, **common)
    in_sync = live is not None and is_subset(desired, live)
    if in_sync and last_hash == digest:
        return ObjectResult(key=key, action=UNCHANGED, applied=True, observed=observe(live),
                            live=strip_server_fields(live), live_known=True, **common)
    drift = live is not None and not in_sync and last_hash == digest
    try:
        result.writes += 1
        stored = port.apply(desired)
    except ClusterError as exc:
        return _failure(key, exc, drift=drift, live=strip_server_fields(live), live_known=True,
                        **common)
    return ObjectResult(key=key, action=CREATED if live is None else UPDATED, applied=True,
                        observed=observe(stored), drift=drift, live=strip_server_fields(stored),
                        live_known=True, **common)


def _children_first(items: list[dict]) -> list[dict]:
    """Items by key, except that an item whose ``spec.parent`` names another comes first.

    Volcano Queues form a tree through ``spec.parent``: a child is deleted
    before its parent. Other kinds have no ``spec.parent`` and keep key order.
    """
    parents = {(i.get("metadata") or {}).get("name"): (i.get("spec") or {}).get("parent")
               for i in items}

    def depth(name: str | None) -> int:
        level, seen = 0, set()
        while parents.get(name) and name not in seen:
            seen.add(name)
            name = parents[name]
            level += 1
        return level

    return sorted(items, key=lambda i: (-depth((i.get("metadata") or {}).get("name")),
                                        key_of(i)))


def _prune(port: ClusterPort, kinds: Sequence[tuple[str, str]], wanted: set[Key],
           result: ReconcileResult, listing: Listing) -> None:
    for api_version, kind in reversed(kinds):
        listed = listing.get((api_version, kind))
        if listed is None:  # the list failed (recorded): prune this kind next run
            continue
        items = [{**item, "apiVersion": api_version, "kind": kind} for item in listed.values()]
        for item in _children_first(items):
            key = key_of(item)
            if key in wanted:
                continue
            if (api_version, kind) in RETAINED_KINDS:
                result.objects.append(ObjectResult(
                    key=key, action=RETAINED, team=_team(item),
                    live=strip_server_fields(item), live_known=True,
                    observed={"state": "retained", "reason": "NotDesired",
                              "message": "no longer desired; kept (deleting it would delete "
                                         "everything in it)"},
                ))
                continue
            try:
                result.writes += 1
                port.delete(api_version, kind, key[3], key[2] or None)
            except ClusterError as exc:
                result.objects.append(_failure(key, exc, team=_team(item)))
                continue
            result.objects.append(ObjectResult(
                key=key, action=PRUNED, team=_team(item),
                observed={"state": "pruned", "reason": "", "message": ""},
            ))


def reconcile(
    port: ClusterPort,
    desired: Iterable[dict],
    last_applied: Mapping[Key, str] | None = None,
    *,
    kinds: Sequence[tuple[str, str]] = MANAGED_KINDS,
    prune: bool = True,
) -> ReconcileResult:
    """Converge the cluster behind ``port`` to ``desired``; see the module doc.

    * ``desired``: manifests in apply order (dependencies first), each with
      our managed-by label (only labelled objects are found again by prune);
    * ``last_applied``: :data:`Key` -> :func:`content_hash` of what was last
      applied successfully (empty on the first run: everything is applied
      once, which also takes ownership of our fields);
    * ``kinds``: the (apiVersion, kind) pairs we manage, in apply order
      (default both backends' kinds: :data:`MANAGED_KINDS`): each is listed
      once by our managed-by label at the start of the run, and that listing
      serves both the comparison and the prune (requests per run: one list
      per kind plus one apply per object to write, instead of a ``get`` per
      object; desired objects of other kinds are read with ``get``);
    * ``prune``: set ``False`` to skip the prune phase.

    Returns a :class:`ReconcileResult`. Never raises a cluster error: failures
    are recorded per object (a failed list is recorded under the key
    ``(apiVersion, kind, "", "*")``; that kind's objects are then read one by
    one with ``get`` and its prune waits for the next run).
    """
    last_applied = last_applied or {}
    desired = list(desired)
    wanted = {key_of(obj) for obj in desired}
    if len(wanted) != len(desired):
        raise ValueError("desired objects must have distinct keys")
    result = ReconcileResult()
    listing = _list_managed(port, kinds, result)
    for obj in desired:
        result.objects.append(
            _sync_one(port, obj, last_applied.get(key_of(obj)), result, listing))
    if prune:
        _prune(port, kinds, wanted, result, listing)
    return result

