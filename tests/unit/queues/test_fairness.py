"""Worked examples for queues.fairness; every expected number is derived in a comment."""

import json
import math
from decimal import Decimal
from fractions import Fraction as F

import pytest

from queues.fairness import (
    Claim,
    DominantShare,
    FlavorSnapshot,
    Resources,
    TeamInput,
    compute_fairness,
    dominant_shares,
    drf_allocate,
    jain_index,
    kueue_weighted_share,
    reclaim_suggestions,
    water_fill,
)

pytestmark = pytest.mark.unit

GiB = 2**30


# ----------------------------------------------------------------- DRF (Ghodsi et al. 2011)


def test_drf_paper_example_three_and_two_tasks():
    # Section 4 of the paper: <9 CPUs, 18 GB>; A's tasks need <1 CPU, 4 GB>, B's <3 CPUs, 1 GB>.
    # A: 3 tasks = <3 CPU, 12 GB> -> shares 3/9 and 12/18 = 2/3 (memory dominant).
    # B: 2 tasks = <6 CPU, 2 GB>  -> shares 6/9 = 2/3 (CPU dominant) and 2/18.
    # Total 9 CPUs: neither can launch another task.
    result = drf_allocate(
        {"cpu": 9, "memory": 18},
        {"A": {"cpu": 1, "memory": 4}, "B": {"cpu": 3, "memory": 1}},
    )
    assert result.tasks == {"A": 3, "B": 2}
    assert result.dominant["A"] == DominantShare(F(2, 3), "memory")
    assert result.dominant["B"] == DominantShare(F(2, 3), "cpu")
    assert result.usage["A"] == {"cpu": 3, "memory": 12}
    assert result.usage["B"] == {"cpu": 6, "memory": 2}


def test_drf_max_tasks_caps_a_user_and_the_other_takes_the_rest():
    # A may run only 1 task (<1, 4>); B then fills CPUs: (9 - 1) // 3 = 2 tasks, 1 CPU idle.
    result = drf_allocate(
        {"cpu": 9, "memory": 18},
        {"A": {"cpu": 1, "memory": 4}, "B": {"cpu": 3, "memory": 1}},
        max_tasks={"A": 1},
    )
    assert result.tasks == {"A": 1, "B": 2}


def test_drf_weighted_user_gets_twice_the_dominant_share():
    # 12 GPUs, both users need 1 GPU per task; B has weight 2: B's weighted share
    # is (n_B/12)/2, so B runs twice as many tasks: A 4, B 8.
    result = drf_allocate(
        {"gpu": 12}, {"A": {"gpu": 1}, "B": {"gpu": 1}}, weights={"B": 2}
    )
    assert result.tasks == {"A": 4, "B": 8}
    assert result.dominant["A"].share == result.dominant["B"].share == F(1, 3)


def test_drf_rejects_task_demanding_nothing():
    with pytest.raises(ValueError, match="must demand"):
        drf_allocate({"cpu": 4}, {"A": {"cpu": 0}})


def test_drf_task_needing_an_absent_resource_is_never_launched():
    result = drf_allocate({"cpu": 4, "gpu": 0}, {"A": {"cpu": 1, "gpu": 1}, "B": {"cpu": 1}})
    assert result.tasks == {"A": 0, "B": 4}


# ----------------------------------------------------------------- dominant shares


def test_dominant_shares_name_the_right_resource():
    capacity = {"gpu": 8, "cpu": 64, "memory": 512 * GiB}
    shares = dominant_shares(
        capacity,
        {
            # gpu 2/8 = 1/4, cpu 32/64 = 1/2, memory 64/512 = 1/8 -> cpu, 1/2
            "cpu-heavy": {"gpu": 2, "cpu": 32, "memory": 64 * GiB},
            # gpu 6/8 = 3/4, cpu 8/64 = 1/8 -> gpu, 3/4
            "gpu-heavy": {"gpu": 6, "cpu": 8},
            # memory 384/512 = 3/4 beats gpu 1/8 -> memory
            "mem-heavy": {"gpu": 1, "cpu": Decimal("0.5"), "memory": 384 * GiB},
            "idle": {"gpu": 0},
        },
    )
    assert shares["cpu-heavy"] == DominantShare(F(1, 2), "cpu")
    assert shares["gpu-heavy"] == DominantShare(F(3, 4), "gpu")
    assert shares["mem-heavy"] == DominantShare(F(3, 4), "memory")
    assert shares["idle"] == DominantShare(F(0), None)


