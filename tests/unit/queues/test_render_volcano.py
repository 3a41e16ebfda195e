"""Golden tests: Volcano capacity-plugin Queues for teams and cohorts."""

import dataclasses

import pytest

from queues.render import amounts, volcano
from queues.specs import SpecError

from .examples import (
    COHORTS,
    FLAVORS,
    FLAVORS_BY_NAME,
    NLP,
    SPEECH,
    VISION,
    shared_labels,
    team_labels,
)

VISION_2 = dataclasses.replace(VISION, weight=2)
TEAMS = (VISION_2, NLP, SPEECH)


def test_team_queue_in_cohort_with_limits():
    capacity = amounts.cohort_capacity(
        "research", teams=TEAMS, cohorts=COHORTS, flavors_by_name=FLAVORS_BY_NAME
    )
    assert volcano.team_queue(VISION_2, FLAVORS_BY_NAME, cohort_capacity=capacity) == {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "vision", "labels": team_labels("vision")},
        "spec": {
            "weight": 2,
            "reclaimable": True,
            "parent": "research",
            # a100 8 GPUs (96 cores, 960Gi) + t4 8 slices (12 cores, 64Gi)
            "deserved": {"cpu": "108", "memory": "1Ti", "nvidia.com/gpu": "16"},
            # same as the ResourceQuota: a100 8+4, t4 capped at the cohort's 12
            "capability": {"cpu": "162", "memory": "1536Gi", "nvidia.com/gpu": "24"},
            # a100 8-2 lent at most; t4 lends everything
            "guarantee": {"resource": {"cpu": "72", "memory": "720Gi", "nvidia.com/gpu": "6"}},
        },
    }


def test_team_queue_without_cohort_keeps_its_whole_grant():
    assert volcano.team_queue(SPEECH, FLAVORS_BY_NAME) == {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "speech", "labels": team_labels("speech")},
        "spec": {
            "weight": 1,
            "reclaimable": True,
            "deserved": {"cpu": "24", "memory": "200Gi", "nvidia.com/mig-1g.10gb": "14"},
            "capability": {"cpu": "24", "memory": "200Gi", "nvidia.com/mig-1g.10gb": "14"},
            "guarantee": {
                "resource": {"cpu": "24", "memory": "200Gi", "nvidia.com/mig-1g.10gb": "14"}
            },
        },
    }


def test_borrow_only_team_has_no_guarantee():
    spec = volcano.queues(flavors=FLAVORS, cohorts=COHORTS, teams=TEAMS)[2]["spec"]
    assert spec == {
        "weight": 1,
        "reclaimable": True,
        "parent": "research",
        "deserved": {"cpu": "6", "memory": "32Gi", "nvidia.com/gpu": "4"},
        "capability": {"cpu": "114", "memory": "1056Gi", "nvidia.com/gpu": "20"},
    }


def test_fractional_weight_is_refused_for_volcano():
    with pytest.raises(SpecError) as info:
        volcano.team_queue(SPEECH.__class__(slug="s", display_name="S", weight="1.5"), {})
    assert info.value.field == "weight"


def test_cohort_queues_cover_their_children_parents_first():
    objects = volcano.queues(flavors=FLAVORS, cohorts=COHORTS, teams=TEAMS)
    assert [o["metadata"]["name"] for o in objects] == [
        "company",
        "research",
        "nlp",
        "speech",
        "vision",
    ]
    totals = {"cpu": "210", "memory": "2016Gi", "nvidia.com/gpu": "28"}
    assert objects[1] == {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": "research", "labels": shared_labels("cohort")},
        "spec": {
            "weight": 2,
            "reclaimable": True,
            "parent": "company",
            # pool 8 + vision 16 + nlp 4 GPUs
            "deserved": totals,
            "capability": totals,
            # pool 8-4 + vision 6 + nlp 0
            "guarantee": {"resource": {"cpu": "120", "memory": "1200Gi", "nvidia.com/gpu": "10"}},
        },
    }
    assert objects[0]["spec"] == {
        "weight": 1,
        "reclaimable": True,
        "deserved": totals,
        "capability": totals,
        "guarantee": {"resource": {"cpu": "120", "memory": "1200Gi", "nvidia.com/gpu": "10"}},
    }


def test_implicit_cohort_gets_a_queue():
    objects = volcano.queues(flavors=FLAVORS, teams=(NLP,))
    assert [(o["metadata"]["name"], o["spec"].get("parent")) for o in objects] == [
        ("research", None),
        ("nlp", "research"),
    ]
