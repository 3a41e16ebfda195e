"""A finished job's name can be reused: the new job is accepted, and its create first
deletes the finished namesake still on the cluster (a Succeeded Job stays there)."""

import pytest
from django.conf import settings
from django.utils import timezone

from portal.models import Job
from portal.services.jobs import job_create
from portal.services.reconcile import cluster_reconcile
from queues.cluster import KubernetesCluster
from queues.errors import TransientError
from tests.integration.helpers import api_as, live_job
from tests.integration.jobs.conftest import build_world, job_payload


@pytest.fixture
def flow(transactional_db, kube_emulator, unconsumed_queue):
    world = build_world()
    result = cluster_reconcile(cluster_id=world["cluster"].pk)
    assert result is not None and not result.failed
    world["port"] = KubernetesCluster(kubeconfig=settings.KUBECONFIG)
    return world


def _submit(client, **overrides):
    return client.post("/api/v1/jobs/", job_payload(**overrides), format="json")


@pytest.mark.parametrize("final", ["Succeeded", "Failed", "Cancelled"])
def test_a_finished_jobs_name_is_reused(flow, final):
    port, client = flow["port"], api_as(flow["member_a"])
    first = _submit(client, name="train")
    assert first.status_code == 201, first.json()
    first_id = first.json()["id"]
    assert job_create(job_id=first_id, port=port) == "created"
    # while it is live the name is taken
    taken = _submit(client, name="train")
    assert taken.status_code == 400 and "already has a job named 'train'" in taken.json()["name"][0]

    Job.objects.filter(pk=first_id).update(phase=final, finished_at=timezone.now())
    second = _submit(client, name="train")
    assert second.status_code == 201, second.json()
    second_id = second.json()["id"]

    # The finished namesake is still on the cluster: deleted first, the create retried.
    with pytest.raises(TransientError, match=f"deleting finished job {first_id} named 'train'"):
        job_create(job_id=second_id, port=port)
    assert Job.objects.get(pk=first_id).deleted_at is not None
    assert "deleting finished job" in Job.objects.get(pk=second_id).last_error
    assert job_create(job_id=second_id, port=port) == "created"
    live = live_job(port, Job.objects.get(pk=second_id))
    assert live["metadata"]["labels"]["portal.gpu/job"] == str(second_id)
    assert Job.objects.get(pk=second_id).last_error == ""
    # the first job's record is kept, final
    assert Job.objects.get(pk=first_id).phase == final
