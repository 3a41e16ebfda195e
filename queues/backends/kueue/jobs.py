"""Gang jobs for Kueue: the manifest, its Workload, and what the cluster says about it.

Pure: no Django, no ``kubernetes`` import. The portal builds a
:class:`queues.jobs.JobSpec`, the Kueue backend renders it with
:func:`render_kueue_job` (a suspended batch/v1 Indexed Job or JobSet), and on
every sync feeds what it reads back (the Job/JobSet, its Kueue ``Workload``,
events, the visibility API's queue position) to :func:`interpret_kueue`, which
returns a :class:`queues.jobs.JobStatus`.

Kueue conventions relied on (kueue.x-k8s.io/v1beta2; Kueue source
``pkg/controller/jobframework/workload_names.go``,
``pkg/scheduler/flavorassigner/flavorassigner.go``,
``pkg/scheduler/preemption/preemption.go``, ``apis/kueue/v1beta2/workload_types.go``):

* the Workload of a Job ``train`` is named ``job-train-<5 hex>`` (JobSet:
  ``jobset-train-<5 hex>``), owned by the job (``ownerReferences[].uid``) and
  labelled ``kueue.x-k8s.io/job-uid: <job uid>``;
* ``QuotaReserved=False`` carries a reason (``WaitingForQuota``,
  ``ExceedsMaxQuota``, ``NoMatchingFlavor``, ``WaitingForPreemptedWorkloads``,
  ``Suspended``, ``Misconfigured``, ``PendingEvaluation``; older releases
  ``Pending``) and a message such as ``couldn't assign flavors to pod set
  main: insufficient unused quota for nvidia.com/gpu in flavor h100, 16 more
  needed``; both are read, the message wins where it is more specific;
* a preempted Workload gets ``Evicted`` (reason ``Preempted``) and
  ``Preempted`` (reason ``InClusterQueue``, ``InCohortReclamation``,
  ``InCohortFairSharing``, ``InCohortReclaimWhileBorrowing``) with the message
  ``Preempted to accommodate a workload (UID: <wl uid>, JobUID: <job uid>) due
  to <why>; ...``; ``status.schedulingStats.evictions`` counts evictions by
  reason.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Iterable, Sequence
from typing import Any

from queues.jobs import (
    PREEMPTION_DEDUP_SECONDS,
    REPLICATED_JOB,
    JobSpec,
    JobStatus,
    format_time,
    merge_times,
    parse_time,
    pod_container,
    preemption_loop,
)
from queues.render.labels import job_labels

__all__ = [
    "JOBSET_API_VERSION",
    "JOB_API_VERSION",
    "JOB_UID_LABEL",
    "PRIORITY_CLASS_LABEL",
    "QUEUE_NAME_LABEL",
    "index_workloads",
    "interpret_kueue",
    "job_kind",
    "render_kueue_job",
    "workload_for_job",
    "workload_name",
]

JOB_API_VERSION = "batch/v1"
JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
#: Kueue's labels on a job: the LocalQueue, the WorkloadPriorityClass, the job UID.
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"

# --- rendering -----------------------------------------------------------------


def job_kind(kind: str) -> tuple[str, str]:
    """``(apiVersion, kind)`` of the manifest for ``JobSpec.kind`` ``"job"``/``"jobset"``.

    Raises ``ValueError`` for another value.
    """
    if kind == "job":
        return JOB_API_VERSION, "Job"
    if kind == "jobset":
        return JOBSET_API_VERSION, "JobSet"
    raise ValueError(f"unknown job kind {kind!r}")


def _pod_template(spec: JobSpec) -> dict:
    return {
        "metadata": {"labels": job_labels(spec.team, spec.job_label)},
        "spec": {"restartPolicy": "Never", "containers": [pod_container(spec)]},
    }


def _indexed_job_spec(spec: JobSpec) -> dict:
    out: dict[str, Any] = {
        "parallelism": spec.workers,
        "completions": spec.workers,
        "completionMode": "Indexed",
        "backoffLimit": 0,
    }
    if spec.max_runtime_seconds is not None:
        out["activeDeadlineSeconds"] = spec.max_runtime_seconds
    out["template"] = _pod_template(spec)
    return out


def render_kueue_job(spec: JobSpec) -> dict:
    """The manifest Kueue admits as one gang: a batch/v1 Job or a JobSet (dict).

    ``kind="job"``: ``batch/v1`` Job, ``completionMode: Indexed``,
    ``parallelism = completions = workers`` (pods get
    ``JOB_COMPLETION_INDEX``). ``kind="jobset"``: ``jobset.x-k8s.io/v1alpha2``
    JobSet with one replicated job ``workers`` (``replicas: 1``, an Indexed
    Job of ``workers`` pods: total pods = workers) and
    ``network.enableDNSHostnames: true``: the JobSet controller creates a
    headless Service named after the JobSet, and worker ``i`` is reachable at
    ``<name>-workers-0-<i>.<name>`` (rank 0 is the usual rendezvous address).

    Both carry, on the top object: ``kueue.x-k8s.io/queue-name: <local_queue>``,
    ``kueue.x-k8s.io/priority-class: <priority_class>`` (only when set), the
    portal's ``job_labels(team, job_label)``; ``metadata.annotations`` =
    ``spec.annotations`` when there are any; ``spec.suspend: true`` (Kueue
    unsuspends it on admission). Pods carry the portal labels too. Each
    container requests ``cpu_per_worker``, ``memory_per_worker`` and
    ``gpus_per_worker`` of ``gpu_resource``; GPU limits equal requests
    (extended resources cannot be overcommitted), memory limit = request (a
    worker that leaks memory is killed alone instead of squeezing its node's
    other jobs), no CPU limit (no CFS throttling of data loaders).

    Choices:

    * ``restartPolicy: Never`` and ``backoffLimit: 0`` (JobSet also
      ``failurePolicy.maxRestarts: 0``): a gang whose worker fails is broken
      (the collective hangs or aborts), so the job fails at once and is
      reported, instead of restarting one pod into a half-dead gang and
      holding GPUs meanwhile.
    * ``activeDeadlineSeconds = max_runtime_seconds`` (on the Job, or on the
      JobSet's child Job): the clock starts when Kueue resumes the job, not
      while it waits (Kubernetes resets ``startTime`` on suspend).
    * No nodeSelector or tolerations: Kueue injects the admitted
      ResourceFlavor's ``nodeLabels`` and ``tolerations`` into the pod
      template when it unsuspends the job; setting them here would pin the
      job to one flavor and could contradict Kueue's choice.
    """
    labels = {QUEUE_NAME_LABEL: spec.local_queue}
    if spec.priority_class:
        labels[PRIORITY_CLASS_LABEL] = spec.priority_class
    labels.update(job_labels(spec.team, spec.job_label))
    api_version, kind = job_kind(spec.kind)
    metadata = {"name": spec.name, "namespace": spec.namespace, "labels": labels}
    if spec.annotations:
        metadata["annotations"] = dict(spec.annotations)
    if spec.kind == "job":
        body = {"suspend": True, **_indexed_job_spec(spec)}
    else:
        body = {
            "suspend": True,
            "network": {"enableDNSHostnames": True},
            "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": [{
                "name": REPLICATED_JOB,
                "replicas": 1,
                "template": {
                    "metadata": {"labels": job_labels(spec.team, spec.job_label)},
                    "spec": _indexed_job_spec(spec),
                },
            }],
        }
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": body}


# --- finding the Workload ------------------------------------------------------


def workload_name(kind: str, job_name: str, job_uid: str, *, max_length: int = 253) -> str:
    """The name Kueue gives the Workload of a job: ``<kind>-<name>-<hash5>``.

    ``kind`` is the object kind (``"Job"``/``"JobSet"``, or the spec's
    ``"job"``/``"jobset"``). Formula from Kueue
    ``jobframework.GetWorkloadNameForOwnerWithGVK``: prefix
    ``lower(kind) + "-" + name`` truncated to ``max_length - 6``, then ``-``
    and the first 5 hex digits of ``sha1(kind "\\n" group "\\n" name "\\n" uid)``.
    ``max_length`` is 253, or 63 with Kueue's ``ShortWorkloadNames`` feature.
    """
    kinds = {"job": ("Job", "batch"), "jobset": ("JobSet", "jobset.x-k8s.io")}
    gvk_kind, group = kinds.get(kind.lower(), (kind, ""))
    digest = hashlib.sha1(
        "\n".join((gvk_kind, group, job_name, job_uid)).encode(), usedforsecurity=False
    ).hexdigest()
    prefix = f"{gvk_kind.lower()}-{job_name}"[: max_length - 6]
    return f"{prefix}-{digest[:5]}"


def index_workloads(workloads: Sequence[dict]) -> dict[str, dict]:
    """``{job uid: Workload}`` over ``workloads`` (one pass), for reading many jobs of a
    namespace from one listing.

    Keyed by every ``ownerReferences[].uid`` and the ``kueue.x-k8s.io/job-uid``
    label of each Workload; for a uid with several Workloads (a re-created one),
    the newest by ``creationTimestamp``, as :func:`workload_for_job` picks. A
    job with no uid is looked up with :func:`workload_for_job` instead.
    """
    index: dict[str, dict] = {}
    for wl in workloads:
        wmeta = wl.get("metadata") or {}
        uids = {ref.get("uid") for ref in wmeta.get("ownerReferences") or ()}
        uids.add((wmeta.get("labels") or {}).get(JOB_UID_LABEL))
        created = wmeta.get("creationTimestamp") or ""
        for uid in uids - {None, ""}:
            known = index.get(uid)
            if known is None or created > ((known.get("metadata") or {})
                                           .get("creationTimestamp") or ""):
                index[uid] = wl
    return index


def workload_for_job(workloads: Sequence[dict], job: dict) -> dict | None:
    """The Workload (dict) among ``workloads`` that Kueue created for ``job``, or ``None``.

    Matched on the job's ``metadata.uid`` through ``ownerReferences[].uid`` or
    the ``kueue.x-k8s.io/job-uid`` label; when the job carries no uid, on the
    name prefix ``<kind>-<name>-``. Several matches (a re-created Workload):
    the newest by ``creationTimestamp``.
    """
    meta = job.get("metadata") or {}
    uid = meta.get("uid") or ""
    name = meta.get("name") or ""
    kind = (job.get("kind") or "Job").lower()
    matches = []
    for wl in workloads:
        wmeta = wl.get("metadata") or {}
        if uid:
            owners = {ref.get("uid") for ref in wmeta.get("ownerReferences") or ()}
            if uid in owners or (wmeta.get("labels") or {}).get(JOB_UID_LABEL) == uid:
                matches.append(wl)
        elif re.fullmatch(rf"{re.escape(kind)}-{re.escape(name)}-[0-9a-f]{{5}}",
                          wmeta.get("name") or ""):
            matches.append(wl)
    if not matches:
        return None
    return max(matches, key=lambda w: (w.get("metadata") or {}).get("creationTimestamp") or "")


# --- status --------------------------------------------------------------------


def _conditions(obj: dict | None) -> dict[str, dict]:
    out = {}
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type"):
            out[cond["type"]] = cond
    return out


def _is_true(conds: dict[str, dict], kind: str) -> bool:
    return (conds.get(kind) or {}).get("status") == "True"


def _event_time(event: dict) -> dt.datetime | None:
    series = event.get("series") or {}
    return (
        parse_time(series.get("lastObservedTime"))
        or parse_time(event.get("lastTimestamp"))
        or parse_time(event.get("eventTime"))
        or parse_time(event.get("firstTimestamp"))
        or parse_time((event.get("metadata") or {}).get("creationTimestamp"))
    )


# Kueue message formats (see the module docstring for the source files).
_UNUSED_QUOTA = re.compile(
    r"insufficient unused quota for (?P<resource>\S+) in flavor (?P<flavor>\S+), "
    r"(?P<more>\S+) more needed"
)
_MAX_CAPACITY_NEW = re.compile(
    r"insufficient quota for (?P<resource>\S+) in flavor (?P<flavor>\S+), previously considered "
    r"podsets requests \((?P<previous>[^)]*)\) \+ current podset request \((?P<request>[^)]*)\) "
    r"> maximum capacity \((?P<maximum>[^)]*)\)"
)
_MAX_CAPACITY_OLD = re.compile(
    r"insufficient quota for (?P<resource>\S+) in flavor (?P<flavor>\S+), "
    r"request > maximum capacity \((?P<request>\S+) > (?P<maximum>[^)]+)\)"
)
_PENDING_PREEMPTION = re.compile(r"Pending the preemption of (?P<count>\d+) workload")
_PREEMPTED_BY = re.compile(
    r"Preempted to accommodate a workload \(UID: (?P<uid>[^,]*), JobUID: (?P<job_uid>[^)]*)\)"
    r"(?: due to (?P<why>[^;]*))?"
)
_NO_FLAVOR = re.compile(
    r"flavor (\S+) not found|untolerated taint|doesn't match node affinity|no flavor|"
    r"unavailable in ClusterQueue"
)
_INACTIVE = re.compile(r"(ClusterQueue|LocalQueue) (\S+) is (inactive|stopped|terminating)")
_QUEUE_MISSING = re.compile(r"LocalQueue (\S+) (doesn't exist|is terminating or missing)")
_EXCEEDED_QUOTA = re.compile(r"exceeded quota", re.IGNORECASE)

_NON_GPU = ("cpu", "memory", "pods", "ephemeral-storage")


def _amount(text: str) -> str:
    return text.strip()


def _explain_pending(reason: str, message: str) -> tuple[str, str]:
    """(code, plain message) for a QuotaReserved=False condition of Kueue."""
    message = message or ""
    too_big = [m.groupdict() for m in _MAX_CAPACITY_NEW.finditer(message)]
    too_big += [m.groupdict() for m in _MAX_CAPACITY_OLD.finditer(message)]
    if reason == "ExceedsMaxQuota" or too_big:
        parts = [
            f"needs {_amount(m['request'])} {m['resource']} on flavor {m['flavor']}, but the "
            f"queue can be admitted at most {_amount(m['maximum'])}"
            for m in too_big
        ]
        detail = "; ".join(parts) or "it asks for more than the queue's maximum"
        return "ExceedsMaximum", (
            f"This job can never start as it is: {detail}, even when borrowing. "
            "Cancel it and submit a smaller one, or ask for more quota."
        )
    preempting = _PENDING_PREEMPTION.search(message)
    if reason == "WaitingForPreemptedWorkloads" or preempting:
        count = int(preempting["count"]) if preempting else None
        what = f"{count} workload{'s' if count != 1 else ''}" if count is not None \
            else "other workloads"
        return "PendingPreemption", (
            f"Kueue is preempting {what} to make room for this job; it starts when they "
            "have stopped."
        )
    short = [m.groupdict() for m in _UNUSED_QUOTA.finditer(message)]
    if reason == "WaitingForQuota" or short:
        gpu = [m for m in short if m["resource"] not in _NON_GPU] or short
        parts = [
            f"{_amount(m['more'])} more {m['resource']} on flavor {m['flavor']}"
            for m in gpu
        ]
        needed = (" It needs " + " or ".join(parts) + " than are free now.") if parts else ""
        return "WaitingForQuota", (
            f"Waiting for quota: the team's queue (and what it can borrow) has not enough "
            f"unused GPUs at the moment.{needed} It starts when running jobs finish."
        )
    missing = _QUEUE_MISSING.search(message)
    if missing:
        return "QueueNotFound", (
            f"The team's queue {missing.group(1)} does not exist on the cluster; platform "
            "staff must set the team up before jobs can be admitted."
        )
    inactive = _INACTIVE.search(message)
    if inactive or reason == "Suspended":
        which = f"{inactive.group(1)} {inactive.group(2)} is {inactive.group(3)}" if inactive \
            else "the queue is inactive"
        return "QueueInactive", (
            f"No job can be admitted now: {which} (for example a flavor it uses is missing, "
            "or staff stopped it). Platform staff have to fix the queue."
        )
    if reason == "NoMatchingFlavor" or _NO_FLAVOR.search(message):
        return "NoMatchingFlavor", (
            "None of the queue's GPU flavors can run this job (the requested GPU kind is not "
            f"in the team's quota, or the flavor's nodes do not fit): {message or reason}."
        )
    if reason in ("", "PendingEvaluation") and not message:
        return "PendingEvaluation", "Queued: waiting for Kueue to consider the job."
    return "Inadmissible", f"Kueue has not admitted the job: {message or reason}."


def _position_sentence(position: int | None) -> str:
    if position is None:
        return ""
    if position == 0:
        return " It is next in the team's queue."
    ahead = f"{position} job{'s' if position != 1 else ''}"
    return f" {ahead} ahead of it in the team's queue."


def _admitted_flavor(workload: dict | None) -> tuple[str | None, str | None]:
    admission = ((workload or {}).get("status") or {}).get("admission") or {}
    flavor = None
    for assignment in admission.get("podSetAssignments") or ():
        flavors = assignment.get("flavors") or {}
        gpu = [f for r, f in sorted(flavors.items()) if r not in _NON_GPU]
        flavor = flavor or (gpu[0] if gpu else next(iter(sorted(flavors.values())), None))
    return flavor, admission.get("clusterQueue")


def _job_failed_create(job_conds: dict[str, dict], events: Sequence[dict],
                       since: dt.datetime | None) -> tuple[bool, str]:
    """(quota refused?, message) for pods the job controller could not create.

    Only events at or after ``since`` (the current admission) count: a refusal
    before an earlier preemption says nothing about this admission.
    """
    messages = []
    for cond in job_conds.values():
        text = f"{cond.get('reason', '')} {cond.get('message', '')}"
        if cond.get("status") == "True" and _EXCEEDED_QUOTA.search(text):
            messages.append(cond.get("message") or "")
    for event in events:
        when = _event_time(event)
        if event.get("reason") == "FailedCreate" and (
                since is None or when is None or when >= since):
            messages.append(event.get("message") or "")
    quota = [m for m in messages if _EXCEEDED_QUOTA.search(m)]
    if quota:
        return True, quota[-1]
    return False, messages[-1] if messages else ""


def _active_pods(job: dict) -> int:
    status = job.get("status") or {}
    if job.get("kind") == "JobSet":
        return sum(int(r.get("active") or 0) for r in status.get("replicatedJobsStatus") or ())
    return int(status.get("active") or 0)


def _timeline(workload: dict | None, job: dict | None, events: Sequence[dict]) -> tuple[dict, ...]:
    entries = []
    for source, obj in (("Workload", workload), ("Job", job)):
        for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
            if not isinstance(cond, dict):
                continue
            entries.append({
                "source": source,
                "type": cond.get("type", ""),
                "status": cond.get("status", ""),
                "reason": cond.get("reason", ""),
                "message": cond.get("message", ""),
                "time": format_time(parse_time(cond.get("lastTransitionTime"))),
            })
    for event in events:
        entries.append({
            "source": "Event",
            "type": event.get("type", ""),
            "status": "",
            "reason": event.get("reason", ""),
            "message": event.get("message", ""),
            "time": format_time(_event_time(event)),
        })
    return tuple(sorted(entries, key=lambda e: (e["time"], e["source"], e["type"])))


def _preemptions(workload: dict | None, events: Sequence[dict]
                 ) -> tuple[int, str, str, tuple[dt.datetime, ...]]:
    """(count, preemptor job uid or workload uid, plain why, visible preemption times)."""
    status = (workload or {}).get("status") or {}
    conds = _conditions(workload)
    times: list[dt.datetime] = []
    preemptor, why = "", ""
    preempted = conds.get("Preempted")
    if preempted and preempted.get("status") == "True":
        t = parse_time(preempted.get("lastTransitionTime"))
        if t:
            times.append(t)
    evicted = conds.get("Evicted")
    if evicted and evicted.get("status") == "True" and evicted.get("reason") == "Preempted":
        t = parse_time(evicted.get("lastTransitionTime"))
        if t:
            times.append(t)
    last_message = ""
    for cond in (preempted, evicted):
        if cond and _PREEMPTED_BY.search(cond.get("message") or ""):
            last_message = cond["message"]
    for event in events:
        if event.get("reason") == "Preempted":
            t = _event_time(event)
            if t:
                times.append(t)
            if _PREEMPTED_BY.search(event.get("message") or ""):
                last_message = event.get("message") or last_message
    match = _PREEMPTED_BY.search(last_message)
    if match:
        job_uid, uid = match["job_uid"].strip(), match["uid"].strip()
        preemptor = job_uid if job_uid and job_uid != "UNKNOWN" else (
            uid if uid != "UNKNOWN" else "")
        why = (match["why"] or "").strip()
    visible = merge_times(times, tolerance_seconds=PREEMPTION_DEDUP_SECONDS)
    counted = sum(
        int(e.get("count") or 0)
        for e in (status.get("schedulingStats") or {}).get("evictions") or ()
        if e.get("reason") == "Preempted"
    )
    return max(counted, len(visible)), preemptor, why, visible


def interpret_kueue(
    *,
    job: dict | None,
    workload: dict | None,
    events: Sequence[dict] = (),
    queue_position: int | None = None,
    now: dt.datetime,
    cancelled: bool = False,
    known_preemption_times: Iterable[dt.datetime] = (),
) -> JobStatus:
    """Explain a job from what the cluster holds (pure; never raises on odd input).

    * ``job``: the live batch/v1 Job or JobSet dict, ``None`` if absent;
    * ``workload``: its Kueue Workload (:func:`workload_for_job`), or ``None``;
    * ``events``: core/v1 Events about the job and the Workload;
    * ``queue_position``: from the visibility API (0-based), ``None`` if the
      job is not listed there;
    * ``now``: aware ``datetime`` for the preemption-loop window;
    * ``cancelled``: the portal has cancelled the job (the phase is then
      ``Cancelled`` once the job is gone or its Workload deactivated, unless it
      had already finished);
    * ``known_preemption_times``: preemption instants the portal stored from
      earlier syncs (Kueue keeps only the latest condition), merged in.

    Rules, first match wins: finished job (Job ``Complete``/``Failed``
    condition, JobSet ``Completed``/``Failed``, Workload ``Finished``) ->
    Succeeded/Failed; cancelled -> Cancelled; Workload ``spec.active: false``
    -> Failed (Deactivated); no job -> Submitted; no Workload -> Submitted
    (WaitingForKueue); ``Admitted=True`` -> Running (pods active or
    ``PodsReady=True``) else Admitted (with ``NamespaceQuotaExceeded`` when
    the job controller's pods are refused by the ResourceQuota); ``Evicted``
    -> Queued (Preempted/Evicted); ``QuotaReserved=True`` -> Queued
    (AdmissionChecksPending); otherwise Queued with the explanation of the
    ``QuotaReserved=False`` reason and message (:data:`REASONS`).
    """
    events = [e for e in events if isinstance(e, dict)]
    wl_conds = _conditions(workload)
    job_conds = _conditions(job)
    job_status = (job or {}).get("status") or {}
    count, preemptor, why, visible_times = _preemptions(workload, events)
    times = merge_times(visible_times, known_preemption_times,
                        tolerance_seconds=PREEMPTION_DEDUP_SECONDS)
    count = max(count, len(times))
    flavor, cluster_queue = _admitted_flavor(workload)
    admitted = wl_conds.get("Admitted")
    pods_ready = wl_conds.get("PodsReady")
    common: dict[str, Any] = {
        "admitted_flavor": flavor,
        "cluster_queue": cluster_queue,
        "submitted_at": parse_time(((job or {}).get("metadata") or {}).get("creationTimestamp"))
        or parse_time(((workload or {}).get("metadata") or {}).get("creationTimestamp")),
        "admitted_at": parse_time((admitted or {}).get("lastTransitionTime"))
        if admitted and admitted.get("status") == "True" else None,
        "started_at": parse_time(job_status.get("startTime"))
        or (parse_time(pods_ready.get("lastTransitionTime"))
            if pods_ready and pods_ready.get("status") == "True" else None),
        "preemptions": count,
        "preemptor": preemptor,
        "preemption_times": times,
        "preemption_loop": preemption_loop(times, now),
        "timeline": _timeline(workload, job, events),
    }
    if common["admitted_at"] is None and flavor is not None:
        reserved = wl_conds.get("QuotaReserved") or {}
        common["admitted_at"] = parse_time(reserved.get("lastTransitionTime"))

    def status(phase: str, reason: str, message: str, **extra: Any) -> JobStatus:
        values = {**common, **extra}
        if values["preemption_loop"] and phase in ("Queued", "Admitted", "Running"):
            message += (f" It has been preempted {len(times)} times within the last hour "
                        "(a preemption loop): consider a higher priority or a smaller job.")
        return JobStatus(phase=phase, reason=reason, message=message, **values)

    # 1. finished
    finished = _finished(job, job_conds, wl_conds)
    if finished is not None:
        phase, reason, message, when = finished
        return status(phase, reason, message, finished_at=when)
    # 2. cancelled by the portal
    deactivated = workload is not None and (workload.get("spec") or {}).get("active") is False
    if cancelled and (job is None or deactivated):
        return status("Cancelled", "Cancelled", "Cancelled: the job was stopped and removed.",
                      finished_at=now)
    if deactivated:
        target = wl_conds.get("DeactivationTarget") or wl_conds.get("Evicted") or {}
        detail = target.get("message") or target.get("reason") or "Kueue deactivated it"
        return status("Failed", "Deactivated", f"Stopped by Kueue: {detail}.",
                      finished_at=parse_time(target.get("lastTransitionTime")) or now)
    # 3. not on the cluster, or Kueue has not seen it yet
    if job is None:
        return status("Submitted", "NotOnCluster",
                      "Submitted; the job is not on the cluster yet.")
    if workload is None:
        return status("Submitted", "WaitingForKueue",
                      "Submitted to the cluster; waiting for Kueue to pick it up.")
    # 4. admitted
    if admitted and admitted.get("status") == "True":
        if _active_pods(job) > 0 or (pods_ready and pods_ready.get("status") == "True"):
            return status("Running", "Running",
                          f"Running on flavor {flavor}." if flavor else "Running.")
        refused, detail = _job_failed_create(job_conds, events, common["admitted_at"])
        if refused:
            return status(
                "Admitted", "NamespaceQuotaExceeded",
                "Kueue admitted the job, but the team namespace's ResourceQuota refuses its "
                f"pods, so it cannot start: {detail}. This is not waiting for queue quota; "
                "platform staff must align the namespace quota with the team's queue.",
            )
        if detail:
            return status("Admitted", "PodsFailedToCreate",
                          f"Admitted, but its pods could not be created: {detail}")
        where = f" on flavor {flavor}" if flavor else ""
        return status("Admitted", "Admitted", f"Admitted{where}; starting its pods.")
    position = _position_sentence(queue_position)
    # 5. evicted (preempted, pods-ready timeout, ...) and back in the queue
    evicted = wl_conds.get("Evicted")
    if evicted and evicted.get("status") == "True":
        if evicted.get("reason") == "Preempted":
            cause = f" due to {why}" if why else ""
            return status(
                "Queued", "Preempted",
                f"Preempted{cause} to make room for another workload; back in the queue and "
                f"restarts from the beginning when admitted again.{position}",
                queue_position=queue_position,
            )
        return status(
            "Queued", "Evicted",
            f"Evicted ({evicted.get('reason') or 'unknown reason'}: "
            f"{evicted.get('message') or 'no detail'}); back in the queue.{position}",
            queue_position=queue_position,
        )
    reserved = wl_conds.get("QuotaReserved")
    if reserved and reserved.get("status") == "True":
        return status("Queued", "AdmissionChecksPending",
                      "Quota is reserved; waiting for the queue's admission checks.",
                      queue_position=queue_position)
    # 6. pending: explain Kueue's reason
    code, message = _explain_pending((reserved or {}).get("reason") or "",
                                     (reserved or {}).get("message") or "")
    if code == "PendingEvaluation":
        pending = wl_conds.get("Pending") or wl_conds.get("Inadmissible") or {}
        if pending.get("message"):
            code, message = _explain_pending(pending.get("reason") or "", pending["message"])
    return status("Queued", code, message + position, queue_position=queue_position)


def _finished(job: dict | None, job_conds: dict[str, dict], wl_conds: dict[str, dict]
              ) -> tuple[str, str, str, dt.datetime | None] | None:
    status = (job or {}).get("status") or {}
    for kind in ("Complete", "Completed"):
        cond = job_conds.get(kind)
        if cond and cond.get("status") == "True":
            when = parse_time(status.get("completionTime")) or parse_time(
                cond.get("lastTransitionTime"))
            return "Succeeded", "Succeeded", "Succeeded: every worker completed.", when
    cond = job_conds.get("Failed")
    if cond and cond.get("status") == "True":
        when = parse_time(cond.get("lastTransitionTime"))
        reason = cond.get("reason") or ""
        if reason == "DeadlineExceeded":
            return ("Failed", "MaxRuntimeExceeded",
                    "Stopped: the job ran longer than its maximum runtime.", when)
        detail = cond.get("message") or reason or "a worker failed"
        return "Failed", "Failed", f"Failed: {detail}.", when
    cond = wl_conds.get("Finished")
    if cond and cond.get("status") == "True":
        when = parse_time(cond.get("lastTransitionTime"))
        if cond.get("reason") == "Succeeded":
            return "Succeeded", "Succeeded", "Succeeded: every worker completed.", when
        detail = cond.get("message") or cond.get("reason") or "failed"
        return "Failed", "Failed", f"Failed: {detail}.", when
    return None

