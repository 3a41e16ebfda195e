"""A small Kueue world for reconcile tests, with the emulator as its cluster.

One cluster, an H100 flavor, a cohort ``research`` with ``team-a`` (16 GPUs)
and ``team-b`` (8 GPUs, borrowing limit 4); users ``staff`` and ``lead_a``.
"""

import time
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model

from portal.models import Cluster, Cohort, GpuFlavor, Membership, QuotaGrant, Team


@pytest.fixture
def world(transactional_db, kube_emulator):
    """Create the world; return a dict of its rows, users and the emulator (``server``)."""
    users = get_user_model().objects
    staff = users.create_user("staff", password="pw-staff-123", is_staff=True)
    lead_a = users.create_user("lead_a", password="pw-lead-a-123")
    cluster = Cluster.objects.create(name="gpu-east", backend="kueue")
    h100 = GpuFlavor.objects.create(
        cluster=cluster, name="h100", gpu_resource="nvidia.com/gpu", gpu_model="H100",
        physical_gpus=64, cpu_per_gpu="12", memory_per_gpu="96Gi",
        node_labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    )
    cohort = Cohort.objects.create(cluster=cluster, name="research", weight=Decimal("1"))
    team_a = Team.objects.create(slug="team-a", name="Team A", cluster=cluster, cohort=cohort)
    team_b = Team.objects.create(slug="team-b", name="Team B", cluster=cluster, cohort=cohort)
    QuotaGrant.objects.create(team=team_a, flavor=h100, nominal_gpus=16)
    QuotaGrant.objects.create(team=team_b, flavor=h100, nominal_gpus=8, borrowing_limit_gpus=4)
    Membership.objects.create(user=lead_a, team=team_a, role="lead")
    return {"staff": staff, "lead_a": lead_a, "cluster": cluster, "h100": h100,
            "cohort": cohort, "team_a": team_a, "team_b": team_b, "server": kube_emulator}


@pytest.fixture
def converged():
    """``converged(cluster, timeout=30)``: wait until the worker applied its spec generation."""

    def wait(cluster: Cluster, timeout: float = 30.0) -> Cluster:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            cluster.refresh_from_db()
            if (cluster.applied_generation >= cluster.spec_generation
                    and cluster.last_reconciled_at is not None):
                return cluster
            time.sleep(0.1)
        pytest.fail(f"cluster {cluster.name} did not converge: applied "
                    f"{cluster.applied_generation} < spec {cluster.spec_generation}; "
                    f"last error: {cluster.last_error!r}")

    return wait
