"""Golden tests: Namespace, ResourceQuota (the admission-safe hard cap), PriorityClass."""

from decimal import Decimal

import pytest

from queues.render import amounts, core
from queues.specs import SpecError

from .examples import (
    COHORTS,
    FLAVORS_BY_NAME,
    HIGH,
    LOW,
    NLP,
    SPEECH,
    TEAMS,
    VISION,
    shared_labels,
    team_labels,
)

GI = 2**30


def _capacity(team):
    return amounts.cohort_capacity(
        team.cohort, teams=TEAMS, cohorts=COHORTS, flavors_by_name=FLAVORS_BY_NAME
    )


def test_namespace():
    assert core.namespace(VISION) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": "vision",
            "labels": team_labels("vision"),
            "annotations": {"portal.gpu/display-name": "Computer Vision"},
        },
    }


def test_namespace_carries_the_pod_security_labels_it_is_given():
    import dataclasses

    import pytest

    from queues.specs import SpecError

    team = dataclasses.replace(VISION, pod_security=(("enforce", "baseline"),
                                                     ("warn", "restricted")))
    assert core.namespace(team)["metadata"]["labels"] == {
        **team_labels("vision"), "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/warn": "restricted"}
    with pytest.raises(SpecError, match="pod_security"):
        dataclasses.replace(VISION, pod_security=(("enforce", "lax"),))
    with pytest.raises(SpecError, match="pod_security"):
        dataclasses.replace(VISION, pod_security=(("deny", "baseline"),))


def test_cohort_capacity_sums_the_whole_tree_and_shared_pools():
    # a100: vision 8 + nlp 0 + research pool 8; t4: vision 8 + nlp 4 (slices).
    assert _capacity(VISION) == {
        "a100-80gb": amounts.Amounts(gpus=16, cpu=Decimal(192), memory=Decimal(1920 * GI)),
        "t4-shared": amounts.Amounts(gpus=12, cpu=Decimal(18), memory=Decimal(96 * GI)),
    }


def test_resource_quota_borrowing_limit_and_unlimited_capped_at_cohort_capacity():
    # a100: nominal 8 + borrowing 4 = 12 GPUs, 144 cores, 1440Gi.
    # t4 (unlimited): max(8, cohort 12) = 12 slices, max(12, 18) cores, max(64Gi, 96Gi).
    assert core.resource_quota(VISION, FLAVORS_BY_NAME, cohort_capacity=_capacity(VISION)) == {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu-quota", "namespace": "vision", "labels": team_labels("vision")},
        "spec": {
            "hard": {
                "requests.cpu": "162",
                "requests.memory": "1536Gi",
                "requests.nvidia.com/gpu": "24",
                "requests.nvidia.com/mig-1g.10gb": "0",
            }
        },
    }


def test_resource_quota_borrow_only_team():
    # a100: 0 + 8 borrowed = 8 GPUs, 96 cores, 960Gi; t4: max(4, 12) slices, 18 cores, 96Gi.
    assert core.resource_quota(NLP, FLAVORS_BY_NAME, cohort_capacity=_capacity(NLP))["spec"] == {
        "hard": {
            "requests.cpu": "114",
            "requests.memory": "1056Gi",
            "requests.nvidia.com/gpu": "20",
            "requests.nvidia.com/mig-1g.10gb": "0",
        }
    }


def test_resource_quota_unlimited_borrowing_uses_given_capacity():
    capacity = {
        "a100-80gb": amounts.Amounts(gpus=0, cpu=Decimal(0), memory=Decimal(0)),
        "t4-shared": amounts.Amounts(gpus=20, cpu=Decimal(30), memory=Decimal(160 * GI)),
    }
    assert core.resource_quota(NLP, FLAVORS_BY_NAME, cohort_capacity=capacity)["spec"] == {
        "hard": {
            "requests.cpu": "126",
            "requests.memory": "1120Gi",
            "requests.nvidia.com/gpu": "28",
            "requests.nvidia.com/mig-1g.10gb": "0",
        }
    }


def test_resource_quota_unlimited_borrowing_without_capacity_is_an_error():
    with pytest.raises(SpecError) as info:
        core.resource_quota(NLP, FLAVORS_BY_NAME)
    assert info.value.field == "cohort_capacity"


def test_resource_quota_without_cohort_mig_profile_requests_prefix_only():
    assert core.resource_quota(SPEECH, FLAVORS_BY_NAME) == {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu-quota", "namespace": "speech", "labels": team_labels("speech")},
        "spec": {
            "hard": {
                "requests.cpu": "24",
                "requests.memory": "200Gi",
                "requests.nvidia.com/gpu": "0",
                "requests.nvidia.com/mig-1g.10gb": "14",
            }
        },
    }


def test_priority_class():
    assert core.priority_class(HIGH) == {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high", "labels": shared_labels("priority-class")},
        "value": 1000,
        "globalDefault": False,
        "description": "Deadline work; preempts low.",
    }
    assert "description" not in core.priority_class(LOW)
