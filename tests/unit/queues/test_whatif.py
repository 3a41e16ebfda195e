"""queues/whatif.py: recent demand through the simulator twice, with exact figures."""

import random

import pytest

from queues.specs import CohortSpec, FlavorQuota, FlavorSpec, SpecError, TeamQueueSpec
from queues.whatif import (
    Demand,
    SimCluster,
    TeamFigures,
    TeamWhatIf,
    WhatIfResult,
    describe,
    format_duration,
    node_pools_for,
    percentile,
    simulate,
    what_if,
)

GPU = "nvidia.com/gpu"
H100 = FlavorSpec(name="h100", gpu_resource=GPU, gpu_model="H100", physical_gpus=8)
A100 = FlavorSpec(name="a100", gpu_resource=GPU, gpu_model="A100", physical_gpus=16)
POOLS = node_pools_for([H100, A100], {"h100": 8, "a100": 8})
DEPT = (CohortSpec(name="dept"),)


def team(slug, *quotas):
    """A team of cohort ``dept``; quotas are (flavor, nominal, lending_limit)."""
    return TeamQueueSpec(slug=slug, display_name=slug, cohort="dept", quotas=tuple(
        FlavorQuota(flavor=f, gpu_resource=GPU, nominal_gpus=n, lending_limit_gpus=lend)
        for f, n, lend in quotas))


def cluster(*teams, backend="kueue", pools=POOLS):
    return SimCluster(backend, (A100, H100), DEPT, tuple(teams), pools)


def job(name, team_, t, gpus, duration, flavor="h100", workers=1, priority=0):
    return Demand(name=name, team=team_, submit_time=t, workers=workers, gpus_per_worker=gpus,
                  flavor=flavor, duration=duration, priority=priority)


def rows(result):
    return {row.team: row for row in result.teams}


def test_a_request_that_takes_gpus_from_a_busy_cohort_raises_the_other_teams_wait():
    # h100: one node of 8 GPUs; team-a and team-b hold 4 each. team-a asks for 8
    # (over-commit: the cohort's quota grows, the node does not).
    before = cluster(team("team-a", ("h100", 4, None)), team("team-b", ("h100", 4, None)))
    after = cluster(team("team-a", ("h100", 8, None)), team("team-b", ("h100", 4, None)))
    demand = [job("a1", "team-a", 0, 8, 600), job("b1", "team-b", 10, 4, 600)]
    result = what_if(before=before, after=after, demand=demand)
    a, b = rows(result)["team-a"], rows(result)["team-b"]
    # before: a1 borrows 4, b1 reclaims them at t=10 (a1 preempted, back at 610)
    assert (b.before.mean_wait_seconds, b.before.p95_wait_seconds) == (0.0, 0.0)
    assert (a.before.mean_wait_seconds, a.before.jobs_preempted, a.before.preemptions) == (
        610.0, 1, 1)
    assert a.before.borrowed_peak_gpus == 4
    assert a.before.borrowed_mean_gpus == round(4 * (10 + 600) / 1210, 3)  # 2.017
    # after: a1 is within its nominal 8, the node is full, b1 waits until 600
    assert (b.after.mean_wait_seconds, b.after.p95_wait_seconds) == (590.0, 590.0)
    assert (a.after.mean_wait_seconds, a.after.jobs_preempted, a.after.borrowed_peak_gpus) == (
        0.0, 0, 0)
    assert b.delta["p95_wait_seconds"] == 590.0 and b.delta["mean_wait_seconds"] == 590.0
    assert a.delta == {"mean_wait_seconds": -610.0, "p95_wait_seconds": -610.0,
                       "borrowed_mean_gpus": -2.017, "borrowed_peak_gpus": -4,
                       "jobs_preempted": -1, "preemptions": -1, "not_admitted": 0}
    assert result.horizon_seconds == 1210.0 and result.jobs == 2
    assert result.sentences == (
        "team-a's p95 wait falls from 10 min to 0 s",
        "team-a's count of preempted jobs falls from 1 to 0",
        "team-a's peak borrowing falls from 4 to 0 GPUs",
        "team-b's p95 wait rises from 0 s to 10 min",
    )


