"""Submit -> a real Celery worker -> the emulator over HTTP -> status back, per workload kind.

Nothing is faked: the API is called over the Django test client, the worker is
a separate ``celery worker`` process running ``portal.job_create`` /
``portal.job_sync`` / ``portal.job_cancel`` through
``queues.cluster.KubernetesCluster`` against the Kubernetes API emulator. No
Kueue runs against the emulator, so the test writes what Kueue's controllers
would write (``queues.sim.kueue_objects``) and checks what the API and the
pages then show.
"""

import datetime as dt

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from portal.models import Job
from portal.services.reconcile import cluster_reconcile
from queues.cluster import KubernetesCluster
from queues.sim import kueue_objects as kueue
from tests.integration.helpers import api_as, live_job, wait_for_job
from tests.integration.jobs.conftest import build_world, job_payload

pytestmark = pytest.mark.usefixtures("celery_worker_process")

MANAGED = {"app.kubernetes.io/managed-by": "gpu-quota-portal"}


@pytest.fixture
def flow(transactional_db, kube_emulator):
    """The world, reconciled onto the emulator (namespaces, queues), and its port."""
    world = build_world()
    result = cluster_reconcile(cluster_id=world["cluster"].pk)
    assert result is not None and not result.failed
    world["server"] = kube_emulator
    world["port"] = KubernetesCluster(kubeconfig=settings.KUBECONFIG)
    return world


