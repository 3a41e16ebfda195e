"""Kueue's on-demand visibility API, computed from the stored Workloads.

``GET /apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/<ns>/localqueues/<lq>/pendingworkloads``
answers a ``PendingWorkloadsSummary`` like Kueue's visibility server
(https://kueue.sigs.k8s.io/docs/tasks/manage/monitor_pending_workloads/pending_workloads_on_demand/):
``items`` are the Workloads of that LocalQueue that are pending - no
``QuotaReserved=True`` condition, not ``Finished``, ``spec.active`` not false -
ordered as Kueue's queue orders them under the default ``BestEffortFIFO`` /
``StrictFIFO`` ordering: ``spec.priority`` descending, then
``creationTimestamp`` ascending (then name, for a stable order). Positions are
0-based (0 = next), as Kueue reports them; ``positionInClusterQueue`` counts
the pending Workloads of every LocalQueue that points at the same ClusterQueue.
Query parameters ``limit`` (default 1000) and ``offset`` (default 0) page the
items, as in Kueue.

Simplification: Kueue orders a requeued (evicted) Workload by its eviction
time, not its creation time; the emulator always uses ``creationTimestamp``.
A LocalQueue that is not stored answers 404 ``NotFound``.
"""

from __future__ import annotations

from typing import Any

from .app import Emulator, GetRequest
from .errors import ApiError, bad_request, not_found

GROUP = "visibility.kueue.x-k8s.io"
VERSION = "v1beta2"
PATH = (rf"/apis/{GROUP}/{VERSION}/namespaces/(?P<ns>[^/]+)/localqueues/(?P<lq>[^/]+)"
        r"/pendingworkloads")
RESOURCES = [
    {"name": "localqueues", "singularName": "localqueue", "namespaced": True,
     "kind": "LocalQueue", "verbs": ["get"]},
    {"name": "localqueues/pendingworkloads", "singularName": "", "namespaced": True,
     "kind": "PendingWorkloadsSummary", "verbs": ["get"]},
    {"name": "clusterqueues", "singularName": "clusterqueue", "namespaced": False,
     "kind": "ClusterQueue", "verbs": ["get"]},
    {"name": "clusterqueues/pendingworkloads", "singularName": "", "namespaced": False,
     "kind": "PendingWorkloadsSummary", "verbs": ["get"]},
]


def is_pending(workload: dict[str, Any]) -> bool:
    """Pending in Kueue's queue: active, not finished, no quota reserved."""
    if (workload.get("spec") or {}).get("active") is False:
        return False
    for cond in (workload.get("status") or {}).get("conditions") or ():
        if cond.get("type") in ("QuotaReserved", "Finished") and cond.get("status") == "True":
            return False
    return True


def queue_order(workload: dict[str, Any]) -> tuple:
    """Sort key: priority descending, then creationTimestamp, then namespace/name."""
    meta = workload.get("metadata") or {}
    priority = (workload.get("spec") or {}).get("priority") or 0
    return (-int(priority), meta.get("creationTimestamp") or "", meta.get("namespace") or "",
            meta.get("name") or "")


def _int_param(query: dict[str, list[str]], key: str, default: int) -> int:
    values = query.get(key)
    if not values or values[0] == "":
        return default
    try:
        value = int(values[0])
    except ValueError:
        raise bad_request(f"{key} must be an integer, got {values[0]!r}") from None
    if value < 0:
        raise bad_request(f"{key} must not be negative")
    return value


def pending_workloads(req: GetRequest) -> dict[str, Any]:
    """The handler: a PendingWorkloadsSummary for the LocalQueue in the path."""
    namespace, local_queue = req.match["ns"], req.match["lq"]
    lq_type = req.registry.lookup("kueue.x-k8s.io", "v1beta2", "localqueues")
    wl_type = req.registry.lookup("kueue.x-k8s.io", "v1beta2", "workloads")
    if lq_type is None or wl_type is None:
        raise ApiError(404, "the server could not find the requested resource", reason="NotFound")
    limit = _int_param(req.query, "limit", 1000)
    offset = _int_param(req.query, "offset", 0)
    with req.store.lock:
        try:
            lq = req.store.get(lq_type, namespace, local_queue)
        except ApiError:
            raise not_found("localqueues", GROUP, local_queue) from None
        cluster_queue = (lq.get("spec") or {}).get("clusterQueue")
        local_queues = req.store.list(lq_type)["items"]
        workloads = req.store.list(wl_type)["items"]
    same_cq = {
        ((q.get("metadata") or {}).get("namespace"), (q.get("metadata") or {}).get("name"))
        for q in local_queues if (q.get("spec") or {}).get("clusterQueue") == cluster_queue
    }
    in_cq = sorted(
        (w for w in workloads if is_pending(w) and (
            (w.get("metadata") or {}).get("namespace"),
            (w.get("spec") or {}).get("queueName")) in same_cq),
        key=queue_order,
    )
    items = []
    position_in_lq = 0
    for position_in_cq, wl in enumerate(in_cq):
        meta = wl.get("metadata") or {}
        if meta.get("namespace") != namespace or (wl.get("spec") or {}).get("queueName") \
                != local_queue:
            continue
        item_meta = {key: meta[key] for key in ("name", "namespace", "creationTimestamp",
                                               "ownerReferences", "uid") if key in meta}
        items.append({
            "metadata": item_meta,
            "priority": int((wl.get("spec") or {}).get("priority") or 0),
            "localQueueName": local_queue,
            "positionInClusterQueue": position_in_cq,
            "positionInLocalQueue": position_in_lq,
        })
        position_in_lq += 1
    return {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": f"{GROUP}/{VERSION}",
        "metadata": {"creationTimestamp": None},
        "items": items[offset:offset + limit],
    }


def install(emulator: Emulator) -> bool:
    """Serve the visibility endpoint on ``emulator`` when the Kueue Workload CRD is loaded.

    Returns whether it was installed. Discovery then lists
    ``visibility.kueue.x-k8s.io/v1beta2``.
    """
    if emulator.registry.lookup("kueue.x-k8s.io", "v1beta2", "workloads") is None:
        return False
    emulator.register_get(PATH, pending_workloads, group=GROUP, version=VERSION,
                          resources=RESOURCES)
    return True
