"""Write what Kueue's controllers would write, through the cluster port (test and demo tool).

No Kueue runs against the emulator, so tests (and later the scheduler
simulator) play its part: they create the ``Workload`` for a suspended job,
set its conditions and ``status.admission``, unsuspend the job and set the
job's status, all over HTTP through :class:`queues.cluster.KubernetesCluster`
(any object with its ``get``/``create``/``patch`` methods). Product code never
imports this module.

Shapes follow Kueue (kueue.x-k8s.io/v1beta2) and its source
(``pkg/workload/workload.go``, ``pkg/scheduler/scheduler.go``,
``pkg/scheduler/preemption/preemption.go``, ``pkg/controller/jobs/job``):

* :func:`create_workload` - ``<kind>-<name>-<hash5>``
  (:func:`queues.backends.kueue.jobs.workload_name`), owned by the job (controller
  ownerReference), label ``kueue.x-k8s.io/job-uid``,
  ``spec.queueName`` from the job's queue-name label, one pod set ``main``
  (batch/v1 Job, ``count = parallelism``) or one per replicated job (JobSet,
  ``count = replicas * parallelism``), ``spec.priority``/``priorityClassRef``.
* :func:`set_pending` - ``QuotaReserved=False`` with a reason and message
  (:func:`insufficient_quota_message` etc. build Kueue's exact texts).
* :func:`admit` - ``status.admission`` (ClusterQueue, per pod set the flavor
  of every resource, counts, usage), ``QuotaReserved=True`` and
  ``Admitted=True``; clears an earlier ``Evicted``/``Preempted`` as Kueue does.
* :func:`set_pods_ready`, :func:`preempt` (``Evicted``/``Preempted``,
  quota released, ``Requeued``, ``schedulingStats.evictions``, the job
  suspended again, an event), :func:`finish` (``Finished``).
* Job side: :func:`unsuspend_job` (with the flavor's node selector as Kueue
  injects it), :func:`set_job_status` (active/ready/succeeded/failed,
  ``startTime``, conditions ``Complete``/``Failed`` - or JobSet
  ``Completed``/``Failed`` and ``replicatedJobsStatus``), :func:`record_event`.

Times are RFC 3339 strings in whole seconds, taken from ``now`` (aware
``datetime``, default the current time).
"""

from __future__ import annotations

import datetime as dt
import secrets
from typing import Any

from queues.backends.kueue.jobs import JOB_UID_LABEL, QUEUE_NAME_LABEL, workload_name

__all__ = [
    "WORKLOAD_API_VERSION",
    "admit",
    "create_workload",
    "deactivated_by_kueue",
    "exceeds_maximum_message",
    "finish",
    "get_workload",
    "insufficient_quota_message",
    "preempt",
    "preemption_message",
    "quota_refused_message",
    "record_event",
    "set_conditions",
    "set_job_status",
    "set_pending",
    "set_pods_ready",
    "unsuspend_job",
]

WORKLOAD_API_VERSION = "kueue.x-k8s.io/v1beta2"
#: Field manager of the writes made on Kueue's behalf.
MANAGER = "kueue-emulated"


def _now(now: dt.datetime | None) -> str:
    when = now or dt.datetime.now(dt.UTC)
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


# --- Kueue's message texts -----------------------------------------------------


def insufficient_quota_message(resource: str, flavor: str, more: int | str,
                               pod_set: str = "main") -> str:
    """Kueue's ``WaitingForQuota`` message (flavorassigner.go, ``fitsResourceQuota``)."""
    return (f"couldn't assign flavors to pod set {pod_set}: insufficient unused quota for "
            f"{resource} in flavor {flavor}, {more} more needed")


def exceeds_maximum_message(resource: str, flavor: str, request: int | str, maximum: int | str,
                            pod_set: str = "main") -> str:
    """Kueue's ``ExceedsMaxQuota`` message (flavorassigner.go, ``fitsResourceQuota``)."""
    return (f"couldn't assign flavors to pod set {pod_set}: insufficient quota for {resource} "
            f"in flavor {flavor}, previously considered podsets requests (0) + current podset "
            f"request ({request}) > maximum capacity ({maximum})")


