"""A cluster whose fairness numbers are worked out by hand (shared by the fairness tests).

Flavor ``a100``: 12 physical GPUs, 8 cores and 64Gi per GPU (capacity 96 cores, 768Gi).
Cohort ``research``: team-a, team-b, team-c, nominal 4 GPUs each (pool 12).

* team-a runs 6 GPUs (one 6-GPU job with 24 cores and 600Gi) plus a 1-GPU job that
  asked for t4-shared but Kueue admitted to a100 (it counts here, with the a100's
  per-GPU 8 cores and 64Gi): usage 7 GPUs, 32 cores, 664Gi; a finished job no longer
  counts. Dominant share: memory 664/768 = 83/96 (GPU 7/12, CPU 1/3).
* team-b runs 4 GPUs (two 2-GPU workers, derived 32 cores, 256Gi) and queues 2; demand 6.
  GPU, CPU and memory are all 1/3: the tie goes to "cpu" (the name that sorts first).
* team-c queues 8 GPUs (one Submitted 4, one Queued 2x2, a Cancelled 8 that does not
  count); usage 0, demand 8.

Water-filling (queues.fairness): guarantees min(nominal, demand) = 4, 4, 4 use the
whole pool, so fair shares are 4 / 4 / 4. team-a is 3 above, team-c 4 below, team-b at
its share: "team-c is 4 GPUs below its fair share; 3 could be reclaimed from team-a
(1 GPU cannot be reclaimed)". Jain over usage/fair = 7/4, 1, 0:
(2.75)^2 / (3 * (49/16 + 1)) = (121/16) / (195/16) = 121/195 = 0.6205...
Kueue share of team-a: borrowed GPU 3 of 12 lendable -> 250; memory 664 - 256 = 408Gi
of 768Gi -> 531.25 (dominant); CPU 32 - 32 = 0. Weight 1 -> 531.25, rounded 532.

Flavor ``t4-shared``: 2 physical GPUs, time-sliced 4 ways (8 slices), 4 cores and 16Gi
per slice (capacity 32 cores, 128Gi). team-d (no cohort) holds 4 slices = 1 GPU and
runs 2 workers x 1 slice with 12 cores each = 0.5 GPU, 24 cores: dominant CPU 24/32 =
0.75; fair share min(nominal 1, demand 0.5) = 0.5; Jain over [1] = 1.

Users: ``staff``; ``lead_a``/``member_a`` in team-a; ``member_c`` in team-c;
``member_d`` in team-d; ``outsider`` in no team.
"""

from tests.factories import (
    make_cluster,
    make_cohort,
    make_flavor,
    make_grant,
    make_job,
    make_team,
    make_user,
)

GiB = 2**30


def build_fairness_world() -> dict:
    """Create the rows described above; return them by name."""
    cluster = make_cluster(name="gpu-east")
    a100 = make_flavor(cluster=cluster, name="a100", physical_gpus=12, cpu_per_gpu="8",
                       memory_per_gpu="64Gi")
    t4 = make_flavor(cluster=cluster, name="t4-shared", physical_gpus=2,
                     time_slicing_replicas=4, cpu_per_gpu="4", memory_per_gpu="16Gi",
                     gpu_model="NVIDIA-T4")
    research = make_cohort(cluster=cluster, name="research")
    teams = {s: make_team(cluster=cluster, slug=s, cohort=research)
             for s in ("team-a", "team-b", "team-c")}
    teams["team-d"] = make_team(cluster=cluster, slug="team-d")
    for slug in ("team-a", "team-b", "team-c"):
        make_grant(team=teams[slug], flavor=a100, nominal_gpus=4)
    make_grant(team=teams["team-d"], flavor=t4, nominal_gpus=4)

    a, b, c, d = (teams[s] for s in ("team-a", "team-b", "team-c", "team-d"))
    make_job(team=a, flavor=a100, workers=1, gpus_per_worker=6, phase="Running",
             cpu_per_worker="24", memory_per_worker="600Gi")
    make_job(team=a, flavor=a100, workers=2, gpus_per_worker=4, phase="Succeeded")
    make_job(team=a, flavor=t4, workers=1, gpus_per_worker=1, phase="Admitted",
             admitted_flavor="a100")
    make_job(team=b, flavor=a100, workers=2, gpus_per_worker=2, phase="Running")
    make_job(team=b, flavor=a100, workers=1, gpus_per_worker=2, phase="Queued")
    make_job(team=c, flavor=a100, workers=1, gpus_per_worker=4, phase="Submitted")
    make_job(team=c, flavor=a100, workers=2, gpus_per_worker=2, phase="Queued")
    make_job(team=c, flavor=a100, workers=1, gpus_per_worker=8, phase="Cancelled")
    make_job(team=d, flavor=t4, workers=2, gpus_per_worker=1, phase="Running",
             cpu_per_worker="12")

    users = {
        "staff": make_user("staff", staff=True),
        "lead_a": make_user("lead_a", team=a, role="lead"),
        "member_a": make_user("member_a", team=a),
        "member_c": make_user("member_c", team=c),
        "member_d": make_user("member_d", team=d),
        "outsider": make_user("outsider"),
    }
    return {"cluster": cluster, "a100": a100, "t4": t4, "research": research, **teams, **users}
