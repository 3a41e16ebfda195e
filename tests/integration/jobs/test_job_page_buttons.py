"""The job page's buttons, clicked in Chromium, acting through a real worker.

(In the integration tier, whose session worker consumes every task published
after it starts; in tests/e2e such a worker would also pick up the tasks of the
browser tests that expect none to run.)

"Refresh from the cluster" and "Cancel job" once posted to the REST API (the
router's ``job-refresh``/``job-cancel`` URL names shadowed the pages'): the user
landed on raw JSON and nothing happened. Here a member clicks both on a job the
worker created on the API emulator, and the test checks the page they land on,
the job row the worker writes and the object on the cluster.
"""

import pytest
from django.conf import settings
from playwright.sync_api import expect

from portal.models import Job
from portal.services.reconcile import cluster_reconcile
from queues.cluster import KubernetesCluster
from queues.sim import kueue_objects as kueue
from tests.e2e.pages.auth import LoginPage
from tests.integration.helpers import api_as, live_job, wait_for_job
from tests.integration.jobs.conftest import build_world, job_payload

pytestmark = pytest.mark.usefixtures("celery_worker_process")


@pytest.fixture
def created_job(transactional_db, kube_emulator):
    """team-a's job ``train-llm`` created by the worker on the emulator, as Kueue
    left it: a Workload admitted on h100."""
    world = build_world()
    result = cluster_reconcile(cluster_id=world["cluster"].pk)
    assert result is not None and not result.failed
    response = api_as(world["member_a"]).post("/api/v1/jobs/", job_payload(), format="json")
    assert response.status_code == 201, response.json()
    job = wait_for_job(response.json()["id"], lambda j: j.cluster_uid and j.status_synced_at,
                       "created on the cluster")
    port = KubernetesCluster(kubeconfig=settings.KUBECONFIG)
    live = live_job(port, job)
    workload = kueue.create_workload(port, live, priority=0)
    kueue.admit(port, workload, cluster_queue="team-a", flavor="h100")
    return {"job": job, "port": port, "member": world["member_a"]}


def test_refresh_then_cancel_with_confirmation_from_the_job_page(live_server, page,
                                                                 created_job):
    job, port = created_job["job"], created_job["port"]
    job_url = f"{live_server.url}/teams/team-a/jobs/{job.pk}/"
    LoginPage(page, live_server.url).open().log_in("member_a", "pw-member_a-123")
    page.goto(job_url)
    expect(page.locator("#job-phase")).to_have_text("Submitted")

    # Refresh: back on the job page (not the API's JSON), and the worker reads the
    # admission Kueue wrote.
    page.click("#job-refresh-form button")
    assert page.url == job_url
    expect(page.locator(".messages")).to_contain_text("Refreshing train-llm from the cluster.")
    job = wait_for_job(job.pk, lambda j: j.phase == "Admitted", "Admitted after the refresh")
    assert job.admitted_flavor == "h100"
    page.reload()
    expect(page.locator("#job-phase")).to_have_text("Admitted")

    # Cancel asks first; "No, keep it" changes nothing.
    page.click("#job-cancel-link")
    assert page.url == f"{job_url}cancel/"
    expect(page.locator("#cancel-title")).to_have_text("Cancel job train-llm?")
    page.click("#job-cancel-keep")
    assert page.url == job_url
    assert Job.objects.get(pk=job.pk).cancel_requested_at is None
    assert live_job(port, job) is not None

    # "Yes, cancel": the job page says so, and the worker deactivates and deletes it.
    page.click("#job-cancel-link")
    page.click("#job-cancel-confirm-form button")
    assert page.url == job_url
    expect(page.locator(".messages")).to_contain_text("Cancelling job train-llm")
    job = wait_for_job(job.pk, lambda j: j.phase == "Cancelled", "Cancelled", timeout=60)
    assert live_job(port, job) is None
    page.reload()
    expect(page.locator("#job-phase")).to_have_text("Cancelled")
    expect(page.locator("#job-cancel-link")).to_have_count(0)


def test_the_confirmation_page_is_refused_to_a_member_for_a_teammates_job(live_server, page,
                                                                           created_job):
    job = created_job["job"]
    LoginPage(page, live_server.url).open().log_in("member_a2", "pw-member_a2-123")
    response = page.goto(f"{live_server.url}/teams/team-a/jobs/{job.pk}/cancel/")
    assert response.status == 403
    assert Job.objects.get(pk=job.pk).cancel_requested_at is None
