"""A small world for quota tests: one Kueue cluster, two flavors, a cohort, two teams.

Users: ``staff``; ``lead_a``/``member_a`` in team-a; ``lead_b``/``member_b`` in team-b.
"""

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model

from portal.models import Cluster, Cohort, GpuFlavor, Membership, QuotaGrant, Team


@pytest.fixture
def world(db):
    """Create the world; return a dict of its rows and users."""
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
    people = {}
    for name, team, role in (("lead_a", team_a, "lead"), ("member_a", team_a, "member"),
                             ("lead_b", team_b, "lead"), ("member_b", team_b, "member")):
        people[name] = users.create_user(name, password=f"pw-{name}-123")
        Membership.objects.create(user=people[name], team=team, role=role)
    return {"staff": staff, "cluster": cluster, "h100": h100, "mig": mig, "cohort": cohort,
            "team_a": team_a, "team_b": team_b, "solo": solo, **people}
