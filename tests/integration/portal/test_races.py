"""State races on quota requests: two staff approving at once, approving a withdrawn
request, withdrawing an approved one. Each runs real transactions on PostgreSQL
(threads with their own connections) and checks that exactly one decision is written."""

import pytest

from portal.models import AuditEvent, Cluster, QuotaGrant, QuotaRequest
from tests.integration.helpers import together


def _pending(world, nominal=20) -> QuotaRequest:
    return QuotaRequest.objects.create(team=world["team_a"], flavor=world["h100"],
                                       requested_by=world["lead_a"], nominal_gpus=nominal,
                                       justification="race")


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("unconsumed_queue")
def test_two_concurrent_approvals_write_one_decision(world, api):
    request = _pending(world)
    generation = Cluster.objects.get(pk=world["cluster"].pk).spec_generation
    path = f"/api/v1/quota-requests/{request.pk}/approve/"
    codes = together([lambda: api(world["staff"]).post(path, {}, format="json").status_code
                      for _ in range(2)])
    assert sorted(codes) == [200, 400]
    request.refresh_from_db()
    assert request.state == "approved"
    assert AuditEvent.objects.filter(action="quota_request.approved").count() == 1
    assert AuditEvent.objects.filter(action="quota_grant.changed").count() == 1
    assert QuotaGrant.objects.get(team=world["team_a"], flavor=world["h100"]).nominal_gpus == 20
    assert Cluster.objects.get(pk=world["cluster"].pk).spec_generation == generation + 1


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("unconsumed_queue")
def test_approve_racing_withdraw_leaves_one_outcome(world, api):
    request = _pending(world)
    codes = together([
        lambda: api(world["staff"]).post(f"/api/v1/quota-requests/{request.pk}/approve/", {},
                                         format="json").status_code,
        lambda: api(world["lead_a"]).post(f"/api/v1/quota-requests/{request.pk}/withdraw/",
                                          format="json").status_code,
    ])
    assert sorted(codes) == [200, 400]
    request.refresh_from_db()
    grant = QuotaGrant.objects.get(team=world["team_a"], flavor=world["h100"])
    if request.state == "approved":
        assert grant.nominal_gpus == 20
    else:
        assert request.state == "withdrawn" and grant.nominal_gpus == 16
    decided = AuditEvent.objects.filter(action__in=["quota_request.approved",
                                                    "quota_request.withdrawn"])
    assert decided.count() == 1


def test_a_withdrawn_request_cannot_be_approved_or_rejected(world, api):
    request = _pending(world)
    assert api(world["lead_a"]).post(f"/api/v1/quota-requests/{request.pk}/withdraw/",
                                     format="json").status_code == 200
    for action, body in (("approve", {}), ("reject", {"comment": "no"})):
        response = api(world["staff"]).post(f"/api/v1/quota-requests/{request.pk}/{action}/",
                                            body, format="json")
        assert response.status_code == 400
        assert "withdrawn" in response.json()["state"][0]
    assert QuotaGrant.objects.get(team=world["team_a"], flavor=world["h100"]).nominal_gpus == 16
    assert api(world["lead_a"]).post(f"/api/v1/quota-requests/{request.pk}/withdraw/",
                                     format="json").status_code == 400