@pytest.mark.parametrize("backend", ["kueue", "volcano"])
def test_a_lower_lending_limit_makes_the_borrowing_team_wait(backend):
    # team-a is idle and lends its 4 GPUs; the request sets its lendingLimit to 0.
    # Only the h100 nodes: Volcano counts capacity per resource name, not per flavor.
    pools = node_pools_for([H100], {"h100": 8})
    before = cluster(team("team-a", ("h100", 4, None)), team("team-b", ("h100", 4, None)),
                     backend=backend, pools=pools)
    after = cluster(team("team-a", ("h100", 4, 0)), team("team-b", ("h100", 4, None)),
                    backend=backend, pools=pools)
    demand = [job("b1", "team-b", 0, 4, 600), job("b2", "team-b", 0, 4, 600)]
    b = rows(what_if(before=before, after=after, demand=demand))["team-b"]
    assert (b.before.mean_wait_seconds, b.before.p95_wait_seconds) == (0.0, 0.0)
    # waits 0 and 600: mean 300, p95 = 0 + 0.95 * 600
    assert (b.after.mean_wait_seconds, b.after.p95_wait_seconds) == (300.0, 570.0)
    # borrowed 4 GPUs for 600 of the 1200 s horizon
    assert (b.before.borrowed_mean_gpus, b.before.borrowed_peak_gpus) == (2.0, 4)
    assert (b.after.borrowed_mean_gpus, b.after.borrowed_peak_gpus) == (0.0, 0)


def test_a_request_on_an_idle_flavor_changes_nothing():
    before = cluster(team("team-a", ("a100", 4, None), ("h100", 4, None)),
                     team("team-b", ("h100", 4, None)))
    after = cluster(team("team-a", ("a100", 12, None), ("h100", 4, None)),
                    team("team-b", ("h100", 4, None)))
    demand = [job("a1", "team-a", 0, 8, 600), job("b1", "team-b", 10, 4, 600),
              job("b2", "team-b", 20, 4, 300)]
    result = what_if(before=before, after=after, demand=demand)
    for row in result.teams:
        assert row.before == row.after
        assert set(row.delta.values()) <= {0, None}
    assert result.fingerprint_before == result.fingerprint_after
    assert result.sentences == (
        "No team's waits, borrowing or preemptions change noticeably with the "
        "recent demand.",)
    # the busy h100 figures are really there
    assert rows(result)["team-a"].before.jobs_preempted == 1


def _random_demand(seed, n=120):
    rng = random.Random(seed)
    teams = ["team-a", "team-b", "team-c"]
    return [job(f"j{i}", rng.choice(teams), round(rng.uniform(0, 3600), 1),
                rng.choice([1, 2, 4, 8]), round(rng.uniform(60, 1800), 1),
                flavor=rng.choice(["h100", "a100"]), workers=rng.choice([1, 1, 2]),
                priority=rng.choice([0, 100])) for i in range(n)]


@pytest.mark.parametrize("backend", ["kueue", "volcano"])
def test_same_inputs_give_an_identical_result(backend):
    quotas = (("a100", 8, None), ("h100", 2, None))
    before = cluster(team("team-a", *quotas), team("team-b", *quotas),
                     team("team-c", ("a100", 0, None), ("h100", 4, None)), backend=backend)
    after = cluster(team("team-a", ("a100", 8, None), ("h100", 6, None)), team("team-b", *quotas),
                    team("team-c", ("a100", 0, None), ("h100", 4, None)), backend=backend)
    demand = _random_demand(7)
    first = what_if(before=before, after=after, demand=demand)
    second = what_if(before=before, after=after, demand=list(demand))
    shuffled = list(demand)
    random.Random(1).shuffle(shuffled)
    third = what_if(before=before, after=after, demand=shuffled)
    assert first == second == third
    assert first.as_dict() == third.as_dict()
    assert first.jobs == 120
    assert sum(row.before.admitted for row in first.teams) > 0
    assert first.fingerprint_before != first.fingerprint_after


def test_jobs_that_can_never_be_admitted_are_counted_not_averaged():
    before = cluster(team("team-a", ("h100", 4, None)))
    after = cluster(team("team-a", ("h100", 8, None)))
    demand = [job("big", "team-a", 0, 8, 100), job("small", "team-a", 0, 2, 100)]
    a = rows(what_if(before=before, after=after, demand=demand))["team-a"]
    assert (a.before.jobs, a.before.admitted, a.before.not_admitted) == (2, 1, 1)
    assert a.before.mean_wait_seconds == 0.0
    assert (a.after.admitted, a.after.not_admitted, a.delta["not_admitted"]) == (2, 0, -1)


