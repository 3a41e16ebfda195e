"""Write what Volcano's controllers write, through the cluster port (test and demo tool).

No Volcano runs against the emulator, so tests play its part over HTTP
through :class:`queues.cluster.KubernetesCluster` (the official client; any
object with its ``get``/``list``/``create``/``patch``/``delete`` methods).
Product code never imports this module.

Shapes follow Volcano (CRDs in ``../shared/crds/volcano``; source
``pkg/controllers/job/job_controller_actions.go``,
``pkg/scheduler/framework/job_updater.go``, ``pkg/controllers/queue``):

* :func:`create_podgroup` - the PodGroup ``<job>-<uid>`` the job controller
  creates: owned by the vcjob, ``minMember`` = its ``minAvailable``,
  ``minTaskMember`` per task, ``queue``, ``priorityClassName``,
  ``minResources`` (the gang's requests), ``status.phase: Pending``;
* :func:`set_podgroup` - what the scheduler writes: ``phase``, ``running``,
  the ``Unschedulable`` condition (:func:`unschedulable_message` builds
  Volcano's text) or ``Scheduled``;
* :func:`set_job_state` - the job controller's ``status.state`` (phase,
  reason, message, lastTransitionTime), ``running``/``pending`` counts,
  ``taskStatusCount``, ``retryCount``, ``minAvailable``;
* :func:`set_queue_state` - the queue controller's ``status.state``
  (``Open``/``Closed``/``Closing``);
* :func:`execute_commands` - the job controller consuming ``Command`` objects
  (AbortJob -> ``Aborted``, TerminateJob -> ``Terminated``) and deleting them.

Times are RFC 3339 strings in whole seconds from ``now`` (aware ``datetime``,
default the current time).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from queues import quantity
from queues.backends.volcano.jobs import (
    ABORT,
    COMMAND_API_VERSION,
    JOB_API_VERSION,
    PODGROUP_API_VERSION,
    QUEUE_API_VERSION,
    TERMINATE,
    podgroup_name,
)

__all__ = [
    "create_podgroup",
    "execute_commands",
    "get_podgroup",
    "set_job_state",
    "set_podgroup",
    "set_queue_state",
    "unschedulable_message",
]

#: Field manager of the writes made on Volcano's behalf.
MANAGER = "volcano-emulated"


def _now(now: dt.datetime | None) -> str:
    when = now or dt.datetime.now(dt.UTC)
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def unschedulable_message(*, unschedulable: int, pods: int, min_available: int,
                          pending: int) -> str:
    """Volcano's gang message, e.g. ``3/4 tasks in gang unschedulable: pod group is not
    ready, 1 Pending, 4 minAvailable`` (``pkg/scheduler/api/job_info.go`` FitError text)."""
    return (f"{unschedulable}/{pods} tasks in gang unschedulable: pod group is not ready, "
            f"{pending} Pending, {min_available} minAvailable")


def _min_resources(job: dict) -> dict[str, str]:
    totals: dict[str, Any] = {}
    for task in (job.get("spec") or {}).get("tasks") or ():
        replicas = int(task.get("replicas") or 0)
        for container in ((task.get("template") or {}).get("spec") or {}).get("containers") or ():
            for name, value in ((container.get("resources") or {}).get("requests") or {}).items():
                totals[name] = totals.get(name, 0) + quantity.parse(str(value)) * replicas
    return {name: quantity.format_quantity(value) for name, value in sorted(totals.items())}


def get_podgroup(cluster: Any, job: dict) -> dict | None:
    """The PodGroup of the live vcjob ``job`` (``<job>-<uid>``), or ``None``."""
    meta = _meta(job)
    return cluster.get(PODGROUP_API_VERSION, "PodGroup", podgroup_name(meta["name"], meta["uid"]),
                       meta["namespace"])


def create_podgroup(cluster: Any, job: dict) -> dict:
    """Create the PodGroup Volcano's job controller makes for the live vcjob ``job``."""
    meta = _meta(job)
    spec = job.get("spec") or {}
    body: dict[str, Any] = {
        "minMember": int(spec.get("minAvailable") or 0),
        "minTaskMember": {t["name"]: int(t.get("minAvailable", t.get("replicas") or 0))
                          for t in spec.get("tasks") or ()},
        "queue": spec.get("queue") or "default",
        "minResources": _min_resources(job),
    }
    if spec.get("priorityClassName"):
        body["priorityClassName"] = spec["priorityClassName"]
    podgroup = {
        "apiVersion": PODGROUP_API_VERSION,
        "kind": "PodGroup",
        "metadata": {
            "name": podgroup_name(meta["name"], meta["uid"]),
            "namespace": meta["namespace"],
            "ownerReferences": [{"apiVersion": JOB_API_VERSION, "kind": "Job",
                                 "name": meta["name"], "uid": meta["uid"],
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": body,
        "status": {"phase": "Pending"},
    }
    return cluster.create(podgroup, field_manager=MANAGER)


def set_podgroup(cluster: Any, job: dict, *, phase: str, running: int = 0,
                 unschedulable: tuple[str, str] | None = None, scheduled: bool = False,
                 now: dt.datetime | None = None) -> dict:
    """What the scheduler writes on the PodGroup: ``status.phase``, ``running`` and conditions.

    ``unschedulable``: ``(reason, message)`` of an ``Unschedulable=True``
    condition (e.g. ``("NotEnoughResources", unschedulable_message(...))``);
    ``scheduled``: a ``Scheduled=True`` condition. The PodGroup CRD has no
    status subresource, so the object itself is patched.
    """
    when = _now(now)
    conditions = []
    if unschedulable is not None:
        reason, message = unschedulable
        conditions.append({"type": "Unschedulable", "status": "True", "reason": reason,
                           "message": message, "lastTransitionTime": when,
                           "transitionID": f"t-{when}"})
    if scheduled:
        conditions.append({"type": "Scheduled", "status": "True", "reason": "tasks in gang are "
                           "ready to be scheduled", "lastTransitionTime": when,
                           "transitionID": f"t-{when}"})
    meta = _meta(job)
    return cluster.patch(PODGROUP_API_VERSION, "PodGroup", podgroup_name(meta["name"], meta["uid"]),
                         meta["namespace"],
                         {"status": {"phase": phase, "running": running,
                                     "conditions": conditions}},
                         field_manager=MANAGER)


def set_job_state(cluster: Any, job: dict, *, phase: str, running: int = 0,
                  task_running: dict[str, int] | None = None, reason: str = "",
                  message: str = "", retry_count: int | None = None,
                  now: dt.datetime | None = None) -> dict:
    """What the job controller writes in the vcjob's status (status subresource).

    ``phase``: a ``status.state.phase``; ``running``: running pods;
    ``task_running``: running pods per task (``taskStatusCount``; default:
    ``running`` spread over the tasks in order); ``retry_count``: restarts.
    """
    spec = job.get("spec") or {}
    tasks = spec.get("tasks") or ()
    if task_running is None:
        task_running, left = {}, running
        for task in tasks:
            take = min(left, int(task.get("replicas") or 0))
            task_running[task["name"]] = take
            left -= take
    pods = sum(int(t.get("replicas") or 0) for t in tasks)
    status: dict[str, Any] = {
        "state": {"phase": phase, "reason": reason, "message": message,
                  "lastTransitionTime": _now(now)},
        "minAvailable": int(spec.get("minAvailable") or 0),
        "running": running,
        "pending": max(pods - running, 0) if phase in ("Pending", "Running") else 0,
        "taskStatusCount": {name: {"phase": {"Running": count}} if count else {}
                            for name, count in task_running.items()},
    }
    if retry_count is not None:
        status["retryCount"] = retry_count
    meta = _meta(job)
    return cluster.patch(JOB_API_VERSION, "Job", meta["name"], meta["namespace"],
                         {"status": status}, subresource="status", field_manager=MANAGER)


def set_queue_state(cluster: Any, name: str, state: str) -> dict:
    """The queue controller's ``status.state`` of Queue ``name`` (``Open``, ``Closed``...)."""
    return cluster.patch(QUEUE_API_VERSION, "Queue", name, None, {"status": {"state": state}},
                         subresource="status", field_manager=MANAGER)


def execute_commands(cluster: Any, namespace: str, *, now: dt.datetime | None = None
                     ) -> list[tuple[str, str]]:
    """Consume the Commands of ``namespace`` as Volcano's job controller does.

    ``AbortJob``: the job's pods are killed, ``status.state.phase: Aborted``;
    ``TerminateJob``: ``Terminated``. Each Command is then deleted. Returns
    ``[(action, job name)]`` in the order handled (by Command name).
    """
    done = []
    for command in sorted(cluster.list(COMMAND_API_VERSION, "Command", "", namespace),
                          key=lambda c: _meta(c)["name"]):
        target = (command.get("target") or {}).get("name", "")
        job = cluster.get(JOB_API_VERSION, "Job", target, namespace)
        action = command.get("action", "")
        if job is not None and action in (ABORT, TERMINATE):
            phase = "Aborted" if action == ABORT else "Terminated"
            set_job_state(cluster, job, phase=phase, reason=command.get("reason") or action,
                          message=command.get("message") or "", now=now)
        cluster.delete(COMMAND_API_VERSION, "Command", _meta(command)["name"], namespace)
        done.append((action, target))
    return done
