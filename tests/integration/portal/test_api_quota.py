"""The quota workflow through the REST API: request, preview, approve/reject, withdraw."""

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.models import AuditEvent, QuotaGrant, QuotaRequest


def _request(api, user, **body):
    payload = {"team": "team-a", "flavor": "h100", "nominal_gpus": 24,
               "justification": "bigger pretraining runs"}
    payload.update(body)
    return api(user).post("/api/v1/quota-requests/", payload, format="json")


def test_lead_requests_staff_previews_and_approves(world, api):
    created = _request(api, world["lead_a"], borrowing_limit_gpus=8)
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["state"] == "pending"
    assert body["team"] == "team-a" and body["flavor"] == "h100"
    assert body["requested_by"] == "lead_a"
    request_id = body["id"]

    listed = api(world["lead_a"]).get("/api/v1/quota-requests/?team=team-a&state=pending").json()
    assert [r["id"] for r in listed] == [request_id]

    preview = api(world["staff"]).get(f"/api/v1/quota-requests/{request_id}/preview/")
    assert preview.status_code == 200
    p = preview.json()
    assert p["capacity_gpus"] == 64
    assert p["nominal_sum_gpus"] == 16 + 32
    assert p["nominal_sum_after_gpus"] == 24 + 32
    assert p["overcommit_after"] is False
    assert p["current"] == {"nominal_gpus": 16, "borrowing_limit_gpus": None,
                            "lending_limit_gpus": None}
    # team-b lends at most 8 of its 32: now 16 + 8; after, 24 + min(8 borrowing, 8).
    assert p["max_admissible_gpus_now"] == 24
    assert p["max_admissible_gpus"] == 32
    kinds = {(m["kind"], m["metadata"]["name"]) for m in p["manifests"]}
    assert ("ClusterQueue", "team-a") in kinds
    assert ("LocalQueue", "team-a") in kinds
    assert ("ResourceQuota", "gpu-quota") in kinds
    assert ("ResourceFlavor", "h100") in kinds
    cq = next(m for m in p["manifests"] if m["kind"] == "ClusterQueue")
    assert cq["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert cq["spec"]["cohortName"] == "research"
    gpu = next(
        r for g in cq["spec"]["resourceGroups"] for f in g["flavors"] if f["name"] == "h100"
        for r in f["resources"] if r["name"] == "nvidia.com/gpu"
    )
    assert gpu["nominalQuota"] == "24"
    assert gpu["borrowingLimit"] == "8"
    assert "lendingLimit" not in gpu

    approved = api(world["staff"]).post(f"/api/v1/quota-requests/{request_id}/approve/",
                                        {"comment": "ok"}, format="json")
    assert approved.status_code == 200, approved.json()
    assert approved.json()["state"] == "approved"
    assert approved.json()["reviewer"] == "staff"

    team = api(world["member_a"]).get("/api/v1/teams/team-a/").json()
    h100 = next(q for q in team["quotas"] if q["flavor"] == "h100")
    assert (h100["nominal_gpus"], h100["borrowing_limit_gpus"], h100["lending_limit_gpus"]) == (
        24, 8, None)
    assert {m["username"]: m["role"] for m in team["members"]} == {
        "lead_a": "lead", "member_a": "member"}
    actions = list(AuditEvent.objects.filter(team=world["team_a"]).values_list(
        "action", flat=True))
    assert "quota_request.created" in actions
    assert "quota_request.approved" in actions
    change = AuditEvent.objects.get(action="quota_grant.changed")
    assert change.actor == world["staff"]
    assert change.before["nominal_gpus"] == 16 and change.after["nominal_gpus"] == 24


def test_overcommit_needs_the_staff_tick(world, api):
    request_id = _request(api, world["lead_a"], nominal_gpus=40).json()["id"]  # 40 + 32 > 64
    refused = api(world["staff"]).post(f"/api/v1/quota-requests/{request_id}/approve/", {},
                                       format="json")
    assert refused.status_code == 400
    assert "allow_overcommit" in refused.json()
    assert "72 nominal GPUs" in refused.json()["allow_overcommit"][0]
    assert QuotaGrant.objects.get(team=world["team_a"], flavor=world["h100"]).nominal_gpus == 16
    assert QuotaRequest.objects.get(pk=request_id).state == "pending"

    ok = api(world["staff"]).post(f"/api/v1/quota-requests/{request_id}/approve/",
                                  {"allow_overcommit": True}, format="json")
    assert ok.status_code == 200
    assert ok.json()["overcommit_acknowledged"] is True
    assert QuotaGrant.objects.get(team=world["team_a"], flavor=world["h100"]).nominal_gpus == 40


def test_reject_needs_a_comment(world, api):
    request_id = _request(api, world["lead_a"]).json()["id"]
    empty = api(world["staff"]).post(f"/api/v1/quota-requests/{request_id}/reject/",
                                     {"comment": ""}, format="json")
    assert empty.status_code == 400 and "comment" in empty.json()
    done = api(world["staff"]).post(f"/api/v1/quota-requests/{request_id}/reject/",
                                    {"comment": "no capacity this quarter"}, format="json")
    assert done.status_code == 200
    assert done.json()["state"] == "rejected"
    assert done.json()["review_comment"] == "no capacity this quarter"
    again = api(world["staff"]).post(f"/api/v1/quota-requests/{request_id}/approve/", {},
                                     format="json")
    assert again.status_code == 400
    assert "not pending" in again.json()["state"][0]


def test_withdraw_by_the_lead(world, api):
    request_id = _request(api, world["lead_a"]).json()["id"]
    done = api(world["lead_a"]).post(f"/api/v1/quota-requests/{request_id}/withdraw/")
    assert done.status_code == 200 and done.json()["state"] == "withdrawn"
    assert AuditEvent.objects.filter(action="quota_request.withdrawn").count() == 1


def test_new_grant_on_a_flavor_without_one(world, api):
    request_id = _request(api, world["lead_a"], flavor="a100-mig-1g", nominal_gpus=4).json()["id"]
    preview = api(world["lead_a"]).get(f"/api/v1/quota-requests/{request_id}/preview/").json()
    assert preview["current"] is None
    assert preview["nominal_sum_gpus"] == 0 and preview["nominal_sum_after_gpus"] == 4
    rq = next(m for m in preview["manifests"] if m["kind"] == "ResourceQuota")
    assert rq["spec"]["hard"]["requests.nvidia.com/mig-1g.10gb"] == "4"
    api(world["staff"]).post(f"/api/v1/quota-requests/{request_id}/approve/", {}, format="json")
    grant = QuotaGrant.objects.get(team=world["team_a"], flavor=world["mig"])
    assert grant.nominal_gpus == 4


def test_lists_are_scoped_to_the_callers_teams(world, api):
    _request(api, world["lead_a"])
    _request(api, world["lead_b"], team="team-b", nominal_gpus=30)
    mine = api(world["member_b"]).get("/api/v1/quota-requests/").json()
    assert {r["team"] for r in mine} == {"team-b"}
    teams = api(world["member_b"]).get("/api/v1/teams/").json()
    assert [t["slug"] for t in teams] == ["team-b"]
    everything = api(world["staff"]).get("/api/v1/teams/").json()
    assert [t["slug"] for t in everything] == ["solo", "team-a", "team-b"]
    bad_state = api(world["staff"]).get("/api/v1/quota-requests/?state=done")
    assert bad_state.status_code == 400 and "state" in bad_state.json()


def test_team_list_query_count_is_constant(world, api, django_assert_max_num_queries):
    from portal.models import Membership, Team

    client = api(world["staff"])
    with django_assert_max_num_queries(6) as few:
        client.get("/api/v1/teams/")
    for i in range(20):
        team = Team.objects.create(slug=f"extra-{i}", name="x", cluster=world["cluster"])
        QuotaGrant.objects.create(team=team, flavor=world["h100"], nominal_gpus=1)
        Membership.objects.create(team=team, user=world["member_a"], role="member")
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert len(client.get("/api/v1/teams/").json()) == 23


def test_openapi_schema_lists_the_contract(world, api):
    schema = api(world["member_a"]).get("/api/schema/?format=json")
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    for path in ("/api/v1/flavors/", "/api/v1/cohorts/", "/api/v1/teams/",
                 "/api/v1/teams/{slug}/", "/api/v1/teams/{slug}/members/",
                 "/api/v1/teams/{slug}/members/{username}/", "/api/v1/quota-requests/",
                 "/api/v1/quota-requests/{id}/approve/", "/api/v1/quota-requests/{id}/reject/",
                 "/api/v1/quota-requests/{id}/withdraw/",
                 "/api/v1/quota-requests/{id}/preview/"):
        assert path in paths, path


def test_temporary_quota_request_records_its_end(world, api):
    ends = timezone.now() + timedelta(days=7)
    body = _request(api, world["lead_a"], ends_at=ends.isoformat()).json()
    assert body["ends_at"] is not None
    past = _request(api, world["lead_a"], ends_at=(timezone.now() - timedelta(days=1)).isoformat())
    assert past.status_code == 400 and "ends_at" in past.json()


@pytest.mark.parametrize("bad", ["", "   "])
def test_justification_is_required(world, api, bad):
    response = _request(api, world["lead_a"], justification=bad)
    assert response.status_code == 400
    assert "justification" in response.json()


def test_preview_manifests_validate_against_the_served_schemas(world, api):
    from tests.schema import validate_manifest

    request_id = _request(api, world["lead_a"], borrowing_limit_gpus=8).json()["id"]
    manifests = api(world["staff"]).get(
        f"/api/v1/quota-requests/{request_id}/preview/").json()["manifests"]
    assert len(manifests) >= 5
    for manifest in manifests:
        validate_manifest(manifest)