def test_dominant_share_tie_goes_to_first_name_and_unmeasured_resource_is_skipped():
    # cpu 4/8 = gpu 2/4 = 1/2: tie -> "cpu" sorts first (as Kueue does).
    # memory has capacity 0: "not measured", so its usage cannot dominate.
    shares = dominant_shares(
        {"gpu": 4, "cpu": 8, "memory": 0}, {"t": {"gpu": 2, "cpu": 4, "memory": 10}}
    )
    assert shares["t"] == DominantShare(F(1, 2), "cpu")


def test_dominant_shares_reject_nan_and_negative():
    with pytest.raises(ValueError, match="finite"):
        dominant_shares({"gpu": 4}, {"t": {"gpu": float("nan")}})
    with pytest.raises(ValueError, match="negative"):
        dominant_shares({"gpu": 4}, {"t": {"gpu": -1}})


# ----------------------------------------------------------------- water-filling


def test_water_fill_equal_split_is_exact_thirds():
    # 10 GPUs, three equal teams each wanting 10: level L = 10/3 each, exactly.
    shares = water_fill(10, [Claim("a", 10), Claim("b", 10), Claim("c", 10)])
    assert shares == {"a": F(10, 3), "b": F(10, 3), "c": F(10, 3)}
    assert sum(shares.values()) == 10


def test_water_fill_demand_cap_releases_capacity_to_others():
    # 12 GPUs; a wants 2, b and c want 10. Level rises to 2: a saturates (2+2+2 = 6 used).
    # 6 left for b and c at equal rate: +3 each -> b = c = 5.
    assert water_fill(12, [Claim("a", 2), Claim("b", 10), Claim("c", 10)]) == {
        "a": 2, "b": 5, "c": 5,
    }


def test_water_fill_weights_and_demand_caps():
    # 12 GPUs; a (w1) wants 2, b (w2) wants 10, c (w1) wants 10.
    # a = L, b = 2L, c = L. a saturates at L = 2: used 2 + 4 + 2 = 8, 4 left.
    # b and c continue at 2:1 -> b += 8/3, c += 4/3. b = 4 + 8/3 = 20/3, c = 2 + 4/3 = 10/3.
    shares = water_fill(
        12, [Claim("a", 2), Claim("b", 10, weight=2), Claim("c", 10, weight=1)]
    )
    assert shares == {"a": 2, "b": F(20, 3), "c": F(10, 3)}
    assert sum(shares.values()) == 12


def test_water_fill_reach_cap():
    # a could use 10 but can reach only 3 (nominal + borrowing limit); b gets the other 9.
    assert water_fill(12, [Claim("a", 10, cap=3), Claim("b", 10)]) == {"a": 3, "b": 9}


def test_water_fill_everyone_satisfied_leaves_capacity_unused():
    assert water_fill(100, [Claim("a", 3), Claim("b", 4)]) == {"a": 3, "b": 4}


def test_water_fill_guarantees_keep_nominal_quota():
    # Pool 16 = nominal 12 + 4. Both want 16. With guarantees each keeps its nominal;
    # nothing is left to borrow: 12 / 4. Without guarantees max-min would say 8 / 8.
    with_nominal = water_fill(
        16, [Claim("a", 16, guaranteed=12), Claim("b", 16, guaranteed=4)]
    )
    assert with_nominal == {"a": 12, "b": 4}
    assert water_fill(16, [Claim("a", 16), Claim("b", 16)]) == {"a": 8, "b": 8}


def test_water_fill_guarantees_then_weighted_borrowing():
    # Pool 16: a nominal 8 wants 2; b nominal 4 (w3) wants 10; c nominal 4 (w1) wants 10.
    # Guarantees: a 2, b 4, c 4 -> 6 unused. b and c borrow at 3:1, both far from their
    # demand (6 more each): level 6/4 = 1.5 -> b +4.5, c +1.5 -> b 8.5, c 5.5.
    shares = water_fill(
        16,
        [
            Claim("a", 2, guaranteed=8),
            Claim("b", 10, weight=3, guaranteed=4),
            Claim("c", 10, weight=1, guaranteed=4),
        ],
    )
    assert shares == {"a": 2, "b": F(17, 2), "c": F(11, 2)}


