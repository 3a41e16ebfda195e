"""Celery tasks of the portal: thin wrappers that load rows by id and call services.

Every task has an explicit name (``portal.<verb>``), is acknowledged late and is
idempotent (see :mod:`portal.celery`).
"""

import socket

from celery import shared_task
from celery.utils.time import get_exponential_backoff_interval
from django.conf import settings
from django.db import connection
from django.utils import timezone

from portal.celery import RETRY_POLICY
from portal.health import database_status
from portal.services.deactivate import job_deactivate
from portal.services.fairness import fairness_snapshot_take
from portal.services.idle import idle_detect, idle_notify, idle_webhook_post
from portal.services.job_runs import job_cancel_execute, job_create, job_sync, jobs_sync
from portal.services.locks import ClusterBusy
from portal.services.quota import grant_expire
from portal.services.reconcile import cluster_reconcile, clusters_to_resync
from portal.services.usage import STEP, floor_to, usage_collect, usage_prune, usage_rollup
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
    return grant_expire()


@shared_task(bind=True, name="portal.reconcile_cluster", **RECONCILE_RETRY_POLICY)
def reconcile_cluster_task(self, cluster_id: int) -> dict:
    """Converge cluster ``cluster_id`` to the database (see :func:`cluster_reconcile`).

    Returns ``{"cluster_id", "writes", "actions": {action: count}, "failed": int}``
    (``{"cluster_id", "skipped": True}`` when nothing could be attempted;
    ``{"cluster_id", "skipped": "busy"}`` when another worker was reconciling
    the cluster: that worker re-checks for changes when it finishes).
    Raises :class:`queues.errors.TransientError` after recording when an
    object failed transiently, so Celery retries with backoff and jitter
    (never sooner than a ``Retry-After`` the API sent); once retries run
    out, the periodic resync re-drives the cluster. Idempotent: a repeated
    run writes nothing.
    """
    try:
        result = cluster_reconcile(cluster_id=cluster_id)
    except ClusterBusy:
        return {"cluster_id": cluster_id, "skipped": "busy"}
    if result is None:
        return {"cluster_id": cluster_id, "skipped": True}
    actions: dict[str, int] = {}
    for item in result.objects:
        actions[item.action] = actions.get(item.action, 0) + 1
    if result.retry_later:
        first = next(i for i in result.failed if i.transient)
        exc = TransientError(
            f"{len(result.failed)} object(s) failed, first: {first.error}", reason="RetryLater",
            retry_after=result.retry_after,
        )
        if result.retry_after is not None:
            raise self.retry(exc=exc, countdown=retry_countdown(
                retries=self.request.retries, retry_after=result.retry_after))
        raise exc
    return {"cluster_id": cluster_id, "writes": result.writes, "actions": actions,
            "failed": len(result.failed)}


def retry_countdown(*, retries: int, retry_after: float) -> float:
    """Seconds before retry number ``retries + 1``: never less than ``retry_after``.

    The exponential backoff with full jitter of :data:`RETRY_POLICY`
    (``celery.utils.time.get_exponential_backoff_interval``: a random value
    in ``[0, min(300, 2 * 2**retries)]``), raised to the API's ``Retry-After``
    (seconds) when that is longer.
    """
    backoff = get_exponential_backoff_interval(
        factor=RETRY_POLICY["retry_backoff"], retries=retries,
        maximum=RETRY_POLICY["retry_backoff_max"], full_jitter=RETRY_POLICY["retry_jitter"],
    )
    return max(float(backoff), float(retry_after))


@shared_task(name="portal.resync")
def resync() -> list[int]:
    """Enqueue a reconcile of every cluster that lags or is due a drift check (periodic).

    Lagging: ``applied_generation < spec_generation``. Due: not reconciled for
    ``settings.RECONCILE_DRIFT_CHECK_SECONDS``. Returns the cluster ids enqueued.
    """
    ids = clusters_to_resync(drift_check_seconds=settings.RECONCILE_DRIFT_CHECK_SECONDS)
    for cluster_id in ids:
        reconcile_cluster_task.delay(cluster_id)
    return ids


