"""Recording audit events."""

from typing import Any

from django.db import models

from portal.models import AuditEvent, Team


def audit_record(
    *,
    actor,
    action: str,
    target: models.Model,
    team: Team | None = None,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> AuditEvent:
    """Write one :class:`AuditEvent` (call inside the change's transaction).

    ``actor`` is a user or ``None`` for the system; ``action`` a dotted verb such
    as ``"quota_request.approved"``; ``before``/``after`` JSON-ready snapshots.
    """
    return AuditEvent.objects.create(
        actor=actor if getattr(actor, "is_authenticated", False) else None,
        action=action,
        team=team,
        target_type=target._meta.label_lower,
        target_id=str(target.pk),
        before=before,
        after=after,
    )