def test_water_fill_overcommitted_guarantees_are_shared_max_min():
    # Capacity 6 cannot honour guarantees 4 + 4; max-min over the guarantees: 3 / 3.
    assert water_fill(6, [Claim("a", 4, guaranteed=4), Claim("b", 4, guaranteed=4)]) == {
        "a": 3, "b": 3,
    }


def test_water_fill_zero_weight_gets_only_leftovers():
    # b (w1) wants 4 of 10 -> 6 left over, which the weight-0 team a may have.
    assert water_fill(10, [Claim("a", 10, weight=0), Claim("b", 4)]) == {"a": 6, "b": 4}
    # b wants all 10 -> nothing left for a.
    assert water_fill(10, [Claim("a", 10, weight=0), Claim("b", 10)]) == {"a": 0, "b": 10}


def test_water_fill_zero_demands_and_zero_capacity():
    assert water_fill(8, [Claim("a", 0), Claim("b", 0)]) == {"a": 0, "b": 0}
    assert water_fill(0, [Claim("a", 5), Claim("b", 5)]) == {"a": 0, "b": 0}
    assert water_fill(8, []) == {}


def test_water_fill_weights_without_demand_caps():
    # 12 GPUs, everyone wants more than there is; weights 1 : 2 : 3 -> L = 12 / 6 = 2:
    # shares 2, 4, 6 (proportional to the weights).
    shares = water_fill(
        12, [Claim("a", 100), Claim("b", 100, weight=2), Claim("c", 100, weight=3)]
    )
    assert shares == {"a": 2, "b": 4, "c": 6}


@pytest.mark.parametrize("n", [2, 3, 5, 10])
def test_jain_one_of_n_is_one_over_n_and_equal_is_one(n):
    assert jain_index([7] + [0] * (n - 1)) == pytest.approx(1 / n)
    assert jain_index([F(3, 7)] * n) == 1.0


def test_water_fill_float_and_decimal_weights_are_exact():
    # weights 0.1 and 0.2 are read as 1/10 and 2/10: 9 GPUs split 3 / 6 exactly.
    shares = water_fill(9, [Claim("a", 9, weight=0.1), Claim("b", 9, weight=Decimal("0.2"))])
    assert shares == {"a": 3, "b": 6}


def test_water_fill_rejects_bad_input():
    with pytest.raises(ValueError, match="negative"):
        water_fill(8, [Claim("a", -1)])
    with pytest.raises(ValueError, match="finite"):
        water_fill(8, [Claim("a", 1, weight=float("nan"))])
    with pytest.raises(ValueError, match="unique"):
        water_fill(8, [Claim("a", 1), Claim("a", 2)])


# ----------------------------------------------------------------- Jain


def test_jain_extremes():
    assert jain_index([1, 1, 1, 1]) == 1.0  # everyone equal
    assert jain_index([1, 0, 0, 0]) == pytest.approx(1 / 4)  # one of n has it all: 1/n
    assert jain_index([5]) == 1.0


def test_jain_worked_value_and_edge_cases():
    # (1 + 2)^2 / (2 * (1 + 4)) = 9 / 10
    assert jain_index([1, 2]) == pytest.approx(0.9)
    assert jain_index([]) is None
    assert jain_index([0, 0]) == 1.0
    with pytest.raises(ValueError, match="negative"):
        jain_index([1, -1])


# ----------------------------------------------------------------- Kueue share


def test_kueue_share_worked_example():
    # Cohort lends 16 GPUs and 128 cores. Team borrows 8 - 4 = 4 GPUs and 40 - 32 = 8 cores.
    # gpu: 4 * 1000 / 16 = 250; cpu: 8 * 1000 / 128 = 62.5 -> max 250 (gpu); weight 2 -> 125.
    share = kueue_weighted_share(
        usage={"gpu": 8, "cpu": 40},
        nominal={"gpu": 4, "cpu": 32},
        lendable={"gpu": 16, "cpu": 128},
        weight=2,
    )
    assert share.value == 125.0
    assert share.rounded == 125
    assert share.dominant_resource == "gpu"
    assert share.borrowing


def test_kueue_share_rounds_up_like_status_weighted_share():
    # 1 * 1000 / 3 = 333.33... -> Kueue reports ceil = 334.
    share = kueue_weighted_share(usage={"gpu": 2}, nominal={"gpu": 1}, lendable={"gpu": 3})
    assert share.value == pytest.approx(1000 / 3)
    assert share.rounded == 334


