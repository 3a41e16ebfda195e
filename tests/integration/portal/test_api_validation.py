"""Bad input: a clear error naming the field, and nothing written."""

import pytest

from portal.models import AuditEvent, Cohort, GpuFlavor, QuotaRequest, Team

LONG = "a" * 64


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"slug": "Team-A"}, "slug", "DNS-1123"),
    ({"slug": "team_a"}, "slug", "DNS-1123"),
    ({"slug": LONG}, "slug", "64 characters"),
    ({"slug": "team-a"}, "slug", "already exists"),
    ({"slug": "ok-team", "cohort": "nope"}, "cohort", "No cohort"),
    ({"slug": "ok-team", "weight": -1}, "weight", ""),
    ({"slug": "ok-team", "weight": 0}, "weight", "greater than 0"),
    ({"slug": "ok-team", "cluster": "elsewhere"}, "cluster", "No cluster"),
])
def test_team_create_errors(world, api, body, field, words):
    before = Team.objects.count()
    response = api(world["staff"]).post("/api/v1/teams/", {"name": "x", **body}, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()
    assert words in " ".join(map(str, response.json()[field]))
    assert Team.objects.count() == before
    assert not AuditEvent.objects.filter(action="team.created").exists()


def test_63_character_slug_is_kept_exactly(world, api):
    slug = "a" * 63
    response = api(world["staff"]).post("/api/v1/teams/", {"slug": slug}, format="json")
    assert response.status_code == 201
    assert Team.objects.get(slug=slug).slug == slug


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"name": "H100"}, "name", "DNS-1123"),
    ({"name": "h100"}, "name", "already exists"),
    ({"name": "l4", "memory_per_gpu": "8gb"}, "memory_per_gpu", "quantity"),
    ({"name": "l4", "cpu_per_gpu": "-1"}, "cpu_per_gpu", "negative"),
    ({"name": "l4", "gpu_resource": "gpu"}, "gpu_resource", "extended resource"),
    ({"name": "l4", "physical_gpus": 1.5}, "physical_gpus", "valid integer"),
    ({"name": "l4", "time_slicing_replicas": 0}, "time_slicing_replicas", ""),
])
def test_flavor_create_errors(world, api, body, field, words):
    before = GpuFlavor.objects.count()
    payload = {"cluster": "gpu-east", "physical_gpus": 8, **body}
    response = api(world["staff"]).post("/api/v1/flavors/", payload, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()
    assert words in " ".join(map(str, response.json()[field]))
    assert GpuFlavor.objects.count() == before


def test_cohort_uppercase_name_is_refused(world, api):
    before = Cohort.objects.count()
    response = api(world["staff"]).post("/api/v1/cohorts/", {"cluster": "gpu-east",
                                                             "name": "Infra"}, format="json")
    assert response.status_code == 400
    assert "name" in response.json()
    assert Cohort.objects.count() == before


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"nominal_gpus": 1.5}, "nominal_gpus", "valid integer"),
    ({"nominal_gpus": "1.5"}, "nominal_gpus", "valid integer"),
    ({"nominal_gpus": -4}, "nominal_gpus", "greater than or equal to 0"),
    ({"borrowing_limit_gpus": -1}, "borrowing_limit_gpus", "greater than or equal to 0"),
    ({"nominal_gpus": 4, "lending_limit_gpus": 6}, "lending_limit_gpus", "exceeds the nominal"),
    ({"team": "solo", "borrowing_limit_gpus": 4}, "borrowing_limit_gpus", "no cohort"),
    ({"team": "solo", "lending_limit_gpus": 0}, "lending_limit_gpus", "no cohort"),
    ({"flavor": "nope"}, "flavor", "No flavor"),
    ({"nominal_gpus": None}, "nominal_gpus", "null"),
])
def test_quota_request_errors(world, api, body, field, words):
    from portal.models import Membership

    Membership.objects.create(user=world["lead_a"], team=world["solo"], role="lead")
    payload = {"team": "team-a", "flavor": "h100", "nominal_gpus": 8, "justification": "why"}
    payload.update(body)
    response = api(world["lead_a"]).post("/api/v1/quota-requests/", payload, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()
    assert words in " ".join(map(str, response.json()[field]))
    assert QuotaRequest.objects.count() == 0
    assert not AuditEvent.objects.exists()


def test_whole_number_given_as_2_point_0_is_two(world, api):
    response = api(world["lead_a"]).post("/api/v1/quota-requests/", {
        "team": "team-a", "flavor": "h100", "nominal_gpus": 2.0, "justification": "why",
    }, format="json")
    assert response.status_code == 201
    assert response.json()["nominal_gpus"] == 2


def test_member_add_unknown_user_and_bad_role(world, api):
    lead = api(world["lead_a"])
    unknown = lead.post("/api/v1/teams/team-a/members/", {"username": "ghost"}, format="json")
    assert unknown.status_code == 400
    assert "username" in unknown.json()
    bad_role = lead.post("/api/v1/teams/team-a/members/",
                         {"username": "member_b", "role": "owner"}, format="json")
    assert bad_role.status_code == 400
    assert "role" in bad_role.json()
