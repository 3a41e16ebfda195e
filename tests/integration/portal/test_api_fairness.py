"""``GET /api/v1/fairness/``: permissions, validation naming the field, real values, queries."""

import pytest
from rest_framework.test import APIClient

from tests.factories import make_cluster, make_flavor, make_grant, make_job, make_team, make_user
from tests.integration.portal.fairness_world import build_fairness_world

pytestmark = pytest.mark.django_db
URL = "/api/v1/fairness/"


@pytest.fixture
def fw():
    return build_fairness_world()


def _get(user, **params):
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client.get(URL, params)


def test_anonymous_gets_401(fw):
    assert _get(None, flavor="a100").status_code == 401


def test_staff_see_every_team_with_the_worked_numbers(fw):
    response = _get(fw["staff"], flavor="a100", cluster="gpu-east")
    assert response.status_code == 200
    body = response.json()
    assert body["cluster"] == "gpu-east"
    assert body["flavor"] == "a100"
    assert body["capacity_gpus"] == 12
    assert body["jain_index"] == pytest.approx(121 / 195)
    assert body["teams_with_demand"] == 3
    assert body["quota_exceeds_capacity"] is False
    contract = ("slug", "weight", "nominal_gpus", "usage_gpus", "demand_gpus",
                "fair_share_gpus", "dominant_share", "dominant_resource")
    got = [tuple(t[k] for k in contract) for t in body["teams"]]
    assert got == [
        ("team-a", 1.0, 4, 7, 7, 4.0, pytest.approx(664 / 768), "memory"),
        ("team-b", 1.0, 4, 4, 6, 4.0, pytest.approx(1 / 3), "cpu"),
        ("team-c", 1.0, 4, 0, 8, 4.0, 0.0, None),
    ]
    team_c = body["teams"][2]
    assert team_c["below_fair_share_by"] == 4
    assert body["teams"][0]["kueue_share"] == pytest.approx(531.25)
    assert body["reclaim"][0]["sources"] == [{"team": "team-a", "gpus": 3}]
    assert ("team-c is 4 GPUs below its fair share; 3 could be reclaimed from team-a "
            "(1 GPU cannot be reclaimed)") in body["sentences"]


def test_cluster_is_optional_when_the_flavor_name_is_unique(fw):
    assert _get(fw["staff"], flavor="a100").json()["capacity_gpus"] == 12


def test_members_see_only_their_teams_rows_and_no_other_team_named(fw):
    body = _get(fw["member_c"], flavor="a100").json()
    assert [t["slug"] for t in body["teams"]] == ["team-c"]
    assert body["capacity_gpus"] == 12  # the flavor's figures stay cluster-wide
    assert body["jain_index"] == pytest.approx(121 / 195)
    assert body["reclaim"] == [{
        "team": "team-c", "deficit_gpus": 4, "reclaimable_gpus": 3, "sources": [],
        "sentence": "team-c is 4 GPUs below its fair share; 3 could be reclaimed from another "
                    "team of its cohort (1 GPU cannot be reclaimed)",
    }]
    assert "team-a" not in response_text(body)
    lead_a = _get(fw["lead_a"], flavor="a100").json()
    assert [t["slug"] for t in lead_a["teams"]] == ["team-a"]
    assert _get(fw["outsider"], flavor="a100").json()["teams"] == []


def response_text(body) -> str:
    import json

    return json.dumps(body)


def test_time_sliced_flavor_in_physical_gpus(fw):
    body = _get(fw["member_d"], flavor="t4-shared").json()
    assert body["capacity_gpus"] == 2
    assert body["time_slicing_replicas"] == 4
    (row,) = body["teams"]
    assert (row["nominal_gpus"], row["usage_gpus"], row["fair_share_gpus"]) == (1, 0.5, 0.5)
    assert (row["dominant_share"], row["dominant_resource"]) == (0.75, "cpu")


@pytest.mark.parametrize(("params", "field", "message"), [
    ({}, "flavor", "This field is required."),
    ({"flavor": "v100"}, "flavor", "No flavor named 'v100'."),
    ({"flavor": "v100", "cluster": "gpu-east"}, "flavor", "No flavor 'v100' in cluster "
                                                          "'gpu-east'."),
    ({"flavor": "a100", "cluster": "gpu-west"}, "cluster", "No cluster named 'gpu-west'."),
])
def test_bad_parameters_are_400_naming_the_field(fw, params, field, message):
    response = _get(fw["member_a"], **params)
    assert response.status_code == 400
    assert response.json() == {field: [message]}


def test_a_flavor_name_in_two_clusters_needs_the_cluster(fw):
    other = make_cluster(name="gpu-west")
    make_flavor(cluster=other, name="a100", physical_gpus=4)
    response = _get(fw["staff"], flavor="a100")
    assert response.status_code == 400
    assert list(response.json()) == ["cluster"]
    assert _get(fw["staff"], flavor="a100", cluster="gpu-west").json()["capacity_gpus"] == 4


def _grow(fw, n: int) -> None:
    """n more teams on a100, each with a grant, jobs in three phases and a member."""
    for i in range(n):
        team = make_team(cluster=fw["cluster"], slug=f"extra-{i}", cohort=fw["research"])
        make_grant(team=team, flavor=fw["a100"], nominal_gpus=1)
        make_job(team=team, flavor=fw["a100"], phase="Running", cpu_per_worker=f"{i + 1}")
        make_job(team=team, flavor=fw["a100"], phase="Queued")
        make_job(team=team, flavor=fw["a100"], phase="Failed")
        make_user(f"extra-user-{i}", team=team)


@pytest.mark.parametrize("who", ["staff", "member_a"])
def test_query_count_is_the_same_at_two_sizes(fw, who, django_assert_num_queries):
    client = APIClient()
    client.force_authenticate(fw[who])
    # flavor (1), the caller's teams for non-staff (1), cohorts, teams, grants, jobs (4)
    expected = 5 if who == "staff" else 6
    with django_assert_num_queries(expected):
        small = client.get(URL, {"flavor": "a100"}).json()
    _grow(fw, 15)
    with django_assert_num_queries(expected):
        big = client.get(URL, {"flavor": "a100"}).json()
    if who == "staff":
        assert (len(small["teams"]), len(big["teams"])) == (3, 18)


def test_openapi_schema_describes_the_endpoint(fw):
    client = APIClient()
    client.force_authenticate(fw["member_a"])
    schema = client.get("/api/schema/?format=json").json()
    op = schema["paths"]["/api/v1/fairness/"]["get"]
    params = {p["name"]: p.get("required", False) for p in op["parameters"]}
    assert params == {"flavor": True, "cluster": False}
    ref = op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    body = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert {"capacity_gpus", "jain_index", "teams"} <= set(body["properties"])
    team = schema["components"]["schemas"]["FairnessTeam"]["properties"]
    assert {"slug", "weight", "nominal_gpus", "usage_gpus", "demand_gpus", "fair_share_gpus",
            "dominant_share", "dominant_resource"} <= set(team)
