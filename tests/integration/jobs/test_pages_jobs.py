"""Job pages through the Django test client: form, live validation, lists, detail, rights."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from portal.models import AuditEvent, Job
from portal.services.jobs import job_submit
from tests.integration.jobs.conftest import job_payload

pytestmark = pytest.mark.django_db


def form_data(**overrides) -> dict:
    data = {"name": "train-llm", "image": "ghcr.io/acme/train:1.4",
            "command": "torchrun train.py", "args": "--epochs 3 --note 'two words'",
            "env": "WANDB_PROJECT=llm\nSEED=7", "kind": "job", "workers": "2",
            "gpus_per_worker": "4", "flavor": "h100", "cpu_per_worker": "",
            "memory_per_worker": "", "priority": "", "max_runtime_seconds": ""}
    data.update(overrides)
    return data


def make_job(world, *, user="member_a", team="team_a", name="train", **fields):
    payload = job_payload(name=name, **fields)
    payload.pop("team")
    return job_submit(actor=world[user], team=world[team], **payload)


def test_member_submits_through_the_form(client, world):
    client.force_login(world["member_a"])
    page = client.get("/teams/team-a/jobs/new/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="job-form"' in html and "js/job_form.js" in html
    assert '<option value="h100">' in html and "a100-mig-1g" not in html  # no MIG quota
    response = client.post("/teams/team-a/jobs/new/", form_data())
    assert response.status_code == 302
    job = Job.objects.get()
    assert response.url == f"/teams/team-a/jobs/{job.pk}/"   # lands on the new job
    assert job.submitter == world["member_a"] and job.phase == "Submitted"
    assert job.command == ["torchrun", "train.py"]
    assert job.args == ["--epochs", "3", "--note", "two words"]
    assert job.env == [{"name": "WANDB_PROJECT", "value": "llm"}, {"name": "SEED", "value": "7"}]
    landed = client.get(response.url).content.decode()
    assert "Job train-llm submitted." in landed and 'id="job-title">train-llm' in landed
    listing = client.get("/teams/team-a/jobs/").content.decode()
    assert f'data-job="{job.pk}"' in listing and "train-llm" in listing


@pytest.mark.parametrize(("overrides", "field", "fragment"), [
    ({"gpus_per_worker": "1.5"}, "gpus_per_worker", "not a whole number"),
    ({"env": "NVIDIA_VISIBLE_DEVICES=all"}, "env", "NVIDIA_VISIBLE_DEVICES may not be set"),
    # Item paths in the form's words: the second line of the env box, not "env[1]".
    ({"env": "A=1\nNVIDIA_VISIBLE_DEVICES=all"}, "env",
     "Line 2: NVIDIA_VISIBLE_DEVICES may not be set"),
    ({"env": "JUSTANAME"}, "env", "expected NAME=value"),
    ({"name": "Bad_Name"}, "name", "DNS-1123"),
    ({"image": "ghcr.io/Acme/x"}, "image", "not a valid image reference"),
    ({"workers": "4", "gpus_per_worker": "8"}, "gpus_per_worker",
     "needs 32 nvidia.com/gpu on h100; the team can be admitted at most 24"),
    ({"command": "python 'unclosed"}, "command", "Cannot split"),
])
def test_form_errors_show_next_to_their_field_and_nothing_is_written(client, world, overrides,
                                                                      field, fragment):
    client.force_login(world["member_a"])
    response = client.post("/teams/team-a/jobs/new/", form_data(**overrides))
    assert response.status_code == 400
    assert fragment in " ".join(response.context["form"].errors[field])
    html = response.content.decode()
    start = html.index(f'id="field-{field}"')
    assert fragment.split("'")[0] in html[start:html.index("</div>", start)]
    assert Job.objects.count() == 0
    assert not AuditEvent.objects.filter(action="job.submitted").exists()


def test_live_validation_answers_field_errors_and_the_gpu_sums(client, world):
    client.force_login(world["member_a"])
    bad = client.post("/teams/team-a/jobs/validate/",
                      form_data(name="X", workers="4", gpus_per_worker="8"))
    assert bad.status_code == 200
    body = bad.json()
    assert body["valid"] is False
    assert "DNS-1123" in body["errors"]["name"][0]
    assert body["errors"]["gpus_per_worker"] == [
        "needs 32 nvidia.com/gpu on h100; the team can be admitted at most 24"]
    good = client.post("/teams/team-a/jobs/validate/", form_data()).json()
    assert good == {"valid": True, "errors": {}, "total_gpus": 8, "max_gpus": 24,
                    "gpu_resource": "nvidia.com/gpu"}
    assert Job.objects.count() == 0


def test_outsiders_get_404_on_every_job_page(client, world):
    job = make_job(world)
    client.force_login(world["member_b"])
    for url in ("/teams/team-a/jobs/", "/teams/team-a/jobs/rows.json",
                "/teams/team-a/jobs/new/", f"/teams/team-a/jobs/{job.pk}/",
                f"/teams/team-b/jobs/{job.pk}/"):
        assert client.get(url).status_code == 404, url
    for url in ("/teams/team-a/jobs/validate/", f"/teams/team-a/jobs/{job.pk}/cancel/",
                f"/teams/team-a/jobs/{job.pk}/refresh/", f"/teams/team-b/jobs/{job.pk}/cancel/"):
        assert client.post(url, form_data()).status_code == 404, url
    assert "train" not in client.get("/jobs/").content.decode()
    assert client.get("/jobs/rows.json").json() == {"jobs": [], "total": 0, "page": 1,
                                                     "pages": 1}
    job.refresh_from_db()
    assert job.cancel_requested_at is None


def test_cancel_button_and_rights_on_the_pages(client, world):
    own = make_job(world, user="member_a", name="own")
    other = make_job(world, user="member_a2", name="other")
    client.force_login(world["member_a"])
    assert 'id="job-cancel-link"' in client.get(f"/teams/team-a/jobs/{own.pk}/").content.decode()
    assert 'id="job-cancel-link"' not in client.get(
        f"/teams/team-a/jobs/{other.pk}/").content.decode()
    assert client.post(f"/teams/team-a/jobs/{other.pk}/cancel/").status_code == 403
    response = client.post(f"/teams/team-a/jobs/{own.pk}/cancel/")
    assert response.status_code == 302
    own.refresh_from_db()
    assert own.cancel_requested_at is not None
    assert "cancelling" in client.get(f"/teams/team-a/jobs/{own.pk}/").content.decode()
    client.force_login(world["lead_a"])
    assert 'id="job-cancel-link"' in client.get(
        f"/teams/team-a/jobs/{other.pk}/").content.decode()
    assert client.post(f"/teams/team-a/jobs/{other.pk}/cancel/").status_code == 302
    other.refresh_from_db()
    assert other.cancel_requested_at is not None


def test_detail_shows_explanation_timeline_and_yaml(client, world):
    job = make_job(world, kind="jobset")
    Job.objects.filter(pk=job.pk).update(
        phase="Queued", reason="WaitingForQuota", queue_position=2,
        message="Waiting for quota: It needs 8 more nvidia.com/gpu on flavor h100.",
        timeline=[{"source": "Workload", "type": "QuotaReserved", "status": "False",
                   "reason": "Pending", "message": "insufficient unused quota",
                   "time": "2026-01-01T10:00:00Z"}])
    client.force_login(world["member_a2"])
    html = client.get(f"/teams/team-a/jobs/{job.pk}/").content.decode()
    assert "Waiting for quota" in html and '<td id="job-position">3 ' in html
    assert 'data-type="QuotaReserved"' in html and "insufficient unused quota" in html
    yaml_text = html[html.index('id="manifest-yaml"'):]
    assert yaml_text.index("apiVersion: jobset.x-k8s.io/v1alpha2") < yaml_text.index("kind: ")
    assert "enableDNSHostnames: true" in yaml_text


def test_team_page_and_nav_link_to_the_jobs(client, world):
    client.force_login(world["member_a"])
    html = client.get("/teams/team-a/").content.decode()
    assert 'href="/teams/team-a/jobs/"' in html and 'href="/teams/team-a/jobs/new/"' in html
    assert 'href="/jobs/"' in html


def test_list_rows_json_is_what_the_script_redraws(client, world):
    job = make_job(world)
    Job.objects.filter(pk=job.pk).update(phase="Queued", reason="WaitingForQuota",
                                         queue_position=0, message="next")
    client.force_login(world["lead_a"])
    [row] = client.get("/teams/team-a/jobs/rows.json").json()["jobs"]
    assert row["id"] == job.pk and row["team"] == "team-a" and row["phase"] == "Queued"
    assert row["queue_position"] == 0 and row["can_cancel"] is True
    html = client.get("/teams/team-a/jobs/").content.decode()
    assert "js/job_list.js" in html
    assert 'data-rows-url="/teams/team-a/jobs/rows.json?page=1"' in html


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return len(queries)


@pytest.mark.parametrize("url", ["/jobs/", "/jobs/rows.json", "/teams/team-a/jobs/",
                                 "/teams/team-a/jobs/rows.json"])
def test_list_pages_run_a_constant_number_of_queries(client, world, url):
    client.force_login(world["lead_a"])
    for index in range(2):
        make_job(world, name=f"small-{index}", user="member_a" if index % 2 else "member_a2")
    small = _queries(client, url)
    for index in range(15):
        make_job(world, name=f"large-{index}", user="member_a" if index % 2 else "member_a2",
                 gpus_per_worker=1, workers=1)
    large = _queries(client, url)
    assert small == large
    assert Job.objects.count() == 17


def test_staff_see_jobs_in_the_admin_console(client, world, django_user_model):
    job = make_job(world)
    client.force_login(django_user_model.objects.create_superuser("root", password="pw-root-1"))
    html = client.get("/admin/portal/job/").content.decode()
    assert job.name in html
    assert client.get(f"/admin/portal/job/{job.pk}/change/").status_code == 200


def test_position_is_one_based_and_the_wait_is_shown_on_the_page_and_in_the_rows(client,
                                                                                 world):
    import datetime as dt

    from django.utils import timezone

    job = make_job(world)
    submitted = timezone.now() - dt.timedelta(minutes=12)
    Job.objects.filter(pk=job.pk).update(phase="Queued", reason="WaitingForQuota",
                                         queue_position=0, submitted_at=submitted)
    client.force_login(world["member_a"])
    html = client.get(f"/teams/team-a/jobs/{job.pk}/").content.decode()
    assert '<td id="job-position">1 <span class="muted">(1 = next)</span>' in html
    assert '<th>Waiting for</th><td id="job-waited">12 min</td>' in html
    [row] = client.get("/teams/team-a/jobs/rows.json").json()["jobs"]
    assert (row["queue_position"], row["queue_rank"]) == (0, 1)
    assert 12 * 60 <= row["wait_seconds"] < 13 * 60
    listing = client.get("/teams/team-a/jobs/").content.decode()
    assert '<td class="position">1</td>' in listing and '<td class="waited">12 min</td>' in listing

    # Admitted after 20 minutes: the wait stops there, and the position is gone.
    Job.objects.filter(pk=job.pk).update(phase="Admitted", queue_position=None,
                                         admitted_at=submitted + dt.timedelta(minutes=20))
    html = client.get(f"/teams/team-a/jobs/{job.pk}/").content.decode()
    assert '<th>Waited for admission</th><td id="job-waited">20 min</td>' in html
    assert '<td id="job-position">—</td>' in html


def test_403_and_404_pages_are_in_the_layout_with_the_reason_and_a_way_back(client, world):
    job = make_job(world)   # member_a's job
    client.force_login(world["member_a2"])
    refused = client.get(f"/teams/team-a/jobs/{job.pk}/cancel/")
    html = refused.content.decode()
    assert refused.status_code == 403
    assert 'class="mainnav"' in html and 'id="error-back"' in html
    assert "You may cancel only your own jobs" in html
    client.force_login(world["member_b"])
    missing = client.get(f"/teams/team-a/jobs/{job.pk}/")
    html = missing.content.decode()
    assert missing.status_code == 404
    assert 'class="mainnav"' in html and '<p id="error-message">No such job.</p>' in html
    assert 'href="/"' in html
