"""JobSpec validation: every bad input is refused with a SpecError naming the field."""

import dataclasses

import pytest

from queues.jobs import FORBIDDEN_ENV, MAX_NAME_LENGTH, JobSpec, check_image
from queues.specs import SpecError

GOOD = {
    "namespace": "vision",
    "name": "resnet-ddp",
    "image": "ghcr.io/acme/train:1.2",
    "workers": 2,
    "gpus_per_worker": 4,
    "gpu_resource": "nvidia.com/gpu",
    "flavor": "h100-80gb",
    "cpu_per_worker": "16",
    "memory_per_worker": "128Gi",
    "local_queue": "vision",
    "job_label": "17",
}


def make(**changes):
    return JobSpec(**{**GOOD, **changes})


def test_a_good_spec_is_normalised():
    spec = make(command=["python", "train.py"], args=["--lr", "0.1"], env={"EPOCHS": "9"})
    assert spec.command == ("python", "train.py")
    assert spec.args == ("--lr", "0.1")
    assert spec.env == (("EPOCHS", "9"),)
    assert spec.total_gpus == 8
    assert spec.team == "vision"
    assert make(env=[{"name": "A", "value": "1"}, ("B", "2")]).env == (("A", "1"), ("B", "2"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.workers = 3


BAD = [
    # fractional or non-integer GPUs are refused, never rounded
    ("gpus_per_worker", 0.5, "whole number"),
    ("gpus_per_worker", "1.5", "whole number"),
    ("gpus_per_worker", 1.0, "whole number"),
    ("gpus_per_worker", True, "whole number"),
    ("gpus_per_worker", 0, "at least 1"),
    ("gpus_per_worker", -2, "at least 1"),
    ("workers", 0, "at least 1"),
    ("workers", 2.5, "whole number"),
    ("workers", 10_001, "at most"),
    # names
    ("name", "Train", "lowercase"),
    ("name", "train_1", "lowercase"),
    ("name", "-train", "lowercase"),
    ("name", "1train", "start with a letter"),
    ("name", "", "non-empty"),
    ("name", "a" * (MAX_NAME_LENGTH + 1), f"at most {MAX_NAME_LENGTH}"),
    ("namespace", "Vision", "lowercase"),
    ("flavor", "H100", "lowercase"),
    ("local_queue", "", "non-empty"),
    ("priority_class", "High", "lowercase"),
    ("priority_class", None, "must be a name"),
    ("job_label", "", "label value"),
    ("job_label", "a b", "label value"),
    # images
    ("image", "", "non-empty image reference"),
    ("image", "ghcr.io/Acme/train:1", "must be lowercase"),
    ("image", "train:", "not a valid image reference"),
    ("image", "train:1 --privileged", "whitespace"),
    ("image", "train@sha256:abc", "not a valid image reference"),
    ("image", "a" * 64, "not a valid image reference"),
    ("image", "ghcr.io/acme/train:" + "t" * 129, "not a valid image reference"),
    ("image", 7, "non-empty image reference"),
    # quantities
    ("cpu_per_worker", "8 cores", "not a Kubernetes quantity"),
    ("cpu_per_worker", "0", "greater than 0"),
    ("cpu_per_worker", 8, "quantity string"),
    ("memory_per_worker", "8gb", "not a Kubernetes quantity"),
    ("memory_per_worker", "-1Gi", "greater than 0"),
    # other
    ("gpu_resource", "gpu", "vendor domain prefix"),
    ("kind", "mpijob", "must be one of job, jobset"),
    ("max_runtime_seconds", 0, "at least 1"),
    ("max_runtime_seconds", 60.5, "whole number"),
    ("command", "python train.py", "list of strings"),
    ("args", ["ok", 3], "must be a string"),
]


@pytest.mark.parametrize(("field", "value", "message"), BAD,
                         ids=[f"{f}={v!r}"[:60] for f, v, _ in BAD])
def test_bad_value_names_the_field(field, value, message):
    with pytest.raises(SpecError) as info:
        make(**{field: value})
    assert info.value.field.split("[")[0] == field
    assert message in info.value.message


@pytest.mark.parametrize("name", sorted(FORBIDDEN_ENV))
def test_forbidden_env_vars_are_refused(name):
    with pytest.raises(SpecError) as info:
        make(env={"OK": "1", name: "all"})
    assert info.value.field == "env[1]"
    assert name in info.value.message
    assert "quota" in info.value.message


@pytest.mark.parametrize(
    ("env", "field", "message"),
    [
        ({"1ABC": "x"}, "env[0]", "not a valid variable name"),
        ({"MY-VAR": "x"}, "env[0]", "not a valid variable name"),
        ({"": "x"}, "env[0]", "not a valid variable name"),
        ([("A", "1"), ("A", "2")], "env[1]", "set twice"),
        ([("A", 1)], "env[0]", "must be a string"),
        (["A=1"], "env[0]", "(name, value) pair"),
        ("A=1", "env", "(name, value) pairs"),
    ],
)
def test_bad_env_names_the_entry(env, field, message):
    with pytest.raises(SpecError) as info:
        make(env=env)
    assert info.value.field == field
    assert message in info.value.message


@pytest.mark.parametrize(
    "image",
    [
        "ubuntu",
        "ubuntu:22.04",
        "nvcr.io/nvidia/pytorch:24.01-py3",
        "localhost:5000/team/train:v1",
        "registry.example.com:443/a/b/c@sha256:" + "0" * 64,
        "ghcr.io/acme/train:1.2@sha256:" + "f" * 64,
    ],
)
def test_valid_images_are_kept_as_given(image):
    assert check_image(image) == image
    assert make(image=image).image == image
