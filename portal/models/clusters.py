"""Clusters, their GPU flavors and priority classes."""

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from portal.models.validators import validate_dns1123_label, validate_gpu_resource
from queues import backends


class Cluster(models.Model):
    """A Kubernetes cluster the portal reconciles, reached through a kubeconfig context.

    ``backend`` picks the renderers: Kueue (``kueue.x-k8s.io/v1beta2``) or Volcano.
    ``idle_threshold`` (0..1, default 0.05) and ``idle_window_hours`` (default 24) say
    when a job holding GPUs is flagged idle; ``idle_webhook_url`` is POSTed each flag.
    """

    #: The scheduler backends, from their registry (:func:`queues.backends.choices`):
    #: ``Cluster.Backend.KUEUE == "kueue"``, ...
    Backend = models.TextChoices(
        "Backend", [(name.upper(), (name, label)) for name, label in backends.choices()])

    name = models.CharField(max_length=63, unique=True, validators=[validate_dns1123_label])
    backend = models.CharField(max_length=16, choices=Backend.choices, default=backends.DEFAULT)
    kube_context = models.CharField(
        max_length=253, blank=True, help_text="kubeconfig context; empty = current/in-cluster"
    )
    spec_generation = models.PositiveBigIntegerField(
        default=1, help_text="bumped by every change of intent for this cluster (outbox)"
    )
    applied_generation = models.PositiveBigIntegerField(
        default=0, help_text="spec_generation the reconciler last converged (outbox)"
    )
    last_reconciled_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    idle_threshold = models.FloatField(
        default=0.05, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="a job is idle while its GPU activity stays below this ratio (0..1)",
    )
    idle_window_hours = models.PositiveIntegerField(
        default=24, validators=[MinValueValidator(1)],
        help_text="hours of activity below the threshold before a job is flagged idle",
    )
    idle_webhook_url = models.URLField(
        blank=True, help_text="POSTed a JSON message for every idle flag (empty: none)"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(idle_threshold__gte=0) & models.Q(idle_threshold__lte=1),
                name="cluster_idle_threshold_ratio",
            ),
            models.CheckConstraint(condition=models.Q(idle_window_hours__gte=1),
                                   name="cluster_idle_window_gte_1"),
        ]

    def __str__(self) -> str:
        return self.name


class GpuFlavor(models.Model):
    """A kind of GPU in a cluster: Kueue ResourceFlavor / Volcano node selector.

    ``physical_gpus`` counts physical GPUs (capacity); a time-sliced flavor
    exposes ``physical_gpus * time_slicing_replicas`` schedulable units, but
    capacity figures always count physical GPUs. ``cpu_per_gpu`` and
    ``memory_per_gpu`` are Kubernetes quantities used to size quotas.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="flavors")
    name = models.CharField(max_length=63, validators=[validate_dns1123_label])
    gpu_resource = models.CharField(
        max_length=253, default="nvidia.com/gpu", validators=[validate_gpu_resource]
    )
    gpu_model = models.CharField(max_length=128, blank=True)
    node_labels = models.JSONField(default=dict, blank=True)
    node_taints = models.JSONField(default=list, blank=True)
    tolerations = models.JSONField(default=list, blank=True)
    physical_gpus = models.PositiveIntegerField(default=0)
    time_slicing_replicas = models.PositiveIntegerField(default=1)
    gpus_per_node = models.PositiveIntegerField(default=8)
    cpu_per_gpu = models.CharField(max_length=32, default="8")
    memory_per_gpu = models.CharField(max_length=32, default="64Gi")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="flavor_unique_per_cluster"),
            models.CheckConstraint(
                condition=models.Q(time_slicing_replicas__gte=1), name="flavor_replicas_gte_1"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class PriorityClass(models.Model):
    """A priority for jobs: Kueue WorkloadPriorityClass / core PriorityClass. Staff-managed."""

    name = models.CharField(max_length=63, unique=True, validators=[validate_dns1123_label])
    value = models.IntegerField()
    description = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["-value", "name"]
        verbose_name_plural = "priority classes"

    def __str__(self) -> str:
        return self.name
