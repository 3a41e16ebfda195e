"""What the reconciler last did to each object it manages on a cluster."""

from django.db import models

from portal.models.clusters import Cluster
from portal.models.teams import Team


class ManagedObject(models.Model):
    """One object the portal manages on a cluster, keyed by (apiVersion, kind, namespace, name).

    ``desired`` is the manifest last rendered; ``applied_hash`` the
    ``queues.reconcile.content_hash`` of what is known to be on the cluster
    (empty until a write succeeds); ``applied_generation`` the cluster's
    ``spec_generation`` of that run; ``observed_state`` is
    ``{"state": "applied" | "not-active" | "pending" | "failed" | "retained",
    "reason", "message", ...}``; ``last_error`` the API's message of the last
    failure ("" when the last attempt succeeded); ``drift_count`` how many
    hand edits of our fields were corrected. ``observed`` is the object as
    last read from the cluster (``queues.reconcile.strip_server_fields``:
    no managedFields, uid, resourceVersion...; ``None`` when it was not
    found or never read). ``namespace`` is "" for cluster-scoped kinds.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="managed_objects")
    api_version = models.CharField(max_length=128)
    kind = models.CharField(max_length=63)
    namespace = models.CharField(max_length=63, blank=True)
    name = models.CharField(max_length=253)
    team = models.ForeignKey(
        Team, on_delete=models.SET_NULL, null=True, blank=True, related_name="managed_objects"
    )
    desired = models.JSONField(null=True, blank=True)
    applied_hash = models.CharField(max_length=64, blank=True)
    applied_generation = models.PositiveBigIntegerField(default=0)
    observed_state = models.JSONField(default=dict, blank=True)
    observed = models.JSONField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    drift_count = models.PositiveIntegerField(default=0)
    last_drift_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster__name", "api_version", "kind", "namespace", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "api_version", "kind", "namespace", "name"],
                name="managed_object_unique_key",
            ),
        ]

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"

    @property
    def key(self) -> tuple[str, str, str, str]:
        """``(api_version, kind, namespace, name)``, the ``queues.reconcile.Key``."""
        return (self.api_version, self.kind, self.namespace, self.name)
