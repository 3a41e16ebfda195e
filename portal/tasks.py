"""Celery tasks of the portal: thin wrappers that load rows by id and call services.

Every task has an explicit name (``portal.<verb>``), is acknowledged late and is
idempotent (see :mod:`portal.celery`).
"""

import socket

from celery import shared_task
from django.db import connection

from portal.celery import RETRY_POLICY
from portal.health import database_status
from queues.errors import TransientError

#: Reconcile retries: the shared policy, plus the cluster port's retryable errors.
RECONCILE_RETRY_POLICY = {
    **RETRY_POLICY,
    "autoretry_for": (TransientError, *RETRY_POLICY["autoretry_for"]),
}


@shared_task(name="portal.worker_health")
def worker_health() -> dict:
    """Report, from inside a worker, that it can reach the database.

    Returns ``{"hostname": str, "database": {"ok": bool, ...}, "database_name": str}``:
    the worker's view of the same database the web process uses. Used by
    ``GET /healthz?worker=1`` and by the integration tests. Safe to run any number
    of times (read-only).
    """
    return {
        "hostname": socket.gethostname(),
        "database": database_status(),
        "database_name": str(connection.settings_dict["NAME"]),
    }


@shared_task(name="portal.expire_grants")
def expire_grants() -> int:
    """Revert temporary grants whose end date has passed (periodic, every minute).

    Returns how many grants were reverted. Idempotent: a reverted grant is not
    reverted again (see :func:`portal.services.quota.grant_expire`).
    """
    from portal.services.quota import grant_expire

    return grant_expire()


@shared_task(name="portal.reconcile_cluster", **RECONCILE_RETRY_POLICY)
def reconcile_cluster_task(cluster_id: int) -> dict:
    """Converge cluster ``cluster_id`` to the database (see :func:`cluster_reconcile`).

    Returns ``{"cluster_id", "writes", "actions": {action: count}, "failed": int}``
    (``{"cluster_id", "skipped": True}`` when nothing could be attempted).
    Raises :class:`queues.errors.TransientError` after recording when an
    object failed transiently, so Celery retries with backoff and jitter;
    once retries run out, the periodic resync re-drives the cluster.
    Idempotent: a repeated run writes nothing.
    """
    from portal.services.reconcile import cluster_reconcile

    result = cluster_reconcile(cluster_id=cluster_id)
    if result is None:
        return {"cluster_id": cluster_id, "skipped": True}
    actions: dict[str, int] = {}
    for item in result.objects:
        actions[item.action] = actions.get(item.action, 0) + 1
    if result.retry_later:
        first = next(i for i in result.failed if i.transient)
        raise TransientError(
            f"{len(result.failed)} object(s) failed, first: {first.error}", reason="RetryLater"
        )
    return {"cluster_id": cluster_id, "writes": result.writes, "actions": actions,
            "failed": len(result.failed)}


@shared_task(name="portal.resync")
def resync() -> list[int]:
    """Enqueue a reconcile of every cluster that lags or is due a drift check (periodic).

    Lagging: ``applied_generation < spec_generation``. Due: not reconciled for
    ``settings.RECONCILE_DRIFT_CHECK_SECONDS``. Returns the cluster ids enqueued.
    """
    from django.conf import settings

    from portal.services.reconcile import clusters_to_resync

    ids = clusters_to_resync(drift_check_seconds=settings.RECONCILE_DRIFT_CHECK_SECONDS)
    for cluster_id in ids:
        reconcile_cluster_task.delay(cluster_id)
    return ids


# --- gang jobs ------------------------------------------------------------------------


@shared_task(name="portal.job_create", **RECONCILE_RETRY_POLICY)
def job_create_task(job_id: int) -> dict:
    """Create job ``job_id``'s suspended manifest on its cluster (enqueued on submit).

    Returns ``{"job_id", "outcome"}`` with outcome ``created``/``exists``/
    ``skipped``/``failed`` (see :func:`portal.services.jobs.job_create`).
    Transient cluster errors are retried with backoff and jitter; the job is
    then read back once (``portal.job_sync``). Idempotent: an existing job is
    never applied again.
    """
    from portal.services.jobs import job_create, job_sync

    outcome = job_create(job_id=job_id)
    if outcome in ("created", "exists"):
        job_sync(job_id=job_id)
    return {"job_id": job_id, "outcome": outcome}


@shared_task(name="portal.job_cancel", **RECONCILE_RETRY_POLICY)
def job_cancel_task(job_id: int) -> dict:
    """Deactivate the job's Workload, then delete the job; phase ``Cancelled``.

    Returns ``{"job_id", "outcome"}`` (``cancelled``/``skipped``). Retried with
    backoff on transient errors; idempotent.
    """
    from portal.services.jobs import job_cancel_execute

    return {"job_id": job_id, "outcome": job_cancel_execute(job_id=job_id)}


@shared_task(name="portal.job_sync", **RECONCILE_RETRY_POLICY)
def job_sync_task(job_id: int) -> dict:
    """Read one job's status from the cluster now (the on-demand refresh).

    Returns ``{"job_id", "phase"}`` (``phase`` ``None`` when there was nothing
    to read). Retried with backoff on transient errors; read-only on the cluster.
    """
    from portal.services.jobs import job_sync

    return {"job_id": job_id, "phase": job_sync(job_id=job_id)}


@shared_task(name="portal.jobs_sync")
def jobs_sync_task() -> dict:
    """Sync every job whose status may still change (periodic, every ~15 s).

    Returns ``{"synced": n, "failed": n}``. A job whose read fails is left for
    the next run (its ``last_error`` says why); the others are still synced.
    """
    from portal.services.jobs import jobs_sync

    return jobs_sync()