def test_a_team_without_jobs_has_no_waits():
    before = cluster(team("team-a", ("h100", 4, None)), team("team-b", ("h100", 4, None)))
    result = what_if(before=before, after=before, demand=[job("a1", "team-a", 0, 2, 10)])
    b = rows(result)["team-b"]
    assert (b.before.jobs, b.before.mean_wait_seconds, b.before.p95_wait_seconds) == (0, None, None)
    assert b.delta["p95_wait_seconds"] is None


def test_a_demand_row_for_an_unknown_team_names_the_field():
    with pytest.raises(SpecError) as err:
        simulate(cluster(team("team-a", ("h100", 4, None))), [job("x", "team-z", 0, 1, 10)])
    assert err.value.field == "demand[0].queue"
    with pytest.raises(SpecError) as err:
        job("x", "team-a", 0, 1, 0).sim_job()
    assert err.value.field == "duration"


def test_backends_must_match_and_be_known():
    with pytest.raises(SpecError) as err:
        SimCluster("slurm", (), (), ())
    assert err.value.field == "backend"
    with pytest.raises(SpecError) as err:
        what_if(before=cluster(backend="kueue"), after=cluster(backend="volcano"), demand=[])
    assert err.value.field == "after.backend"


def test_node_pools_from_capacity():
    sliced = FlavorSpec(name="t4", gpu_resource=GPU, gpu_model="T4", physical_gpus=12,
                        time_slicing_replicas=2)
    small = FlavorSpec(name="l4", gpu_resource=GPU, gpu_model="L4", physical_gpus=2)
    unknown = FlavorSpec(name="x", gpu_resource=GPU, gpu_model="X")
    pools = node_pools_for([sliced, small, unknown], {"t4": 4, "l4": 8})
    assert [(p.flavor, p.nodes, p.units_per_node) for p in pools] == [
        ("t4", 3, 8), ("l4", 1, 2)]
    with pytest.raises(SpecError) as err:
        node_pools_for([small], {"l4": 0})
    assert err.value.field == "devices_per_node[l4]"


def test_percentile_is_linear_between_closest_ranks():
    assert percentile([], 95) is None
    assert percentile([42.0], 95) == 42.0
    assert percentile([0.0, 600.0], 95) == 570.0
    assert percentile(list(range(1, 101)), 95) == pytest.approx(95.05)
    with pytest.raises(ValueError, match="within 0..100"):
        percentile([1.0], 101)


def test_durations_in_words():
    assert [format_duration(s) for s in (None, 0, 44.6, 89, 90, 720, 2400, 5399, 5400, 9000)] == [
        "-", "0 s", "45 s", "89 s", "2 min", "12 min", "40 min", "90 min", "1.5 h", "2.5 h"]


def _figures(team_, p95, preempted=0, peak=0, not_admitted=0):
    return TeamFigures(team=team_, jobs=3, admitted=3 - not_admitted, not_admitted=not_admitted,
                       mean_wait_seconds=p95, p95_wait_seconds=p95, borrowed_mean_gpus=0.0,
                       borrowed_peak_gpus=peak, jobs_preempted=preempted, preemptions=preempted)


def test_describe_names_the_team_and_the_move():
    def row(team_, before, after):
        return TeamWhatIf(team=team_, before=before, after=after, delta={})

    result = WhatIfResult(backend="kueue", jobs=9, horizon_seconds=1.0, teams=(
        row("team-a", _figures("team-a", 0, preempted=2, peak=8), _figures("team-a", 30)),
        row("team-b", _figures("team-b", 720), _figures("team-b", 2400)),
        row("team-c", _figures("team-c", 100), _figures("team-c", 130, not_admitted=1)),
        # small moves: 6 % of the wait, 1 of 13 preempted, 3 of 27 GPUs
        row("team-d", _figures("team-d", 6000, preempted=13, peak=27),
            _figures("team-d", 6360, preempted=14, peak=30)),
        row("team-e", _figures("team-e", 6000, preempted=5, peak=10),
            _figures("team-e", 7200, preempted=3, peak=12)),
    ), fingerprint_before="x", fingerprint_after="y")
    assert describe(result) == [
        "team-a's count of preempted jobs falls from 2 to 0",
        "team-a's peak borrowing falls from 8 to 0 GPUs",
        "team-b's p95 wait rises from 12 min to 40 min",
        "team-c's count of jobs never admitted rises from 0 to 1",
        "team-e's p95 wait rises from 1.7 h to 2.0 h",
        "team-e's count of preempted jobs falls from 5 to 3",
        "team-e's peak borrowing rises from 10 to 12 GPUs",
    ]  # team-a's and team-c's 30 s wait changes are under a minute
