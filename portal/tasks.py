"""Celery tasks of the portal: thin wrappers that load rows by id and call services.

Every task has an explicit name (``portal.<verb>``), is acknowledged late and is
idempotent (see :mod:`portal.celery`).
"""

import socket

from celery import shared_task
from django.db import connection

from portal.health import database_status


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
