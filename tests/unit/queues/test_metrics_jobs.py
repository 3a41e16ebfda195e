"""usage_snapshot: DCGM samples attributed to the portal's jobs and teams (no network)."""

import pytest

from queues.metrics import JobAllocation, parse_exposition, usage_snapshot
from tests.dcgm import DCGM_TEXT, dcgm_line

pytestmark = pytest.mark.unit

JOBS = [
    JobAllocation("team-a", "train", units=4, units_per_pod=2, flavor="h100", key=1),
    JobAllocation("team-a", "eval", units=1, units_per_pod=1, flavor="h100", key=2),
    JobAllocation("team-b", "mig-ft", units=2, units_per_pod=2, flavor="mig", key=3),
    JobAllocation("team-b", "waiting-for-pods", units=8, units_per_pod=8, key=4),
]


def test_test_series_imply_these_figures():
    snap = usage_snapshot(parse_exposition(DCGM_TEXT), jobs=JOBS, teams=["team-a", "team-b"])
    jobs = {j.key: j for j in snap.jobs}
    # train: 0.75 + 0.5 + 0.25 + 0.5 (GR_ENGINE_ACTIVE wins over GPU_UTIL 90 on gpu 3)
    assert (jobs[1].allocated_gpus, jobs[1].reporting_gpus) == (4, 4)
    assert jobs[1].busy_gpu_equivalents == pytest.approx(2.0)
    assert jobs[1].utilization == pytest.approx(0.5)
    # eval: its only sample is 150 % (impossible, dropped): no data, not 0 %
    assert (jobs[2].allocated_gpus, jobs[2].reporting_gpus) == (1, 0)
    assert jobs[2].busy_gpu_equivalents is None
    assert jobs[2].utilization is None
    assert jobs[2].coverage == 0
    # MIG: two instances of one A100, each a unit with its own ratio
    assert jobs[3].busy_gpu_equivalents == pytest.approx(0.75)
    assert jobs[3].coverage == 1
    # admitted, no pod reporting yet
    assert (jobs[4].allocated_gpus, jobs[4].busy_gpu_equivalents) == (8, None)
    teams = {t.team: t for t in snap.teams}
    assert (teams["team-a"].allocated_gpus, teams["team-a"].reporting_gpus) == (5, 4)
    assert teams["team-a"].busy_gpu_equivalents == pytest.approx(2.0)
    assert teams["team-a"].coverage == pytest.approx(0.8)
    assert (teams["team-b"].allocated_gpus, teams["team-b"].reporting_gpus) == (10, 2)
    assert snap.unattributed.team is None
    assert (snap.unattributed.reporting_gpus, snap.unattributed.busy_gpu_equivalents) == (1, 0.25)
    assert snap.dropped == {"DCGM_FI_DEV_GPU_UTIL": 1}


def test_namespace_that_is_no_team_goes_to_unattributed_never_team_empty():
    text = "\n".join([
        dcgm_line("DCGM_FI_DEV_GPU_UTIL", 40, gpu="0", node="n", namespace="kube-system",
                  pod="probe-x2kq9"),
        dcgm_line("DCGM_FI_DEV_GPU_UTIL", 60, gpu="1", node="n", namespace="", pod=""),
    ]) + "\n"
    snap = usage_snapshot(parse_exposition(text), jobs=[], teams=["team-a"])
    assert snap.teams == ()
    assert snap.unknown_namespaces == ("kube-system",)
    assert snap.unattributed.reporting_gpus == 2
    assert snap.unattributed.busy_gpu_equivalents == pytest.approx(1.0)


def test_longest_job_name_owns_the_pod_and_unowned_pods_count_for_the_team():
    text = "\n".join([
        dcgm_line("DCGM_FI_DEV_GPU_UTIL", 10, gpu="0", node="n", namespace="t",
                  pod="train-big-0-x2kq9"),
        dcgm_line("DCGM_FI_DEV_GPU_UTIL", 30, gpu="1", node="n", namespace="t",
                  pod="train-0-bz7wm"),
        dcgm_line("DCGM_FI_DEV_GPU_UTIL", 50, gpu="2", node="n", namespace="t",
                  pod="notebook-lmnpq"),
    ]) + "\n"
    jobs = [JobAllocation("t", "train", 1, 1, key="a"),
            JobAllocation("t", "train-big", 1, 1, key="b")]
    snap = usage_snapshot(parse_exposition(text), jobs=jobs, teams=["t"])
    by_key = {j.key: j.busy_gpu_equivalents for j in snap.jobs}
    assert by_key == {"a": pytest.approx(0.3), "b": pytest.approx(0.1)}
    (team,) = snap.teams
    # the notebook pod holds a GPU no portal job owns: allocated and reporting
    assert team.unmatched_gpus == 1
    assert (team.allocated_gpus, team.reporting_gpus) == (3, 3)
    assert team.busy_gpu_equivalents == pytest.approx(0.9)


def test_time_sliced_job_counts_physical_gpus():
    # 4 replicas per GPU; the job holds 2 replicas on one GPU that is 80 % busy
    text = "\n".join(
        dcgm_line("DCGM_FI_DEV_GPU_UTIL", 80, gpu="0", node="n", namespace="t",
                  pod=f"ts-{i}-x2kq9") for i in range(2)
    ) + "\n"
    snap = usage_snapshot(parse_exposition(text), teams=["t"],
                          jobs=[JobAllocation("t", "ts", 2, 1, replicas=4, key=1)])
    (job,) = snap.jobs
    assert job.allocated_gpus == 0.5
    assert job.reporting_gpus == 0.5
    assert job.busy_gpu_equivalents == pytest.approx(0.4)  # 2 x 0.8 / 4


def test_more_reporting_than_allocated_is_capped():
    text = "\n".join(
        dcgm_line("DCGM_FI_DEV_GPU_UTIL", 100, gpu=str(g), node="n", namespace="t",
                  pod="j-0-x2kq9") for g in range(4)
    ) + "\n"
    snap = usage_snapshot(parse_exposition(text), teams=["t"],
                          jobs=[JobAllocation("t", "j", 2, 2, key=1)])
    (job,) = snap.jobs
    assert (job.allocated_gpus, job.reporting_gpus, job.busy_gpu_equivalents) == (2, 2, 2.0)


def test_bad_job_allocations_are_refused():
    with pytest.raises(ValueError, match="team and a job"):
        usage_snapshot([], jobs=[JobAllocation("", "j", 1, 1)], teams=[])
    with pytest.raises(ValueError, match="replicas"):
        usage_snapshot([], jobs=[JobAllocation("t", "j", 1, 1, replicas=0)], teams=["t"])