def preemption_message(preemptor_uid: str, preemptor_job_uid: str,
                       reason: str = "InClusterQueue") -> str:
    """Kueue's preemption message (preemption.go, ``preemptionMessage``)."""
    why = {
        "InClusterQueue": "prioritization in the ClusterQueue",
        "InCohortReclamation": "reclamation within the cohort",
        "InCohortFairSharing": "Fair Sharing within the cohort",
        "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
    }.get(reason, "UNKNOWN")
    return (f"Preempted to accommodate a workload (UID: {preemptor_uid}, JobUID: "
            f"{preemptor_job_uid}) due to {why}; preemptor path: UNKNOWN; preemptee path: "
            "UNKNOWN")


# --- Workload ------------------------------------------------------------------


def _pod_sets(job: dict) -> list[dict]:
    spec = job.get("spec") or {}
    if job.get("kind") == "JobSet":
        out = []
        for rj in spec.get("replicatedJobs") or ():
            job_spec = (rj.get("template") or {}).get("spec") or {}
            count = int(rj.get("replicas") or 1) * int(job_spec.get("parallelism") or 1)
            out.append({"name": rj["name"], "count": count, "template": job_spec["template"]})
        return out
    return [{"name": "main", "count": int(spec.get("parallelism") or 1),
             "template": spec["template"]}]


def get_workload(cluster: Any, workload: dict) -> dict:
    """Re-read ``workload`` (dict with metadata name/namespace) from the cluster."""
    meta = _meta(workload)
    live = cluster.get(WORKLOAD_API_VERSION, "Workload", meta["name"], meta["namespace"])
    if live is None:
        raise LookupError(f"Workload {meta['namespace']}/{meta['name']} not found")
    return live


def create_workload(cluster: Any, job: dict, *, priority: int = 0, priority_class: str = "",
                    now: dt.datetime | None = None) -> dict:
    """Create the Workload Kueue's job reconciler creates for ``job`` (the live job dict,
    with ``metadata.uid``); returns the stored Workload. ``priority`` is the
    WorkloadPriorityClass value (``spec.priority``), ``priority_class`` its
    name (``spec.priorityClassRef``; default: the job's
    ``kueue.x-k8s.io/priority-class`` label).
    """
    meta = _meta(job)
    labels = meta.get("labels") or {}
    priority_class = priority_class or labels.get("kueue.x-k8s.io/priority-class", "")
    spec: dict[str, Any] = {
        "queueName": labels.get(QUEUE_NAME_LABEL, ""),
        "podSets": _pod_sets(job),
        "priority": priority,
        "active": True,
    }
    if priority_class:
        spec["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass",
                                    "name": priority_class}
    workload = {
        "apiVersion": WORKLOAD_API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": workload_name(job["kind"], meta["name"], meta["uid"]),
            "namespace": meta["namespace"],
            "labels": {JOB_UID_LABEL: meta["uid"]},
            "ownerReferences": [{
                "apiVersion": job["apiVersion"], "kind": job["kind"], "name": meta["name"],
                "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True,
            }],
        },
        "spec": spec,
    }
    if now is not None:
        workload["metadata"]["creationTimestamp"] = _now(now)
    return cluster.create(workload, field_manager=MANAGER)


def set_conditions(cluster: Any, workload: dict, conditions: list[dict], *,
                   status: dict | None = None, now: dt.datetime | None = None) -> dict:
    """Upsert ``conditions`` (dicts with ``type``, ``status``, ``reason``, ``message``) in the
    Workload's ``status.conditions``, keeping the others; ``lastTransitionTime``
    changes only when a condition's status changes (Kueue's
    ``apimeta.SetStatusCondition``). ``status``: other status fields to merge.
    Returns the patched Workload.
    """
    live = get_workload(cluster, workload)
    current = {c["type"]: c for c in (live.get("status") or {}).get("conditions") or ()}
    stamp = _now(now)
    for cond in conditions:
        previous = current.get(cond["type"])
        merged = {"type": cond["type"], "status": cond["status"],
                  "reason": cond.get("reason") or cond["type"],
                  "message": cond.get("message", ""),
                  "lastTransitionTime": stamp,
                  "observedGeneration": _meta(live).get("generation", 1)}
        if previous and previous.get("status") == cond["status"] and "time" not in cond:
            merged["lastTransitionTime"] = previous.get("lastTransitionTime") or stamp
        if cond.get("time"):
            merged["lastTransitionTime"] = _now(cond["time"])
        current[cond["type"]] = merged
    body = {"conditions": list(current.values()), **(status or {})}
    meta = _meta(live)
    return cluster.patch(WORKLOAD_API_VERSION, "Workload", meta["name"], meta["namespace"],
                         {"status": body}, subresource="status", field_manager=MANAGER)