@shared_task(name="portal.usage_collect", **RETRY_POLICY)
def usage_collect_task() -> dict:
    """Store the 5-minute GPU usage sample that just ended (periodic, every 5 minutes).

    Returns ``{"start", "source", "error", "rows", "dropped"}``. Idempotent: the bucket
    is replaced whole (see :func:`portal.services.usage.usage_collect`).
    """
    result = usage_collect(at=floor_to(timezone.now(), STEP))
    return {"start": result.start.isoformat(), "source": result.source,
            "error": result.error, "rows": result.rows, "dropped": result.dropped}


@shared_task(name="portal.usage_rollup")
def usage_rollup_task() -> dict:
    """Hourly and daily rollups of the stored samples (periodic, hourly); idempotent."""
    return usage_rollup()


@shared_task(name="portal.usage_prune")
def usage_prune_task() -> dict:
    """Delete stored samples past their retention (periodic, daily)."""
    return {str(k): v for k, v in usage_prune().items()}


@shared_task(name="portal.idle_detect")
def idle_detect_task() -> dict:
    """Flag idle jobs, clear stale flags (periodic); ``{"flagged": ids, "cleared": ids}``."""
    result = idle_detect()
    return {"flagged": result.flagged, "cleared": result.cleared}


@shared_task(name="portal.idle_notify", **RETRY_POLICY)
def idle_notify_task(flag_id: int) -> dict:
    """Email the owner and leads of idle flag ``flag_id`` and enqueue its webhooks (once)."""
    return idle_notify(flag_id=flag_id)


@shared_task(name="portal.idle_webhook", **RETRY_POLICY)
def idle_webhook_task(flag_id: int, url: str) -> int | None:
    """POST idle flag ``flag_id`` as JSON to ``url``; retried with backoff on failure."""
    return idle_webhook_post(flag_id=flag_id, url=url)


@shared_task(name="portal.job_deactivate", **RECONCILE_RETRY_POLICY)
def job_deactivate_task(job_id: int) -> dict | None:
    """Deactivate job ``job_id`` on its cluster (Kueue spec.active=false, Volcano AbortJob),
    never delete it; retried on transient cluster errors. Idempotent."""
    return job_deactivate(job_id=job_id)
# --- gang jobs ------------------------------------------------------------------------


@shared_task(name="portal.job_create", **RECONCILE_RETRY_POLICY)
def job_create_task(job_id: int) -> dict:
    """Create job ``job_id``'s suspended manifest on its cluster (enqueued on submit).

    Returns ``{"job_id", "outcome"}`` with outcome ``created``/``exists``/
    ``cancelled``/``skipped``/``failed`` (see :func:`portal.services.job_runs.job_create`;
    ``cancelled``: a cancel recorded before or during the create, whatever exists
    of the job is deleted).
    Transient cluster errors are retried with backoff and jitter; the job is
    then read back once (``portal.job_sync``). Idempotent: an existing job is
    never applied again.
    """
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
    return {"job_id": job_id, "outcome": job_cancel_execute(job_id=job_id)}


@shared_task(name="portal.job_sync", **RECONCILE_RETRY_POLICY)
def job_sync_task(job_id: int) -> dict:
    """Read one job's status from the cluster now (the on-demand refresh).

    Returns ``{"job_id", "phase"}`` (``phase`` ``None`` when there was nothing
    to read). Retried with backoff on transient errors; read-only on the cluster.
    """
    return {"job_id": job_id, "phase": job_sync(job_id=job_id)}


@shared_task(name="portal.jobs_sync")
def jobs_sync_task() -> dict:
    """Sync every job whose status may still change (periodic, every ~15 s).

    Returns ``{"synced": n, "cancelled": n, "failed": n}``. A job whose read fails is left for
    the next run (its ``last_error`` says why); the others are still synced.
    """
    return jobs_sync()


@shared_task(name="portal.fairness_snapshot")
def fairness_snapshot() -> dict:
    """Store every flavor's fairness for the history charts (periodic, every
    ``FAIRNESS_SNAPSHOT_INTERVAL_SECONDS``) and delete snapshots older than
    ``FAIRNESS_SNAPSHOT_RETENTION_DAYS``.

    Returns ``{"created": int, "pruned": int}``. Idempotent: a second run in the same
    interval creates nothing (see :func:`portal.services.fairness.fairness_snapshot_take`).
    """
    return fairness_snapshot_take()
