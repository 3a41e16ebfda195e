"""Golden and schema tests: gang job -> Volcano Job, cancel Commands, PodGroup/vcjob reading."""

import dataclasses
import datetime as dt

import pytest

from queues.backends.volcano.jobs import (
    PARTLY_PLACED_AFTER,
    gang_running,
    interpret_volcano,
    is_partly_placed,
    podgroup_name,
    queue_refusal,
    render_command,
    render_volcano_job,
)
from queues.jobs import JobSpec, JobStatus
from queues.specs import SpecError
from tests.schema import ManifestError, validate_manifest
from tests.unit.queues.examples import A100

JOB_LABELS = {
    "app.kubernetes.io/managed-by": "gpu-quota-portal",
    "app.kubernetes.io/part-of": "gpu-quota-portal",
    "portal.gpu/kind": "job",
    "portal.gpu/team": "vision",
    "portal.gpu/job": "42",
}

SPEC = JobSpec(
    namespace="vision", name="train-llm", image="ghcr.io/acme/train:1.4", workers=4,
    gpus_per_worker=8, gpu_resource="nvidia.com/gpu", flavor="a100-80gb",
    cpu_per_worker="96", memory_per_worker="960Gi", local_queue="vision", job_label="42",
    command=("torchrun",), args=("--nproc-per-node=8", "train.py"), env={"EPOCHS": "3"},
    priority_class="high", max_runtime_seconds=7200,
)

TEMPLATE = {
    "metadata": {"labels": JOB_LABELS},
    "spec": {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": 7200,
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
        "tolerations": [{"operator": "Exists", "key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        "containers": [{
            "name": "worker",
            "image": "ghcr.io/acme/train:1.4",
            "command": ["torchrun"],
            "args": ["--nproc-per-node=8", "train.py"],
            "env": [{"name": "EPOCHS", "value": "3"}],
            "resources": {
                "requests": {"cpu": "96", "memory": "960Gi", "nvidia.com/gpu": "8"},
                "limits": {"nvidia.com/gpu": "8", "memory": "960Gi"},
            },
        }],
    },
}


def test_multi_node_gang_uses_the_pytorch_plugin_with_a_master_task():
    assert render_volcano_job(SPEC, flavor=A100) == {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "train-llm", "namespace": "vision", "labels": JOB_LABELS},
        "spec": {
            "schedulerName": "volcano",
            "queue": "vision",
            "minAvailable": 4,  # every pod of the gang
            "priorityClassName": "high",
            "maxRetry": 3,
            "ttlSecondsAfterFinished": 86400,
            "policies": [
                {"event": "PodEvicted", "action": "RestartJob"},
                {"event": "PodFailed", "action": "TerminateJob"},
            ],
            # WORLD_SIZE = 1 master + 3 workers = 4 pods (not 32 GPUs)
            "plugins": {"pytorch": ["--master=master", "--worker=worker", "--port=23456"],
                        "svc": []},
            "tasks": [
                {"name": "master", "replicas": 1, "minAvailable": 1,
                 "policies": [{"event": "TaskCompleted", "action": "CompleteJob"}],
                 "template": TEMPLATE},
                {"name": "worker", "replicas": 3, "minAvailable": 3, "template": TEMPLATE},
            ],
        },
    }


def test_svc_framework_and_single_pod_jobs():
    job = render_volcano_job(SPEC, framework="svc", max_retry=0, ttl_seconds_after_finished=60)
    assert job["spec"]["plugins"] == {"svc": [], "env": []}
    assert [(t["name"], t["replicas"], t["minAvailable"]) for t in job["spec"]["tasks"]] == [
        ("worker", 4, 4)]
    assert (job["spec"]["maxRetry"], job["spec"]["ttlSecondsAfterFinished"]) == (0, 60)
    # No flavor given: no node selector or tolerations.
    assert "nodeSelector" not in job["spec"]["tasks"][0]["template"]["spec"]
    single = render_volcano_job(dataclasses.replace(SPEC, workers=1, priority_class=""))
    assert "plugins" not in single["spec"] and "priorityClassName" not in single["spec"]
    assert single["spec"]["minAvailable"] == 1
    assert [(t["name"], t["replicas"]) for t in single["spec"]["tasks"]] == [("worker", 1)]


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"framework": "mpi"}, "framework"),
    ({"max_retry": -1}, "max_retry"),
    ({"max_retry": True}, "max_retry"),
    ({"ttl_seconds_after_finished": 1.5}, "ttl_seconds_after_finished"),
    ({"flavor": dataclasses.replace(A100, gpu_resource="nvidia.com/mig-1g.10gb")}, "flavor"),
])
def test_bad_render_options_name_the_field(kwargs, field):
    with pytest.raises(SpecError) as info:
        render_volcano_job(SPEC, **kwargs)
    assert info.value.field == field


