"""Hostile input on the portal's write endpoints: every bad value is a 400 naming its
field (never a 500) and nothing is written. Found by the break-and-fix review."""

import pytest
from django.test import Client

from portal.models import AuditEvent, GpuFlavor, Membership, QuotaRequest, Team

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


def _flavor_body(**overrides) -> dict:
    body = {"cluster": "gpu-east", "name": "l4", "gpu_model": "L4", "physical_gpus": 8}
    body.update(overrides)
    return body


def test_flavor_created_without_a_gpu_model_keeps_previews_and_submits_working(world, api):
    staff = api(world["staff"])
    body = _flavor_body()
    del body["gpu_model"]
    created = staff.post("/api/v1/flavors/", body, format="json")
    assert created.status_code == 201, created.content
    request = QuotaRequest.objects.create(team=world["team_a"], flavor=world["h100"],
                                          requested_by=world["lead_a"], nominal_gpus=4,
                                          justification="x")
    preview = staff.get(f"/api/v1/quota-requests/{request.pk}/preview/")
    assert preview.status_code == 200, preview.content
    assert {m["kind"] for m in preview.json()["manifests"]} >= {"ClusterQueue"}
    submitted = api(world["lead_a"]).post("/api/v1/jobs/", {
        "team": "team-a", "name": "after-l4", "image": "ghcr.io/acme/train:1",
        "command": ["python"], "workers": 1, "gpus_per_worker": 1, "flavor": "h100"},
        format="json")
    assert submitted.status_code == 201, submitted.content


@pytest.mark.parametrize(("extra", "field"), [
    ({"node_labels": {"bad key!": "v"}}, "node_labels"),
    ({"node_labels": {"k": "bad value!"}}, "node_labels"),
    ({"node_labels": {"a\x00": "b"}}, "node_labels"),
    ({"node_labels": {f"k{i}": "v" for i in range(9)}}, "node_labels"),
    ({"node_taints": [{"key": "k", "effect": "NoSchedule", "extra": 1}]}, "node_taints[0]"),
    ({"node_taints": [{"key": "bad key!", "effect": "NoSchedule"}]}, "node_taints[0].key"),
    ({"tolerations": [{"x": "y"}]}, "tolerations[0]"),
    ({"tolerations": [{"key": "k", "operator": "Bogus"}]}, "tolerations[0].operator"),
    ({"tolerations": ["k"]}, "tolerations"),
    ({"gpu_model": "x" * 129}, "gpu_model"),
    ({"cpu_per_gpu": "1" * 33}, "cpu_per_gpu"),
    ({"memory_per_gpu": "9" * 40}, "memory_per_gpu"),
    ({"cpu_per_gpu": "123456789012345678901234567891m"}, "cpu_per_gpu"),
    ({"memory_per_gpu": "9999999Ei"}, "memory_per_gpu"),
])
def test_flavor_that_could_not_be_rendered_is_refused_and_writes_nothing(world, api, extra,
                                                                         field):
    before = GpuFlavor.objects.count()
    response = api(world["staff"]).post("/api/v1/flavors/", _flavor_body(**extra),
                                        format="json")
    assert response.status_code == 400, response.content
    assert field in response.json(), response.json()
    assert GpuFlavor.objects.count() == before
    assert not AuditEvent.objects.filter(action="flavor.created").exists()


def test_flavor_with_valid_labels_taints_and_tolerations_is_accepted(world, api):
    response = api(world["staff"]).post("/api/v1/flavors/", _flavor_body(
        node_labels={"nvidia.com/gpu.product": "NVIDIA-L4"},
        node_taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    ), format="json")
    assert response.status_code == 201, response.content
    assert GpuFlavor.objects.get(name="l4").tolerations == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def test_admin_console_refuses_a_flavor_that_could_not_be_rendered(world, django_user_model):
    client = Client()
    client.force_login(django_user_model.objects.create_superuser("root", password="pw-root-1"))
    form = {"cluster": str(world["cluster"].pk), "name": "l4", "gpu_resource": "nvidia.com/gpu",
            "gpu_model": "", "node_labels": "{}", "node_taints": "[]",
            "tolerations": '[{"key": "k", "operator": "Bogus"}]', "physical_gpus": "8",
            "time_slicing_replicas": "1", "gpus_per_node": "8", "cpu_per_gpu": "8",
            "memory_per_gpu": "64Gi"}
    refused = client.post("/admin/portal/gpuflavor/add/", form)
    assert refused.status_code == 200
    assert "tolerations[0].operator" in str(refused.context["adminform"].form.errors)
    assert not GpuFlavor.objects.filter(name="l4").exists()
    form["tolerations"] = '[{"key": "k", "operator": "Exists"}]'
    accepted = client.post("/admin/portal/gpuflavor/add/", form)
    assert accepted.status_code == 302
    assert GpuFlavor.objects.get(name="l4").tolerations == [{"key": "k", "operator": "Exists"}]