def test_kueue_share_zero_weight_and_not_borrowing():
    inf = kueue_weighted_share(
        usage={"gpu": 5}, nominal={"gpu": 4}, lendable={"gpu": 16}, weight=0
    )
    assert math.isinf(inf.value)
    assert inf.rounded is None
    assert inf.borrowing
    zero = kueue_weighted_share(
        usage={"gpu": 3}, nominal={"gpu": 4}, lendable={"gpu": 16}, weight=0
    )
    assert zero.value == 0.0
    assert not zero.borrowing
    assert zero.dominant_resource is None


def test_kueue_share_outside_cohort_and_nothing_lendable():
    assert kueue_weighted_share(
        usage={"gpu": 8}, nominal={"gpu": 4}, lendable={"gpu": 16}, in_cohort=False
    ).value == 0.0
    # Borrowing only something the cohort lends none of: borrowing, ratio 0 (as Kueue).
    share = kueue_weighted_share(usage={"gpu": 8}, nominal={"gpu": 4}, lendable={"cpu": 16})
    assert share.borrowing
    assert share.value == 0.0
    assert share.dominant_resource is None


# ----------------------------------------------------------------- reclaim


def _three_team_cohort() -> FlavorSnapshot:
    # One cohort, pool 4 + 4 + 4 = 12 GPUs. Everyone keeps nominal up to demand:
    # a wants 6 (has 6), b wants 6 (has 6), c wants 8 (has 0) -> guarantees 4, 4, 4 = 12,
    # nothing left to borrow: fair shares 4 / 4 / 4. a and b are 2 above, c is 4 below.
    def team(slug, usage, demand):
        return TeamInput(
            slug=slug,
            cohort="research",
            nominal=Resources(gpus=4, cpu_cores=32, memory_bytes=256 * GiB),
            usage=Resources(gpus=usage, cpu_cores=8 * usage, memory_bytes=64 * GiB * usage),
            demand=Resources(gpus=demand),
        )

    return FlavorSnapshot(
        flavor="a100",
        capacity=Resources(gpus=12, cpu_cores=96, memory_bytes=768 * GiB),
        teams=(team("team-a", 6, 6), team("team-b", 6, 6), team("team-c", 0, 8)),
    )


def test_reclaim_sentence():
    report = compute_fairness(_three_team_cohort())
    (suggestion,) = report.reclaim
    assert suggestion.team == "team-c"
    assert suggestion.deficit_gpus == 4
    assert suggestion.sources == (("team-a", 2), ("team-b", 2))
    assert suggestion.sentence() == (
        "team-c is 4 GPUs below its fair share; 2 could be reclaimed from team-a and 2 from team-b"
    )


def test_reclaim_sentence_without_naming_the_other_teams():
    (suggestion,) = compute_fairness(_three_team_cohort()).reclaim
    assert suggestion.sentence(name_sources=False) == (
        "team-c is 4 GPUs below its fair share; 4 could be reclaimed from other teams of its "
        "cohort"
    )
    from queues.fairness import ReclaimSuggestion

    one = ReclaimSuggestion("t", F(3), (("u", F(1)),))
    assert one.sentence(name_sources=False) == (
        "t is 3 GPUs below its fair share; 1 could be reclaimed from another team of its cohort "
        "(2 GPUs cannot be reclaimed)"
    )


def test_reclaim_largest_surplus_first_and_not_promised_twice():
    report = compute_fairness(_three_team_cohort())
    rows = {r.slug: r for r in report.rows}
    # only team-c below; asking for team-a gives nothing
    assert reclaim_suggestions(report.rows, team="team-a") == []
    assert len(reclaim_suggestions(report.rows, team="team-c")) == 1
    # surplus a 3, b 1 (fake rows): deficit 2 comes all from a, the largest surplus
    from dataclasses import replace

    rows2 = [
        replace(rows["team-a"], usage=F(7)),
        replace(rows["team-b"], usage=F(5)),
        replace(rows["team-c"], usage=F(2)),
    ]
    (s,) = reclaim_suggestions(rows2)
    assert s.sources == (("team-a", 2),)
    assert s.sentence() == "team-c is 2 GPUs below its fair share; 2 could be reclaimed from team-a"