def page_as(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def refresh(client: APIClient, job_id: int, phase: str) -> Job:
    """POST .../refresh/ and wait until the worker has read the cluster into ``phase``."""
    before = Job.objects.get(pk=job_id).status_synced_at
    response = client.post(f"/api/v1/jobs/{job_id}/refresh/")
    assert response.status_code == 202
    return wait_for_job(job_id, lambda j: j.status_synced_at != before and j.phase == phase,
                        f"a fresh read with phase {phase}")


def submit(client: APIClient, **overrides) -> int:
    response = client.post("/api/v1/jobs/", job_payload(**overrides), format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["phase"] == "Submitted"
    return response.json()["id"]


def created(job_id: int) -> Job:
    """Wait until the worker created the job on the cluster (and read it once)."""
    return wait_for_job(job_id, lambda j: j.cluster_uid and j.status_synced_at, "created")


@pytest.mark.parametrize("kind", ["job", "jobset"])
def test_a_job_goes_queued_admitted_running_preempted_and_succeeded(flow, kind):
    port, member = flow["port"], flow["member_a"]
    client = api_as(member)
    pages = page_as(member)
    # Another job of the team, higher priority: it is ahead in the queue.
    ahead_id = submit(client, name="urgent", kind=kind, workers=1, gpus_per_worker=1,
                      priority="high")
    job_id = submit(client, name="train", kind=kind)

    # The suspended job exists with the right labels.
    job = created(job_id)
    assert job.phase == "Submitted" and job.reason == "WaitingForKueue"
    live = live_job(port, job)
    assert live["kind"] == ("Job" if kind == "job" else "JobSet")
    assert live["spec"]["suspend"] is True
    labels = live["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "team-a"
    assert labels["portal.gpu/team"] == "team-a"
    assert labels["portal.gpu/job"] == str(job_id)
    assert labels.items() >= MANAGED.items()
    assert job.cluster_uid == live["metadata"]["uid"]

    # Kueue creates both Workloads; ours waits for quota behind the urgent one.
    ahead_live = live_job(port, created(ahead_id))
    kueue.create_workload(port, ahead_live, priority=1000)
    workload = kueue.create_workload(port, live, priority=0)
    kueue.set_pending(port, workload, reason="Pending",
                      message=kueue.insufficient_quota_message("nvidia.com/gpu", "h100", 8))
    job = refresh(client, job_id, "Queued")
    assert job.reason == "WaitingForQuota"
    assert "8 more nvidia.com/gpu on flavor h100" in job.message
    assert job.queue_position == 1
    body = client.get(f"/api/v1/jobs/{job_id}/").json()
    assert (body["phase"], body["reason"], body["queue_position"]) == ("Queued",
                                                                       "WaitingForQuota", 1)
    html = pages.get(f"/teams/team-a/jobs/{job_id}/").content.decode()
    assert 'id="job-phase" class="badge phase-queued">Queued<' in html
    assert "8 more nvidia.com/gpu on flavor h100" in html
    assert '<td id="job-position">2 ' in html
    [row] = [r for r in pages.get("/teams/team-a/jobs/rows.json").json()["jobs"]
             if r["id"] == job_id]
    assert (row["phase"], row["queue_position"]) == ("Queued", 1)
    assert "8 more nvidia.com/gpu" in row["message"]

    # Admitted on h100.
    kueue.admit(port, workload, cluster_queue="team-a", flavor="h100")
    job = refresh(client, job_id, "Admitted")
    assert job.admitted_flavor == "h100" and job.admitted_at is not None
    assert job.queue_position is None
    assert "Admitted" in pages.get(f"/teams/team-a/jobs/{job_id}/").content.decode()

    # Running: unsuspended with the flavor's node selector, pods active and ready.
    kueue.unsuspend_job(port, live, node_selector={"nvidia.com/gpu.product": "H100"})
    kueue.set_job_status(port, live, active=2, ready=2)
    kueue.set_pods_ready(port, workload)
    job = refresh(client, job_id, "Running")
    assert job.started_at is not None
    assert client.get(f"/api/v1/jobs/{job_id}/").json()["phase"] == "Running"

    # Preempted and requeued: counted, with its preemptor.
    # One instant for the conditions and the event: interpret_kueue counts distinct
    # preemption instants, and a second between them would count as two preemptions.
    kueue.preempt(port, workload, live, preemptor_uid="wl-uid-9", preemptor_job_uid="job-uid-9",
                  reason="InCohortReclamation", now=timezone.now())
    job = refresh(client, job_id, "Queued")
    assert job.reason == "Preempted"
    assert job.preemptions == 1
    assert job.last_preemptor == "job-uid-9"
    assert "reclamation within the cohort" in job.message
    body = client.get(f"/api/v1/jobs/{job_id}/").json()
    assert body["preemptions"] == 1 and body["preemption_loop"] is False

    # Admitted again, runs, and succeeds; the preemption stays counted.
    kueue.admit(port, workload, cluster_queue="team-a", flavor="h100")
    kueue.unsuspend_job(port, live)
    kueue.set_job_status(port, live, active=2, ready=2)
    job = refresh(client, job_id, "Running")
    kueue.set_job_status(port, live, active=0, ready=0, succeeded=2, complete=True)
    kueue.finish(port, workload, succeeded=True)
    job = refresh(client, job_id, "Succeeded")
    assert job.finished_at is not None and job.preemptions == 1
    body = client.get(f"/api/v1/jobs/{job_id}/").json()
    assert body["phase"] == "Succeeded" and body["finished_at"] is not None
    kinds = {(e["source"], e["type"]) for e in body["timeline"]}
    assert {("Workload", "QuotaReserved"), ("Workload", "Admitted"), ("Workload", "Preempted"),
            ("Workload", "Finished"), ("Event", "Normal")} <= kinds
    html = pages.get(f"/teams/team-a/jobs/{job_id}/").content.decode()
    assert "Succeeded" in html and 'data-type="Preempted"' in html
    assert "suspend: true" in html  # the rendered manifest as YAML


def test_cancel_deactivates_the_workload_before_deleting_the_job(flow):
    port, server, member = flow["port"], flow["server"], flow["member_a"]
    client = api_as(member)
    job_id = submit(client, name="long-run")
    job = created(job_id)
    live = live_job(port, job)
    workload = kueue.create_workload(port, live)
    kueue.admit(port, workload, cluster_queue="team-a", flavor="h100")
    kueue.unsuspend_job(port, live)
    kueue.set_job_status(port, live, active=2, ready=2)
    refresh(client, job_id, "Running")

    # Deleting the job fails until we say so: what happened before the delete is visible.
    path = r"/apis/batch/v1/namespaces/team-a/jobs/long-run$"
    server.faults.add("DELETE", path, 503, count=None, message="try later")
    server.counters.reset()
    response = client.post(f"/api/v1/jobs/{job_id}/cancel/")
    assert response.status_code == 202
    wait_for_job(job_id, lambda j: "try later" in j.last_error, "a failed delete")
    wl = kueue.get_workload(port, workload)
    assert wl["spec"]["active"] is False          # deactivated first ...
    assert live_job(port, job) is not None        # ... while the job still exists
    counts = server.counters.snapshot()["by_resource"]
    assert counts["kueue.x-k8s.io/workloads"]["patch"] == 1
    assert counts["batch/jobs"]["delete"] >= 1
    assert Job.objects.get(pk=job_id).phase == "Running"

    # The task retries with backoff; once the API accepts the delete the job is gone.
    server.faults.clear()
    job = wait_for_job(job_id, lambda j: j.phase == "Cancelled", "Cancelled", timeout=90)
    assert job.deleted_at is not None and job.finished_at is not None
    assert live_job(port, job) is None
    assert kueue.get_workload(port, workload)["spec"]["active"] is False
    # The Workload was deactivated once: the retry saw spec.active false already.
    assert server.counters.snapshot()["by_resource"]["kueue.x-k8s.io/workloads"]["patch"] == 1
    assert [e for e in job.timeline if e["source"] == "Portal"][0]["message"].startswith(
        "Workload deactivated (spec.active: false), then the job deleted")
    body = client.get(f"/api/v1/jobs/{job_id}/").json()
    assert body["phase"] == "Cancelled"
    html = page_as(member).get(f"/teams/team-a/jobs/{job_id}/").content.decode()
    assert "Cancelled" in html and 'id="job-cancel-link"' not in html


def test_a_preemption_loop_and_a_namespace_quota_refusal_are_explained(flow):
    port, client = flow["port"], api_as(flow["member_a"])
    job_id = submit(client, name="flaky")
    job = created(job_id)
    live = live_job(port, job)
    workload = kueue.create_workload(port, live)
    now = timezone.now()
    for minutes_ago in (50, 30, 10):
        at = now - dt.timedelta(minutes=minutes_ago)
        kueue.admit(port, workload, cluster_queue="team-a", flavor="h100", now=at)
        kueue.preempt(port, workload, live, preemptor_job_uid="job-uid-7",
                      now=at + dt.timedelta(minutes=1))
        refresh(client, job_id, "Queued")   # each read keeps the preemption it saw
    job = Job.objects.get(pk=job_id)
    assert job.preemptions == 3
    assert job.preemption_loop is True
    assert "preemption loop" in job.message
    html = page_as(flow["member_a"]).get("/teams/team-a/jobs/").content.decode()
    assert "preemption loop" in html

    # Admitted, but the namespace ResourceQuota refuses the pods: not "waiting for quota".
    kueue.admit(port, workload, cluster_queue="team-a", flavor="h100")
    kueue.unsuspend_job(port, live)
    kueue.record_event(port, live, reason="FailedCreate", type="Warning",
                       component="job-controller",
                       message=kueue.quota_refused_message("flaky-0-abcde", "gpu-quota",
                                                           "requests.nvidia.com/gpu", 4, 16, 16))
    job = refresh(client, job_id, "Admitted")
    assert job.reason == "NamespaceQuotaExceeded"
    assert "ResourceQuota" in job.message and "Waiting for quota" not in job.message


def test_the_periodic_sync_reads_every_live_job_and_redrives_a_lost_cancel(flow):
    from portal.tasks import jobs_sync_task

    port, client = flow["port"], api_as(flow["member_a"])
    waiting_id = submit(client, name="waiting")
    lost_id = submit(client, name="lost-cancel")
    waiting, lost = created(waiting_id), created(lost_id)
    workload = kueue.create_workload(port, live_job(port, waiting))
    kueue.set_pending(port, workload, reason="ExceedsMaxQuota",
                      message=kueue.exceeds_maximum_message("nvidia.com/gpu", "h100", 8, 4))
    # A cancel whose task message was lost: only the row says it was asked for.
    Job.objects.filter(pk=lost_id).update(cancel_requested_at=timezone.now())

    result = jobs_sync_task.delay().get(timeout=60)
    assert result == {"synced": 1, "cancelled": 1, "failed": 0}
    waiting = Job.objects.get(pk=waiting_id)
    assert (waiting.phase, waiting.reason) == ("Queued", "ExceedsMaximum")
    assert "can never start as it is" in waiting.message
    lost = Job.objects.get(pk=lost_id)
    assert lost.phase == "Cancelled" and live_job(port, lost) is None
    # Nothing left to do: the next run reads only the waiting job, and writes nothing.
    flow["server"].counters.reset()
    assert jobs_sync_task.delay().get(timeout=60) == {"synced": 1, "cancelled": 0, "failed": 0}
    counts = flow["server"].counters.snapshot()
    assert counts["writes"] == 0
    # Five reads for the namespace: the jobs, the Workloads, events about jobs and about
    # Workloads (one list each), the LocalQueue's pending workloads.
    assert {verb: n for verb, n in counts["by_verb"].items() if verb != "discovery"} == {
        "get": 1, "list": 4}
