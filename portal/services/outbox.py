"""The database row is the outbox: intent changes bump the cluster's spec generation,
and cluster work is enqueued after commit, by task name.

Services never import :mod:`portal.tasks` (the tasks import the services): they
send a task by its name (``portal.<verb>``) through :func:`task_enqueue`.
"""

from django.db import transaction
from django.db.models import F

from portal.celery import app
from portal.models import Cluster


def task_send(name: str, *args) -> None:
    """Send Celery task ``name`` (``portal.job_create``, ...) with ``args`` now."""
    app.send_task(name, args=args)


def task_enqueue(name: str, *args) -> None:
    """After the current transaction commits, send Celery task ``name`` with ``args``
    (at once when no transaction is open). A rolled-back change sends nothing."""
    transaction.on_commit(lambda: task_send(name, *args))


def cluster_spec_bump(*, cluster_id: int) -> None:
    """Record that the desired state of ``cluster_id`` changed (call inside the transaction).

    The reconciler compares ``spec_generation`` with what it applied; a periodic
    resync re-drives every cluster that lags, so a lost task loses nothing.
    """
    Cluster.objects.filter(pk=cluster_id).update(spec_generation=F("spec_generation") + 1)


def reconcile_enqueue(*, cluster_id: int) -> None:
    """After commit, ask a worker to reconcile the cluster (``portal.reconcile_cluster``).

    The bumped ``spec_generation`` is the real record of the change: if this
    message is lost, the periodic ``portal.resync`` re-drives the cluster.
    """
    task_enqueue("portal.reconcile_cluster", cluster_id)