LIVE = {**render_volcano_job(SPEC, flavor=A100)}
LIVE["metadata"] = {**LIVE["metadata"], "uid": "0b5c6a1e-1111-4222-8333-444455556666",
                    "creationTimestamp": "2026-03-01T10:00:00Z"}


def test_cancel_command_targets_the_live_job():
    assert render_command(job=LIVE, action="AbortJob", message="cancelled by alice") == {
        "apiVersion": "bus.volcano.sh/v1alpha1",
        "kind": "Command",
        "metadata": {
            "name": "train-llm-abortjob",
            "namespace": "vision",
            "ownerReferences": [{
                "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train-llm",
                "uid": "0b5c6a1e-1111-4222-8333-444455556666", "controller": True,
                "blockOwnerDeletion": True,
            }],
            "labels": JOB_LABELS,
        },
        "action": "AbortJob",
        "target": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                   "name": "train-llm", "uid": "0b5c6a1e-1111-4222-8333-444455556666"},
        "reason": "CancelledByPortal",
        "message": "cancelled by alice",
    }
    assert render_command(job=LIVE, action="TerminateJob")["metadata"]["name"] == (
        "train-llm-terminatejob")
    with pytest.raises(SpecError) as info:
        render_command(job=render_volcano_job(SPEC), action="AbortJob")
    assert info.value.field == "job"
    with pytest.raises(SpecError):
        render_command(job=LIVE, action="SuspendJob")


@pytest.mark.parametrize("obj", [
    render_volcano_job(SPEC, flavor=A100),
    render_volcano_job(SPEC, framework="svc"),
    render_volcano_job(dataclasses.replace(SPEC, workers=1)),
    render_command(job=LIVE, action="AbortJob", message="m"),
    render_command(job=LIVE, action="TerminateJob"),
], ids=["pytorch", "svc", "single", "abort", "terminate"])
def test_rendered_objects_validate_against_the_volcano_crds(obj):
    validate_manifest(obj)


def test_the_schema_catches_a_broken_job():
    job = render_volcano_job(SPEC)
    job["spec"]["tasks"][0]["minAvailable"] = -1
    with pytest.raises(ManifestError, match="minAvailable"):
        validate_manifest(job)
    job = render_volcano_job(SPEC)
    job["spec"]["policies"][0]["event"] = "PodVanished"
    with pytest.raises(ManifestError, match="PodVanished"):
        validate_manifest(job)


# --- reading status -------------------------------------------------------------------

NOW = dt.datetime(2026, 3, 1, 11, 0, tzinfo=dt.UTC)
UID = LIVE["metadata"]["uid"]


def _job(phase, *, running=0, at="2026-03-01T10:00:00Z", tasks=None, retry=0, reason="",
         message=""):
    job = {**LIVE, "status": {
        "state": {"phase": phase, "lastTransitionTime": at, "reason": reason, "message": message},
        "running": running, "minAvailable": 4, "retryCount": retry,
    }}
    if tasks is not None:
        job["status"]["taskStatusCount"] = {name: {"phase": {"Running": n}}
                                            for name, n in tasks.items()}
    return job


def _podgroup(phase, *, running=0, unschedulable=None):
    conditions = []
    if unschedulable:
        conditions.append({"type": "Unschedulable", "status": "True",
                           "reason": unschedulable[0], "message": unschedulable[1],
                           "lastTransitionTime": "2026-03-01T10:59:00Z"})
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": podgroup_name("train-llm", UID), "namespace": "vision"},
        "spec": {"minMember": 4, "queue": "vision",
                 "minResources": {"nvidia.com/gpu": "32", "cpu": "384", "memory": "3840Gi"}},
        "status": {"phase": phase, "running": running, "conditions": conditions},
    }


def test_podgroup_name_is_job_and_uid():
    assert podgroup_name("train-llm", "abc-123") == "train-llm-abc-123"


@pytest.mark.parametrize("obj", [
    _podgroup("Pending", unschedulable=("NotEnoughResources", "4/4 tasks in gang unschedulable")),
    _job("Running", running=4, tasks={"master": 1, "worker": 3}),
], ids=["podgroup", "job-status"])
def test_objects_read_back_are_valid_for_the_crds(obj):
    validate_manifest(obj)


