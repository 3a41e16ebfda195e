"""A worker SIGKILLed while a job create or cancel is in flight: after a new worker
starts, the periodic ``portal.jobs_sync`` re-drives the job to convergence and nothing
is duplicated on the cluster (one job object, one create, one deactivation).

Real parts only: separate ``celery worker`` processes (``start_worker``), Redis, the
Kubernetes API emulator over HTTP; the emulator holds one request (a delay fault) so
the worker can be killed while it waits for the answer.
"""

import time

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from harness.sim import kueue_objects as kueue
from portal.models import Job
from portal.services.reconcile import cluster_reconcile
from portal.tasks import jobs_sync_task
from queues.cluster import KubernetesCluster
from tests.integration.jobs.conftest import build_world, job_payload

JOB_PATH = r"/apis/batch/v1/namespaces/team-a/jobs/train$"


@pytest.fixture
def flow(transactional_db, kube_emulator):
    world = build_world()
    result = cluster_reconcile(cluster_id=world["cluster"].pk)
    assert result is not None and not result.failed
    world["server"] = kube_emulator
    world["port"] = KubernetesCluster(kubeconfig=settings.KUBECONFIG)
    return world


def wait_until(predicate, what: str, timeout: float = 45.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def jobs_on_cluster(port) -> list[dict]:
    return port.list("batch/v1", "Job", "app.kubernetes.io/managed-by=gpu-quota-portal",
                     namespace="team-a")


def job_writes(server) -> dict:
    """Write requests on batch/v1 Jobs by verb (reads left out)."""
    counts = server.counters.snapshot()["by_resource"].get("batch/jobs", {})
    return {verb: n for verb, n in counts.items() if verb in ("post", "put", "patch", "delete")}


def submit(flow) -> int:
    client = APIClient()
    client.force_authenticate(flow["member_a"])
    response = client.post("/api/v1/jobs/", job_payload(name="train"), format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def test_worker_killed_before_the_create_landed_sync_creates_the_job_once(flow, start_worker):
    server, port = flow["server"], flow["port"]
    first = start_worker()
    held = server.faults.add("GET", JOB_PATH, delay=3, count=1)  # job_create's first read
    job_id = submit(flow)
    wait_until(lambda: held.hits == 1, "the worker to read the job before creating it")
    first.kill()
    time.sleep(3.5)  # the held read is answered to nobody
    assert jobs_on_cluster(port) == []

    start_worker()
    jobs_sync_task.delay().get(timeout=30)
    job = wait_until(lambda: Job.objects.filter(pk=job_id).exclude(cluster_uid="").first(),
                     "the job to be created by the re-drive")
    (live,) = jobs_on_cluster(port)
    assert live["metadata"]["uid"] == job.cluster_uid
    assert live["spec"]["suspend"] is True
    assert job.phase == "Submitted" and job.status_synced_at is not None
    assert job_writes(server)["patch"] == 1  # one server-side apply: created once
    # A second sync writes nothing more.
    writes = dict(job_writes(server))
    jobs_sync_task.delay().get(timeout=30)
    assert job_writes(server) == writes
    assert len(jobs_on_cluster(port)) == 1


def test_worker_killed_while_the_create_was_in_flight_sync_adopts_the_job(flow, start_worker):
    server, port = flow["server"], flow["port"]
    first = start_worker()
    held = server.faults.add("PATCH", JOB_PATH, delay=3, count=1)  # the apply itself
    job_id = submit(flow)
    wait_until(lambda: held.hits == 1, "the worker to send the apply")
    first.kill()
    wait_until(lambda: jobs_on_cluster(port), "the in-flight apply to land")
    assert Job.objects.get(pk=job_id).cluster_uid == ""  # the worker died before recording

    start_worker()
    jobs_sync_task.delay().get(timeout=30)
    (live,) = jobs_on_cluster(port)
    job = Job.objects.get(pk=job_id)
    assert job.cluster_uid == live["metadata"]["uid"]
    assert job.status_synced_at is not None
    assert job_writes(server).get("patch", 0) == 1  # applied once, by the killed worker


def test_worker_killed_mid_cancel_sync_finishes_the_cancel(flow, start_worker):
    server, port = flow["server"], flow["port"]
    worker = start_worker()
    job_id = submit(flow)
    job = wait_until(lambda: Job.objects.filter(pk=job_id).exclude(cluster_uid="").first(),
                     "the job to be created")
    workload = kueue.create_workload(port, port.get("batch/v1", "Job", "train", "team-a"))
    held = server.faults.add("PATCH", r"/workloads/[^/]+$", delay=3, count=1)  # deactivate
    client = APIClient()
    client.force_authenticate(flow["member_a"])
    assert client.post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 202
    wait_until(lambda: held.hits == 1, "the worker to deactivate the Workload")
    worker.kill()
    time.sleep(3.5)
    assert jobs_on_cluster(port)  # not deleted yet

    start_worker()
    jobs_sync_task.delay().get(timeout=30)
    job = wait_until(lambda: Job.objects.filter(pk=job_id, deleted_at__isnull=False).first(),
                     "the re-driven cancel")
    assert job.phase == "Cancelled"
    assert jobs_on_cluster(port) == []
    wl = port.get(workload["apiVersion"], "Workload", workload["metadata"]["name"], "team-a")
    assert wl is None or wl["spec"]["active"] is False
