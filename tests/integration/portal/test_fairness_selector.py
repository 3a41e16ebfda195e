"""portal.selectors.fairness on PostgreSQL: the hand-worked numbers of fairness_world."""

from fractions import Fraction as F

import pytest

from portal.selectors.fairness import cluster_fairness, flavor_fairness
from queues.fairness import DominantShare
from tests.factories import make_cohort, make_flavor, make_grant, make_job, make_team
from tests.integration.portal.fairness_world import build_fairness_world

pytestmark = pytest.mark.django_db
GiB = 2**30


@pytest.fixture
def fw():
    return build_fairness_world()


def test_a100_inputs_and_results(fw):
    ff = flavor_fairness(flavor=fw["a100"])
    report = ff.report
    assert report.capacity_gpus == 12
    rows = {r.slug: r for r in report.rows}
    assert list(rows) == ["team-a", "team-b", "team-c"]  # team-d has nothing on a100
    assert {s: (r.nominal, r.usage, r.demand, r.fair_share) for s, r in rows.items()} == {
        "team-a": (4, 7, 7, 4),
        "team-b": (4, 4, 6, 4),
        "team-c": (4, 0, 8, 4),
    }
    assert rows["team-a"].dominant == DominantShare(F(664, 768), "memory")
    assert rows["team-b"].dominant == DominantShare(F(1, 3), "cpu")
    assert rows["team-c"].dominant == DominantShare(F(0), None)
    assert rows["team-a"].kueue.value == pytest.approx(531.25)
    assert rows["team-a"].kueue.rounded == 532
    assert rows["team-a"].kueue.dominant_resource == "memory"
    assert report.jain_index == pytest.approx(121 / 195)
    assert [s.sentence() for s in report.reclaim] == [
        "team-c is 4 GPUs below its fair share; 3 could be reclaimed from team-a "
        "(1 GPU cannot be reclaimed)"
    ]
    assert ff.teams_with_demand == 3


def test_time_sliced_flavor_counts_physical_gpus(fw):
    ff = flavor_fairness(flavor=fw["t4"])
    assert ff.report.capacity_gpus == 2
    (row,) = ff.report.rows
    assert row.slug == "team-d"
    assert (row.nominal, row.usage, row.demand, row.fair_share) == (1, F(1, 2), F(1, 2), F(1, 2))
    assert row.dominant == DominantShare(F(3, 4), "cpu")
    assert ff.report.jain_index == 1.0
    data = ff.as_dict()
    assert data["time_slicing_replicas"] == 4
    assert data["teams"][0]["usage_gpus"] == 0.5
    assert data["teams"][0]["nominal_gpus"] == 1
    assert ("t4-shared is time-sliced (4 slices per GPU): figures count physical GPUs, "
            "a slice is 1/4 GPU.") in data["sentences"]


def test_whole_cluster_in_name_order(fw, django_assert_num_queries):
    with django_assert_num_queries(5):
        result = cluster_fairness(cluster=fw["cluster"])
    assert [f.flavor.name for f in result] == ["a100", "t4-shared"]


def test_staff_payload_names_sources_member_payload_does_not(fw):
    ff = flavor_fairness(flavor=fw["a100"])
    staff = ff.as_dict()
    assert [t["slug"] for t in staff["teams"]] == ["team-a", "team-b", "team-c"]
    team_a = staff["teams"][0]
    assert team_a == {
        "slug": "team-a", "name": "Team A", "cohort": "research", "cohort_pool": "research",
        "weight": 1.0, "nominal_gpus": 4, "usage_gpus": 7, "demand_gpus": 7,
        "fair_share_gpus": 4.0, "dominant_share": pytest.approx(664 / 768),
        "dominant_resource": "memory", "kueue_share": pytest.approx(531.25),
        "kueue_share_infinite": False, "kueue_share_rounded": 532,
        "below_fair_share_by": 0, "above_fair_share_by": 3,
        "sentence": "team-a uses 7 GPUs of a fair share of 4, 3 above it "
                    "(borrowing 3 beyond its nominal quota).",
    }
    assert staff["reclaim"] == [{
        "team": "team-c", "deficit_gpus": 4, "reclaimable_gpus": 3,
        "sources": [{"team": "team-a", "gpus": 3}],
        "sentence": "team-c is 4 GPUs below its fair share; 3 could be reclaimed from team-a "
                    "(1 GPU cannot be reclaimed)",
    }]
    assert staff["sentences"] == [
        "Jain's index 0.62 over 3 teams with demand (1 = every team at its fair share; "
        "0.33 = one team holds it all).",
        "team-c is 4 GPUs below its fair share; 3 could be reclaimed from team-a "
        "(1 GPU cannot be reclaimed)",
    ]

    member_c = ff.as_dict(slugs={"team-c"})
    assert [t["slug"] for t in member_c["teams"]] == ["team-c"]
    assert member_c["capacity_gpus"] == 12
    assert member_c["jain_index"] == pytest.approx(121 / 195)
    assert member_c["reclaim"][0]["sources"] == []
    assert "team-a" not in str(member_c)
    assert member_c["sentences"][1] == (
        "team-c is 4 GPUs below its fair share; 3 could be reclaimed from another team of its "
        "cohort (1 GPU cannot be reclaimed)."
    )
    member_b = ff.as_dict(slugs={"team-b"})
    assert member_b["sentences"][1] == "team-b uses 4 GPUs of a fair share of 4, exactly its share."


