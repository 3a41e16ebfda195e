"""Quota grants (what a team has) and quota requests (what a team asks for)."""

from django.conf import settings
from django.db import models

from portal.models.clusters import GpuFlavor
from portal.models.teams import Team


class QuotaGrant(models.Model):
    """A team's quota on one GPU flavor.

    GPU counts are whole GPUs. ``borrowing_limit_gpus`` / ``lending_limit_gpus``
    of ``None`` mean "no limit" (Kueue omits the field); both limits need the team
    to be in a cohort, and lending <= nominal. ``cpu``/``memory`` are Kubernetes
    quantities; empty = derived from the flavor's per-GPU sizing.
    ``temporary_request`` points at the approved request with an end date whose
    values are in force; when it expires, the grant reverts to that request's
    ``previous_grant``.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="grants")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="grants")
    nominal_gpus = models.PositiveIntegerField(default=0)
    borrowing_limit_gpus = models.PositiveIntegerField(null=True, blank=True)
    lending_limit_gpus = models.PositiveIntegerField(null=True, blank=True)
    cpu = models.CharField(max_length=32, blank=True)
    memory = models.CharField(max_length=32, blank=True)
    temporary_request = models.ForeignKey(
        "QuotaRequest", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["team__slug", "flavor__name"]
        constraints = [
            models.UniqueConstraint(fields=["team", "flavor"], name="grant_unique_per_flavor"),
            models.CheckConstraint(
                condition=models.Q(lending_limit_gpus__isnull=True)
                | models.Q(lending_limit_gpus__lte=models.F("nominal_gpus")),
                name="grant_lending_lte_nominal",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.team}/{self.flavor}: {self.nominal_gpus}"


class QuotaRequest(models.Model):
    """A team's request for quota on a flavor, reviewed by platform staff.

    States: ``pending -> approved | rejected | withdrawn``. Approval writes the
    grant in the same transaction; ``ends_at`` makes the quota temporary
    (reverted by the ``portal.expire_grants`` periodic task, which sets
    ``expired_at``).
    """

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        WITHDRAWN = "withdrawn", "Withdrawn"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="quota_requests")
    flavor = models.ForeignKey(GpuFlavor, on_delete=models.PROTECT, related_name="quota_requests")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    nominal_gpus = models.PositiveIntegerField()
    borrowing_limit_gpus = models.PositiveIntegerField(null=True, blank=True)
    lending_limit_gpus = models.PositiveIntegerField(null=True, blank=True)
    justification = models.TextField()
    ends_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(
        max_length=16, choices=State.choices, default=State.PENDING, db_index=True
    )
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    review_comment = models.TextField(blank=True)
    overcommit_acknowledged = models.BooleanField(default=False)
    previous_grant = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    reviewed_at = models.DateTimeField(null=True, blank=True)
    expired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"#{self.pk} {self.team}/{self.flavor} {self.nominal_gpus} ({self.state})"
