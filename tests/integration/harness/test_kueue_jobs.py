"""Gang jobs over HTTP: the cluster port's Workload, visibility, event, cancel calls against
the emulator, and the Kueue writes of ``harness.sim.kueue_objects`` read back through
``interpret_kueue``. Official kubernetes client, real loopback HTTP, no fakes."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
from pathlib import Path

import pytest
import requests

from harness.apiserver import EmulatorServer
from harness.apiserver.kueue_visibility import queue_order
from harness.sim import kueue_objects as ko
from queues.backends.kueue.jobs import interpret_kueue, render_kueue_job, workload_for_job
from queues.cluster import KubernetesCluster, PermanentError, TransientError
from queues.jobs import JobSpec
from tests.schema import validate_manifest

REPO = Path(__file__).resolve().parents[3]
CRD_DIR = (REPO / ".." / "shared" / "crds").resolve()
KUEUE = "kueue.x-k8s.io/v1beta2"

if not CRD_DIR.is_dir():
    reason = f"CRD folder {CRD_DIR} not found (expected at <repo>/../shared/crds)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason, allow_module_level=True)

SPEC = JobSpec(namespace="vision", name="train", image="ghcr.io/acme/train:1", workers=2,
               gpus_per_worker=4, gpu_resource="nvidia.com/gpu", flavor="h100",
               cpu_per_worker="8", memory_per_worker="64Gi", local_queue="vision",
               job_label="7")


@pytest.fixture(scope="module")
def server():
    with EmulatorServer(crd_dir=CRD_DIR) as srv:
        yield srv


@pytest.fixture(scope="module")
def cluster(server, tmp_path_factory):
    kubeconfig = server.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
    return KubernetesCluster(kubeconfig=kubeconfig)


@pytest.fixture(autouse=True)
def world(server, cluster):
    server.reset()
    server.faults.clear()
    for ns in ("vision", "nlp"):
        cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    # vision and nlp share the ClusterQueue "research"; "solo" has its own.
    for ns, name, cq in (("vision", "vision", "research"), ("nlp", "nlp", "research"),
                         ("vision", "solo", "solo")):
        cluster.apply({"apiVersion": KUEUE, "kind": "LocalQueue",
                       "metadata": {"name": name, "namespace": ns},
                       "spec": {"clusterQueue": cq}})
    yield
    server.faults.clear()


def submit(cluster, name, *, namespace="vision", queue="vision", priority=0, kind="job"):
    spec = dataclasses.replace(SPEC, name=name, namespace=namespace, local_queue=queue,
                               kind=kind)
    job = cluster.apply(render_kueue_job(spec))
    return job, ko.create_workload(cluster, job, priority=priority)


# --- visibility API ------------------------------------------------------------------------


def test_discovery_announces_the_visibility_api(server):
    headers = {"Authorization": f"Bearer {server.token}"}
    groups = requests.get(f"{server.url}/apis", headers=headers, timeout=5).json()["groups"]
    visibility = next(g for g in groups if g["name"] == "visibility.kueue.x-k8s.io")
    assert visibility["preferredVersion"]["version"] == "v1beta2"
    listing = requests.get(f"{server.url}/apis/visibility.kueue.x-k8s.io/v1beta2",
                           headers=headers, timeout=5).json()
    assert "localqueues/pendingworkloads" in {r["name"] for r in listing["resources"]}


def test_pending_workloads_in_queue_order_with_positions(cluster):
    _, low = submit(cluster, "low", priority=0)
    _, high = submit(cluster, "high", priority=100)
    _, other_team = submit(cluster, "other", namespace="nlp", queue="nlp", priority=50)
    _, solo = submit(cluster, "alone", queue="solo", priority=1000)
    _, admitted = submit(cluster, "admitted", priority=500)
    ko.admit(cluster, admitted, cluster_queue="research", flavor="h100")
    _, inactive = submit(cluster, "inactive", priority=700)
    cluster.deactivate_workload("vision", inactive["metadata"]["name"])

    items = cluster.pending_workloads("vision", "vision")
    assert [(i["metadata"]["name"], i["priority"], i["positionInLocalQueue"],
             i["positionInClusterQueue"], i["localQueueName"]) for i in items] == [
        (high["metadata"]["name"], 100, 0, 0, "vision"),
        (low["metadata"]["name"], 0, 1, 2, "vision"),
    ]
    (nlp,) = cluster.pending_workloads("nlp", "nlp")
    assert nlp["metadata"]["name"] == other_team["metadata"]["name"]
    assert (nlp["positionInLocalQueue"], nlp["positionInClusterQueue"]) == (0, 1)
    (alone,) = cluster.pending_workloads("vision", "solo")
    assert alone["metadata"]["name"] == solo["metadata"]["name"]
    assert alone["positionInClusterQueue"] == 0


def test_pending_workloads_limit_offset_and_missing_queue(server, cluster):
    for i in range(3):
        submit(cluster, f"job-{i}")
    headers = {"Authorization": f"Bearer {server.token}"}
    url = (f"{server.url}/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/vision/"
           "localqueues/vision/pendingworkloads")
    page = requests.get(url, params={"limit": 1, "offset": 1}, headers=headers, timeout=5).json()
    assert page["kind"] == "PendingWorkloadsSummary"
    assert [i["positionInLocalQueue"] for i in page["items"]] == [1]
    bad = requests.get(url, params={"limit": "x"}, headers=headers, timeout=5)
    assert bad.status_code == 400
    with pytest.raises(PermanentError) as info:
        cluster.pending_workloads("vision", "nope")
    assert info.value.status == 404


def test_queue_order_is_priority_then_fifo():
    def wl(name, priority, created):
        return {"metadata": {"name": name, "namespace": "a", "creationTimestamp": created},
                "spec": {"priority": priority}}

    items = [wl("c", 0, "2026-01-01T00:00:02Z"), wl("b", 0, "2026-01-01T00:00:01Z"),
             wl("a", 5, "2026-01-01T00:00:09Z"), wl("d", 0, "2026-01-01T00:00:01Z")]
    assert [w["metadata"]["name"] for w in sorted(items, key=queue_order)] == ["a", "b", "d", "c"]


def test_visibility_faults_are_transient(server, cluster):
    server.faults.add("GET", r"/pendingworkloads", 503, count=1)
    with pytest.raises(TransientError):
        cluster.pending_workloads("vision", "vision")
    assert cluster.pending_workloads("vision", "vision") == []


# --- Workloads, events, cancel --------------------------------------------------------------


def test_workload_is_found_and_valid_against_the_crd(cluster):
    job, wl = submit(cluster, "train", priority=10)
    assert wl["metadata"]["name"].startswith("job-train-")
    listed = cluster.list_workloads("vision", f"kueue.x-k8s.io/job-uid={job['metadata']['uid']}")
    assert [w["metadata"]["name"] for w in listed] == [wl["metadata"]["name"]]
    assert workload_for_job(cluster.list_workloads("vision"), job)["metadata"]["uid"] \
        == wl["metadata"]["uid"]
    assert wl["spec"]["podSets"][0]["count"] == 2
    assert wl["spec"]["queueName"] == "vision"
    wl = ko.admit(cluster, wl, cluster_queue="research", flavor="h100")
    assert wl["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] == {
        "cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "8"}
    for obj in (wl, cluster.get("batch/v1", "Job", "train", "vision")):
        clean = {k: v for k, v in obj.items() if k != "status"}
        clean["metadata"] = {k: v for k, v in obj["metadata"].items()
                             if k in ("name", "namespace", "labels", "ownerReferences")}
        validate_manifest(clean)


def test_jobset_workload_pod_sets(cluster):
    spec = dataclasses.replace(SPEC, kind="jobset", workers=3)
    job = cluster.apply(render_kueue_job(spec))
    wl = ko.create_workload(cluster, job)
    assert wl["metadata"]["name"].startswith("jobset-train-")
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("workers", 3)]


def test_events_by_involved_object(cluster):
    job, wl = submit(cluster, "train")
    ko.record_event(cluster, job, reason="FailedCreate", type="Warning", message="refused")
    ko.record_event(cluster, wl, reason="Pending", message="waiting")
    other, _ = submit(cluster, "other")
    ko.record_event(cluster, other, reason="Created", message="other job")
    events = cluster.list_events("vision", "train")
    assert [(e["reason"], e["involvedObject"]["kind"]) for e in events] == [
        ("FailedCreate", "Job")]
    assert [e["reason"] for e in cluster.list_events("vision", wl["metadata"]["name"],
                                                     "Workload")] == ["Pending"]
    assert cluster.list_events("vision", "train", "Workload") == []


def test_unknown_field_selector_is_refused(server):
    headers = {"Authorization": f"Bearer {server.token}"}
    resp = requests.get(f"{server.url}/api/v1/namespaces/vision/events",
                        params={"fieldSelector": "spec.nothing=x"}, headers=headers, timeout=5)
    assert resp.status_code == 400
    assert "involvedObject.name" in resp.json()["message"]


def test_cancel_deactivates_then_deletes(server, cluster):
    job, wl = submit(cluster, "train")
    ko.admit(cluster, wl, cluster_queue="research", flavor="h100")
    server.counters.reset()
    patched = cluster.deactivate_workload("vision", wl["metadata"]["name"])
    assert patched["spec"]["active"] is False
    assert cluster.delete_background("batch/v1", "Job", "train", "vision") is True
    assert cluster.get("batch/v1", "Job", "train", "vision") is None
    assert cluster.delete_background("batch/v1", "Job", "train", "vision") is False
    assert cluster.deactivate_workload("vision", "job-gone-12345") is None
    status = interpret_kueue(job=None, workload=patched, now=dt.datetime.now(dt.UTC),
                             cancelled=True)
    assert status.phase == "Cancelled"
    writes = server.counters.snapshot()
    assert writes["by_verb"].get("patch", 0) >= 1 and writes["by_verb"].get("delete", 0) >= 1


# --- the whole Kueue story, written as Kueue would, read back over HTTP ------------------------


@pytest.mark.parametrize("kind", ["job", "jobset"])
def test_kueue_story_through_interpret(cluster, kind):
    api_version, kind_name = ("batch/v1", "Job") if kind == "job" else (
        "jobset.x-k8s.io/v1alpha2", "JobSet")
    now = dt.datetime.now(dt.UTC)
    job, wl = submit(cluster, "train", kind=kind)
    _, rival = submit(cluster, "rival", priority=100)

    def read():
        live_job = cluster.get(api_version, kind_name, "train", "vision")
        live_wl = workload_for_job(cluster.list_workloads("vision"), live_job) \
            if live_job else None
        events = []
        if live_job:
            events += cluster.list_events("vision", "train", kind_name)
        if live_wl:
            events += cluster.list_events("vision", live_wl["metadata"]["name"], "Workload")
        position = next((i["positionInLocalQueue"] for i in
                         cluster.pending_workloads("vision", "vision")
                         if live_wl and i["metadata"]["name"] == live_wl["metadata"]["name"]),
                        None)
        return interpret_kueue(job=live_job, workload=live_wl, events=events,
                               queue_position=position, now=now)

    ko.set_pending(cluster, wl, message=ko.insufficient_quota_message("nvidia.com/gpu", "h100", 8))
    status = read()
    assert (status.phase, status.reason, status.queue_position) == ("Queued", "WaitingForQuota", 1)
    assert "8 more nvidia.com/gpu on flavor h100" in status.message

    ko.admit(cluster, wl, cluster_queue="research", flavor="h100")
    ko.unsuspend_job(cluster, job, node_selector={"nvidia.com/gpu.product": "H100"})
    status = read()
    assert (status.phase, status.admitted_flavor, status.queue_position) == (
        "Admitted", "h100", None)
    live = cluster.get(api_version, kind_name, "train", "vision")
    assert live["spec"]["suspend"] is False

    ko.set_job_status(cluster, job, active=2, ready=2)
    ko.set_pods_ready(cluster, wl)
    assert read().phase == "Running"

    ko.preempt(cluster, wl, job, preemptor_uid=rival["metadata"]["uid"],
               preemptor_job_uid="rival-job-uid", reason="InClusterQueue")
    status = read()
    assert (status.phase, status.reason, status.preemptions, status.preemptor) == (
        "Queued", "Preempted", 1, "rival-job-uid")
    assert cluster.get(api_version, kind_name, "train", "vision")["spec"]["suspend"] is True

    ko.admit(cluster, wl, cluster_queue="research", flavor="h100")
    ko.unsuspend_job(cluster, job)
    ko.set_job_status(cluster, job, active=0, ready=0, succeeded=2, complete=True)
    ko.finish(cluster, wl)
    status = read()
    assert (status.phase, status.preemptions) == ("Succeeded", 1)
    assert status.finished_at is not None
    assert [e["type"] for e in status.timeline if e["source"] == "Workload"].count(
        "Finished") == 1


def test_admitted_job_refused_by_resource_quota(cluster):
    job, wl = submit(cluster, "train")
    ko.admit(cluster, wl, cluster_queue="research", flavor="h100")
    ko.unsuspend_job(cluster, job)
    ko.record_event(cluster, job, reason="FailedCreate", type="Warning",
                    component="job-controller",
                    message=ko.quota_refused_message("train-0-abcde", "gpu-quota",
                                                     "requests.nvidia.com/gpu", 4, 4, 4))
    live = cluster.get("batch/v1", "Job", "train", "vision")
    status = interpret_kueue(job=live, workload=ko.get_workload(cluster, wl),
                             events=cluster.list_events("vision", "train"),
                             now=dt.datetime.now(dt.UTC))
    assert (status.phase, status.reason) == ("Admitted", "NamespaceQuotaExceeded")


def test_kueue_deactivation_is_a_failure(cluster):
    job, wl = submit(cluster, "train")
    ko.deactivated_by_kueue(cluster, wl)
    status = interpret_kueue(job=cluster.get("batch/v1", "Job", "train", "vision"),
                             workload=ko.get_workload(cluster, wl), now=dt.datetime.now(dt.UTC))
    assert (status.phase, status.reason) == ("Failed", "Deactivated")
