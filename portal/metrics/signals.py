"""Celery signal handlers: each finished task's outcome and duration, into the store.

Connected when :mod:`portal.celery` is imported (every worker). ``task_prerun`` notes
the start, ``task_postrun`` records the outcome (Celery's state: SUCCESS, FAILURE,
RETRY) and the duration; ``task_revoked`` records ``revoked``. A reconcile task
(``portal.reconcile_cluster``) is also recorded per cluster, its outcome read from the
task's return value: ``ok``, ``failed_objects`` (some objects failed permanently, see
``ManagedObject.last_error``), ``skipped`` (another worker held the cluster, or nothing
to do), ``retry`` (transient failures: Celery retries) or ``error`` (an exception).
"""

from __future__ import annotations

import time

from celery import signals

RECONCILE_TASK = "portal.reconcile_cluster"
OUTCOMES = {"SUCCESS": "success", "FAILURE": "failure", "RETRY": "retry"}
_started: dict[str, float] = {}


@signals.task_prerun.connect
def _task_prerun(task_id=None, **_kwargs) -> None:
    if task_id:
        _started[task_id] = time.monotonic()


def _cluster_id(args, kwargs) -> int | None:
    value = (kwargs or {}).get("cluster_id")
    if value is None and args:
        value = args[0]
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def reconcile_outcome(state: str, retval) -> tuple[str, int, int]:
    """(outcome, writes, failed objects) of one reconcile task run."""
    if state == "RETRY":
        return "retry", 0, 0
    if state != "SUCCESS" or not isinstance(retval, dict):
        return "error", 0, 0
    if retval.get("skipped"):
        return "skipped", 0, 0
    failed = int(retval.get("failed") or 0)
    return ("failed_objects" if failed else "ok"), int(retval.get("writes") or 0), failed


@signals.task_postrun.connect
def _task_postrun(task_id=None, task=None, args=None, kwargs=None, retval=None, state=None,
                  **_kwargs) -> None:
    from portal.metrics import store

    started = _started.pop(task_id, None) if task_id else None
    seconds = time.monotonic() - started if started is not None else None
    name = getattr(task, "name", None) or "unknown"
    store.record_task(name, OUTCOMES.get(state or "", (state or "unknown").lower()), seconds)
    if name == RECONCILE_TASK:
        cluster_id = _cluster_id(args, kwargs)
        if cluster_id is not None:
            outcome, writes, failed = reconcile_outcome(state or "", retval)
            store.record_reconcile(cluster_id, outcome,
                                   None if outcome == "skipped" else seconds,
                                   writes=writes, failed=failed)


@signals.task_revoked.connect
def _task_revoked(request=None, **_kwargs) -> None:
    from portal.metrics import store

    name = getattr(request, "task", None) or getattr(request, "name", None) or "unknown"
    store.record_task(str(name), "revoked", None)
