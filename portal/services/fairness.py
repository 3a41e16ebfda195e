"""Fairness history: take a snapshot of every flavor's fairness, drop old ones."""

from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from portal.models import Cluster, FairnessSnapshot
from portal.selectors.fairness import cluster_fairness


def snapshot_time(now: datetime, interval_seconds: int) -> datetime:
    """``now`` rounded down to the start of its interval (aware datetime, UTC epoch based)."""
    epoch = int(now.timestamp())
    return datetime.fromtimestamp(epoch - epoch % interval_seconds, tz=now.tzinfo or UTC)


def fairness_snapshot_take(*, now: datetime | None = None) -> dict[str, int]:
    """Store one :class:`FairnessSnapshot` per GPU flavor of every cluster, then prune.

    ``taken_at`` is ``now`` (default: the current time) rounded down to
    ``settings.FAIRNESS_SNAPSHOT_INTERVAL_SECONDS`` (seconds), so running twice in one
    interval stores nothing new (idempotent: the unique (flavor, taken_at) row is kept).
    Snapshots older than ``settings.FAIRNESS_SNAPSHOT_RETENTION_DAYS`` (days) before
    ``now`` are deleted. Everything happens in one transaction. Queries: one for the
    clusters, 5 per cluster (:func:`cluster_fairness`), one insert, one delete.

    Returns ``{"created": rows inserted, "pruned": rows deleted}``.
    """
    now = now or timezone.now()
    taken_at = snapshot_time(now, settings.FAIRNESS_SNAPSHOT_INTERVAL_SECONDS)
    cutoff = now - timedelta(days=settings.FAIRNESS_SNAPSHOT_RETENTION_DAYS)
    rows = []
    for cluster in Cluster.objects.order_by("name"):
        for ff in cluster_fairness(cluster=cluster):
            data = ff.as_dict()
            rows.append(FairnessSnapshot(
                cluster=cluster, flavor=ff.flavor, taken_at=taken_at,
                capacity_gpus=data["capacity_gpus"], jain_index=data["jain_index"],
                teams_with_demand=data["teams_with_demand"],
                teams=[{k: v for k, v in t.items() if k != "sentence"} for t in data["teams"]],
            ))
    with transaction.atomic():
        before = FairnessSnapshot.objects.filter(taken_at=taken_at).count()
        FairnessSnapshot.objects.bulk_create(rows, ignore_conflicts=True)
        created = FairnessSnapshot.objects.filter(taken_at=taken_at).count() - before
        pruned, _ = FairnessSnapshot.objects.filter(taken_at__lt=cutoff).delete()
    return {"created": created, "pruned": pruned}