def test_pending_gang_shows_gpus_needed_and_volcanos_reason():
    message = ("4/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, "
               "4 minAvailable")
    status = interpret_volcano(job=_job("Pending"),
                               podgroup=_podgroup("Pending", unschedulable=(
                                   "NotEnoughResources", message)), now=NOW)
    assert isinstance(status, JobStatus)
    assert (status.phase, status.reason) == ("Queued", "Unschedulable")
    assert status.message == f"pending: needs 32 GPUs. Volcano: NotEnoughResources: {message}."
    assert status.cluster_queue == "vision"
    assert status.submitted_at == dt.datetime(2026, 3, 1, 10, 0, tzinfo=dt.UTC)
    assert [e["type"] for e in status.timeline] == ["Pending", "Unschedulable"]


def test_gang_partly_placed_for_more_than_ten_minutes():
    job = _job("Pending", running=3, tasks={"master": 1, "worker": 2})
    status = interpret_volcano(job=job, podgroup=_podgroup("Inqueue", running=3), now=NOW)
    assert (status.phase, status.reason) == ("Admitted", "GangPartlyPlaced")
    assert status.message.startswith(
        "gang partly placed: 3/4 pods, 24 GPUs held without progress (for 60 minutes)")
    # Not yet 10 minutes: still just being placed.
    recent = NOW - PARTLY_PLACED_AFTER + dt.timedelta(seconds=1)
    status = interpret_volcano(job=job, podgroup=_podgroup("Inqueue", running=3), now=NOW,
                               partly_placed_since=recent)
    assert (status.phase, status.reason) == ("Admitted", "Inqueue")
    # Nothing running is "pending", never "partly placed".
    status = interpret_volcano(job=_job("Pending"), podgroup=_podgroup("Pending"), now=NOW)
    assert (status.reason, status.message) == (
        "Pending", "pending: needs 32 GPUs; waiting for Volcano to enqueue the gang.")


@pytest.mark.parametrize(("job", "podgroup", "kwargs", "phase", "reason", "words"), [
    (None, None, {}, "Submitted", "NotOnCluster", "not on the cluster"),
    (None, None, {"cancelled": True}, "Cancelled", "Cancelled", "stopped and removed"),
    ("Pending", None, {}, "Submitted", "WaitingForVolcano", "pod group"),
    ("Running", "Running", {}, "Running", "Running", "4/4 pods"),
    ("Restarting", "Pending", {}, "Queued", "Restarting", "restart 2"),
    ("Completed", "Completed", {}, "Succeeded", "Succeeded", "Completed"),
    ("Failed", "Unknown", {}, "Failed", "Failed", "PodFailed"),
    ("Aborted", "Pending", {"cancelled": True}, "Cancelled", "Cancelled", "stopped"),
    ("Aborted", "Pending", {}, "Failed", "Aborted", "aborted"),
    ("Terminated", "Pending", {}, "Failed", "Aborted", "terminated"),
])
def test_phases(job, podgroup, kwargs, phase, reason, words):
    live = None if job is None else _job(job, running=4 if job == "Running" else 0, retry=2,
                                         reason="PodFailed" if job == "Failed" else "")
    pg = None if podgroup is None else _podgroup(podgroup)
    status = interpret_volcano(job=live, podgroup=pg, now=NOW, **kwargs)
    assert (status.phase, status.reason) == (phase, reason)
    assert words in status.message


def test_closed_queue_is_explained_and_refused():
    queue = {"metadata": {"name": "vision"}, "status": {"state": "Closed"}}
    status = interpret_volcano(job=_job("Pending"), podgroup=_podgroup("Pending"), now=NOW,
                               queue=queue)
    assert (status.phase, status.reason) == ("Queued", "QueueClosed")
    assert "queue 'vision' is closed" in status.message
    assert "is closed" in queue_refusal(queue)
    assert queue_refusal({"metadata": {"name": "v"}, "status": {"state": "Open"}}) is None
    assert queue_refusal({"metadata": {"name": "v"}}) is None
    assert "does not exist" in queue_refusal(None)


def test_gang_running_and_partly_placed():
    job = _job("Pending", running=3, tasks={"master": 1, "worker": 2})
    assert gang_running(job, _podgroup("Inqueue", running=1)) == (3, 4)
    assert gang_running(_job("Pending"), _podgroup("Inqueue", running=2)) == (2, 4)
    assert gang_running(None, None) == (0, 0)
    assert is_partly_placed(job, _podgroup("Inqueue", running=3)) is True
    assert is_partly_placed(job, None) is False  # no PodGroup yet: not being placed
    assert is_partly_placed(_job("Pending"), _podgroup("Pending")) is False  # nothing runs
    assert is_partly_placed(_job("Running", running=4), _podgroup("Running", running=4)) is False
    # Restarting or over: never "partly placed", whatever the counts say.
    for phase in ("Restarting", "Aborted", "Completed"):
        assert is_partly_placed(_job(phase, running=2), _podgroup("Inqueue", running=2)) is False
