"""Golden and schema tests of the gang-job renderer (batch/v1 Indexed Job and JobSet)."""

import dataclasses

import pytest

from queues.backends.kueue.jobs import job_kind, render_kueue_job, workload_name
from queues.jobs import JobSpec
from queues.render.labels import job_labels, job_selector
from tests.schema import ManifestError, validate_manifest

SPEC = JobSpec(
    namespace="vision",
    name="resnet-ddp",
    image="nvcr.io/nvidia/pytorch:24.01-py3",
    command=("torchrun",),
    args=("--nproc-per-node=4", "train.py"),
    env=(("EPOCHS", "90"), ("NCCL_DEBUG", "INFO")),
    workers=2,
    gpus_per_worker=4,
    gpu_resource="nvidia.com/gpu",
    flavor="h100-80gb",
    cpu_per_worker="16",
    memory_per_worker="128Gi",
    priority_class="high",
    kind="job",
    max_runtime_seconds=7200,
    local_queue="vision",
    job_label="17",
)

PORTAL_LABELS = {
    "app.kubernetes.io/managed-by": "gpu-quota-portal",
    "app.kubernetes.io/part-of": "gpu-quota-portal",
    "portal.gpu/kind": "job",
    "portal.gpu/team": "vision",
    "portal.gpu/job": "17",
}

POD_TEMPLATE = {
    "metadata": {"labels": PORTAL_LABELS},
    "spec": {
        "restartPolicy": "Never",
        "containers": [{
            "name": "worker",
            "image": "nvcr.io/nvidia/pytorch:24.01-py3",
            "command": ["torchrun"],
            "args": ["--nproc-per-node=4", "train.py"],
            "env": [{"name": "EPOCHS", "value": "90"}, {"name": "NCCL_DEBUG", "value": "INFO"}],
            "resources": {
                "requests": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "4"},
                "limits": {"nvidia.com/gpu": "4", "memory": "128Gi"},
            },
        }],
    },
}


def test_indexed_job_golden():
    assert render_kueue_job(SPEC) == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "resnet-ddp",
            "namespace": "vision",
            "labels": {
                "kueue.x-k8s.io/queue-name": "vision",
                "kueue.x-k8s.io/priority-class": "high",
                **PORTAL_LABELS,
            },
        },
        "spec": {
            "suspend": True,
            "parallelism": 2,
            "completions": 2,
            "completionMode": "Indexed",
            "backoffLimit": 0,
            "activeDeadlineSeconds": 7200,
            "template": POD_TEMPLATE,
        },
    }


def test_jobset_golden():
    spec = dataclasses.replace(SPEC, kind="jobset")
    assert render_kueue_job(spec) == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "resnet-ddp",
            "namespace": "vision",
            "labels": {
                "kueue.x-k8s.io/queue-name": "vision",
                "kueue.x-k8s.io/priority-class": "high",
                **PORTAL_LABELS,
            },
        },
        "spec": {
            "suspend": True,
            "network": {"enableDNSHostnames": True},
            "failurePolicy": {"maxRestarts": 0},
            "replicatedJobs": [{
                "name": "workers",
                "replicas": 1,
                "template": {
                    "metadata": {"labels": PORTAL_LABELS},
                    "spec": {
                        "parallelism": 2,
                        "completions": 2,
                        "completionMode": "Indexed",
                        "backoffLimit": 0,
                        "activeDeadlineSeconds": 7200,
                        "template": POD_TEMPLATE,
                    },
                },
            }],
        },
    }


def test_minimal_job_omits_optional_fields():
    spec = dataclasses.replace(SPEC, command=(), args=(), env=(), priority_class="",
                               max_runtime_seconds=None, workers=1, gpus_per_worker=1,
                               gpu_resource="nvidia.com/mig-1g.10gb")
    job = render_kueue_job(spec)
    assert job["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "vision", **PORTAL_LABELS}
    assert "activeDeadlineSeconds" not in job["spec"]
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container == {
        "name": "worker",
        "image": "nvcr.io/nvidia/pytorch:24.01-py3",
        "resources": {
            "requests": {"cpu": "16", "memory": "128Gi", "nvidia.com/mig-1g.10gb": "1"},
            "limits": {"nvidia.com/mig-1g.10gb": "1", "memory": "128Gi"},
        },
    }
    validate_manifest(job)


KINDS_AND_SIZES = [(kind, workers, gpus) for kind in ("job", "jobset")
                   for workers, gpus in ((1, 1), (2, 4), (64, 8))]


@pytest.mark.parametrize(("kind", "workers", "gpus"), KINDS_AND_SIZES)
def test_rendered_job_is_valid_against_the_schema(kind, workers, gpus):
    spec = dataclasses.replace(SPEC, kind=kind, workers=workers, gpus_per_worker=gpus,
                               name="x" * 47)
    manifest = render_kueue_job(spec)
    validate_manifest(manifest)
    assert (manifest["apiVersion"], manifest["kind"]) == job_kind(kind)


@pytest.mark.parametrize("kind", ["job", "jobset"])
def test_gpu_requests_equal_limits_and_total_pods_equal_workers(kind):
    spec = dataclasses.replace(SPEC, kind=kind, workers=3, gpus_per_worker=8)
    manifest = render_kueue_job(spec)
    if kind == "jobset":
        (rj,) = manifest["spec"]["replicatedJobs"]
        job_spec, replicas = rj["template"]["spec"], rj["replicas"]
    else:
        job_spec, replicas = manifest["spec"], 1
    assert replicas * job_spec["parallelism"] == 3
    assert job_spec["completions"] == job_spec["parallelism"]
    resources = job_spec["template"]["spec"]["containers"][0]["resources"]
    assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"] == "8"
    assert manifest["spec"]["suspend"] is True
    pod_spec = job_spec["template"]["spec"]
    assert "nodeSelector" not in pod_spec and "tolerations" not in pod_spec


def test_schema_catches_a_broken_job():
    manifest = render_kueue_job(SPEC)
    manifest["spec"]["completionMode"] = 3
    with pytest.raises(ManifestError, match="completionMode"):
        validate_manifest(manifest)
    jobset = render_kueue_job(dataclasses.replace(SPEC, kind="jobset"))
    jobset["spec"]["network"]["enableDNSHostname"] = True  # typo
    with pytest.raises(ManifestError, match="enableDNSHostname"):
        validate_manifest(jobset)


def test_job_labels_and_selector():
    assert job_labels("vision", "17") == PORTAL_LABELS
    assert job_selector("vision") == (
        "app.kubernetes.io/managed-by=gpu-quota-portal,portal.gpu/kind=job,portal.gpu/team=vision"
    )
    assert job_selector("vision", "17").endswith(",portal.gpu/job=17")


def test_workload_name_follows_kueue():
    # Kueue: lower(kind)-name-sha1("Job\nbatch\n<name>\n<uid>")[:5]; digests computed with
    # `printf 'Job\nbatch\nresnet-ddp\n<uid>' | sha1sum`.
    uid = "0b9c6f36-8f8a-4f55-a1a3-1a7b2c3d4e5f"
    assert workload_name("Job", "resnet-ddp", uid) == "job-resnet-ddp-7c29e"
    assert workload_name("jobset", "resnet-ddp", uid) == "jobset-resnet-ddp-1e0c3"
    assert len(workload_name("job", "a" * 63, uid, max_length=63)) == 63
