"""Fairness history: one snapshot per flavor every few minutes (``portal.fairness_snapshot``)."""

from django.db import models

from portal.models.clusters import Cluster, GpuFlavor


class FairnessSnapshot(models.Model):
    """The fairness of one GPU flavor at one time, kept for the staff charts' history.

    ``taken_at`` is the start of the snapshot interval (``FAIRNESS_SNAPSHOT_INTERVAL_SECONDS``)
    the snapshot belongs to, so a task run twice in one interval writes one row
    (unique per flavor and time). ``capacity_gpus`` (physical GPUs), ``jain_index``
    (0..1, ``None`` when no team had demand), ``teams_with_demand``, and ``teams``: the
    per-team rows as ``GET /api/v1/fairness/`` shows staff (``slug``, ``nominal_gpus``,
    ``usage_gpus``, ``demand_gpus``, ``fair_share_gpus``, ``dominant_share``,
    ``dominant_resource``, ...). Rows older than ``FAIRNESS_SNAPSHOT_RETENTION_DAYS``
    are deleted by the same task.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE,
                                related_name="fairness_snapshots")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.CASCADE,
                               related_name="fairness_snapshots")
    taken_at = models.DateTimeField(db_index=True)
    capacity_gpus = models.PositiveIntegerField()
    jain_index = models.FloatField(null=True, blank=True)
    teams_with_demand = models.PositiveIntegerField(default=0)
    teams = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-taken_at", "flavor_id"]
        constraints = [
            models.UniqueConstraint(fields=["flavor", "taken_at"],
                                    name="fairness_snapshot_unique_per_interval"),
        ]
        indexes = [models.Index(fields=["cluster", "taken_at"], name="fairness_cluster_time")]

    def __str__(self) -> str:
        return f"{self.flavor_id}@{self.taken_at:%Y-%m-%d %H:%M}: J={self.jain_index}"
