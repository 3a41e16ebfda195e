"""Golden tests: each Kueue renderer against a literal expected manifest."""

from queues.backends.kueue import objects as kueue
from tests.unit.queues.examples import (
    A100,
    COHORTS,
    COMPANY,
    FLAVORS,
    FLAVORS_BY_NAME,
    HIGH,
    MIG_1G,
    NLP,
    PRIORITY_CLASSES,
    RESEARCH,
    SPEECH,
    T4_SHARED,
    TEAMS,
    VISION,
    shared_labels,
    team_labels,
)


def test_resource_flavor_with_taints_and_tolerations():
    assert kueue.resource_flavor(A100) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "a100-80gb", "labels": shared_labels("gpu-flavor")},
        "spec": {
            "nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
            "nodeTaints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
        },
    }


def test_resource_flavor_mig_profile():
    assert kueue.resource_flavor(MIG_1G) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "a100-mig-1g10gb", "labels": shared_labels("gpu-flavor")},
        "spec": {
            "nodeLabels": {
                "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                "nvidia.com/mig.config": "all-1g.10gb",
            }
        },
    }


def test_resource_flavor_time_sliced():
    assert kueue.resource_flavor(T4_SHARED) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ResourceFlavor",
        "metadata": {"name": "t4-shared", "labels": shared_labels("gpu-flavor")},
        "spec": {"nodeLabels": {"nvidia.com/gpu.product": "Tesla-T4-SHARED"}},
    }
    assert T4_SHARED.allocatable_gpus == 32


def test_root_cohort_without_pool_has_no_resource_groups():
    assert kueue.cohort(COMPANY) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "company", "labels": shared_labels("cohort")},
        "spec": {"fairSharing": {"weight": "1"}},
    }


def test_cohort_with_shared_pool():
    assert kueue.cohort(RESEARCH, FLAVORS_BY_NAME) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "research", "labels": shared_labels("cohort")},
        "spec": {
            "parentName": "company",
            "fairSharing": {"weight": "2"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "a100-80gb",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "96", "lendingLimit": "48"},
                                {
                                    "name": "memory",
                                    "nominalQuota": "960Gi",
                                    "lendingLimit": "480Gi",
                                },
                                {
                                    "name": "nvidia.com/gpu",
                                    "nominalQuota": "8",
                                    "lendingLimit": "4",
                                },
                            ],
                        }
                    ],
                }
            ],
        },
    }


def test_cluster_queue_in_cohort_with_borrowing_and_lending_limits():
    assert kueue.cluster_queue(VISION, FLAVORS_BY_NAME) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "vision", "labels": team_labels("vision")},
        "spec": {
            "cohortName": "research",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "vision"}},
            "queueingStrategy": "BestEffortFIFO",
            "preemption": {
                "reclaimWithinCohort": "Any",
                "withinClusterQueue": "LowerPriority",
                "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
            },
            "fairSharing": {"weight": "1500m"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "a100-80gb",
                            "resources": [
                                {
                                    "name": "cpu",
                                    "nominalQuota": "96",
                                    "borrowingLimit": "48",
                                    "lendingLimit": "24",
                                },
                                {
                                    "name": "memory",
                                    "nominalQuota": "960Gi",
                                    "borrowingLimit": "480Gi",
                                    "lendingLimit": "240Gi",
                                },
                                {
                                    "name": "nvidia.com/gpu",
                                    "nominalQuota": "8",
                                    "borrowingLimit": "4",
                                    "lendingLimit": "2",
                                },
                            ],
                        },
                        {
                            "name": "t4-shared",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "12"},
                                {"name": "memory", "nominalQuota": "64Gi"},
                                {"name": "nvidia.com/gpu", "nominalQuota": "8"},
                            ],
                        },
                    ],
                }
            ],
        },
    }


def test_cluster_queue_borrow_only_keeps_zero_nominal():
    assert kueue.cluster_queue(NLP, FLAVORS_BY_NAME) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "nlp", "labels": team_labels("nlp")},
        "spec": {
            "cohortName": "research",
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "nlp"}},
            "queueingStrategy": "BestEffortFIFO",
            "preemption": {
                "reclaimWithinCohort": "Any",
                "withinClusterQueue": "LowerPriority",
                "borrowWithinCohort": {"policy": "Never"},
            },
            "fairSharing": {"weight": "1"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "a100-80gb",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "0", "borrowingLimit": "96"},
                                {"name": "memory", "nominalQuota": "0", "borrowingLimit": "960Gi"},
                                {
                                    "name": "nvidia.com/gpu",
                                    "nominalQuota": "0",
                                    "borrowingLimit": "8",
                                },
                            ],
                        },
                        {
                            "name": "t4-shared",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "6"},
                                {"name": "memory", "nominalQuota": "32Gi"},
                                {"name": "nvidia.com/gpu", "nominalQuota": "4"},
                            ],
                        },
                    ],
                }
            ],
        },
    }


