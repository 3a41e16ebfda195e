"""Gang jobs for Volcano: the vcjob manifest, its cancel Command, and its status.

Pure: no Django, no ``kubernetes`` import. The same :class:`queues.jobs.JobSpec`
the Kueue side renders becomes a ``batch.volcano.sh/v1alpha1`` ``Job`` here
(:func:`render_volcano_job`); cancelling goes through ``bus.volcano.sh/v1alpha1``
``Command`` objects (:func:`render_command`), since a vcjob has no suspend
field; :func:`interpret_volcano` turns the live vcjob and its PodGroup into the
same :class:`queues.jobs.JobStatus` that :func:`queues.backends.kueue.jobs.interpret_kueue`
returns, so the portal shows both backends alike.

Volcano conventions relied on (volcano-sh/volcano ``pkg/controllers/job``,
``pkg/scheduler/framework``, ``pkg/controllers/job/plugins/pytorch``; the CRDs
in ``../shared/crds/volcano``):

* the controller creates one PodGroup per vcjob named ``<job>-<job uid>``
  (:func:`podgroup_name`), ``spec.minMember`` = the job's ``minAvailable``;
* PodGroup ``status.phase``: ``Pending`` (not enqueued: the queue cannot hold
  its ``minResources``), ``Inqueue`` (enqueued; pods are created and wait to be
  bound), ``Running`` (at least ``minMember`` pods bound), ``Unknown``
  (some bound, gang broken), ``Completed``; the scheduler writes an
  ``Unschedulable`` condition (reason ``NotEnoughResources``, message such as
  ``3/4 tasks in gang unschedulable: pod group is not ready, 1 Pending, 4
  minAvailable``) on each session it cannot place the gang;
* vcjob ``status.state.phase``: ``Pending``, ``Running``, ``Restarting``,
  ``Completing``/``Completed``, ``Aborting``/``Aborted``,
  ``Terminating``/``Terminated``, ``Failed``; ``status.running`` counts
  running pods, ``status.retryCount`` restarts;
* the pytorch plugin sets ``MASTER_ADDR``, ``MASTER_PORT``, ``WORLD_SIZE`` and
  ``RANK`` in every pod from the ``master`` and ``worker`` tasks: WORLD_SIZE
  is the number of *pods* (master replicas + worker replicas), not GPUs; a
  training script starts ``gpus_per_worker`` processes per pod itself
  (``torchrun --nproc-per-node``);
* a Command names its target through ``target`` (an owner reference: apiVersion,
  kind, name, uid) in the job's namespace; the controller executes the
  ``action`` and deletes the Command. ``AbortJob`` kills the pods and keeps the
  vcjob (phase ``Aborted``) so its status stays readable; ``TerminateJob``
  ends it for good (``Terminated``) before the object is deleted.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from queues.jobs import JobSpec, JobStatus, parse_time, pod_container
from queues.render.core import toleration
from queues.render.labels import job_labels
from queues.specs import FlavorSpec, SpecError

__all__ = [
    "ABORT",
    "ABORTING",
    "COMMAND_API_VERSION",
    "DEFAULT_MAX_RETRY",
    "DEFAULT_TTL_SECONDS_AFTER_FINISHED",
    "FRAMEWORKS",
    "JOB_API_VERSION",
    "PARTLY_PLACED_AFTER",
    "PODGROUP_API_VERSION",
    "QUEUE_API_VERSION",
    "REASONS",
    "SCHEDULER_NAME",
    "STOPPED_PHASES",
    "TERMINATE",
    "gang_running",
    "interpret_volcano",
    "is_partly_placed",
    "podgroup_name",
    "queue_refusal",
    "render_command",
    "render_volcano_job",
]

JOB_API_VERSION = "batch.volcano.sh/v1alpha1"
COMMAND_API_VERSION = "bus.volcano.sh/v1alpha1"
PODGROUP_API_VERSION = "scheduling.volcano.sh/v1beta1"
QUEUE_API_VERSION = "scheduling.volcano.sh/v1beta1"
SCHEDULER_NAME = "volcano"

#: vcjob phases in which its pods are stopped for good (abort done, or over);
#: ``Aborting``: an abort is under way.
STOPPED_PHASES = frozenset({"Aborted", "Terminating", "Terminated", "Completed", "Failed"})
ABORTING = "Aborting"

#: Command actions the portal issues: abort on cancel, terminate before deleting.
ABORT = "AbortJob"
TERMINATE = "TerminateJob"

#: How a multi-pod gang finds its peers: the ``pytorch`` plugin (a ``master``
#: task of 1 pod and a ``worker`` task of the rest; MASTER_ADDR, WORLD_SIZE,
#: RANK set by Volcano) or ``svc``+``env`` (one ``worker`` task; a headless
#: Service with every pod's hostname, ``VK_TASK_INDEX`` in each pod).
FRAMEWORKS = ("pytorch", "svc")
#: Restarts of the whole gang (after an eviction) before the vcjob fails.
DEFAULT_MAX_RETRY = 3
#: Seconds a finished vcjob stays before Volcano deletes it (the portal reads
#: its final status well before: ``portal.jobs_sync`` runs every minute).
DEFAULT_TTL_SECONDS_AFTER_FINISHED = 86400
#: Port of the pytorch plugin's rendezvous (its default).
PYTORCH_PORT = 23456
#: A gang with some but fewer than ``minAvailable`` pods running for longer
#: than this is reported as partly placed (holding GPUs without progress).
PARTLY_PLACED_AFTER = dt.timedelta(minutes=10)

#: Reason codes :func:`interpret_volcano` adds to ``queues.jobs.REASONS`` (phase in brackets).
REASONS = {
    "NotOnCluster": "[Submitted] the vcjob is not on the cluster (yet)",
    "WaitingForVolcano": "[Submitted] the vcjob exists; Volcano has not created its PodGroup",
    "Pending": "[Queued] the gang does not fit now; N GPUs needed",
    "Unschedulable": "[Queued] Volcano cannot place the gang (reason and message shown)",
    "QueueClosed": "[Queued] the team's Volcano Queue is closed",
    "Inqueue": "[Admitted] enqueued: the queue holds its resources, pods being placed",
    "GangPartlyPlaced": "[Admitted] some pods run, fewer than minAvailable, for > 10 min",
    "Restarting": "[Queued] evicted (e.g. reclaimed) and restarting as a whole gang",
    "Running": "[Running] at least minAvailable pods running",
    "Succeeded": "[Succeeded] the job completed",
    "Failed": "[Failed] the job failed (a worker failed or retries ran out)",
    "Aborted": "[Failed] aborted or terminated on the cluster, not by the portal",
    "Cancelled": "[Cancelled] cancelled through the portal",
}


# --- the manifest ----------------------------------------------------------------------


def podgroup_name(job_name: str, job_uid: str) -> str:
    """Name of the PodGroup Volcano's job controller creates: ``<job>-<uid>``."""
    return f"{job_name}-{job_uid}"


