"""Temporary quota reverts after its end date, through the periodic task on a real worker."""

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.celery import app
from portal.models import AuditEvent, QuotaGrant, QuotaRequest
from portal.services.quota import quota_request_approve, quota_request_create
from portal.tasks import expire_grants


def test_expire_grants_is_scheduled_by_beat():
    entry = app.conf.beat_schedule["expire-grants"]
    assert entry["task"] == "portal.expire_grants"
    assert entry["schedule"] <= 300


@pytest.mark.django_db(transaction=True)
def test_temporary_grant_reverts_through_the_worker(world, celery_worker_process):
    request = quota_request_create(
        actor=world["lead_a"], team=world["team_a"], flavor=world["h100"], nominal_gpus=24,
        borrowing_limit_gpus=4, justification="conference deadline",
        ends_at=timezone.now() + timedelta(hours=1),
    )
    quota_request_approve(actor=world["staff"], request=request)
    grant = QuotaGrant.objects.get(team=world["team_a"], flavor=world["h100"])
    assert (grant.nominal_gpus, grant.borrowing_limit_gpus) == (24, 4)
    assert grant.temporary_request_id == request.pk

    # Not yet due: the task changes nothing.
    assert expire_grants.delay().get(timeout=30) == 0
    # Time passes: the end date is now behind us.
    QuotaRequest.objects.filter(pk=request.pk).update(ends_at=timezone.now() - timedelta(seconds=1))
    assert expire_grants.delay().get(timeout=30) == 1
    grant.refresh_from_db()
    assert (grant.nominal_gpus, grant.borrowing_limit_gpus) == (16, None)
    assert grant.temporary_request_id is None
    request.refresh_from_db()
    assert request.expired_at is not None
    event = AuditEvent.objects.get(action="quota_grant.expired")
    assert event.actor is None
    assert event.before["nominal_gpus"] == 24
    assert event.after["nominal_gpus"] == 16
    # Idempotent: a second run reverts nothing more.
    assert expire_grants.delay().get(timeout=30) == 0
    assert AuditEvent.objects.filter(action="quota_grant.expired").count() == 1


@pytest.mark.django_db
def test_permanent_approval_supersedes_a_temporary_grant(world):
    temporary = quota_request_create(
        actor=world["lead_a"], team=world["team_a"], flavor=world["h100"], nominal_gpus=24,
        justification="burst", ends_at=timezone.now() + timedelta(hours=1),
    )
    quota_request_approve(actor=world["staff"], request=temporary)
    permanent = quota_request_create(
        actor=world["lead_a"], team=world["team_a"], flavor=world["h100"], nominal_gpus=20,
        justification="steady state",
    )
    quota_request_approve(actor=world["staff"], request=permanent)
    QuotaRequest.objects.filter(pk=temporary.pk).update(ends_at=timezone.now())
    from portal.services.quota import grant_expire

    assert grant_expire() == 0
    assert QuotaGrant.objects.get(team=world["team_a"], flavor=world["h100"]).nominal_gpus == 20
