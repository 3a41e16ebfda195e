"""A small but complete cluster used by the renderer tests.

Flavors: a full A100 (tainted pool), a MIG 1g.10gb profile, a time-sliced T4
(8 cards x 4 slices). Cohorts: ``company`` (root) > ``research`` (weight 2,
a shared pool of 8 A100 of which 4 may be lent to ``company``). Teams:

* ``vision`` in research: 8 A100 (borrow <= 4, lend <= 2) and 8 T4 slices
  with unlimited borrowing; may preempt lower priority to borrow.
* ``nlp`` in research: borrow-only on A100 (nominal 0, borrow <= 8) and
  4 T4 slices, unlimited borrowing.
* ``speech``: no cohort, 14 MIG instances with explicit CPU and memory.
"""

from queues.specs import (
    CohortSpec,
    FlavorQuota,
    FlavorSpec,
    PriorityClassSpec,
    Taint,
    TeamQueueSpec,
    Toleration,
)

A100 = FlavorSpec(
    name="a100-80gb",
    gpu_resource="nvidia.com/gpu",
    gpu_model="NVIDIA-A100-SXM4-80GB",
    node_labels={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"},
    node_taints=(Taint(key="nvidia.com/gpu", value="present", effect="NoSchedule"),),
    tolerations=(Toleration(key="nvidia.com/gpu", operator="Exists", effect="NoSchedule"),),
    physical_gpus=32,
    cpu_per_gpu="12",
    memory_per_gpu="120Gi",
)

MIG_1G = FlavorSpec(
    name="a100-mig-1g10gb",
    gpu_resource="nvidia.com/mig-1g.10gb",
    gpu_model="NVIDIA-A100-SXM4-80GB MIG 1g.10gb",
    node_labels={
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "nvidia.com/mig.config": "all-1g.10gb",
    },
    physical_gpus=56,
    cpu_per_gpu="2",
    memory_per_gpu="16Gi",
)

T4_SHARED = FlavorSpec(
    name="t4-shared",
    gpu_resource="nvidia.com/gpu",
    gpu_model="Tesla-T4",
    node_labels={"nvidia.com/gpu.product": "Tesla-T4-SHARED"},
    physical_gpus=8,
    time_slicing_replicas=4,
    cpu_per_gpu="1500m",
    memory_per_gpu="8Gi",
)

FLAVORS = (A100, MIG_1G, T4_SHARED)
FLAVORS_BY_NAME = {f.name: f for f in FLAVORS}

COMPANY = CohortSpec(name="company")
RESEARCH = CohortSpec(
    name="research",
    parent="company",
    weight="2",
    shared_pool=(
        FlavorQuota(
            flavor="a100-80gb", gpu_resource="nvidia.com/gpu", nominal_gpus=8, lending_limit_gpus=4
        ),
    ),
)
COHORTS = (RESEARCH, COMPANY)

VISION = TeamQueueSpec(
    slug="vision",
    display_name="Computer Vision",
    cohort="research",
    weight="1.5",
    quotas=(
        FlavorQuota(
            flavor="a100-80gb",
            gpu_resource="nvidia.com/gpu",
            nominal_gpus=8,
            borrowing_limit_gpus=4,
            lending_limit_gpus=2,
        ),
        FlavorQuota(flavor="t4-shared", gpu_resource="nvidia.com/gpu", nominal_gpus=8),
    ),
    borrow_within_cohort="LowerPriority",
    borrow_within_cohort_max_priority=100,
)

NLP = TeamQueueSpec(
    slug="nlp",
    display_name="Language",
    cohort="research",
    quotas=(
        FlavorQuota(
            flavor="a100-80gb",
            gpu_resource="nvidia.com/gpu",
            nominal_gpus=0,
            borrowing_limit_gpus=8,
        ),
        FlavorQuota(flavor="t4-shared", gpu_resource="nvidia.com/gpu", nominal_gpus=4),
    ),
)

SPEECH = TeamQueueSpec(
    slug="speech",
    display_name="Speech",
    quotas=(
        FlavorQuota(
            flavor="a100-mig-1g10gb",
            gpu_resource="nvidia.com/mig-1g.10gb",
            nominal_gpus=14,
            cpu="24",
            memory="200Gi",
        ),
    ),
)

TEAMS = (VISION, NLP, SPEECH)

HIGH = PriorityClassSpec(name="high", value=1000, description="Deadline work; preempts low.")
LOW = PriorityClassSpec(name="low", value=10)
PRIORITY_CLASSES = (LOW, HIGH)

MANAGED = {
    "app.kubernetes.io/managed-by": "gpu-quota-portal",
    "app.kubernetes.io/part-of": "gpu-quota-portal",
}


def team_labels(slug: str) -> dict:
    return {**MANAGED, "portal.gpu/kind": "team", "portal.gpu/team": slug}


def shared_labels(kind: str) -> dict:
    return {**MANAGED, "portal.gpu/kind": kind}