def test_cohort_tree_shares_one_pool_with_weights(db):
    # Root cohort "dept" with child "vision": x (dept, w1) and y (vision, w3) share one
    # pool of 2 + 2 = 4 nominal GPUs on an 8-GPU flavor. Both want 10: guarantees 2 / 2,
    # nothing left -> fair 2 / 2. A team in another tree (z, nominal 4, wants 0) lends to
    # nobody in "dept": the trees are separate pools.
    from tests.factories import make_cluster

    cluster = make_cluster(name="c2")
    fl = make_flavor(cluster=cluster, name="h100", physical_gpus=8)
    dept = make_cohort(cluster=cluster, name="dept")
    vision = make_cohort(cluster=cluster, name="vision", parent=dept)
    x = make_team(cluster=cluster, slug="x", cohort=dept)
    y = make_team(cluster=cluster, slug="y", cohort=vision, weight=3)
    z = make_team(cluster=cluster, slug="z", cohort=make_cohort(cluster=cluster, name="other"))
    make_grant(team=x, flavor=fl, nominal_gpus=2)
    make_grant(team=y, flavor=fl, nominal_gpus=2)
    make_grant(team=z, flavor=fl, nominal_gpus=4)
    make_job(team=x, flavor=fl, workers=1, gpus_per_worker=8, phase="Queued")
    make_job(team=y, flavor=fl, workers=1, gpus_per_worker=8, phase="Queued")
    rows = {r.slug: r for r in flavor_fairness(flavor=fl).report.rows}
    assert {s: r.fair_share for s, r in rows.items()} == {"x": 2, "y": 2, "z": 0}
    assert rows["y"].cohort == "dept"
    # y's own quota grows to 0 and x's to 0: now the shared 4 is split 1 : 3 by weight
    from portal.models import QuotaGrant

    QuotaGrant.objects.filter(team__in=[x, y]).update(nominal_gpus=0)
    make_grant(team=make_team(cluster=cluster, slug="pool", cohort=dept), flavor=fl,
               nominal_gpus=4)
    rows = {r.slug: r for r in flavor_fairness(flavor=fl).report.rows}
    assert (rows["x"].fair_share, rows["y"].fair_share, rows["pool"].fair_share) == (1, 3, 0)
    payload = flavor_fairness(flavor=fl).as_dict()
    y_row = next(t for t in payload["teams"] if t["slug"] == "y")
    assert (y_row["cohort"], y_row["cohort_pool"], y_row["weight"]) == ("vision", "dept", 3.0)


def test_team_with_jobs_but_no_grant_appears_and_borrowing_limit_caps(db):
    from tests.factories import make_cluster

    cluster = make_cluster(name="c3")
    fl = make_flavor(cluster=cluster, name="l4", physical_gpus=8)
    co = make_cohort(cluster=cluster, name="co")
    lender = make_team(cluster=cluster, slug="lender", cohort=co)
    capped = make_team(cluster=cluster, slug="capped", cohort=co)
    free = make_team(cluster=cluster, slug="free", cohort=co)
    make_grant(team=lender, flavor=fl, nominal_gpus=8)
    make_grant(team=capped, flavor=fl, nominal_gpus=0, borrowing_limit_gpus=1)
    make_job(team=capped, flavor=fl, workers=4, gpus_per_worker=1, phase="Queued")
    make_job(team=free, flavor=fl, workers=1, gpus_per_worker=6, phase="Running")
    # pool 8; lender wants 0; capped may reach 1; free (no grant) takes the rest it wants: 6
    shares = {r.slug: r.fair_share for r in flavor_fairness(flavor=fl).report.rows}
    assert shares == {"capped": 1, "free": 6, "lender": 0}