def test_cluster_queue_without_cohort_mig_with_explicit_cpu_memory():
    assert kueue.cluster_queue(SPEECH, FLAVORS_BY_NAME) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "speech", "labels": team_labels("speech")},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "speech"}},
            "queueingStrategy": "BestEffortFIFO",
            "preemption": {
                "reclaimWithinCohort": "Any",
                "withinClusterQueue": "LowerPriority",
                "borrowWithinCohort": {"policy": "Never"},
            },
            "fairSharing": {"weight": "1"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "nvidia.com/mig-1g.10gb"],
                    "flavors": [
                        {
                            "name": "a100-mig-1g10gb",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "24"},
                                {"name": "memory", "nominalQuota": "200Gi"},
                                {"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "14"},
                            ],
                        }
                    ],
                }
            ],
        },
    }


def test_cluster_queue_mixing_full_gpus_and_mig_uses_one_group_with_zero_fillers():
    from queues.specs import FlavorQuota, TeamQueueSpec

    team = TeamQueueSpec(
        slug="mixed",
        display_name="Mixed",
        quotas=(
            FlavorQuota(flavor="a100-80gb", gpu_resource="nvidia.com/gpu", nominal_gpus=2),
            FlavorQuota(
                flavor="a100-mig-1g10gb", gpu_resource="nvidia.com/mig-1g.10gb", nominal_gpus=7
            ),
        ),
    )
    assert kueue.cluster_queue(team, FLAVORS_BY_NAME)["spec"]["resourceGroups"] == [
        {
            "coveredResources": ["cpu", "memory", "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"],
            "flavors": [
                {
                    "name": "a100-80gb",
                    "resources": [
                        {"name": "cpu", "nominalQuota": "24"},
                        {"name": "memory", "nominalQuota": "240Gi"},
                        {"name": "nvidia.com/gpu", "nominalQuota": "2"},
                        {"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "0"},
                    ],
                },
                {
                    "name": "a100-mig-1g10gb",
                    "resources": [
                        {"name": "cpu", "nominalQuota": "14"},
                        {"name": "memory", "nominalQuota": "112Gi"},
                        {"name": "nvidia.com/gpu", "nominalQuota": "0"},
                        {"name": "nvidia.com/mig-1g.10gb", "nominalQuota": "7"},
                    ],
                },
            ],
        }
    ]


def test_local_queue_in_team_namespace():
    assert kueue.local_queue(VISION) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "vision", "namespace": "vision", "labels": team_labels("vision")},
        "spec": {"clusterQueue": "vision"},
    }


def test_workload_priority_class():
    assert kueue.workload_priority_class(HIGH) == {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "high", "labels": shared_labels("priority-class")},
        "value": 1000,
        "description": "Deadline work; preempts low.",
    }


def _ids(objects):
    return [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects]


def test_team_objects_order_namespace_first_localqueue_last():
    objects = kueue.team_objects(SPEECH, FLAVORS_BY_NAME)
    assert _ids(objects) == [
        ("Namespace", None, "speech"),
        ("ResourceQuota", "speech", "gpu-quota"),
        ("ClusterQueue", None, "speech"),
        ("LocalQueue", "speech", "speech"),
    ]
    for obj in objects:
        assert obj["metadata"]["labels"] == team_labels("speech")


def test_cluster_objects_dependency_order():
    objects = kueue.cluster_objects(
        flavors=reversed(FLAVORS), cohorts=COHORTS, priority_classes=PRIORITY_CLASSES
    )
    assert _ids(objects) == [
        ("ResourceFlavor", None, "a100-80gb"),
        ("ResourceFlavor", None, "a100-mig-1g10gb"),
        ("ResourceFlavor", None, "t4-shared"),
        ("Cohort", None, "company"),
        ("Cohort", None, "research"),
        ("WorkloadPriorityClass", None, "high"),
        ("PriorityClass", None, "high"),
        ("WorkloadPriorityClass", None, "low"),
        ("PriorityClass", None, "low"),
    ]
    for obj in objects:
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "gpu-quota-portal"
        assert "portal.gpu/team" not in obj["metadata"]["labels"]


def test_desired_objects_shared_first_then_teams_by_slug_and_deterministic():
    objects = kueue.desired_objects(
        flavors=FLAVORS, cohorts=COHORTS, priority_classes=PRIORITY_CLASSES, teams=TEAMS
    )
    again = kueue.desired_objects(
        flavors=reversed(FLAVORS),
        cohorts=reversed(COHORTS),
        priority_classes=reversed(PRIORITY_CLASSES),
        teams=reversed(TEAMS),
    )
    assert objects == again
    assert [i[0] for i in _ids(objects)][9:] == [
        "Namespace",
        "ResourceQuota",
        "ClusterQueue",
        "LocalQueue",
    ] * 3
    assert [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"] == [
        "nlp",
        "speech",
        "vision",
    ]
