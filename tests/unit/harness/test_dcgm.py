"""The simulated dcgm-exporter: series per running pod, parsed by queues.metrics."""

import requests

from harness.sim.dcgm import MetricsServer, gpu_units, render_metrics
from queues.backends.kueue.model import KueueSimulator
from queues.metrics import PodAllocation, parse_exposition, utilization
from queues.schedmodel import NodePool, SimJob
from queues.specs import FlavorQuota, TeamQueueSpec

MIG = "nvidia.com/mig-1g.10gb"


def _cluster():
    pools = [
        NodePool(flavor="h100", nodes=1, units_per_node=8, gpu_model="NVIDIA H100 80GB HBM3"),
        NodePool(flavor="mig", nodes=1, units_per_node=14, gpu_resource=MIG,
                 gpu_model="NVIDIA A100-SXM4-80GB", mig_profile="1g.10gb",
                 mig_instances_per_gpu=7, memory_mib=9856),
    ]
    teams = [
        TeamQueueSpec(slug="vision", display_name="Vision", quotas=(
            FlavorQuota(flavor="h100", gpu_resource="nvidia.com/gpu", nominal_gpus=8),)),
        TeamQueueSpec(slug="nlp", display_name="NLP", quotas=(
            FlavorQuota(flavor="h100", gpu_resource="nvidia.com/gpu", nominal_gpus=8),
            FlavorQuota(flavor="mig", gpu_resource=MIG, nominal_gpus=14))),
    ]
    sim = KueueSimulator(teams, node_pools=pools)
    sim.submit(SimJob(name="train", namespace="vision", workers=2, gpus_per_worker=2,
                      duration=600, profile="training"))
    sim.submit(SimJob(name="nb", namespace="nlp", workers=1, gpus_per_worker=1, duration=600,
                      profile="notebook", gpu_resource=MIG))
    sim.submit(SimJob(name="serve", namespace="nlp", workers=1, gpus_per_worker=1,
                      duration=600, profile="inference"))
    sim.advance(120)
    return sim


def test_series_are_attributed_to_pods_and_parse():
    sim = _cluster()
    units = gpu_units(sim)
    assert len(units) == 6  # 2 pods x 2 GPUs, 1 MIG instance, 1 GPU
    text = render_metrics(units, now=sim.now, seed=1)
    samples = parse_exposition(text)
    by_pod = {}
    for s in samples:
        by_pod.setdefault((s.labels["namespace"], s.labels["pod"]), []).append(s)
    train_pods = [p.pod for p in sim.workloads["vision/train"].placements]
    assert sorted(pod for ns, pod in by_pod if ns == "vision") == sorted(train_pods)
    first = [s for s in by_pod[("vision", train_pods[0])] if s.metric == "DCGM_FI_DEV_GPU_UTIL"]
    assert [(s.labels["gpu"], s.labels["Hostname"], s.labels["modelName"]) for s in first] == [
        ("0", "h100-0", "NVIDIA H100 80GB HBM3"), ("1", "h100-0", "NVIDIA H100 80GB HBM3")]
    assert all(85 <= s.value <= 95 for s in first)
    [nb_pod] = [p.pod for p in sim.workloads["nlp/nb"].placements]
    mig = by_pod[("nlp", nb_pod)]
    # a MIG instance has GR_ENGINE_ACTIVE and FB_USED but no GPU_UTIL
    assert sorted(s.metric for s in mig) == ["DCGM_FI_DEV_FB_USED",
                                             "DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
    assert {(s.labels["GPU_I_PROFILE"], s.labels["GPU_I_ID"], s.labels["gpu"]) for s in mig} == {
        ("1g.10gb", "0", "0")}
    assert all(s.value <= 0.02 for s in mig if s.metric == "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
    fb = [s.value for s in samples if s.metric == "DCGM_FI_DEV_FB_USED"]
    assert all(0 < v <= 81559 for v in fb)


def test_utilization_sees_busy_training_and_idle_notebook():
    sim = _cluster()
    samples = parse_exposition(render_metrics(gpu_units(sim), now=sim.now, seed=1))
    allocations = [PodAllocation(r.job.namespace, p.pod, len(p.units), r.flavor)
                   for r in sim.running() for p in r.placements]
    pod_jobs = {(r.job.namespace, p.pod): r.job.name for r in sim.running() for p in r.placements}
    report = utilization(samples, allocations=allocations, pod_jobs=pod_jobs)
    jobs = {(row.team, row.job): row for row in report.jobs}
    train = jobs[("vision", "train")]
    assert (train.allocated_gpus, train.reporting_gpus, train.idle) == (4, 4, False)
    assert 0.85 <= train.utilization <= 0.95
    notebook = jobs[("nlp", "nb")]
    assert (notebook.allocated_gpus, notebook.idle) == (1, True)
    assert report.unallocated_pods == () and report.dropped_total == 0


def test_deterministic_from_seed_and_clock():
    sim = _cluster()
    units = gpu_units(sim)
    assert render_metrics(units, now=120, seed=1) == render_metrics(units, now=120.5, seed=1)
    assert render_metrics(units, now=120, seed=1) != render_metrics(units, now=121, seed=1)
    assert render_metrics(units, now=120, seed=1) != render_metrics(units, now=120, seed=2)


def test_served_on_loopback():
    sim = _cluster()
    with MetricsServer(lambda: render_metrics(gpu_units(sim), now=sim.now)) as server:
        assert server.url.startswith("http://127.0.0.1:")
        response = requests.get(server.url, timeout=5)
        assert response.status_code == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert response.text == render_metrics(gpu_units(sim), now=sim.now)
        assert requests.get(server.url.replace("/metrics", "/other"), timeout=5).status_code == 404