def set_pending(cluster: Any, workload: dict, *, reason: str = "WaitingForQuota",
                message: str = "", now: dt.datetime | None = None) -> dict:
    """``QuotaReserved=False`` with Kueue's ``reason`` and ``message`` (e.g.
    :func:`insufficient_quota_message`)."""
    return set_conditions(cluster, workload, [
        {"type": "QuotaReserved", "status": "False", "reason": reason, "message": message},
    ], now=now)


def admit(cluster: Any, workload: dict, *, cluster_queue: str, flavor: str,
          now: dt.datetime | None = None) -> dict:
    """Reserve quota and admit: ``status.admission`` assigns ``flavor`` to every resource
    of every pod set (usage = count x per-pod requests), ``QuotaReserved`` and
    ``Admitted`` True, and an earlier ``Evicted``/``Preempted``/``Requeued``
    set False as Kueue does on re-admission.
    """
    live = get_workload(cluster, workload)
    assignments = []
    for pod_set in (live.get("spec") or {}).get("podSets") or ():
        usage: dict[str, str] = {}
        for container in pod_set["template"]["spec"].get("containers") or ():
            for resource, value in ((container.get("resources") or {}).get("requests")
                                    or {}).items():
                usage[resource] = value if pod_set["count"] == 1 else \
                    _times(value, pod_set["count"])
        assignments.append({
            "name": pod_set["name"],
            "count": pod_set["count"],
            "flavors": {resource: flavor for resource in sorted(usage)},
            "resourceUsage": usage,
        })
    conds = _conditions_of(live)
    conditions = [
        {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
         "message": f"Quota reserved in ClusterQueue {cluster_queue}"},
        {"type": "Admitted", "status": "True", "reason": "Admitted",
         "message": "The workload is admitted"},
    ]
    for kind in ("Evicted", "Preempted", "Requeued"):
        if (conds.get(kind) or {}).get("status") == "True":
            conditions.append({"type": kind, "status": "False", "reason": "QuotaReserved",
                               "message": f"Previously: {conds[kind].get('message', '')}"})
    return set_conditions(cluster, live, conditions, now=now, status={
        "admission": {"clusterQueue": cluster_queue, "podSetAssignments": assignments},
    })


def _times(value: str, count: int) -> str:
    from queues import quantity

    total = quantity.parse(value) * count
    return quantity.format_quantity(total, binary=quantity.is_binary(value))


def _conditions_of(obj: dict) -> dict[str, dict]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or ()}


def set_pods_ready(cluster: Any, workload: dict, ready: bool = True, *,
                   now: dt.datetime | None = None) -> dict:
    """``PodsReady`` True (reason ``PodsReady``) or False (reason ``WaitForStart``)."""
    return set_conditions(cluster, workload, [{
        "type": "PodsReady", "status": "True" if ready else "False",
        "reason": "PodsReady" if ready else "WaitForStart",
        "message": "All pods reached readiness and the workload is running" if ready
        else "Not all pods are ready or succeeded",
    }], now=now)


