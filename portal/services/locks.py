"""One reconcile of a cluster at a time, across every worker process and thread.

:func:`cluster_reconcile_lock` is a non-blocking lock keyed by cluster id:

* **PostgreSQL**: a session-level advisory lock,
  ``pg_try_advisory_lock(RECONCILE_LOCK_CLASS, cluster_id)`` (the two-key
  form: our class id, then the cluster id; see
  https://www.postgresql.org/docs/current/functions-admin.html#FUNCTIONS-ADVISORY-LOCKS).
  Session-level, not ``pg_advisory_xact_lock``: a reconcile makes many HTTP
  calls and must not hold a database transaction open while it does. The
  lock dies with its connection, so a worker killed mid-reconcile
  (``SIGKILL``) leaves no stale lock behind.
* **SQLite** (the demo's embedded default, one host) and other vendors: an
  exclusive ``flock`` on ``reconcile-cluster-<id>.lock`` beside the database
  file (the temp folder for an in-memory database). ``flock`` conflicts
  between separate ``open()`` calls even inside one process, so it also
  serialises the threads of ``celery worker --pool=threads``, and the kernel
  drops it when the process dies.

Busy means skip, never wait: :class:`ClusterBusy` is raised at once. The
caller (:func:`portal.services.reconcile.cluster_reconcile`) relies on the
holder re-checking the cluster's ``spec_generation`` after it releases the
lock, and on the periodic resync, so a skipped request loses nothing.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from django.db import DatabaseError, connection

__all__ = ["RECONCILE_LOCK_CLASS", "ClusterBusy", "cluster_reconcile_lock"]

#: First key of the two-key PostgreSQL advisory lock ("gq" in ASCII): keeps
#: our locks apart from any other advisory lock user of the same database.
RECONCILE_LOCK_CLASS = 0x6771

_INT4_MAX = 2**31 - 1


class ClusterBusy(Exception):
    """Another worker is reconciling this cluster right now (``cluster_id`` attribute)."""

    def __init__(self, cluster_id: int) -> None:
        super().__init__(f"cluster {cluster_id} is being reconciled by another worker")
        self.cluster_id = cluster_id


def _lock_dir() -> Path:
    name = str(connection.settings_dict.get("NAME") or "")
    if connection.vendor == "sqlite" and name and name != ":memory:" and "mode=memory" not in name:
        return Path(name).resolve().parent
    return Path(tempfile.gettempdir())


def _lock_path(cluster_id: int) -> Path:
    # The database's own name in the file name: two databases on one host
    # (tests next to a demo) never share a lock.
    tag = hashlib.sha256(str(connection.settings_dict.get("NAME")).encode()).hexdigest()[:12]
    return _lock_dir() / f"reconcile-cluster-{cluster_id}-{tag}.lock"


@contextlib.contextmanager
def _file_lock(path: Path, cluster_id: int) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ClusterBusy(cluster_id) from None
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _advisory_lock(cluster_id: int) -> Iterator[None]:
    key = cluster_id if cluster_id <= _INT4_MAX else cluster_id % _INT4_MAX
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [RECONCILE_LOCK_CLASS, key])
        (acquired,) = cursor.fetchone()
    if not acquired:
        raise ClusterBusy(cluster_id)
    try:
        yield
    finally:
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [RECONCILE_LOCK_CLASS, key])
        except DatabaseError:
            # The connection is gone, and with it the session's lock.
            connection.close()


@contextlib.contextmanager
def cluster_reconcile_lock(*, cluster_id: int) -> Iterator[None]:
    """Hold the reconcile lock of ``cluster_id`` for the ``with`` block.

    Raises :class:`ClusterBusy` immediately (no waiting) when another
    session, process or thread holds it. Re-entrant use from the same
    connection is not supported (PostgreSQL would grant it twice).
    """
    if connection.vendor == "postgresql":
        with _advisory_lock(cluster_id):
            yield
    else:
        with _file_lock(_lock_path(cluster_id), cluster_id):
            yield
