"""``/api/v1/jobs/``: submit, list/filter, read, cancel rights, validation; no worker.

On-commit tasks never run in these tests (each runs in a rolled-back
transaction), so they check only what the web process writes. The flow
through a worker and the emulator is in test_job_flow.py.
"""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.models import AuditEvent, Job
from tests.integration.jobs.conftest import job_payload

pytestmark = pytest.mark.django_db

URL = "/api/v1/jobs/"


def submit(api, user, **overrides):
    return api(user).post(URL, job_payload(**overrides), format="json")


def make_job(world, *, user="member_a", team="team_a", name="train", phase="Submitted"):
    """A job row as the submit service leaves it (created through the service)."""
    from portal.services.jobs import job_submit

    payload = job_payload(name=name)
    payload.pop("team")
    job = job_submit(actor=world[user], team=world[team], **payload)
    if phase != "Submitted":
        Job.objects.filter(pk=job.pk).update(phase=phase)
        job.refresh_from_db()
    return job


# --- submit --------------------------------------------------------------------------


def test_member_submits_and_gets_201_with_phase_submitted(world, api):
    response = submit(api, world["member_a"], priority="high", max_runtime_seconds=3600)
    assert response.status_code == 201, response.json()
    body = response.json()
    job = Job.objects.get()
    assert body["id"] == job.pk
    assert body["phase"] == "Submitted"
    assert body["team"] == "team-a" and body["flavor"] == "h100" and body["priority"] == "high"
    assert body["submitter"] == "member_a"
    assert (body["workers"], body["gpus_per_worker"], body["total_gpus"]) == (2, 4, 8)
    # CPU and memory default to the flavor's per-GPU sizing times the GPUs per worker.
    assert (body["cpu_per_worker"], body["memory_per_worker"]) == ("48", "384Gi")
    assert body["env"] == [{"name": "WANDB_PROJECT", "value": "llm"}]
    for field in ("reason", "message", "queue_position", "admitted_flavor", "preemptions",
                  "submitted_at", "admitted_at", "started_at", "finished_at"):
        assert field in body
    manifest = body["manifest"]
    assert manifest["apiVersion"] == "batch/v1" and manifest["kind"] == "Job"
    assert manifest["metadata"]["namespace"] == "team-a"
    labels = manifest["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "team-a"
    assert labels["kueue.x-k8s.io/priority-class"] == "high"
    assert labels["portal.gpu/job"] == str(job.pk)
    assert manifest["spec"]["suspend"] is True
    assert manifest["spec"]["activeDeadlineSeconds"] == 3600
    [container] = manifest["spec"]["template"]["spec"]["containers"]
    resources = container["resources"]
    assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"] == "4"
    [event] = AuditEvent.objects.filter(action="job.submitted")
    assert event.actor == world["member_a"] and event.team == world["team_a"]
    assert event.after["total_gpus"] == 8


def test_jobset_kind_renders_a_jobset_with_a_headless_network(world, api):
    response = submit(api, world["lead_a"], kind="jobset", name="ddp")
    assert response.status_code == 201, response.json()
    manifest = response.json()["manifest"]
    assert manifest["apiVersion"] == "jobset.x-k8s.io/v1alpha2"
    assert manifest["kind"] == "JobSet"
    assert manifest["spec"]["suspend"] is True
    assert manifest["spec"]["network"]["enableDNSHostnames"] is True


def test_a_job_as_big_as_the_team_can_be_admitted_is_accepted(world, api):
    # 16 nominal + 8 that team-b lends = 24.
    response = submit(api, world["member_a"], workers=3, gpus_per_worker=8)
    assert response.status_code == 201, response.json()


def test_staff_may_submit_to_any_team(world, api):
    response = submit(api, world["staff"], team="team-b", gpus_per_worker=1)
    assert response.status_code == 201, response.json()
    assert response.json()["team"] == "team-b"


def test_a_name_is_unique_in_the_team_among_live_jobs(world, api):
    assert submit(api, world["member_a"]).status_code == 201
    again = submit(api, world["member_a2"])
    assert again.status_code == 400
    assert "already has a job named 'train-llm'" in again.json()["name"][0]
    # Another team may use the name.
    assert submit(api, world["member_b"], team="team-b").status_code == 201
    # Once the job is cancelled and deleted from the cluster, the name is free again.
    from django.utils import timezone

    Job.objects.filter(team=world["team_a"]).update(phase="Cancelled",
                                                    deleted_at=timezone.now())
    assert submit(api, world["member_a2"]).status_code == 201


# --- validation: each error names its field, nothing is written ------------------------


TOO_BIG = "needs 32 nvidia.com/gpu on h100; the team can be admitted at most 24"


@pytest.mark.parametrize(("overrides", "field", "fragment"), [
    ({"gpus_per_worker": 1.5}, "gpus_per_worker", "1.5 is not a whole number"),
    ({"gpus_per_worker": "1.5"}, "gpus_per_worker", "'1.5' is not a whole number"),
    ({"workers": 0.5}, "workers", "0.5 is not a whole number"),
    ({"gpus_per_worker": 0}, "gpus_per_worker", "Must be 1 or more"),
    ({"gpu_limit_per_worker": 8}, "gpu_limit_per_worker", "GPU limits cannot be set apart"),
    ({"resources": {"limits": {"nvidia.com/gpu": "8"}}}, "resources",
     "GPU limits cannot be set apart"),
    ({"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}, "env",
     "NVIDIA_VISIBLE_DEVICES may not be set"),
    ({"env": [{"name": "CUDA_VISIBLE_DEVICES", "value": "0,1,2,3,4,5,6,7"}]}, "env",
     "CUDA_VISIBLE_DEVICES may not be set"),
    ({"env": [{"name": "MY-VAR", "value": "x"}]}, "env", "not a valid variable name"),
    ({"name": "Train_LLM"}, "name", "DNS-1123"),
    ({"name": "9lives"}, "name", "must start with a letter"),
    ({"name": "a" * 48}, "name", "at most 47 characters"),
    ({"image": "ghcr.io/Acme/Train:1.4"}, "image", "not a valid image reference"),
    ({"image": "ubuntu:bad tag"}, "image", "whitespace"),
    ({"image": ""}, "image", "blank"),
    ({"workers": 4, "gpus_per_worker": 8}, "gpus_per_worker", TOO_BIG),
    ({"flavor": "a100-mig-1g"}, "flavor", "holds no quota on flavor 'a100-mig-1g'"),
    ({"flavor": "b200"}, "flavor", "No GPU flavor 'b200'"),
    ({"priority": "urgent"}, "priority", "No priority class named 'urgent'"),
    ({"kind": "mpijob"}, "kind", "not a valid choice"),
    ({"cpu_per_worker": "8cores"}, "cpu_per_worker", "quantity"),
    ({"memory_per_worker": "64gb"}, "memory_per_worker", "quantity"),
    ({"max_runtime_seconds": 0}, "max_runtime_seconds", "Must be 1 or more"),
    ({"command": "python train.py"}, "command", "list"),
])
def test_bad_input_is_a_field_error_and_writes_nothing(world, api, overrides, field, fragment):
    audits = AuditEvent.objects.count()
    response = submit(api, world["member_a"], **overrides)
    assert response.status_code == 400, response.json()
    errors = response.json()
    assert field in errors, errors
    assert fragment in " ".join(str(m) for m in errors[field]), errors
    assert Job.objects.count() == 0
    assert AuditEvent.objects.count() == audits


def test_a_team_without_cohort_is_admitted_at_most_its_nominal(world, api):
    response = submit(api, world["staff"], team="solo", workers=2, gpus_per_worker=4)
    assert response.status_code == 400
    assert response.json() == {"gpus_per_worker": [
        "needs 8 nvidia.com/gpu on h100; the team can be admitted at most 4"]}


def test_several_errors_are_reported_together(world, api):
    response = submit(api, world["member_a"], name="Bad_Name", flavor="b200", priority="nope")
    assert response.status_code == 400
    assert {"name", "flavor", "priority"} <= set(response.json())


# --- isolation and roles ---------------------------------------------------------------


def test_another_teams_member_cannot_list_read_cancel_or_submit(world, api):
    job = make_job(world)
    outsider = api(world["member_b"])
    assert outsider.get(URL).json() == []
    assert outsider.get(URL, {"team": "team-a"}).json() == []
    assert outsider.get(f"{URL}{job.pk}/").status_code == 404
    assert outsider.post(f"{URL}{job.pk}/cancel/").status_code == 404
    assert outsider.post(f"{URL}{job.pk}/refresh/").status_code == 404
    assert submit(api, world["member_b"], name="sneaky").status_code == 404
    job.refresh_from_db()
    assert job.cancel_requested_at is None
    assert Job.objects.count() == 1


def test_anonymous_callers_are_refused(world, api):
    job = make_job(world)
    assert api().get(URL).status_code in (401, 403)
    assert api().get(f"{URL}{job.pk}/").status_code in (401, 403)
    assert api().post(URL, job_payload(), format="json").status_code in (401, 403)


def test_member_cancels_own_job_but_not_a_teammates(world, api):
    own = make_job(world, user="member_a", name="own")
    other = make_job(world, user="member_a2", name="other")
    member = api(world["member_a"])
    refused = member.post(f"{URL}{other.pk}/cancel/")
    assert refused.status_code == 403
    other.refresh_from_db()
    assert other.cancel_requested_at is None
    accepted = member.post(f"{URL}{own.pk}/cancel/")
    assert accepted.status_code == 202
    assert accepted.json()["cancel_requested_at"] is not None
    assert AuditEvent.objects.filter(action="job.cancel_requested", target_id=str(own.pk),
                                     actor=world["member_a"]).count() == 1


def test_lead_cancels_any_job_of_the_team_and_staff_any_job(world, api):
    first = make_job(world, user="member_a", name="first")
    second = make_job(world, user="member_a2", name="second")
    assert api(world["lead_a"]).post(f"{URL}{first.pk}/cancel/").status_code == 202
    assert api(world["staff"]).post(f"{URL}{second.pk}/cancel/").status_code == 202
    # The other team's lead does not even see them.
    third = make_job(world, user="member_a", name="third")
    assert api(world["lead_b"]).post(f"{URL}{third.pk}/cancel/").status_code == 404


def test_a_finished_job_cannot_be_cancelled(world, api):
    job = make_job(world, phase="Succeeded")
    response = api(world["member_a"]).post(f"{URL}{job.pk}/cancel/")
    assert response.status_code == 400
    assert response.json() == {"phase": ["The job is already Succeeded."]}


# --- list, filters, detail ---------------------------------------------------------------


def test_list_filters_by_team_and_phase(world, api):
    queued = make_job(world, name="queued", phase="Queued")
    running = make_job(world, name="running", phase="Running")
    theirs = make_job(world, user="member_b", team="team_b", name="theirs")
    staff = api(world["staff"])
    assert {j["id"] for j in staff.get(URL).json()} == {queued.pk, running.pk, theirs.pk}
    assert [j["id"] for j in staff.get(URL, {"team": "team-a", "phase": "Queued"}).json()] == [
        queued.pk]
    assert [j["id"] for j in staff.get(URL, {"team": "team-b"}).json()] == [theirs.pk]
    member = api(world["member_a"])
    assert {j["id"] for j in member.get(URL).json()} == {queued.pk, running.pk}
    assert [j["id"] for j in member.get(URL, {"phase": "Running"}).json()] == [running.pk]
    bad = member.get(URL, {"phase": "Sleeping"})
    assert bad.status_code == 400
    assert "phase" in bad.json()


def test_detail_has_the_contract_fields(world, api):
    job = make_job(world)
    body = api(world["member_a2"]).get(f"{URL}{job.pk}/").json()
    assert body["id"] == job.pk and body["phase"] == "Submitted"
    assert {"phase", "reason", "message", "queue_position", "admitted_flavor", "preemptions",
            "submitted_at", "admitted_at", "started_at", "finished_at", "preemption_loop",
            "timeline", "manifest"} <= set(body)


def _list_queries(api, user, count_jobs, world):
    for index in range(count_jobs):
        make_job(world, name=f"job-{len(Job.objects.all())}-{index}")
    client = api(user)
    with CaptureQueriesContext(connection) as queries:
        response = client.get(URL)
    assert response.status_code == 200
    assert len(response.json()) == Job.objects.count()
    return len(queries)


def test_list_endpoint_runs_a_constant_number_of_queries(world, api):
    small = _list_queries(api, world["lead_a"], 2, world)
    large = _list_queries(api, world["lead_a"], 12, world)
    assert small == large


def test_openapi_schema_documents_the_job_endpoints(world, api):
    schema = api(world["member_a"]).get("/api/schema/", {"format": "json"}).json()
    paths = schema["paths"]
    assert {"/api/v1/jobs/", "/api/v1/jobs/{id}/", "/api/v1/jobs/{id}/cancel/",
            "/api/v1/jobs/{id}/refresh/"} <= set(paths)
    create = schema["components"]["schemas"]["JobCreate"]
    assert set(create["required"]) >= {"team", "name", "image", "command", "workers",
                                       "gpus_per_worker", "flavor"}
    assert create["properties"]["gpus_per_worker"]["type"] == "integer"
    params = {p["name"] for p in paths["/api/v1/jobs/"]["get"]["parameters"]}
    assert {"team", "phase"} <= params


def test_the_simulator_fields_are_deprecated_in_the_schema(world, api):
    schema = api(world["member_a"]).get("/api/schema/", {"format": "json"}).json()
    for component in ("JobCreate", "Job"):
        properties = schema["components"]["schemas"][component]["properties"]
        for field in ("sim_duration_seconds", "sim_outcome", "sim_profile"):
            assert properties[field]["deprecated"] is True, (component, field)
        assert "deprecated" not in properties["name"]
    assert schema["components"]["schemas"]["JobCreate"]["properties"]["annotations"][
        "type"] == "object"


# --- simulator hints: annotations, and the deprecated sim_* fields ----------------------


def test_simulator_hints_travel_as_annotations(world, api):
    notes = {"sim.portal.gpu/duration-seconds": "90", "sim.portal.gpu/profile": "notebook"}
    response = submit(api, world["member_a"], annotations=notes)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["manifest"]["metadata"]["annotations"] == notes
    # the deprecated columns still report the hints, whichever way they came
    assert (body["sim_duration_seconds"], body["sim_outcome"], body["sim_profile"]) == (
        90, "", "notebook")


def test_the_deprecated_sim_fields_become_the_same_annotations(world, api):
    response = submit(api, world["member_a"], sim_duration_seconds=90, sim_outcome="Failed")
    assert response.status_code == 201, response.json()
    assert response.json()["manifest"]["metadata"]["annotations"] == {
        "sim.portal.gpu/duration-seconds": "90", "sim.portal.gpu/outcome": "Failed"}


@pytest.mark.parametrize(("overrides", "field", "fragment"), [
    ({"annotations": {"example.com/owner": "me"}}, "annotations", "allowed key prefixes"),
    ({"annotations": {"sim.portal.gpu/outcome": "Done"}}, "annotations", "must be one of"),
    ({"sim_outcome": "Done"}, "sim_outcome", "must be one of Succeeded, Failed"),
    ({"sim_profile": "gaming"}, "sim_profile", "must be one of training"),
])
def test_bad_annotations_are_field_errors(world, api, overrides, field, fragment):
    response = submit(api, world["member_a"], **overrides)
    assert response.status_code == 400
    assert fragment in " ".join(response.json()[field])
    assert not Job.objects.exists()


def test_production_accepts_no_annotations_but_the_deprecated_fields(world, api, settings):
    settings.JOB_ANNOTATION_PREFIXES = []
    response = submit(api, world["member_a"],
                      annotations={"sim.portal.gpu/duration-seconds": "9"})
    assert response.status_code == 400
    assert "allowed key prefixes: none" in " ".join(response.json()["annotations"])
    assert submit(api, world["member_a"], sim_duration_seconds=9).status_code == 201
