"""Permission matrix: every quota endpoint x anonymous, other team, member, lead, staff.

Expected codes: 401 anonymous; 404 for a team the caller does not belong to; 403
for a role that may not; 2xx otherwise.
"""

import pytest

from portal.models import QuotaRequest

ROLES = ("anonymous", "other", "member", "lead", "staff")
USERS = {"anonymous": None, "other": "member_b", "member": "member_a", "lead": "lead_a",
         "staff": "staff"}
OTHER_LEAD = "lead_b"

# (name, method, path, body, {role: status})
MATRIX = [
    ("flavors list", "get", "/api/v1/flavors/", None,
     {"anonymous": 401, "other": 200, "member": 200, "lead": 200, "staff": 200}),
    ("flavor create", "post", "/api/v1/flavors/",
     {"cluster": "gpu-east", "name": "l40s", "gpu_model": "L40S", "physical_gpus": 16},
     {"anonymous": 401, "other": 403, "member": 403, "lead": 403, "staff": 201}),
    ("cohorts list", "get", "/api/v1/cohorts/", None,
     {"anonymous": 401, "other": 200, "member": 200, "lead": 200, "staff": 200}),
    ("cohort create", "post", "/api/v1/cohorts/", {"cluster": "gpu-east", "name": "infra"},
     {"anonymous": 401, "other": 403, "member": 403, "lead": 403, "staff": 201}),
    ("teams list", "get", "/api/v1/teams/", None,
     {"anonymous": 401, "other": 200, "member": 200, "lead": 200, "staff": 200}),
    ("team detail", "get", "/api/v1/teams/team-a/", None,
     {"anonymous": 401, "other": 404, "member": 200, "lead": 200, "staff": 200}),
    ("team create", "post", "/api/v1/teams/", {"slug": "team-z", "name": "Z"},
     {"anonymous": 401, "other": 403, "member": 403, "lead": 403, "staff": 201}),
    ("member add", "post", "/api/v1/teams/team-a/members/",
     {"username": "member_b", "role": "member"},
     {"anonymous": 401, "other": 404, "member": 403, "lead": 201, "staff": 201}),
    ("member remove", "delete", "/api/v1/teams/team-a/members/member_a/", None,
     {"anonymous": 401, "other": 404, "member": 403, "lead": 204, "staff": 204}),
    ("request create", "post", "/api/v1/quota-requests/",
     {"team": "team-a", "flavor": "h100", "nominal_gpus": 20, "justification": "more"},
     {"anonymous": 401, "other": 404, "member": 403, "lead": 201, "staff": 201}),
    ("requests list", "get", "/api/v1/quota-requests/", None,
     {"anonymous": 401, "other": 200, "member": 200, "lead": 200, "staff": 200}),
    ("request detail", "get", "/api/v1/quota-requests/{id}/", None,
     {"anonymous": 401, "other": 404, "member": 200, "lead": 200, "staff": 200}),
    ("approve", "post", "/api/v1/quota-requests/{id}/approve/", {},
     {"anonymous": 401, "other": 404, "member": 403, "lead": 403, "staff": 200}),
    ("reject", "post", "/api/v1/quota-requests/{id}/reject/", {"comment": "no"},
     {"anonymous": 401, "other": 404, "member": 403, "lead": 403, "staff": 200}),
    ("withdraw", "post", "/api/v1/quota-requests/{id}/withdraw/", None,
     {"anonymous": 401, "other": 404, "member": 403, "lead": 200, "staff": 403}),
    ("preview", "get", "/api/v1/quota-requests/{id}/preview/", None,
     {"anonymous": 401, "other": 404, "member": 403, "lead": 200, "staff": 200}),
]


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize(("name", "method", "path", "body", "expected"), MATRIX,
                         ids=[row[0] for row in MATRIX])
def test_permission_matrix(world, api, role, name, method, path, body, expected):
    pending = QuotaRequest.objects.create(
        team=world["team_a"], flavor=world["h100"], requested_by=world["lead_a"],
        nominal_gpus=20, justification="more",
    )
    user = world[USERS[role]] if USERS[role] else None
    client = api(user)
    response = getattr(client, method)(path.format(id=pending.pk), body, format="json")
    assert response.status_code == expected[role], (role, name, response.content[:300])
    pending.refresh_from_db()
    decided = {"approve": "approved", "reject": "rejected", "withdraw": "withdrawn"}
    if name in decided:
        ok = expected[role] == 200
        assert pending.state == (decided[name] if ok else "pending")


def test_member_of_b_never_sees_as_requests_in_lists(world, api):
    QuotaRequest.objects.create(team=world["team_a"], flavor=world["h100"], nominal_gpus=20,
                                justification="x")
    for path in ("/api/v1/quota-requests/", "/api/v1/quota-requests/?team=team-a"):
        assert api(world["member_b"]).get(path).json() == []
        assert api(world[OTHER_LEAD]).get(path).json() == []
