"""Every rendered object validates against the upstream schema of its served version."""

import copy
import dataclasses

import pytest

from queues.backends.kueue import objects as kueue
from queues.backends.volcano import objects as volcano
from tests.schema import ManifestError, validate_manifest

from .examples import COHORTS, FLAVORS, PRIORITY_CLASSES, TEAMS

OBJECTS = kueue.desired_objects(
    flavors=FLAVORS, cohorts=COHORTS, priority_classes=PRIORITY_CLASSES, teams=TEAMS
) + [
    # Volcano's whole set: its PriorityClasses, Namespaces and ResourceQuotas are the
    # same objects as Kueue's (same keys), so only its Queues are added here.
    o
    for o in volcano.desired_objects(
        flavors=FLAVORS,
        cohorts=COHORTS,
        priority_classes=PRIORITY_CLASSES,
        teams=[dataclasses.replace(t, weight=2) if t.slug == "vision" else t for t in TEAMS],
    )
    if o["kind"] == "Queue"
]


def _id(obj):
    return f"{obj['apiVersion'].split('/')[0]}/{obj['kind']}/{obj['metadata']['name']}"


@pytest.mark.parametrize("obj", OBJECTS, ids=[_id(o) for o in OBJECTS])
def test_rendered_object_is_valid(obj):
    validate_manifest(obj)


def test_every_rendered_object_carries_the_managed_by_label():
    for obj in OBJECTS:
        labels = obj["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "gpu-quota-portal", _id(obj)
        assert "portal.gpu/kind" in labels


def _find(kind, name):
    return copy.deepcopy(
        next(o for o in OBJECTS if o["kind"] == kind and o["metadata"]["name"] == name)
    )


@pytest.mark.parametrize(
    ("kind", "name", "mutate", "message"),
    [
        ("ClusterQueue", "vision", lambda o: o["spec"].update(cohort="research"), "cohort"),
        ("ClusterQueue", "vision", lambda o: o["spec"].update(queueingStrategy="FIFO"), "FIFO"),
        (
            "ClusterQueue",
            "vision",
            lambda o: o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2].update(
                nominalQuota="eight"
            ),
            "eight",
        ),
        (
            "ClusterQueue",
            "speech",
            lambda o: o["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2].update(
                borrowingLimit="1"
            ),
            "without cohort",
        ),
        (
            "ClusterQueue",
            "vision",
            lambda o: o["spec"]["resourceGroups"][0]["flavors"][0]["resources"].pop(),
            "coveredResources",
        ),
        ("Cohort", "research", lambda o: o["spec"].update(parent="company"), "parent"),
        ("LocalQueue", "vision", lambda o: o["metadata"].pop("namespace"), "namespace"),
        (
            "ResourceFlavor",
            "t4-shared",
            lambda o: o["metadata"].update(namespace="x"),
            "cluster scoped",
        ),
        ("ResourceQuota", "gpu-quota", lambda o: o["spec"].update(hardd={}), "hardd"),
        (
            "ResourceQuota",
            "gpu-quota",
            lambda o: o["spec"]["hard"].update({"limits.nvidia.com/gpu": "1"}),
            "requests",
        ),
        (
            "ResourceQuota",
            "gpu-quota",
            lambda o: o["spec"]["hard"].update({"requests.cpu": "lots"}),
            "lots",
        ),
        ("Namespace", "vision", lambda o: o["metadata"].update(name="Vision"), "Vision"),
        ("Queue", "vision", lambda o: o["spec"].update(weight=0), "weight"),
        ("Queue", "nlp", lambda o: o["spec"]["deserved"].update(cpu="six"), "six"),
        ("PriorityClass", "high", lambda o: o.update(value="high"), "high"),
        (
            "WorkloadPriorityClass",
            "low",
            lambda o: o["metadata"]["labels"].update({"portal.gpu/team": "no way!"}),
            "no way",
        ),
    ],
)
def test_validator_rejects_broken_manifests(kind, name, mutate, message):
    obj = _find(kind, name)
    mutate(obj)
    with pytest.raises(ManifestError, match=message):
        validate_manifest(obj)


def test_validator_rejects_unknown_kinds():
    with pytest.raises(ManifestError):
        validate_manifest({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Queue", "metadata": {}})
    with pytest.raises(ManifestError):
        validate_manifest({"apiVersion": "v1", "kind": "Nothing", "metadata": {"name": "x"}})


def test_missing_crd_folder_skips_locally_and_fails_under_ci(monkeypatch, tmp_path):
    from tests import schema

    monkeypatch.setattr(schema, "CRD_DIR", tmp_path / "nowhere")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="upstream CRDs not found"):
        schema.crd_dir()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="upstream CRDs not found"):
        schema.crd_dir()
