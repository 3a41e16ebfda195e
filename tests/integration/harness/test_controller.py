"""The simulated Kueue/Volcano controllers (``harness.sim.controller``) against the API emulator.

Official kubernetes client over real loopback HTTP; the portal's own renderers write
the quota objects and jobs; the controller's clock is stepped by hand (no sleeps),
and what it wrote is read back through ``interpret_kueue`` / ``interpret_volcano``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from pathlib import Path

import pytest

from harness.sim.annotations import sim_annotations
from harness.sim.controller import SimClock, SimController, pools_from_json
from harness.sim.dcgm import MetricsServer
from queues.backends.kueue import objects as render_kueue
from queues.backends.kueue.jobs import interpret_kueue, render_kueue_job
from queues.backends.volcano import objects as render_volcano
from queues.backends.volcano.jobs import interpret_volcano, podgroup_name, render_volcano_job
from queues.cluster import KubernetesCluster
from queues.jobs import JobSpec
from queues.specs import CohortSpec, FlavorQuota, FlavorSpec, PriorityClassSpec, TeamQueueSpec

REPO = Path(__file__).resolve().parents[3]
CRD_DIR = (REPO / ".." / "shared" / "crds").resolve()
KUEUE = "kueue.x-k8s.io/v1beta2"
VCJOB = "batch.volcano.sh/v1alpha1"


def NOW():  # noqa: N802
    return dt.datetime.now(dt.UTC)

if not CRD_DIR.is_dir():
    reason = f"CRD folder {CRD_DIR} not found (expected at <repo>/../shared/crds)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason, allow_module_level=True)

H100 = FlavorSpec(name="h100", gpu_resource="nvidia.com/gpu", gpu_model="H100",
                  node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                  physical_gpus=16, cpu_per_gpu="8", memory_per_gpu="64Gi")
TEAMS = (
    TeamQueueSpec(slug="vision", display_name="Vision", cohort="research",
                  quotas=(FlavorQuota(flavor="h100", gpu_resource="nvidia.com/gpu",
                                      nominal_gpus=8, borrowing_limit_gpus=0),)),
    TeamQueueSpec(slug="nlp", display_name="NLP", cohort="research",
                  quotas=(FlavorQuota(flavor="h100", gpu_resource="nvidia.com/gpu",
                                      nominal_gpus=8, borrowing_limit_gpus=0),)),
)
PRIORITIES = (PriorityClassSpec(name="standard", value=100),)
SPEC = JobSpec(namespace="vision", name="train", image="ghcr.io/acme/train:1", workers=2,
               gpus_per_worker=4, gpu_resource="nvidia.com/gpu", flavor="h100",
               cpu_per_worker="8", memory_per_worker="64Gi", local_queue="vision",
               job_label="7", priority_class="standard",
               annotations=sim_annotations(duration_seconds=30, profile="training"))
POOLS = [{"flavor": "h100", "gpu_resource": "nvidia.com/gpu", "gpus": 16, "gpus_per_node": 8,
          "gpu_model": "NVIDIA H100 80GB HBM3",
          "node_labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}]


class ManualTime:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture(scope="module")
def server():
    from harness.apiserver import EmulatorServer

    with EmulatorServer(crd_dir=CRD_DIR) as srv:
        yield srv


@pytest.fixture(scope="module")
def cluster(server, tmp_path_factory):
    kubeconfig = server.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
    return KubernetesCluster(kubeconfig=kubeconfig)


@pytest.fixture
def time_():
    return ManualTime()


@pytest.fixture
def kueue(server, cluster, time_):
    server.reset()
    server.faults.clear()
    for obj in render_kueue.desired_objects(flavors=[H100], cohorts=[CohortSpec(name="research")],
                                            priority_classes=PRIORITIES, teams=TEAMS):
        cluster.apply(obj)
    return SimController(cluster, clock=SimClock(1.0, monotonic=time_))


def _job(cluster, name):
    return cluster.get("batch/v1", "Job", name, "vision")


def _workload(cluster, name, namespace="vision"):
    job = cluster.get("batch/v1", "Job", name, namespace)
    return next(w for w in cluster.list_workloads(namespace)
                if w["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"])


def _status(cluster, name):
    return interpret_kueue(job=_job(cluster, name), workload=_workload(cluster, name),
                           now=dt.datetime.now(dt.UTC))


def _cq_usage(cluster, name):
    status = cluster.get(KUEUE, "ClusterQueue", name)["status"]
    return {f["name"]: f["resources"][0]["total"] for f in status["flavorsUsage"]}, status


def test_a_suspended_job_gets_a_workload_is_admitted_runs_and_finishes(cluster, kueue, time_):
    cluster.apply(render_kueue_job(SPEC))
    kueue.step()

    workload = _workload(cluster, "train")
    assert workload["spec"]["queueName"] == "vision"
    assert workload["spec"]["priority"] == 100
    assert workload["status"]["admission"]["clusterQueue"] == "vision"
    assignment = workload["status"]["admission"]["podSetAssignments"][0]
    assert assignment["flavors"]["nvidia.com/gpu"] == "h100"
    assert assignment["count"] == 2
    job = _job(cluster, "train")
    assert job["spec"]["suspend"] is False
    assert job["spec"]["template"]["spec"]["nodeSelector"] == {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    status = _status(cluster, "train")
    assert (status.phase, status.admitted_flavor) == ("Running", "h100")
    usage, cq_status = _cq_usage(cluster, "vision")
    assert usage == {"h100": "8"}
    assert cq_status["admittedWorkloads"] == 1
    assert cq_status["conditions"][0]["type"] == "Active"
    reasons = [e["reason"] for e in cluster.list_events("vision", workload["metadata"]["name"])]
    assert {"QuotaReserved", "Admitted"} <= set(reasons)
    # the exporter reports its pods: 2 pods x 4 GPUs, busy (training)
    text = kueue.metrics_text()
    lines = [ln for ln in text.splitlines() if ln.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    assert len(lines) == 8
    assert all('namespace="vision"' in ln and 'pod="train-' in ln for ln in lines)
    assert all(int(ln.rsplit(" ", 1)[1]) >= 85 for ln in lines)

    time_.t = 29.0
    kueue.step()
    assert _status(cluster, "train").phase == "Running"
    time_.t = 30.0
    kueue.step()
    status = _status(cluster, "train")
    assert status.phase == "Succeeded"
    assert _job(cluster, "train")["status"]["succeeded"] == 2
    finished = {c["type"]: c for c in _workload(cluster, "train")["status"]["conditions"]}
    assert finished["Finished"]["reason"] == "Succeeded"
    assert _cq_usage(cluster, "vision")[0] == {"h100": "0"}
    assert kueue.metrics_text().count("DCGM_FI_DEV_GPU_UTIL{") == 0


def test_a_job_that_does_not_fit_stays_pending_with_kueues_message(cluster, kueue, time_):
    cluster.apply(render_kueue_job(SPEC))
    kueue.step()
    second = dataclasses.replace(SPEC, name="second", workers=1)
    cluster.apply(render_kueue_job(second))
    kueue.step()
    assert _status(cluster, "train").phase == "Running"
    conditions = {c["type"]: c for c in _workload(cluster, "second")["status"]["conditions"]}
    assert conditions["QuotaReserved"]["status"] == "False"
    assert conditions["QuotaReserved"]["reason"] == "WaitingForQuota"
    assert conditions["QuotaReserved"]["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for "
        "nvidia.com/gpu in flavor h100, 4 more needed")
    assert _job(cluster, "second")["spec"]["suspend"] is True
    status = _status(cluster, "second")
    assert status.phase == "Queued"
    assert "4 more" in status.message
    _, cq_status = _cq_usage(cluster, "vision")
    assert cq_status["pendingWorkloads"] == 1
    # bigger than the queue can ever be admitted (borrowing limit 0): never admitted
    huge = dataclasses.replace(SPEC, name="huge", workers=4)
    cluster.apply(render_kueue_job(huge))
    kueue.step()
    conditions = {c["type"]: c for c in _workload(cluster, "huge")["status"]["conditions"]}
    assert conditions["QuotaReserved"]["reason"] == "ExceedsMaxQuota"
    assert "maximum capacity (8)" in conditions["QuotaReserved"]["message"]
    # the first finishes, the second is admitted; the huge one never is
    time_.t = 30.0
    kueue.step()
    assert _status(cluster, "second").phase == "Running"
    time_.t = 120.0
    kueue.step()
    assert _status(cluster, "huge").phase == "Queued"


def test_a_deactivated_workload_is_evicted_and_frees_its_quota(cluster, kueue, time_):
    cluster.apply(render_kueue_job(SPEC))
    kueue.step()
    cluster.apply(render_kueue_job(dataclasses.replace(SPEC, name="waiting")))
    kueue.step()
    assert _status(cluster, "waiting").phase == "Queued"
    cluster.deactivate_workload("vision", _workload(cluster, "train")["metadata"]["name"])
    time_.t = 1.0
    kueue.step()
    workload = _workload(cluster, "train")
    conditions = {c["type"]: c for c in workload["status"]["conditions"]}
    assert conditions["Evicted"]["status"] == "True"
    assert conditions["Evicted"]["reason"] == "Deactivated"
    assert conditions["QuotaReserved"]["status"] == "False"
    assert workload["status"].get("admission") is None
    assert _job(cluster, "train")["spec"]["suspend"] is True
    assert _status(cluster, "train").phase == "Failed"  # deactivated, not cancelled by the portal
    assert _status(cluster, "waiting").phase == "Running"
    assert kueue.job_state("vision", "train") == "Cancelled"


def test_a_deleted_job_leaves_the_simulator_and_its_workload_is_collected(cluster, kueue,
                                                                           time_):
    cluster.apply(render_kueue_job(SPEC))
    kueue.step()
    name = _workload(cluster, "train")["metadata"]["name"]
    cluster.delete("batch/v1", "Job", "train", "vision")
    time_.t = 1.0
    kueue.step()
    assert cluster.get(KUEUE, "Workload", name, "vision") is None
    assert _cq_usage(cluster, "vision")[0] == {"h100": "0"}


def test_a_quota_change_rebuilds_the_tree_and_keeps_running_jobs(cluster, kueue, time_):
    cluster.apply(render_kueue_job(SPEC))
    kueue.step()
    cluster.apply(render_kueue_job(dataclasses.replace(SPEC, name="waiting")))
    kueue.step()
    assert _status(cluster, "waiting").phase == "Queued"
    bigger = dataclasses.replace(TEAMS[0], quotas=(FlavorQuota(
        flavor="h100", gpu_resource="nvidia.com/gpu", nominal_gpus=16),))
    cluster.apply(render_kueue.cluster_queue(bigger, {"h100": H100}))
    time_.t = 5.0
    kueue.step()
    assert _status(cluster, "train").phase == "Running"
    assert _status(cluster, "waiting").phase == "Running"
    time_.t = 30.0  # the first keeps its remaining 25 s, not a fresh 30
    kueue.step()
    assert _status(cluster, "train").phase == "Succeeded"
    assert _status(cluster, "waiting").phase == "Running"


def test_declared_outcome_and_deadline(cluster, kueue, time_):
    failing = dataclasses.replace(SPEC, name="failing", workers=1, annotations=sim_annotations(
        duration_seconds=10, outcome="Failed"))
    late = dataclasses.replace(SPEC, name="late", workers=1, max_runtime_seconds=20,
                               annotations=sim_annotations(duration_seconds=50))
    cluster.apply(render_kueue_job(failing))
    cluster.apply(render_kueue_job(late))
    kueue.step()
    time_.t = 10.0
    kueue.step()
    assert _status(cluster, "failing").phase == "Failed"
    assert _status(cluster, "late").phase == "Running"
    time_.t = 20.0
    kueue.step()
    status = _status(cluster, "late")
    assert status.phase == "Failed"
    conditions = {c["type"]: c for c in _job(cluster, "late")["status"]["conditions"]}
    assert conditions["Failed"]["reason"] == "DeadlineExceeded"


def test_the_metrics_server_serves_the_live_pods(cluster, kueue):
    import requests

    cluster.apply(render_kueue_job(dataclasses.replace(SPEC, annotations=sim_annotations(
        duration_seconds=30, profile="notebook"))))
    kueue.step()
    with MetricsServer(kueue.metrics_text) as metrics:
        text = requests.get(metrics.url, timeout=5).text
    busy = [float(ln.rsplit(" ", 1)[1]) for ln in text.splitlines()
            if ln.startswith("DCGM_FI_PROF_GR_ENGINE_ACTIVE{")]
    assert len(busy) == 8 and max(busy) < 0.05  # an idle notebook holding 8 GPUs


# --- Volcano ---------------------------------------------------------------------------------


@pytest.fixture
def volcano(server, cluster, time_):
    server.reset()
    server.faults.clear()
    for team in TEAMS:
        cluster.apply({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": team.slug}})
    for obj in render_volcano.queues(flavors=[H100], cohorts=[CohortSpec(name="research")],
                                     teams=TEAMS):
        cluster.apply(obj)
    cluster.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                   "metadata": {"name": "standard"}, "value": 100})
    pools, labels = pools_from_json(POOLS)
    return SimController(cluster, backend="volcano", node_pools=pools, flavor_labels=labels,
                         clock=SimClock(1.0, monotonic=time_))


def _vcjob(cluster, name):
    return cluster.get(VCJOB, "Job", name, "vision")


def _podgroup(cluster, name):
    job = _vcjob(cluster, name)
    return cluster.get("scheduling.volcano.sh/v1beta1", "PodGroup",
                       podgroup_name(name, job["metadata"]["uid"]), "vision")


def test_volcano_podgroup_and_vcjob_phases(cluster, volcano, time_):
    cluster.apply(render_volcano_job(SPEC, flavor=H100))
    volcano.step()
    cluster.apply(render_volcano_job(dataclasses.replace(SPEC, name="second", workers=1),
                                     flavor=H100))
    volcano.step()
    assert cluster.get("scheduling.volcano.sh/v1beta1", "Queue", "vision")["status"][
        "state"] == "Open"
    podgroup = _podgroup(cluster, "train")
    assert podgroup["spec"]["minMember"] == 2
    assert podgroup["status"]["phase"] == "Running"
    assert _vcjob(cluster, "train")["status"]["state"]["phase"] == "Running"
    status = interpret_volcano(job=_vcjob(cluster, "train"), podgroup=podgroup, now=NOW())
    assert status.phase == "Running"
    # the second does not fit in vision's capability (8): its gang waits whole
    waiting = _podgroup(cluster, "second")
    assert waiting["status"]["phase"] in ("Pending", "Inqueue")
    assert _vcjob(cluster, "second")["status"]["state"]["phase"] == "Pending"
    queued = interpret_volcano(job=_vcjob(cluster, "second"), podgroup=waiting, now=NOW())
    assert queued.phase == "Queued"
    time_.t = 30.0
    volcano.step()
    assert _vcjob(cluster, "train")["status"]["state"]["phase"] == "Completed"
    assert _vcjob(cluster, "second")["status"]["state"]["phase"] == "Running"
    assert interpret_volcano(job=_vcjob(cluster, "train"),
                             podgroup=_podgroup(cluster, "train"), now=NOW()).phase == "Succeeded"


def test_a_borrow_only_team_with_zero_nominal_quota_borrows_from_its_cohort(cluster, kueue,
                                                                             time_):
    # A trace replay gives VCs with a tiny share 0 GPUs and no borrowing limit: in Kueue
    # such a ClusterQueue ("nominalQuota: 0", no borrowingLimit) borrows what its cohort
    # lends. vision (8 nominal, no lending limit) is idle, so nlp's 4-GPU job runs on
    # vision's GPUs.
    borrow_only = dataclasses.replace(TEAMS[1], quotas=(FlavorQuota(
        flavor="h100", gpu_resource="nvidia.com/gpu", nominal_gpus=0),))
    rendered = render_kueue.cluster_queue(borrow_only, {"h100": H100})
    gpu = rendered["spec"]["resourceGroups"][0]["flavors"][0]["resources"][-1]
    assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": "0"}
    cluster.apply(rendered)
    job = dataclasses.replace(SPEC, namespace="nlp", local_queue="nlp", name="borrower",
                              workers=1)
    cluster.apply(render_kueue_job(job))
    time_.t = 1.0
    kueue.step()
    workload = _workload(cluster, "borrower", namespace="nlp")
    assert workload["status"]["admission"]["clusterQueue"] == "nlp"
    status = interpret_kueue(job=cluster.get("batch/v1", "Job", "borrower", "nlp"),
                             workload=workload, now=NOW())
    assert (status.phase, status.admitted_flavor) == ("Running", "h100")
    usage, _ = _cq_usage(cluster, "nlp")
    assert usage == {"h100": "4"}
