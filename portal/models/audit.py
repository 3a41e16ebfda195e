"""The audit trail: who changed what, when, before and after."""

from django.conf import settings
from django.db import models


class AuditEvent(models.Model):
    """One change of quota, membership or request state.

    ``actor`` is ``None`` for the system (periodic tasks). ``before``/``after``
    are JSON snapshots of the changed fields.
    """

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
        related_name="+",
    )
    action = models.CharField(max_length=64, db_index=True)
    team = models.ForeignKey(
        "portal.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="audit"
    )
    target_type = models.CharField(max_length=64)
    target_id = models.CharField(max_length=64)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M} {self.action} {self.target_type}#{self.target_id}"