def _template(spec: JobSpec, flavor: FlavorSpec | None) -> dict:
    pod: dict[str, Any] = {"restartPolicy": "Never"}
    if spec.max_runtime_seconds is not None:
        pod["activeDeadlineSeconds"] = spec.max_runtime_seconds
    if flavor is not None and flavor.node_labels:
        pod["nodeSelector"] = dict(flavor.node_labels)
    if flavor is not None and flavor.tolerations:
        pod["tolerations"] = [toleration(t) for t in flavor.tolerations]
    pod["containers"] = [pod_container(spec)]
    return {"metadata": {"labels": job_labels(spec.team, spec.job_label)}, "spec": pod}


def _task(name: str, replicas: int, template: dict, policies: list[dict] | None = None) -> dict:
    task: dict[str, Any] = {"name": name, "replicas": replicas, "minAvailable": replicas}
    if policies:
        task["policies"] = policies
    task["template"] = template
    return task


def render_volcano_job(
    spec: JobSpec,
    *,
    flavor: FlavorSpec | None = None,
    queue: str | None = None,
    framework: str = "pytorch",
    max_retry: int = DEFAULT_MAX_RETRY,
    ttl_seconds_after_finished: int = DEFAULT_TTL_SECONDS_AFTER_FINISHED,
) -> dict:
    """The ``batch.volcano.sh/v1alpha1`` Job (dict) for a gang ``spec``.

    * ``schedulerName: volcano``, ``queue``: the team's Volcano Queue
      (default ``spec.local_queue``, which is the team slug = its Queue name);
    * ``minAvailable`` = every pod of the gang (``spec.workers``), and each
      task's ``minAvailable`` = its ``replicas``: the gang is placed whole or
      not at all;
    * ``priorityClassName`` = ``spec.priority_class`` (a core PriorityClass)
      when set;
    * ``policies``: ``PodEvicted -> RestartJob`` (Volcano's reclaim evicts
      pods one by one, it is not gang-aware: a gang missing a pod must restart
      whole instead of hanging), ``PodFailed -> TerminateJob`` (a worker that
      fails breaks the collective: the job fails at once, as on Kueue);
      ``maxRetry`` restarts (int >= 0) before Volcano fails the job;
      ``ttlSecondsAfterFinished`` (seconds, int >= 0);
    * one pod: a single task ``worker``, no plugin. Several pods, ``framework``
      ``"pytorch"``: plugins ``pytorch`` (``--master=master --worker=worker
      --port=23456``) and ``svc``; task ``master`` (1 pod, whose completion
      completes the job) and task ``worker`` (``workers - 1`` pods);
      WORLD_SIZE = ``workers`` pods. ``"svc"``: plugins ``svc`` and ``env``,
      one task ``worker`` of ``workers`` pods;
    * pods: ``restartPolicy: Never``, ``activeDeadlineSeconds`` =
      ``max_runtime_seconds`` when set; the ``flavor``'s ``node_labels`` as
      ``nodeSelector`` and its tolerations (Volcano has no ResourceFlavor: the
      job itself says where its GPUs are); requests cpu, memory and
      ``gpus_per_worker`` of ``gpu_resource``, limits = requests for GPUs and
      memory.

    Raises ``SpecError`` naming ``framework``, ``max_retry``,
    ``ttl_seconds_after_finished`` or ``flavor`` (a flavor whose GPU resource
    differs from the spec's).
    """
    if framework not in FRAMEWORKS:
        raise SpecError("framework", f"must be one of {', '.join(FRAMEWORKS)}; got {framework!r}")
    for field, value in (("max_retry", max_retry),
                         ("ttl_seconds_after_finished", ttl_seconds_after_finished)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise SpecError(field, f"must be a whole number >= 0, got {value!r}")
    if flavor is not None and flavor.gpu_resource != spec.gpu_resource:
        raise SpecError("flavor", f"flavor {flavor.name!r} offers {flavor.gpu_resource!r}, "
                                  f"the job asks for {spec.gpu_resource!r}")
    template = _template(spec, flavor)
    body: dict[str, Any] = {
        "schedulerName": SCHEDULER_NAME,
        "queue": queue or spec.local_queue,
        "minAvailable": spec.workers,
    }
    if spec.priority_class:
        body["priorityClassName"] = spec.priority_class
    body["maxRetry"] = max_retry
    body["ttlSecondsAfterFinished"] = ttl_seconds_after_finished
    body["policies"] = [
        {"event": "PodEvicted", "action": "RestartJob"},
        {"event": "PodFailed", "action": "TerminateJob"},
    ]
    if spec.workers == 1:
        body["tasks"] = [_task("worker", 1, template)]
    elif framework == "pytorch":
        body["plugins"] = {
            "pytorch": ["--master=master", "--worker=worker", f"--port={PYTORCH_PORT}"],
            "svc": [],
        }
        body["tasks"] = [
            _task("master", 1, template, [{"event": "TaskCompleted", "action": "CompleteJob"}]),
            _task("worker", spec.workers - 1, template),
        ]
    else:
        body["plugins"] = {"svc": [], "env": []}
        body["tasks"] = [_task("worker", spec.workers, template)]
    metadata: dict[str, Any] = {"name": spec.name, "namespace": spec.namespace,
                                "labels": job_labels(spec.team, spec.job_label)}
    if spec.annotations:
        metadata["annotations"] = dict(spec.annotations)
    return {"apiVersion": JOB_API_VERSION, "kind": "Job", "metadata": metadata, "spec": body}


def render_command(
    *, job: Mapping[str, Any], action: str, reason: str = "CancelledByPortal", message: str = ""
) -> dict:
    """A ``bus.volcano.sh/v1alpha1`` Command telling Volcano to ``action`` the live vcjob ``job``.

    ``action``: :data:`ABORT` (on cancel) or :data:`TERMINATE` (before
    deleting). ``job`` is the vcjob as read from the cluster: its namespace,
    name and ``metadata.uid`` (required by the Command's ``target``) are
    used. The Command is named ``<job>-<action lowercased>`` in the job's
    namespace, owned by the job (garbage-collected with it) and labelled like
    the job. Raises ``SpecError("job")`` when the job has no uid.
    """
    if action not in (ABORT, TERMINATE):
        raise SpecError("action", f"must be {ABORT} or {TERMINATE}; got {action!r}")
    meta = job.get("metadata") or {}
    uid = meta.get("uid")
    if not uid:
        raise SpecError("job", "the vcjob has no metadata.uid (read it from the cluster)")
    target = {"apiVersion": JOB_API_VERSION, "kind": "Job", "name": meta["name"], "uid": uid}
    command: dict[str, Any] = {
        "apiVersion": COMMAND_API_VERSION,
        "kind": "Command",
        "metadata": {
            "name": f"{meta['name']}-{action.lower()}",
            "namespace": meta["namespace"],
            "ownerReferences": [{**target, "controller": True, "blockOwnerDeletion": True}],
        },
        "action": action,
        "target": target,
        "reason": reason,
    }
    labels = meta.get("labels") or {}
    if labels:
        command["metadata"]["labels"] = dict(labels)
    if message:
        command["message"] = message
    return command


def queue_refusal(queue: Mapping[str, Any] | None) -> str | None:
    """Why a job may not be submitted to the Volcano Queue ``queue`` (live dict), or ``None``.

    ``status.state`` ``Closed`` or ``Closing``: Volcano's admission refuses new
    jobs to a queue that is not open. ``None`` (queue missing) is a refusal too.
    """
    if queue is None:
        return "the team's Volcano queue does not exist on the cluster yet"
    state = ((queue.get("status") or {}).get("state")) or "Open"
    if state in ("Closed", "Closing"):
        name = (queue.get("metadata") or {}).get("name", "")
        return (f"the team's Volcano queue '{name}' is {state.lower()}: it accepts no new jobs "
                "until platform staff reopen it")
    return None


# --- status ---------------------------------------------------------------------------


def _gpu_requests(template: Mapping[str, Any]) -> int:
    total = 0
    for container in ((template.get("spec") or {}).get("containers") or ()):
        for resource, value in ((container.get("resources") or {}).get("requests") or {}).items():
            if "/" in resource and not resource.split("/")[0].endswith("kubernetes.io"):
                try:
                    total += int(str(value))
                except ValueError:
                    continue
    return total


def _gang(job: Mapping[str, Any]) -> tuple[int, int, dict[str, int]]:
    """(pods in the gang, GPUs of the gang, GPUs per pod by task name) from the vcjob spec."""
    tasks = (job.get("spec") or {}).get("tasks") or ()
    per_pod = {t.get("name", ""): _gpu_requests(t.get("template") or {}) for t in tasks}
    pods = sum(int(t.get("replicas") or 0) for t in tasks)
    gpus = sum(int(t.get("replicas") or 0) * per_pod[t.get("name", "")] for t in tasks)
    return pods, gpus, per_pod


def _running_gpus(job: Mapping[str, Any], per_pod: Mapping[str, int], running: int) -> int:
    counts = (job.get("status") or {}).get("taskStatusCount") or {}
    if counts:
        return sum(int(((c or {}).get("phase") or {}).get("Running") or 0) * per_pod.get(task, 0)
                   for task, c in counts.items())
    return running * (max(per_pod.values()) if per_pod else 0)


#: vcjob phases in which a gang is not being placed (running whole, restarting, or over).
_NOT_PLACING = frozenset({"Running", "Restarting", "Completing", "Completed", "Failed",
                          "Aborting", "Aborted", "Terminating", "Terminated"})


def gang_running(job: Mapping[str, Any] | None,
                 podgroup: Mapping[str, Any] | None) -> tuple[int, int]:
    """``(running pods, minAvailable)`` of a gang, from the live vcjob and its PodGroup.

    Running = the larger of the vcjob's ``status.running`` and the PodGroup's
    ``status.running`` (the job controller and the scheduler update them at
    different times); minAvailable = the vcjob's ``spec.minAvailable``, else
    every pod of its tasks. ``(0, 0)`` for no vcjob. Pure; never raises on odd input.
    """
    pods = _gang(job or {})[0]
    try:
        min_available = int(((job or {}).get("spec") or {}).get("minAvailable") or pods or 0)
        running = max(int(((job or {}).get("status") or {}).get("running") or 0),
                      int(((podgroup or {}).get("status") or {}).get("running") or 0))
    except (TypeError, ValueError):
        return 0, pods
    return running, min_available


def is_partly_placed(job: Mapping[str, Any] | None, podgroup: Mapping[str, Any] | None) -> bool:
    """True when some but fewer than ``minAvailable`` pods of the gang run
    (``0 < running < minAvailable``, see :func:`gang_running`) and the vcjob is not
    ``Running``, restarting or over (the phases in which :func:`interpret_volcano`
    applies its partly-placed rule): the state whose duration
    :data:`PARTLY_PLACED_AFTER` limits."""
    phase = ((((job or {}).get("status") or {}).get("state") or {}).get("phase")) or ""
    if job is None or podgroup is None or phase in _NOT_PLACING:
        return False
    running, min_available = gang_running(job, podgroup)
    return 0 < running < min_available


def _condition(obj: Mapping[str, Any] | None, kind: str) -> dict | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == kind:
            return cond
    return None


def _timeline(job: Mapping[str, Any] | None, podgroup: Mapping[str, Any] | None) -> tuple:
    entries = []
    state = ((job or {}).get("status") or {}).get("state") or {}
    if state.get("phase"):
        entries.append({"source": "Job", "type": state["phase"], "status": "True",
                        "reason": state.get("reason") or "", "message": state.get("message") or "",
                        "time": state.get("lastTransitionTime") or ""})
    for cond in ((podgroup or {}).get("status") or {}).get("conditions") or ():
        entries.append({"source": "PodGroup", "type": cond.get("type") or "",
                        "status": cond.get("status") or "", "reason": cond.get("reason") or "",
                        "message": cond.get("message") or "",
                        "time": cond.get("lastTransitionTime") or ""})
    return tuple(sorted(entries, key=lambda e: e["time"]))


def interpret_volcano(
    *,
    job: Mapping[str, Any] | None,
    podgroup: Mapping[str, Any] | None,
    now: dt.datetime,
    cancelled: bool = False,
    queue: Mapping[str, Any] | None = None,
    partly_placed_since: dt.datetime | None = None,
) -> JobStatus:
    """Explain a vcjob from what the cluster holds (pure; never raises on odd input).

    * ``job``: the live vcjob dict, ``None`` if absent; ``podgroup``: its
      PodGroup ``<job>-<uid>`` (:func:`podgroup_name`) or ``None``;
    * ``now``: aware ``datetime``; ``cancelled``: the portal cancelled it;
    * ``queue``: the team's live Queue, to explain a closed queue;
    * ``partly_placed_since``: when the portal first saw the gang partly
      placed (:func:`is_partly_placed`; ``Job.partly_placed_since``, stored by
      ``job_sync``); only when it is ``None`` is the vcjob's
      ``status.state.lastTransitionTime`` used (when it entered its current
      phase, which can be long before its first pod ran).

    Rules, first match wins: vcjob ``Completed``/``Completing`` -> Succeeded;
    ``Failed`` -> Failed (with the state's reason/message);
    ``Aborting``/``Aborted``/``Terminating``/``Terminated`` or no vcjob ->
    Cancelled when ``cancelled``, else Failed (Aborted) / Submitted
    (NotOnCluster); no PodGroup -> Submitted (WaitingForVolcano);
    ``Restarting`` -> Queued (Restarting, the retry count);
    ``Running`` -> Running; running pods ``R`` with ``0 < R < N`` (N =
    minAvailable) for more than :data:`PARTLY_PLACED_AFTER` -> Admitted,
    ``"gang partly placed: R/N pods, G GPUs held without progress"`` (G = the
    GPUs the running pods hold); PodGroup ``Inqueue`` -> Admitted (Inqueue);
    otherwise Queued: ``"pending: needs N GPUs"`` (the gang's total) followed
    by the PodGroup's ``Unschedulable`` reason and message, or the queue's
    closed state. Reason codes: :data:`REASONS`.
    """
    job_status = (job or {}).get("status") or {}
    state = job_status.get("state") or {}
    phase = state.get("phase") or ""
    pods, gpus, per_pod = _gang(job or {})
    running, min_available = gang_running(job, podgroup)
    pg_status = (podgroup or {}).get("status") or {}
    since = parse_time(state.get("lastTransitionTime"))
    restarts = int(job_status.get("retryCount") or 0)
    common: dict[str, Any] = {
        "cluster_queue": ((job or {}).get("spec") or {}).get("queue"),
        "submitted_at": parse_time(((job or {}).get("metadata") or {}).get("creationTimestamp")),
        "preemptions": restarts,
        "timeline": _timeline(job, podgroup),
    }
    scheduled = _condition(podgroup, "Scheduled")
    if scheduled and scheduled.get("status") == "True":
        common["admitted_at"] = parse_time(scheduled.get("lastTransitionTime"))
    if phase == "Running":
        common["started_at"] = since

    def status(phase_: str, reason: str, message: str, **extra: Any) -> JobStatus:
        return JobStatus(phase=phase_, reason=reason, message=message, **{**common, **extra})

    detail = ": ".join(p for p in (state.get("reason"), state.get("message")) if p)
    if phase in ("Completed", "Completing"):
        return status("Succeeded", "Succeeded", "Completed.", finished_at=since or now)
    if phase == "Failed":
        why = f" ({detail})" if detail else ""
        return status("Failed", "Failed", f"Failed{why}.", finished_at=since or now)
    if phase in ("Aborting", "Aborted", "Terminating", "Terminated") or job is None:
        if cancelled:
            return status("Cancelled", "Cancelled", "Cancelled: the job was stopped and removed.",
                          finished_at=now)
        if job is None:
            return status("Submitted", "NotOnCluster",
                          "Submitted; the job is not on the cluster yet.")
        why = f" ({detail})" if detail else ""
        return status("Failed", "Aborted", f"Stopped on the cluster: {phase.lower()}{why}.",
                      finished_at=since or now)
    if podgroup is None:
        return status("Submitted", "WaitingForVolcano",
                      "Submitted to the cluster; waiting for Volcano to create its pod group.")
    if phase == "Restarting":
        return status("Queued", "Restarting",
                      f"A pod was evicted (Volcano reclaims pod by pod); the whole gang restarts "
                      f"(restart {restarts}).")
    if phase == "Running":
        return status("Running", "Running", f"Running: {running}/{min_available} pods.")
    stuck_since = partly_placed_since or since
    if (0 < running < min_available and stuck_since is not None
            and now - stuck_since > PARTLY_PLACED_AFTER):
        held = _running_gpus(job or {}, per_pod, running)
        return status(
            "Admitted", "GangPartlyPlaced",
            f"gang partly placed: {running}/{min_available} pods, {held} GPUs held without "
            f"progress (for {int((now - stuck_since).total_seconds() // 60)} minutes). The "
            "remaining pods cannot be placed; platform staff may need to free nodes.",
        )
    pg_phase = pg_status.get("phase") or "Pending"
    if pg_phase in ("Inqueue", "Running"):
        return status("Admitted", "Inqueue",
                      f"Enqueued: the queue holds its resources; placing its pods "
                      f"({running}/{min_available} running).")
    message = f"pending: needs {gpus} GPUs"
    refusal = queue_refusal(queue) if queue is not None else None
    if refusal:
        return status("Queued", "QueueClosed", f"{message}; {refusal}.")
    unschedulable = _condition(podgroup, "Unschedulable")
    if unschedulable and unschedulable.get("status", "True") == "True":
        why = ": ".join(p for p in (unschedulable.get("reason"), unschedulable.get("message"))
                        if p)
        return status("Queued", "Unschedulable", f"{message}. Volcano: {why}.")
    return status("Queued", "Pending", f"{message}; waiting for Volcano to enqueue the gang.")
