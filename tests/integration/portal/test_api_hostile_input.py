"""Hostile input on the portal's write endpoints: every bad value is a 400 naming its
field (never a 500) and nothing is written. Found by the break-and-fix review."""

import pytest
from django.test import Client

from portal.models import AuditEvent, GpuFlavor, QuotaRequest

#: PostgreSQL ``integer`` (Django ``PositiveIntegerField``) holds at most this.
INT_MAX = 2**31 - 1


def _quota_body(**overrides) -> dict:
    body = {"team": "team-a", "flavor": "h100", "nominal_gpus": 8, "justification": "why"}
    body.update(overrides)
    return body


@pytest.mark.parametrize("field", ["nominal_gpus", "borrowing_limit_gpus",
                                   "lending_limit_gpus"])
@pytest.mark.parametrize("value", [INT_MAX + 1, 2**63, 10**30])
def test_quota_request_gpu_count_beyond_the_database_range_is_a_field_error(
        world, api, field, value):
    body = _quota_body(**{field: value})
    if field == "lending_limit_gpus":
        body["nominal_gpus"] = value  # so only the range can be wrong
    response = api(world["lead_a"]).post("/api/v1/quota-requests/", body, format="json")
    assert response.status_code == 400, response.content
    assert f"at most {INT_MAX}" in " ".join(response.json()["nominal_gpus" if field ==
                                                           "lending_limit_gpus" else field])
    assert QuotaRequest.objects.count() == 0
    assert not AuditEvent.objects.exists()


def test_quota_request_largest_database_integer_is_accepted(world, api):
    response = api(world["staff"]).post("/api/v1/quota-requests/",
                                        _quota_body(nominal_gpus=INT_MAX), format="json")
    assert response.status_code == 201, response.content
    assert response.json()["nominal_gpus"] == INT_MAX


def test_quota_request_page_form_with_a_twelve_digit_count_is_a_field_error(world):
    client = Client()
    client.force_login(world["lead_a"])
    response = client.post("/teams/team-a/", {
        "flavor": str(world["h100"].pk), "nominal_gpus": "999999999999",
        "justification": "why", "borrowing_limit_gpus": "99999999999"})
    assert response.status_code == 200
    errors = response.context["quota_form"].errors
    assert f"at most {INT_MAX}" in " ".join(errors["nominal_gpus"])
    assert QuotaRequest.objects.count() == 0


@pytest.mark.parametrize("field", ["physical_gpus", "gpus_per_node", "time_slicing_replicas"])
def test_flavor_count_beyond_the_database_range_is_a_field_error(world, api, field):
    before = GpuFlavor.objects.count()
    response = api(world["staff"]).post("/api/v1/flavors/", {
        "cluster": "gpu-east", "name": "l4", "gpu_model": "L4", "physical_gpus": 8,
        field: INT_MAX + 1}, format="json")
    assert response.status_code == 400, response.content
    assert f"at most {INT_MAX}" in " ".join(response.json()[field])
    assert GpuFlavor.objects.count() == before
