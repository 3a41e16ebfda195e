"""A world for utilization tests: one Kueue cluster, an H100 and a MIG flavor, three
teams, jobs in every phase that matters, and the users who look at them.

Jobs holding GPUs (Admitted/Running): team-a ``train`` (2 workers x 2 H100) and ``eval``
(1 x 1), team-b ``mig-ft`` (1 worker x 2 MIG 1g.10gb instances). ``old`` (team-a, 8 GPUs)
has Succeeded and holds nothing. team-c has no jobs.
"""

import pytest

from portal.models import Job
from tests.factories import make_cluster, make_flavor, make_team, make_user


def make_job(*, team, flavor, name, workers=1, gpus_per_worker=1, phase="Running",
             submitter=None, **fields) -> Job:
    """A job row as job_sync leaves it (the portal half of jobs is another branch's)."""
    return Job.objects.create(team=team, flavor=flavor, name=name, workers=workers,
                              gpus_per_worker=gpus_per_worker, phase=phase,
                              submitter=submitter, image="registry.example/train:1", **fields)


@pytest.fixture
def usage_world(db):
    """Create the world; return a dict of its rows and users."""
    cluster = make_cluster(name="gpu-east")
    h100 = make_flavor(cluster=cluster, name="h100", physical_gpus=16, gpu_model="H100")
    mig = make_flavor(cluster=cluster, name="a100-mig-1g", physical_gpus=8,
                      gpu_resource="nvidia.com/mig-1g.10gb", gpu_model="A100")
    team_a = make_team(cluster=cluster, slug="team-a")
    team_b = make_team(cluster=cluster, slug="team-b")
    team_c = make_team(cluster=cluster, slug="team-c")
    staff = make_user("staff", staff=True)
    lead_a = make_user("lead_a", team=team_a, role="lead")
    lead_a.email = "lead-a@example.org"
    lead_a.save()
    owner = make_user("owner_a", team=team_a)
    owner.email = "owner-a@example.org"
    owner.save()
    member_b = make_user("member_b", team=team_b)
    jobs = {
        "train": make_job(team=team_a, flavor=h100, name="train", workers=2, gpus_per_worker=2,
                          submitter=owner),
        "eval": make_job(team=team_a, flavor=h100, name="eval", phase="Admitted",
                         submitter=owner),
        "old": make_job(team=team_a, flavor=h100, name="old", gpus_per_worker=8,
                        phase="Succeeded", submitter=owner),
        "mig-ft": make_job(team=team_b, flavor=mig, name="mig-ft", gpus_per_worker=2,
                           submitter=member_b),
    }
    return {"cluster": cluster, "h100": h100, "mig": mig, "team_a": team_a, "team_b": team_b,
            "team_c": team_c, "staff": staff, "lead_a": lead_a, "owner": owner,
            "member_b": member_b, "jobs": jobs}
