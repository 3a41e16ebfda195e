"""Hostile input on ``POST /api/v1/jobs/`` and the form's live validation: every bad
value is a 400 (or ``valid: false``) naming its field, never a 500, nothing written."""

import pytest
from django.test import Client

from portal.models import AuditEvent, GpuFlavor, Job
from tests.integration.jobs.conftest import job_payload

pytestmark = pytest.mark.django_db

URL = "/api/v1/jobs/"


@pytest.mark.parametrize("field", ["workers", "gpus_per_worker", "max_runtime_seconds"])
@pytest.mark.parametrize("value", [1e308, 10**30, 2**31, -1])
def test_huge_or_negative_counts_are_a_field_error(world, api, field, value):
    response = api(world["member_a"]).post(URL, job_payload(**{field: value}), format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()
    assert Job.objects.count() == 0
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize(("field", "value"), [
    ("cpu_per_worker", "1" * 33),
    ("memory_per_worker", "9" * 40),
    ("memory_per_worker", "9" * 31 + "Ei"),
])
def test_quantity_longer_than_its_column_is_a_field_error(world, api, field, value):
    response = api(world["member_a"]).post(URL, job_payload(**{field: value}), format="json")
    assert response.status_code == 400, response.content
    assert "At most 32 characters" in " ".join(response.json()[field])
    assert Job.objects.count() == 0


#: A valid quantity (31 characters) whose multiples exceed what Decimal formats exactly.
PRECISE = "123456789012345678901234567891m"


def test_flavor_sizing_too_precise_to_multiply_is_a_field_error(world, api):
    GpuFlavor.objects.filter(pk=world["h100"].pk).update(cpu_per_gpu=PRECISE)
    response = api(world["member_a"]).post(URL, job_payload(workers=1, gpus_per_worker=7),
                                           format="json")
    assert response.status_code == 400, response.content
    assert "cpu_per_worker" in response.json()
    assert Job.objects.count() == 0
    given = api(world["member_a"]).post(URL, job_payload(workers=1, gpus_per_worker=7,
                                                         cpu_per_worker="8"), format="json")
    assert given.status_code == 201, given.content


def test_live_validation_reports_the_same_errors_without_writing(world):
    client = Client()
    client.force_login(world["member_a"])
    response = client.post("/teams/team-a/jobs/validate/", {
        "name": "probe", "image": "ghcr.io/a/b:1", "command": "python x", "workers": "1",
        "gpus_per_worker": "1", "flavor": "h100", "kind": "job",
        "memory_per_worker": "9" * 32, "cpu_per_worker": "1"})
    assert response.status_code == 200
    assert response.json()["valid"] is True  # 32 characters still fit
    GpuFlavor.objects.filter(pk=world["h100"].pk).update(cpu_per_gpu=PRECISE)
    response = client.post("/teams/team-a/jobs/validate/", {
        "name": "probe", "image": "ghcr.io/a/b:1", "command": "python x", "workers": "1",
        "gpus_per_worker": "7", "flavor": "h100", "kind": "job"})
    assert response.status_code == 200
    body = response.json()
    assert body["valid"] is False and "cpu_per_worker" in body["errors"], body
    assert Job.objects.count() == 0
