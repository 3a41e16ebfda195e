"""A job submitted just after its quota is approved, before the reconcile has made the
team's namespace, waits (Submitted, "waiting for the team's queue to be set up") and is
created once the namespace exists; it never fails for good ("namespaces not found")."""

import pytest
from django.conf import settings

from portal.models import Job
from portal.services.reconcile import cluster_reconcile
from portal.tasks import jobs_sync_task
from queues.cluster import KubernetesCluster
from tests.integration.helpers import api_as, live_job, wait_for_job
from tests.integration.jobs.conftest import build_world, job_payload

pytestmark = pytest.mark.usefixtures("celery_worker_process")


def test_a_job_before_its_namespace_waits_then_is_created(transactional_db, kube_emulator):
    world = build_world()   # quota granted, nothing reconciled onto the cluster yet
    port = KubernetesCluster(kubeconfig=settings.KUBECONFIG)
    assert port.get("v1", "Namespace", "team-a") is None
    response = api_as(world["member_a"]).post("/api/v1/jobs/", job_payload(), format="json")
    assert response.status_code == 201
    job = wait_for_job(response.json()["id"], lambda j: j.reason == "WaitingForNamespace",
                       "waiting for its namespace")
    assert job.phase == "Submitted" and job.finished_at is None and not job.cluster_uid
    assert "Waiting for the team's queue to be set up on the cluster" in job.message
    assert "team-a" in job.message
    body = api_as(world["member_a"]).get(f"/api/v1/jobs/{job.pk}/").json()
    assert (body["phase"], body["reason"]) == ("Submitted", "WaitingForNamespace")

    # The reconcile makes the namespace and queues; the next sync creates the job.
    result = cluster_reconcile(cluster_id=world["cluster"].pk)
    assert result is not None and not result.failed
    jobs_sync_task.delay().get(timeout=60)
    job = wait_for_job(job.pk, lambda j: bool(j.cluster_uid), "created after the reconcile")
    assert job.phase == "Submitted" and job.reason != "WaitingForNamespace"
    assert live_job(port, job)["metadata"]["uid"] == job.cluster_uid
    assert Job.objects.filter(phase="Failed").count() == 0