def test_team_name_longer_than_its_column_is_a_field_error(world, api):
    before = Team.objects.count()
    response = api(world["staff"]).post("/api/v1/teams/", {"slug": "long-name",
                                                           "name": "x" * 201}, format="json")
    assert response.status_code == 400, response.content
    assert "name" in response.json()
    assert Team.objects.count() == before


@pytest.mark.parametrize("path", ["/api/v1/quota-requests/abc/",
                                  "/api/v1/quota-requests/abc/preview/",
                                  "/api/v1/teams/%00/", "/api/v1/flavors/%00/"])
def test_malformed_ids_in_the_path_are_404(world, api, path):
    assert api(world["staff"]).get(path).status_code == 404


@pytest.mark.parametrize("path", ["/api/v1/quota-requests/abc/approve/",
                                  "/api/v1/quota-requests/abc/withdraw/"])
def test_malformed_ids_in_action_paths_are_404(world, api, path):
    assert api(world["staff"]).post(path, {}, format="json").status_code == 404


@pytest.mark.parametrize("username", ["%00", "a%00b"])
def test_member_removal_with_a_nul_in_the_username_is_not_a_500(world, api, username):
    before = Membership.objects.count()
    response = api(world["lead_a"]).delete(f"/api/v1/teams/team-a/members/{username}/")
    assert response.status_code in (400, 404), response.content
    assert Membership.objects.count() == before


def test_quota_request_list_with_a_nul_in_team_is_a_field_error(world, api):
    response = api(world["lead_a"]).get("/api/v1/quota-requests/?team=%00")
    assert response.status_code == 400, response.content
    assert "team" in response.json()


def _pending_request(world) -> QuotaRequest:
    return QuotaRequest.objects.create(team=world["team_a"], flavor=world["h100"],
                                       requested_by=world["lead_a"], nominal_gpus=4,
                                       justification="x")


@pytest.mark.parametrize(("who", "path", "body", "unknown"), [
    # A typo for borrowing_limit_gpus: ignored, it asked for unlimited borrowing.
    ("lead_a", "/api/v1/quota-requests/", _quota_body(borrowing_limit=4), "borrowing_limit"),
    ("lead_a", "/api/v1/teams/team-a/members/", {"username": "member_b", "rol": "lead"},
     "rol"),
    ("staff", "/api/v1/teams/", {"slug": "new-team", "weigth": 3}, "weigth"),
    ("staff", "/api/v1/flavors/", _flavor_body(node_label={"a": "b"}), "node_label"),
    ("staff", "/api/v1/cohorts/", {"cluster": "gpu-east", "name": "infra", "parnet": "x"},
     "parnet"),
    ("staff", "/api/v1/quota-requests/{id}/approve/", {"allow_overcommmit": True},
     "allow_overcommmit"),
    ("staff", "/api/v1/quota-requests/{id}/reject/", {"comment": "no", "x": 1}, "x"),
])
def test_unknown_keys_are_refused_naming_them_and_nothing_is_written(world, api, who, path,
                                                                     body, unknown):
    request = _pending_request(world)
    counts = (QuotaRequest.objects.count(), Membership.objects.count(), Team.objects.count(),
              GpuFlavor.objects.count(), AuditEvent.objects.count())
    response = api(world[who]).post(path.format(id=request.pk), body, format="json")
    assert response.status_code == 400, response.content
    assert response.json() == {unknown: [f"Unknown field '{unknown}'."]}
    assert counts == (QuotaRequest.objects.count(), Membership.objects.count(),
                      Team.objects.count(), GpuFlavor.objects.count(),
                      AuditEvent.objects.count())
    request.refresh_from_db()
    assert request.state == "pending"


@pytest.mark.parametrize("raw", ["[1, 2]", '"text"', "null", "1"])
@pytest.mark.parametrize("path", ["/api/v1/quota-requests/", "/api/v1/teams/",
                                  "/api/v1/flavors/", "/api/v1/cohorts/",
                                  "/api/v1/teams/team-a/members/"])
def test_json_that_is_not_an_object_is_a_400(world, api, path, raw):
    before = (QuotaRequest.objects.count(), Team.objects.count(), Membership.objects.count())
    response = api(world["staff"]).post(path, raw, content_type="application/json")
    assert response.status_code == 400, response.content
    assert before == (QuotaRequest.objects.count(), Team.objects.count(),
                      Membership.objects.count())


@pytest.mark.parametrize("path", ["/api/v1/quota-requests/", "/api/v1/teams/",
                                  "/api/v1/flavors/", "/api/v1/cohorts/", "/api/v1/jobs/",
                                  "/api/v1/fairness/?flavor=h100"])
@pytest.mark.parametrize("fmt", ["csv", "xml", "%00"])
def test_an_unsupported_format_is_a_400_naming_format_not_a_404(world, api, path, fmt):
    sep = "&" if "?" in path else "?"
    response = api(world["member_a"]).get(f"{path}{sep}format={fmt}")
    assert response.status_code == 400, response.content
    assert "format" in response.json()


def test_csv_stays_available_where_it_is_offered(world, api):
    response = api(world["member_a"]).get("/api/v1/utilization/?format=csv")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