def test_reclaim_shortfall_and_no_cohort():
    from dataclasses import replace

    report = compute_fairness(_three_team_cohort())
    rows = {r.slug: r for r in report.rows}
    # a 1 above, b at share, c 4 below: only 1 GPU can come back.
    rows2 = [
        replace(rows["team-a"], usage=F(5)),
        replace(rows["team-b"], usage=F(4)),
        rows["team-c"],
    ]
    (s,) = reclaim_suggestions(rows2)
    assert s.sentence() == (
        "team-c is 4 GPUs below its fair share; 1 could be reclaimed from team-a "
        "(3 GPUs cannot be reclaimed)"
    )
    lone = replace(rows["team-c"], cohort=None)
    (s,) = reclaim_suggestions([rows["team-a"], lone])
    assert s.sources == ()
    assert s.sentence() == (
        "team-c is 4 GPUs below its fair share; no team in its cohort is above its fair "
        "share to reclaim from"
    )


def test_reclaim_singular_and_fractional_wording():
    from queues.fairness import ReclaimSuggestion

    s = ReclaimSuggestion("t", F(1), (("u", F(1, 2)),))
    assert s.sentence() == (
        "t is 1 GPU below its fair share; 0.5 could be reclaimed from u "
        "(0.5 GPUs cannot be reclaimed)"
    )


# ----------------------------------------------------------------- compute_fairness


def test_compute_fairness_report_rows_and_jain():
    report = compute_fairness(_three_team_cohort())
    assert report.flavor == "a100"
    assert report.capacity_gpus == 12
    rows = {r.slug: r for r in report.rows}
    assert [r.fair_share for r in report.rows] == [4, 4, 4]
    # dominant share of team-a: gpu 6/12 = 1/2, cpu 48/96 = 1/2, memory 384/768 = 1/2:
    # three-way tie -> "cpu" (first name).
    assert rows["team-a"].dominant == DominantShare(F(1, 2), "cpu")
    # Kueue: a borrows 2 GPUs, 16 cores, 128 GiB of a cohort lending 12, 96, 768 GiB:
    # 2*1000/12 = 166.67, 16*1000/96 = 166.67, 128*1000/768 = 166.67 -> tie, "cpu".
    assert rows["team-a"].kueue.value == pytest.approx(500 / 3)
    assert rows["team-a"].kueue.dominant_resource == "cpu"
    assert rows["team-c"].kueue.value == 0.0
    # Jain over usage/fair: 6/4, 6/4, 0/4 -> (3)^2 / (3 * (2.25 + 2.25)) = 2/3
    assert report.jain_index == pytest.approx(2 / 3)
    assert not report.quota_exceeds_capacity


def test_compute_fairness_mixed_cohorts_weights_and_borrowing_limit():
    # cohort "vision": v1 nominal 4 (w1) wants 12, v2 nominal 4 (w3) wants 12, shared pool 4.
    #   pool 4 + 4 + 4 = 12; guarantees 4 / 4; 4 to borrow at 1:3 -> v1 +1, v2 +3 -> 5 / 7.
    # cohort "nlp": n1 nominal 2 wants 10 but may borrow only 1 -> cap 3;
    #   n2 nominal 6 wants 1 -> pool 8: n2 1, n1 3 (cap), 4 GPUs stay idle.
    # solo (no cohort) nominal 2 wants 5 -> min(2, 5) = 2.
    def team(slug, cohort, nominal, usage, demand, weight=1, limit=None):
        return TeamInput(
            slug=slug,
            cohort=cohort,
            weight=weight,
            nominal=Resources(gpus=nominal),
            usage=Resources(gpus=usage),
            demand=Resources(gpus=demand),
            borrowing_limit_gpus=limit,
        )

    snapshot = FlavorSnapshot(
        flavor="h100",
        capacity=Resources(gpus=24),
        teams=(
            team("v1", "vision", 4, 5, 12),
            team("v2", "vision", 4, 7, 12, weight=3),
            team("n1", "nlp", 2, 3, 10, limit=1),
            team("n2", "nlp", 6, 1, 1),
            team("solo", None, 2, 2, 5),
        ),
        cohort_shared={"vision": Resources(gpus=4)},
    )
    report = compute_fairness(snapshot)
    shares = {r.slug: r.fair_share for r in report.rows}
    assert shares == {"v1": 5, "v2": 7, "n1": 3, "n2": 1, "solo": 2}
    # every team is exactly at its fair share: Jain = 1, nothing to reclaim
    assert report.jain_index == 1.0
    assert report.reclaim == ()
    rows = {r.slug: r for r in report.rows}
    # Kueue: v2 borrows 3 of vision's lendable 12 -> 3000/12 = 250, weight 3 -> 83.33
    assert rows["v2"].kueue.value == pytest.approx(250 / 3)
    # v1 borrows 1 -> 1000/12 = 83.33, weight 1 -> equal weighted shares: fair.
    assert rows["v1"].kueue.value == pytest.approx(250 / 3)
    assert rows["solo"].kueue.value == 0.0
    # GPU-only capacity: dominant share is gpu usage / 24
    assert rows["v2"].dominant == DominantShare(F(7, 24), "gpu")


