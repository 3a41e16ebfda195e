"""The database row is the outbox: intent changes bump the cluster's spec generation."""

from django.db import transaction
from django.db.models import F

from portal.models import Cluster


def cluster_spec_bump(*, cluster_id: int) -> None:
    """Record that the desired state of ``cluster_id`` changed (call inside the transaction).

    The reconciler compares ``spec_generation`` with what it applied; a periodic
    resync re-drives every cluster that lags, so a lost task loses nothing.
    """
    Cluster.objects.filter(pk=cluster_id).update(spec_generation=F("spec_generation") + 1)


def reconcile_enqueue(*, cluster_id: int) -> None:
    """After commit, ask a worker to reconcile the cluster.

    The bumped ``spec_generation`` is the real record of the change: if this
    message is lost, the periodic ``portal.resync`` re-drives the cluster.
    """
    from portal.tasks import reconcile_cluster_task

    transaction.on_commit(lambda: reconcile_cluster_task.delay(cluster_id))
