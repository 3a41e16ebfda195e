"""Faults on the real control plane: the apiserver stopped and restarted while the worker
reconciles, and a worker SIGKILLed while its request hangs on a frozen apiserver.

A frozen apiserver (SIGSTOP) holds every request the worker sends, so the fault
lands mid-reconcile or mid-apply deterministically; SIGCONT (or a restart) lets it
answer again. Afterwards every grant and job converges and nothing is duplicated.
"""

import signal
import time

from portal.models import Job
from portal.services.quota import quota_request_approve, quota_request_create
from portal.tasks import jobs_sync_task, reconcile_cluster_task
from queues.render.labels import managed_selector
from tests.integration.helpers import api_as
from tests.real.conftest import KUEUE, wait_until


def approve(world, nominal: int):
    request = quota_request_create(
        actor=world["staff"], team=world["team_a"], flavor=world["h100"], nominal_gpus=nominal,
        justification="fault test")
    return quota_request_approve(actor=world["staff"], request=request)


def gpu_nominal(world) -> str | None:
    cq = world["admin"].get(KUEUE, "ClusterQueue", world["team_a"].slug)
    if cq is None:
        return None
    for group in cq["spec"]["resourceGroups"]:
        for flavor in group["flavors"]:
            for resource in flavor["resources"]:
                if resource["name"] == "nvidia.com/gpu":
                    return str(resource["nominalQuota"])
    return None


def test_apiserver_stopped_and_restarted_mid_reconcile_converges(rworld, start_worker,
                                                                 converged):
    w, plane = rworld, rworld["plane"]
    start_worker(KUBE_REQUEST_TIMEOUT="5")
    plane.send_signal("kube-apiserver", signal.SIGSTOP)
    try:
        approve(w, nominal=4)   # on commit: the worker's reconcile hangs on its first request
        time.sleep(2)
    finally:
        plane.stop("kube-apiserver", timeout=1)   # SIGTERM is not handled while stopped: KILL
    plane.restart_apiserver()
    # The retry (with backoff) or the next resync finishes the job.
    reconcile_cluster_task.delay(w["cluster"].pk)
    cluster = converged(w["cluster"], timeout=180)
    assert cluster.last_error == ""
    wait_until(lambda: gpu_nominal(w) == "4", "the new quota on the ClusterQueue")
    queues = [cq for cq in w["admin"].list(KUEUE, "ClusterQueue", managed_selector())
              if w["n"] in cq["metadata"]["name"]]
    assert sorted(cq["metadata"]["name"] for cq in queues) == sorted(
        [w["team_a"].slug, w["team_b"].slug])


def test_worker_killed_mid_apply_the_job_is_created_once(rworld, start_worker, converged):
    w, plane = rworld, rworld["plane"]
    start_worker()
    reconcile_cluster_task.delay(w["cluster"].pk).get(timeout=60)
    converged(w["cluster"], timeout=60)
    first = start_worker()
    plane.send_signal("kube-apiserver", signal.SIGSTOP)
    try:
        response = api_as(w["member_a"]).post("/api/v1/jobs/", {
            "team": w["team_a"].slug, "name": "train", "image": "ghcr.io/acme/train:1.4",
            "command": ["python", "train.py"], "workers": 1, "gpus_per_worker": 4,
            "flavor": w["h100"].name, "kind": "job"}, format="json")
        assert response.status_code == 201, response.content
        job_id = response.json()["id"]
        time.sleep(2)            # the worker's create is in flight, held by the frozen server
        first.kill()
    finally:
        plane.send_signal("kube-apiserver", signal.SIGCONT)
    start_worker()
    jobs_sync_task.delay().get(timeout=60)
    job = wait_until(lambda: Job.objects.filter(pk=job_id).exclude(cluster_uid="").first(),
                     "the job created by the re-drive", timeout=90)
    live = w["admin"].list("batch/v1", "Job", f"portal.gpu/job={job_id}", w["team_a"].slug)
    assert [j["metadata"]["uid"] for j in live] == [job.cluster_uid]
    # Not asserted here: Kueue's Workload for it. After the previous test restarted the
    # apiserver, Kueue v0.17.0 created no Workload for new Jobs within 3 minutes in this
    # setup (seen twice, not diagnosed yet; see README).