def preempt(cluster: Any, workload: dict, job: dict | None = None, *,
            preemptor_uid: str = "", preemptor_job_uid: str = "",
            reason: str = "InClusterQueue", now: dt.datetime | None = None) -> dict:
    """Preempt an admitted Workload as Kueue does, and requeue it.

    ``Evicted=True`` (reason ``Preempted``) and ``Preempted=True`` (``reason``:
    InClusterQueue, InCohortReclamation, ...) with Kueue's message naming the
    preemptor, quota released (``QuotaReserved``/``Admitted`` False,
    ``status.admission`` removed), ``Requeued=True``,
    ``schedulingStats.evictions`` (reason ``Preempted``) incremented, an event
    ``Preempted`` on the Workload and, when ``job`` is given, the job
    suspended again with no active pods. Returns the Workload.
    """
    now = now or dt.datetime.now(dt.UTC)  # one instant for the conditions and the event
    live = get_workload(cluster, workload)
    message = preemption_message(preemptor_uid or "UNKNOWN", preemptor_job_uid or "UNKNOWN",
                                 reason)
    stats = ((live.get("status") or {}).get("schedulingStats") or {}).get("evictions") or []
    stats = [dict(e) for e in stats]
    for entry in stats:
        if entry.get("reason") == "Preempted" and entry.get("underlyingCause", "") == reason:
            entry["count"] = int(entry.get("count") or 0) + 1
            break
    else:
        stats.append({"reason": "Preempted", "underlyingCause": reason, "count": 1})
    meta = _meta(live)
    cluster.patch(WORKLOAD_API_VERSION, "Workload", meta["name"], meta["namespace"],
                  {"status": {"admission": None}}, subresource="status", field_manager=MANAGER)
    updated = set_conditions(cluster, live, [
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": message},
        {"type": "Preempted", "status": "True", "reason": reason, "message": message},
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": message},
        {"type": "Admitted", "status": "False", "reason": "NoReservation",
         "message": "The workload has no reservation"},
        {"type": "PodsReady", "status": "False", "reason": "WaitForStart",
         "message": "Not all pods are ready or succeeded"},
        {"type": "Requeued", "status": "True", "reason": "Preempted", "message": message},
    ], now=now, status={"schedulingStats": {"evictions": stats}})
    record_event(cluster, updated, reason="Preempted", message=message, now=now,
                 component="kueue-admission")
    if job is not None:
        jmeta = _meta(job)
        cluster.patch(job["apiVersion"], job["kind"], jmeta["name"], jmeta["namespace"],
                      {"spec": {"suspend": True}}, field_manager=MANAGER)
        set_job_status(cluster, job, active=0, ready=0)
    return updated


def finish(cluster: Any, workload: dict, *, succeeded: bool = True, message: str = "",
           now: dt.datetime | None = None) -> dict:
    """``Finished=True`` with reason ``Succeeded`` or ``Failed``."""
    return set_conditions(cluster, workload, [{
        "type": "Finished", "status": "True",
        "reason": "Succeeded" if succeeded else "Failed",
        "message": message or ("Job finished successfully" if succeeded else "Job failed"),
    }], now=now)


def deactivated_by_kueue(cluster: Any, workload: dict, *, reason: str = "RequeuingLimitExceeded",
                         message: str = "exceeding the maximum number of re-queuing retries",
                         now: dt.datetime | None = None) -> dict:
    """Kueue deactivating a Workload itself: ``spec.active: false`` and
    ``Evicted=True`` (reason ``Deactivated``) with ``reason`` in the message."""
    meta = _meta(workload)
    cluster.patch(WORKLOAD_API_VERSION, "Workload", meta["name"], meta["namespace"],
                  {"spec": {"active": False}}, field_manager=MANAGER)
    return set_conditions(cluster, workload, [{
        "type": "Evicted", "status": "True", "reason": f"Deactivated{reason}",
        "message": f"The workload is deactivated due to {message}",
    }], now=now)


# --- the job -------------------------------------------------------------------


def unsuspend_job(cluster: Any, job: dict, *, node_selector: dict[str, str] | None = None,
                  now: dt.datetime | None = None) -> dict:
    """``spec.suspend: false`` with the admitted flavor's ``node_selector`` injected into the
    pod template(s), as Kueue does on admission; ``status.startTime`` set (batch/v1
    Job). Returns the patched job.
    """
    meta = _meta(job)
    patch: dict[str, Any] = {"spec": {"suspend": False}}
    if node_selector and job["kind"] == "Job":
        patch["spec"]["template"] = {"spec": {"nodeSelector": dict(node_selector)}}
    elif node_selector and job["kind"] == "JobSet":
        live = cluster.get(job["apiVersion"], job["kind"], meta["name"], meta["namespace"])
        replicated = []
        for rj in (live.get("spec") or {}).get("replicatedJobs") or ():
            rj = dict(rj)
            pod_spec = rj["template"]["spec"]["template"]["spec"]
            pod_spec["nodeSelector"] = {**(pod_spec.get("nodeSelector") or {}), **node_selector}
            replicated.append(rj)
        patch["spec"]["replicatedJobs"] = replicated
    updated = cluster.patch(job["apiVersion"], job["kind"], meta["name"], meta["namespace"],
                            patch, field_manager=MANAGER)
    if job["kind"] == "Job":
        updated = set_job_status(cluster, job, start_time=now or dt.datetime.now(dt.UTC))
    return updated


