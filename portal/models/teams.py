"""Cohorts (departments), teams and their members."""

from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models

from portal.models.clusters import Cluster
from portal.models.validators import validate_dns1123_label


class Cohort(models.Model):
    """A department: Kueue Cohort (with optional parent) / Volcano parent Queue."""

    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="cohorts")
    name = models.CharField(max_length=63, validators=[validate_dns1123_label])
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    weight = models.DecimalField(
        max_digits=8, decimal_places=3, default=Decimal("1"),
        validators=[MinValueValidator(Decimal("0"))],
    )

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="cohort_unique_per_cluster"),
        ]

    def __str__(self) -> str:
        return self.name


class Team(models.Model):
    """A team: its namespace (``slug``), ClusterQueue and LocalQueue on one cluster.

    ``slug`` is a DNS-1123 label (at most 63 characters), used as is for the
    namespace name: never truncated or altered. ``idle_webhook_url`` (optional) is
    POSTed a JSON message for every idle flag on the team's jobs.
    """

    slug = models.CharField(max_length=63, unique=True, validators=[validate_dns1123_label])
    name = models.CharField(max_length=200)
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="teams")
    cohort = models.ForeignKey(
        Cohort, null=True, blank=True, on_delete=models.PROTECT, related_name="teams"
    )
    weight = models.DecimalField(
        max_digits=8, decimal_places=3, default=Decimal("1"),
        validators=[MinValueValidator(Decimal("0"))],
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams"
    )
    idle_webhook_url = models.URLField(
        blank=True, help_text="POSTed a JSON message for each idle flag of the team's jobs"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    """A user's role in a team: ``member`` (submit jobs) or ``lead`` (also quota, members)."""

    class Role(models.TextChoices):
        MEMBER = "member", "Member"
        LEAD = "lead", "Lead"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team__slug", "user__username"]
        constraints = [
            models.UniqueConstraint(fields=["user", "team"], name="membership_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"
