"""A world for job tests: one Kueue cluster, two flavors, a cohort, three teams, users.

``team-a`` holds 16 H100 (no limits) in cohort ``research``; ``team-b`` 32
H100 lending at most 8; so team-a can be admitted at most 16 + 8 = 24 H100.
``solo`` (no cohort) holds 4 H100. No team holds MIG quota. Users: ``staff``;
``lead_a``, ``member_a``, ``member_a2`` in team-a; ``lead_b``, ``member_b``
in team-b. Priority class ``high`` (1000).
"""

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model

from portal.models import Cluster, Cohort, GpuFlavor, Membership, PriorityClass, QuotaGrant, Team
from tests.integration.reconcile.conftest import start_worker  # noqa: F401 - shared fixture


def build_world() -> dict:
    """Create the world (rows and users); return them by name."""
    users = get_user_model().objects
    staff = users.create_user("staff", password="pw-staff-123", is_staff=True)
    cluster = Cluster.objects.create(name="gpu-east", backend="kueue")
    h100 = GpuFlavor.objects.create(
        cluster=cluster, name="h100", gpu_resource="nvidia.com/gpu", gpu_model="H100",
        physical_gpus=64, cpu_per_gpu="12", memory_per_gpu="96Gi",
        node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    )
    mig = GpuFlavor.objects.create(
        cluster=cluster, name="a100-mig-1g", gpu_resource="nvidia.com/mig-1g.10gb",
        gpu_model="A100", physical_gpus=8, cpu_per_gpu="2", memory_per_gpu="16Gi",
    )
    cohort = Cohort.objects.create(cluster=cluster, name="research", weight=Decimal("1"))
    team_a = Team.objects.create(slug="team-a", name="Team A", cluster=cluster, cohort=cohort)
    team_b = Team.objects.create(slug="team-b", name="Team B", cluster=cluster, cohort=cohort)
    solo = Team.objects.create(slug="solo", name="Solo", cluster=cluster)
    QuotaGrant.objects.create(team=team_a, flavor=h100, nominal_gpus=16)
    QuotaGrant.objects.create(team=team_b, flavor=h100, nominal_gpus=32, lending_limit_gpus=8)
    QuotaGrant.objects.create(team=solo, flavor=h100, nominal_gpus=4)
    high = PriorityClass.objects.create(name="high", value=1000)
    people = {}
    for name, team, role in (("lead_a", team_a, "lead"), ("member_a", team_a, "member"),
                             ("member_a2", team_a, "member"), ("lead_b", team_b, "lead"),
                             ("member_b", team_b, "member")):
        people[name] = users.create_user(name, password=f"pw-{name}-123")
        Membership.objects.create(user=people[name], team=team, role=role)
    return {"staff": staff, "cluster": cluster, "h100": h100, "mig": mig, "cohort": cohort,
            "team_a": team_a, "team_b": team_b, "solo": solo, "high": high, **people}


@pytest.fixture
def world(db):
    """The world in a test transaction (no worker: on-commit tasks never run)."""
    return build_world()


def job_payload(**overrides) -> dict:
    """A valid ``POST /api/v1/jobs/`` body for team-a (2 workers x 4 H100), with overrides."""
    body = {
        "team": "team-a", "name": "train-llm", "image": "ghcr.io/acme/train:1.4",
        "command": ["torchrun", "train.py"], "args": ["--epochs", "3"],
        "env": [{"name": "WANDB_PROJECT", "value": "llm"}],
        "workers": 2, "gpus_per_worker": 4, "flavor": "h100",
    }
    body.update(overrides)
    return body
