"""Golden tests: Volcano capacity-plugin Queues for teams and cohorts."""

import dataclasses

import pytest

from queues.backends.volcano import objects as volcano
from queues.render import amounts
from queues.specs import SpecError
from tests.unit.queues.examples import (
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


# --- the whole desired set, validation ---------------------------------------------

def _desired(teams=TEAMS, cohorts=COHORTS):
    from tests.unit.queues.examples import PRIORITY_CLASSES

    return volcano.desired_objects(
        flavors=FLAVORS, cohorts=cohorts, priority_classes=PRIORITY_CLASSES, teams=teams
    )


def test_desired_objects_order_and_kinds():
    objects = _desired()
    assert [(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
            for o in objects] == [
        ("PriorityClass", "", "high"),
        ("PriorityClass", "", "low"),
        ("Queue", "", "company"),
        ("Queue", "", "research"),
        ("Namespace", "", "nlp"),
        ("ResourceQuota", "nlp", "gpu-quota"),
        ("Queue", "", "nlp"),
        ("Namespace", "", "speech"),
        ("ResourceQuota", "speech", "gpu-quota"),
        ("Queue", "", "speech"),
        ("Namespace", "", "vision"),
        ("ResourceQuota", "vision", "gpu-quota"),
        ("Queue", "", "vision"),
    ]
    assert objects[0] == {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "high", "labels": shared_labels("priority-class")},
        "value": 1000,
        "globalDefault": False,
        "description": "Deadline work; preempts low.",
    }
    # No Kueue object in a Volcano cluster's desired set.
    assert not [o for o in objects if o["apiVersion"].startswith("kueue.")]


def test_resource_quota_is_at_or_above_the_queue_capability():
    from queues import quantity

    objects = _desired()
    for team in ("nlp", "speech", "vision"):
        queue = next(o for o in objects if o["kind"] == "Queue" and o["metadata"]["name"] == team)
        hard = next(o for o in objects if o["kind"] == "ResourceQuota"
                    and o["metadata"]["namespace"] == team)["spec"]["hard"]
        for resource, value in queue["spec"]["capability"].items():
            assert quantity.parse(hard[f"requests.{resource}"]) >= quantity.parse(value), (
                team, resource)
    vision_rq = next(o for o in objects if o["kind"] == "ResourceQuota"
                     and o["metadata"]["namespace"] == "vision")
    assert vision_rq["spec"]["hard"] == {
        "requests.cpu": "162", "requests.memory": "1536Gi",
        "requests.nvidia.com/gpu": "24", "requests.nvidia.com/mig-1g.10gb": "0",
    }


def test_every_queue_holds_guarantee_le_deserved_le_capability():
    queue_objects = [o for o in _desired() if o["kind"] == "Queue"]
    for queue in queue_objects:
        volcano.check_queue(queue)
    volcano.check_hierarchy(queue_objects)


def _queue(name, *, parent=None, deserved, capability=None, guarantee=None):
    spec = {"weight": 1, "reclaimable": True, "deserved": deserved}
    if parent:
        spec["parent"] = parent
    if capability is not None:
        spec["capability"] = capability
    if guarantee is not None:
        spec["guarantee"] = {"resource": guarantee}
    return {"apiVersion": volcano.API_VERSION, "kind": "Queue",
            "metadata": {"name": name}, "spec": spec}


def test_check_queue_refuses_guarantee_above_deserved():
    queue = _queue("a", deserved={"cpu": "4", "nvidia.com/gpu": "2"},
                   guarantee={"nvidia.com/gpu": "3"})
    with pytest.raises(SpecError) as info:
        volcano.check_queue(queue)
    assert info.value.field == "a.spec.guarantee.resource[nvidia.com/gpu]"
    assert "exceeds deserved 2" in info.value.message


def test_check_queue_refuses_deserved_above_capability():
    queue = _queue("a", deserved={"memory": "64Gi"}, capability={"memory": "32Gi"})
    with pytest.raises(SpecError) as info:
        volcano.check_queue(queue)
    assert info.value.field == "a.spec.deserved[memory]"


def test_check_hierarchy_refuses_children_above_their_parent():
    parent = _queue("dept", deserved={"nvidia.com/gpu": "8"}, capability={"nvidia.com/gpu": "8"},
                    guarantee={"nvidia.com/gpu": "2"})
    kids = [
        _queue("a", parent="dept", deserved={"nvidia.com/gpu": "4"},
               guarantee={"nvidia.com/gpu": "2"}),
        _queue("b", parent="dept", deserved={"nvidia.com/gpu": "4"},
               guarantee={"nvidia.com/gpu": "1"}),
    ]
    with pytest.raises(SpecError) as info:
        volcano.check_hierarchy([parent, *kids])
    assert info.value.field == "dept.spec.guarantee.resource[nvidia.com/gpu]"
    kids[1]["spec"]["guarantee"] = {"resource": {}}
    kids[1]["spec"]["deserved"] = {"nvidia.com/gpu": "5"}
    with pytest.raises(SpecError) as info:
        volcano.check_hierarchy([parent, *kids])
    assert info.value.field == "dept.spec.deserved[nvidia.com/gpu]"
    kids[1]["spec"]["deserved"] = {"nvidia.com/gpu": "4"}
    kids[1]["spec"]["capability"] = {"nvidia.com/gpu": "9"}
    with pytest.raises(SpecError) as info:
        volcano.check_hierarchy([parent, *kids])
    assert info.value.field == "dept.spec.capability[nvidia.com/gpu]"
    kids[1]["spec"]["capability"] = {"nvidia.com/gpu": "8"}
    volcano.check_hierarchy([parent, *kids])
    with pytest.raises(SpecError, match="no Queue named 'dept'") as info:
        volcano.check_hierarchy(kids)
    assert info.value.field == "a.spec.parent"


@pytest.mark.parametrize(("weight", "ok"), [("2.0", True), ("65535", True), ("65536", False),
                                            ("0.5", False), ("2.5", False)])
def test_volcano_weights_are_whole_numbers_up_to_65535(weight, ok):
    teams = (dataclasses.replace(VISION, weight=weight), NLP, SPEECH)
    if ok:
        queue = next(o for o in _desired(teams) if o["metadata"]["name"] == "vision"
                     and o["kind"] == "Queue")
        assert queue["spec"]["weight"] == int(float(weight))
        return
    with pytest.raises(SpecError) as info:
        _desired(teams)
    assert info.value.field == "weight"


def test_fractional_cohort_weight_is_refused_too():
    cohorts = (dataclasses.replace(COHORTS[0], weight="1.5"), COHORTS[1])
    with pytest.raises(SpecError) as info:
        _desired(cohorts=cohorts)
    assert info.value.field == "weight"


def test_queue_names_must_not_collide():
    clash = dataclasses.replace(SPEECH, slug="research")
    with pytest.raises(SpecError, match="also a cohort's name") as info:
        _desired(teams=(VISION_2, NLP, clash))
    assert info.value.field == "teams[2].slug"
    with pytest.raises(SpecError, match="Volcano queue name") as info:
        _desired(teams=(VISION_2, NLP, dataclasses.replace(SPEECH, slug="default")))
    assert info.value.field == "teams[2].slug"