def set_job_status(cluster: Any, job: dict, *, active: int | None = None,
                   ready: int | None = None, succeeded: int | None = None,
                   failed: int | None = None, start_time: dt.datetime | None = None,
                   complete: bool | None = None, reason: str = "", message: str = "",
                   now: dt.datetime | None = None) -> dict:
    """Merge the job controller's status: pod counts, ``startTime``, and with
    ``complete=True``/``False`` the terminal conditions (batch/v1: ``Complete``
    or ``Failed``, plus ``completionTime`` on success; JobSet: ``Completed`` or
    ``Failed``). For a JobSet the counts go to ``replicatedJobsStatus`` of its
    first replicated job. ``reason``/``message`` of a failure (e.g.
    ``DeadlineExceeded``). Returns the patched job.
    """
    meta = _meta(job)
    stamp = _now(now)
    status: dict[str, Any] = {}
    if job["kind"] == "JobSet":
        live = cluster.get(job["apiVersion"], job["kind"], meta["name"], meta["namespace"])
        rjs = (live.get("spec") or {}).get("replicatedJobs") or [{"name": "workers"}]
        current = ((live.get("status") or {}).get("replicatedJobsStatus") or [{}])[0]
        entry = {"name": rjs[0]["name"], "ready": 0, "succeeded": 0, "failed": 0, "active": 0,
                 "suspended": 0}
        entry.update({k: v for k, v in current.items() if k in entry})
        for key, value in (("active", active), ("ready", ready), ("succeeded", succeeded),
                           ("failed", failed)):
            if value is not None:
                entry[key] = value
        status["replicatedJobsStatus"] = [entry]
        if complete is not None:
            kind = "Completed" if complete else "Failed"
            status["conditions"] = [{
                "type": kind, "status": "True", "reason": reason or (
                    "AllJobsCompleted" if complete else "FailedJobs"),
                "message": message or ("jobset completed successfully" if complete
                                       else "jobset failed due to one or more job failures"),
                "lastTransitionTime": stamp,
            }]
            status["terminalState"] = kind
    else:
        for key, value in (("active", active), ("ready", ready), ("succeeded", succeeded),
                           ("failed", failed)):
            if value is not None:
                status[key] = value
        if start_time is not None:
            status["startTime"] = _now(start_time)
        if complete is not None:
            kind = "Complete" if complete else "Failed"
            conds = [{"type": kind, "status": "True",
                      "reason": reason or ("CompletionsReached" if complete
                                           else "BackoffLimitExceeded"),
                      "message": message or ("Reached expected number of succeeded pods"
                                             if complete else "Job has reached the specified "
                                             "backoff limit"),
                      "lastProbeTime": stamp, "lastTransitionTime": stamp}]
            if complete:
                conds.insert(0, {"type": "SuccessCriteriaMet", "status": "True",
                                 "reason": "CompletionsReached",
                                 "message": "Reached expected number of succeeded pods",
                                 "lastProbeTime": stamp, "lastTransitionTime": stamp})
                status["completionTime"] = stamp
            else:
                conds.insert(0, {"type": "FailureTarget", "status": "True",
                                 "reason": conds[0]["reason"], "message": conds[0]["message"],
                                 "lastProbeTime": stamp, "lastTransitionTime": stamp})
            status["conditions"] = conds
    return cluster.patch(job["apiVersion"], job["kind"], meta["name"], meta["namespace"],
                         {"status": status}, subresource="status", field_manager=MANAGER)


def record_event(cluster: Any, obj: dict, *, reason: str, message: str, type: str = "Normal",
                 component: str = "kueue-admission", now: dt.datetime | None = None) -> dict:
    """Create a core/v1 Event about ``obj`` (``involvedObject`` = its kind, name, uid),
    like a controller's event recorder; returns the Event."""
    meta = _meta(obj)
    stamp = _now(now)
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}",
                     "namespace": meta["namespace"]},
        "involvedObject": {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""),
                           "name": meta["name"], "namespace": meta["namespace"],
                           "uid": meta.get("uid", "")},
        "reason": reason,
        "message": message,
        "type": type,
        "source": {"component": component},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "reportingComponent": component,
    }
    return cluster.create(event, field_manager=MANAGER)


def quota_refused_message(pod_name: str, quota: str, resource: str, requested: int | str,
                          used: int | str, limited: int | str) -> str:
    """The job controller's ``FailedCreate`` message when the ResourceQuota refuses a pod
    (kube-apiserver quota admission, ``exceeded quota``)."""
    return (f'Error creating: pods "{pod_name}" is forbidden: exceeded quota: {quota}, '
            f"requested: {resource}={requested}, used: {resource}={used}, "
            f"limited: {resource}={limited}")
