"""A member submits a gang job through the form and sees it in the team's job list."""

import pytest
from playwright.sync_api import expect

from portal.models import Job
from tests.e2e.pages.auth import LoginPage
from tests.e2e.pages.jobs import JobFormPage, JobListPage
from tests.factories import (
    PASSWORD,
    make_cluster,
    make_cohort,
    make_flavor,
    make_grant,
    make_team,
    make_user,
)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("unconsumed_queue")   # the job stays Submitted: no worker acts
def test_member_submits_a_job_and_sees_it_in_the_list(live_server, page):
    cluster = make_cluster(name="gpu-east")
    flavor = make_flavor(cluster=cluster, name="a100", physical_gpus=16, gpu_model="A100-80GB",
                         cpu_per_gpu="8", memory_per_gpu="64Gi")
    team = make_team(cluster=cluster, slug="vision", name="Vision",
                     cohort=make_cohort(cluster=cluster, name="research"))
    make_grant(team=team, flavor=flavor, nominal_gpus=8)
    make_user("max", team=team, role="member")

    LoginPage(page, live_server.url).open().log_in("max", PASSWORD)
    page.click(".mainnav >> text=Jobs")
    page.click('a.submit-to:has-text("vision")')
    form = JobFormPage(page)
    # Live validation: a fractional GPU count is refused next to its field while typing.
    form.fill(name="detector", image="ghcr.io/vision/train:2.0", command="python train.py",
              workers="2", gpus_per_worker="1.5")
    form.expect_live_error("gpus_per_worker", "'1.5' is not a whole number.")
    # Too big for the team: 2 x 8 > the 8 GPUs it can ever be admitted.
    form.fill(gpus_per_worker="8")
    assert form.expect_live_error(
        "gpus_per_worker", "needs 16 nvidia.com/gpu on a100; the team can be admitted at most 8"
    ) == "needs 16 nvidia.com/gpu on a100; the team can be admitted at most 8"
    form.fill(gpus_per_worker="4")
    # (a locator assertion: wait_for_function's string predicate is an eval, which the
    # page's Content-Security-Policy refuses)
    expect(page.locator("#job-form")).to_have_attribute("data-valid", "true")
    assert "8 nvidia.com/gpu in total" in form.summary
    assert Job.objects.count() == 0   # validation wrote nothing

    landed = form.submit()   # on the new job's page, with the confirmation
    assert any("Job detector submitted" in m for m in landed.messages)
    job = Job.objects.get()
    assert page.url.endswith(f"/teams/vision/jobs/{job.pk}/")
    page.click("#job-title a")   # the team's job list
    listing = JobListPage(page)
    assert listing.names() == ["detector"]
    assert listing.row(job.pk).locator("td.phase").inner_text().startswith("Submitted")

    # The list refreshes itself: a status read by the worker shows up without a reload.
    Job.objects.filter(pk=job.pk).update(
        phase="Queued", reason="WaitingForQuota", queue_position=3,
        message="Waiting for quota: It needs 8 more nvidia.com/gpu on flavor a100.")
    JobListPage(page).wait_for_phase(job.pk, "Queued")
    row = listing.row(job.pk)
    assert row.locator("td.position").inner_text() == "4"   # 1-based: 3 ahead of it
    assert row.locator("td.waited").inner_text().endswith(" s")   # drawn by the script
    assert "8 more nvidia.com/gpu" in row.locator("td.reason").inner_text()
