"""Gang jobs on the real control plane: Kueue's Workloads, the job controller's pods,
the scheduler's bindings to KWOK nodes, and what the portal explains from them.

Nothing here writes status by hand: Kueue creates and admits the Workloads, the
job/JobSet controllers create the pods, kube-scheduler binds them, KWOK marks them
Running, and (when a test annotates them, see ``finish``) Succeeded.
"""

import pytest

from portal.models import Job
from portal.tasks import reconcile_cluster_task
from queues.cluster import WORKLOAD_API_VERSION
from tests.integration.helpers import api_as, live_job, wait_for_job
from tests.real.conftest import condition, wait_until

pytestmark = pytest.mark.usefixtures("celery_worker_process")


@pytest.fixture
def flow(rworld, converged):
    """The world reconciled; every ClusterQueue Active."""
    reconcile_cluster_task.delay(rworld["cluster"].pk).get(timeout=60)
    converged(rworld["cluster"], timeout=60)
    admin = rworld["admin"]
    for team in ("team_a", "team_b"):
        wait_until(lambda slug=rworld[team].slug: (condition(
            admin.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", slug), "Active") or {}).get(
            "status") == "True", f"ClusterQueue {rworld[team].slug} Active")
    return rworld


def submit(world, user="member_a", team="team_a", **fields) -> int:
    body = {"team": world[team].slug, "name": "train", "image": "ghcr.io/acme/train:1.4",
            "command": ["torchrun", "train.py"], "workers": 2, "gpus_per_worker": 4,
            "flavor": world["h100"].name, "kind": "job"}
    body.update(fields)
    response = api_as(world[user]).post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["id"]


def refresh(world, job_id: int, predicate, what: str, user="member_a", timeout=60.0) -> Job:
    """Ask the worker to read the job from the cluster until ``predicate(job)`` holds."""
    client = api_as(world[user])

    def fresh():
        before = Job.objects.get(pk=job_id).status_synced_at
        assert client.post(f"/api/v1/jobs/{job_id}/refresh/").status_code == 202
        try:
            job = wait_for_job(job_id, lambda j: j.status_synced_at != before, "a fresh read",
                               timeout=20)
        except pytest.fail.Exception:
            return None
        return job if predicate(job) else None

    return wait_until(fresh, what, timeout=timeout, interval=0.5)


def pods_of(world, job: Job) -> list[dict]:
    return world["admin"].list("v1", "Pod", f"portal.gpu/job={job.pk}", job.team.slug)


def workload_of(world, job: Job) -> dict | None:
    for wl in world["admin"].list(WORKLOAD_API_VERSION, "Workload", "", job.team.slug):
        if any(ref.get("uid") == job.cluster_uid
               for ref in wl["metadata"].get("ownerReferences") or []):
            return wl
    return None


def running(world, job_id: int, workers: int, user="member_a") -> Job:
    """Wait until the job's pods are bound to KWOK nodes of the flavor and Running."""
    job = Job.objects.get(pk=job_id)

    def all_running():
        pods = pods_of(world, job)
        ok = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        return pods if len(ok) >= workers else None

    pods = wait_until(all_running, f"{workers} running pods of job {job.name}", timeout=90)
    for pod in pods:
        node = pod["spec"]["nodeName"]
        assert node.startswith("kwok-h100-") or node.startswith("kwok-mig-"), node
    return refresh(world, job_id, lambda j: j.phase == "Running", "phase Running", user=user)


def finish(world, job_id: int) -> None:
    """Let KWOK complete the job's pods (its pod-complete stage looks for this annotation)."""
    from harness.realcluster.controlplane import COMPLETE_ANNOTATION

    job = Job.objects.get(pk=job_id)
    for pod in pods_of(world, job):
        world["admin"].patch("v1", "Pod", pod["metadata"]["name"], job.team.slug,
                             {"metadata": {"annotations": {COMPLETE_ANNOTATION: "true"}}},
                             field_manager="realcluster-test")


@pytest.mark.parametrize("kind", ["job", "jobset"])
def test_a_gang_job_waits_for_quota_then_runs_and_succeeds(flow, kind):
    w = flow
    first = submit(w, name="first", kind=kind)           # 8 GPUs: the team's nominal quota
    job = wait_for_job(first, lambda j: j.cluster_uid, "created on the cluster", timeout=60)
    live = live_job(w["admin"], job)
    assert live["kind"] == ("Job" if kind == "job" else "JobSet")
    wait_until(lambda: workload_of(w, job), "Kueue to create the first job's Workload")
    running(w, first, 2)
    job = Job.objects.get(pk=first)
    assert job.admitted_flavor == w["h100"].name

    # 8 more GPUs: team-a can borrow only 4 (team-b lends at most 4): it waits.
    second = submit(w, name="second", kind=kind)
    job2 = wait_for_job(second, lambda j: j.cluster_uid, "created on the cluster", timeout=60)

    def pending():
        cond = condition(workload_of(w, job2), "QuotaReserved")
        return cond if cond and cond["status"] == "False" and cond.get("message") else None

    cond = wait_until(pending, "Kueue to report the second Workload pending")
    job2 = refresh(w, second, lambda j: j.phase == "Queued", "phase Queued")
    assert job2.reason == "WaitingForQuota", (job2.reason, job2.message, cond)
    assert "more nvidia.com/gpu on flavor" in job2.message, (job2.message, cond["message"])
    assert job2.queue_position == 0
    assert live_job(w["admin"], job2)["spec"]["suspend"] is True
    assert pods_of(w, job2) == []

    # The first finishes: its GPUs are free and Kueue admits the second.
    finish(w, first)
    job = refresh(w, first, lambda j: j.phase == "Succeeded", "the first job Succeeded")
    assert job.finished_at is not None
    running(w, second, 2)
    finish(w, second)
    job2 = refresh(w, second, lambda j: j.phase == "Succeeded", "the second job Succeeded")
    kinds = {(e["source"], e["type"]) for e in job2.timeline}
    assert {("Workload", "QuotaReserved"), ("Workload", "Admitted"),
            ("Workload", "Finished")} <= kinds


def test_cancel_deactivates_the_workload_then_deletes_the_job(flow):
    w = flow
    job_id = submit(w, name="long-run", workers=1)
    running(w, job_id, 1)
    job = Job.objects.get(pk=job_id)
    assert api_as(w["member_a"]).post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 202
    job = wait_for_job(job_id, lambda j: j.phase == "Cancelled", "Cancelled", timeout=90)
    assert job.deleted_at is not None
    assert live_job(w["admin"], job) is None
    wait_until(lambda: pods_of(w, job) == [], "the cancelled job's pods to be gone")


def test_a_higher_priority_job_preempts_within_the_cluster_queue(flow):
    w = flow
    low = submit(w, name="low", workers=2, gpus_per_worker=4)
    running(w, low, 2)
    # team-b fills what it lends, so team-a cannot borrow around the preemption.
    other = submit(w, user="member_b", team="team_b", name="b-fill", workers=2,
                   gpus_per_worker=4)
    running(w, other, 2, user="member_b")
    high = submit(w, name="high", workers=2, gpus_per_worker=4,
                  priority=w["high"].name)
    low_job = refresh(w, low, lambda j: j.phase == "Queued" and j.reason == "Preempted",
                      "the low-priority job preempted and queued again", timeout=90)
    assert low_job.preemptions == 1
    assert "prioritization in the ClusterQueue" in low_job.message, low_job.message
    assert low_job.last_preemptor
    running(w, high, 2)
    for job_id in (high, other):
        finish(w, job_id)


def test_a_namespace_resourcequota_refusing_pods_is_explained_as_such(flow):
    w = flow
    slug = w["team_a"].slug
    # Someone else's ResourceQuota in the team namespace: no pods at all.
    w["admin"].create({"apiVersion": "v1", "kind": "ResourceQuota",
                       "metadata": {"name": "freeze", "namespace": slug},
                       "spec": {"hard": {"pods": "0"}}})
    wait_until(lambda: ((w["admin"].get("v1", "ResourceQuota", "freeze", slug) or {})
                        .get("status") or {}).get("hard"), "the freeze quota's status")
    job_id = submit(w, name="frozen", workers=1)
    job = refresh(w, job_id, lambda j: j.reason == "NamespaceQuotaExceeded",
                  "the job explained as refused by the namespace quota", timeout=90)
    assert job.phase == "Admitted"
    assert "ResourceQuota" in job.message
    assert "waiting for quota" not in job.message.lower()
    w["admin"].delete("v1", "ResourceQuota", "freeze", slug)
    running(w, job_id, 1)
    finish(w, job_id)


def test_a_lender_reclaims_its_quota_within_the_cohort(flow):
    w = flow
    # team-a runs 12 GPUs: its 8 plus the 4 team-b lends while idle.
    borrower = submit(w, name="borrower", workers=3, gpus_per_worker=4)
    running(w, borrower, 3)
    # team-b wants its 8 back: Kueue preempts the borrower to reclaim them.
    lender = submit(w, user="member_b", team="team_b", name="lender", workers=2,
                    gpus_per_worker=4)
    job = refresh(w, borrower, lambda j: j.phase == "Queued" and j.reason == "Preempted",
                  "the borrower preempted by reclamation", timeout=90)
    assert "cohort" in job.message.lower(), job.message
    running(w, lender, 2, user="member_b")
    finish(w, lender)