def test_compute_fairness_fractional_shares_and_json():
    # No nominal quotas, a cohort-owned pool of 10; a, b, c (weight 1) want 10 each and
    # z (weight 0) too: a, b, c take 10/3 each, nothing is left over for z.
    teams = tuple(
        TeamInput(slug=s, cohort="c", demand=Resources(gpus=10), weight=w)
        for s, w in (("a", 1), ("b", 1), ("c", 1), ("z", 0))
    )
    report = compute_fairness(
        FlavorSnapshot("t4", Resources(gpus=10), teams, cohort_shared={"c": Resources(gpus=10)})
    )
    shares = {r.slug: r.fair_share for r in report.rows}
    assert shares == {"a": F(10, 3), "b": F(10, 3), "c": F(10, 3), "z": 0}
    data = report.as_dict()
    text = json.dumps(data, allow_nan=False)  # JSON-safe: no inf, no NaN, no Fraction
    assert data["teams"][0]["fair_share_gpus"] == pytest.approx(10 / 3)
    assert '"fair_share_gpus": 0.0' in text
    # Jain only over teams with demand and a positive fair share (a, b, c): all 0 -> 1.0
    assert data["jain_index"] == 1.0
    # everyone is below the fair share but nobody is above: no sources to reclaim from
    assert [s.team for s in report.reclaim] == ["a", "b", "c"]
    assert all(s.sources == () for s in report.reclaim)


def test_compute_fairness_infinite_kueue_share_serializes():
    teams = (
        TeamInput("greedy", "c", weight=0, nominal=Resources(gpus=1), usage=Resources(gpus=3),
                  demand=Resources(gpus=3)),
        TeamInput("other", "c", nominal=Resources(gpus=3), demand=Resources(gpus=1)),
    )
    report = compute_fairness(FlavorSnapshot("l4", Resources(gpus=4), teams))
    row = next(r for r in report.as_dict()["teams"] if r["slug"] == "greedy")
    assert row["kueue_share"] is None
    assert row["kueue_share_infinite"] is True
    json.dumps(report.as_dict(), allow_nan=False)


def test_compute_fairness_demand_below_usage_is_read_as_usage():
    team = TeamInput("t", None, nominal=Resources(gpus=4), usage=Resources(gpus=3),
                     demand=Resources(gpus=1))
    (row,) = compute_fairness(FlavorSnapshot("x", Resources(gpus=4), (team,))).rows
    assert row.demand == 3
    assert row.fair_share == 3


def test_overcommitted_quota_is_flagged():
    teams = (
        TeamInput("a", None, nominal=Resources(gpus=8), demand=Resources(gpus=8)),
        TeamInput("b", None, nominal=Resources(gpus=8), demand=Resources(gpus=8)),
    )
    assert compute_fairness(FlavorSnapshot("x", Resources(gpus=8), teams)).quota_exceeds_capacity


def test_inputs_are_validated():
    with pytest.raises(ValueError, match="twice"):
        FlavorSnapshot("x", Resources(gpus=1), (TeamInput("a"), TeamInput("a")))
    with pytest.raises(ValueError, match="negative"):
        Resources(gpus=-1)
    with pytest.raises(ValueError, match="finite"):
        Resources(cpu_cores=float("inf"))
    with pytest.raises(ValueError, match="empty"):
        TeamInput("")
    with pytest.raises(ValueError, match="negative"):
        TeamInput("a", weight=-1)
