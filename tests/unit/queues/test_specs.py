"""SpecError: every bad value is refused on construction, naming its field."""

from decimal import Decimal

import pytest

from queues.backends.kueue import objects as kueue
from queues.render import amounts
from queues.specs import (
    CohortSpec,
    FlavorQuota,
    FlavorSpec,
    PriorityClassSpec,
    SpecError,
    Taint,
    TeamQueueSpec,
    Toleration,
)

from .examples import FLAVORS_BY_NAME


def flavor(**overrides):
    kwargs = {
        "name": "a100",
        "gpu_resource": "nvidia.com/gpu",
        "gpu_model": "A100",
        "physical_gpus": 8,
        "cpu_per_gpu": "8",
        "memory_per_gpu": "64Gi",
    }
    return FlavorSpec(**{**kwargs, **overrides})


def quota(**overrides):
    kwargs = {"flavor": "a100-80gb", "gpu_resource": "nvidia.com/gpu", "nominal_gpus": 4}
    return FlavorQuota(**{**kwargs, **overrides})


def team(**overrides):
    kwargs = {
        "slug": "vision",
        "display_name": "Vision",
        "cohort": "research",
        "quotas": (quota(),),
    }
    return TeamQueueSpec(**{**kwargs, **overrides})


def assert_field(field, build):
    with pytest.raises(SpecError) as info:
        build()
    assert info.value.field == field
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith(f"{field}: ")


@pytest.mark.parametrize("name", ["Vision", "vision_team", "-vision", "vision-", "", "a" * 64, 7])
def test_bad_team_slug(name):
    assert_field("slug", lambda: team(slug=name))


def test_63_character_names_are_fine():
    assert team(slug="a" * 63).cluster_queue_name == "a" * 63


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: flavor(name="A100"), "name"),
        (lambda: flavor(name="a" * 64), "name"),
        (lambda: CohortSpec(name="Research"), "name"),
        (lambda: CohortSpec(name="research", parent="R&D"), "parent"),
        (lambda: CohortSpec(name="research", parent="research"), "parent"),
        (lambda: PriorityClassSpec(name="High", value=1), "name"),
        (lambda: PriorityClassSpec(name="system-high", value=1), "name"),
        (lambda: quota(flavor="A100"), "flavor"),
        (lambda: team(cohort="Research"), "cohort"),
    ],
)
def test_bad_names(build, field):
    assert_field(field, build)


@pytest.mark.parametrize("value", [1.5, 2.0, True, "4", Decimal(4), None])
def test_gpu_counts_must_be_int(value):
    assert_field("nominal_gpus", lambda: quota(nominal_gpus=value))


@pytest.mark.parametrize("value", [0.5, False, "2"])
def test_gpu_limits_must_be_int(value):
    assert_field("borrowing_limit_gpus", lambda: quota(borrowing_limit_gpus=value))
    assert_field("lending_limit_gpus", lambda: quota(lending_limit_gpus=value))


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: quota(nominal_gpus=-1), "nominal_gpus"),
        (lambda: quota(borrowing_limit_gpus=-1), "borrowing_limit_gpus"),
        (lambda: quota(lending_limit_gpus=-1), "lending_limit_gpus"),
        (lambda: quota(cpu="-4"), "cpu"),
        (lambda: flavor(physical_gpus=-1), "physical_gpus"),
        (lambda: flavor(time_slicing_replicas=0), "time_slicing_replicas"),
        (lambda: flavor(time_slicing_replicas=2.0), "time_slicing_replicas"),
        (lambda: flavor(cpu_per_gpu="-1"), "cpu_per_gpu"),
        (lambda: team(weight=-1), "weight"),
        (lambda: team(weight=0), "weight"),
        (lambda: CohortSpec(name="r", weight="-0.5"), "weight"),
        (lambda: PriorityClassSpec(name="p", value=-(2**31) - 1), "value"),
    ],
)
def test_negative_numbers(build, field):
    assert_field(field, build)


def test_lending_limit_above_nominal():
    assert_field("lending_limit_gpus", lambda: quota(nominal_gpus=4, lending_limit_gpus=5))
    assert quota(nominal_gpus=4, lending_limit_gpus=4).lending_limit_gpus == 4


def test_limits_need_a_cohort():
    assert_field(
        "quotas[0].borrowing_limit_gpus",
        lambda: team(cohort=None, quotas=(quota(borrowing_limit_gpus=2),)),
    )
    assert_field(
        "quotas[1].lending_limit_gpus",
        lambda: team(
            cohort=None,
            quotas=(quota(), quota(flavor="t4-shared", lending_limit_gpus=1)),
        ),
    )
    assert team(cohort=None).cohort is None


def test_shared_pool_limits_need_a_parent():
    assert_field(
        "shared_pool[0].lending_limit_gpus",
        lambda: CohortSpec(name="research", shared_pool=(quota(lending_limit_gpus=1),)),
    )
    assert CohortSpec(name="research", shared_pool=(quota(),)).shared_pool == (quota(),)


def test_duplicate_flavor_in_quotas():
    assert_field("quotas[1].flavor", lambda: team(quotas=(quota(), quota(nominal_gpus=1))))


@pytest.mark.parametrize(
    "resource",
    ["gpu", "kubernetes.io/gpu", "foo.kubernetes.io/gpu", "nvidia.com/", "Nvidia.com/gpu"],
)
def test_gpu_resource_must_be_an_extended_resource(resource):
    assert_field("gpu_resource", lambda: flavor(gpu_resource=resource))


def test_mig_profile_is_an_extended_resource():
    assert flavor(gpu_resource="nvidia.com/mig-3g.40gb").gpu_resource == "nvidia.com/mig-3g.40gb"


@pytest.mark.parametrize("value", ["1K", "lots", "", 8, "1.5.2", "NaN"])
def test_quantities(value):
    assert_field("memory_per_gpu", lambda: flavor(memory_per_gpu=value))
    assert_field("cpu", lambda: quota(cpu=value))


@pytest.mark.parametrize("value", ["abc", "NaN", "Infinity", True, "0.0000000001", None])
def test_weights(value):
    assert_field("weight", lambda: team(weight=value))


def test_weight_accepts_str_float_int_decimal():
    assert team(weight="2.5").weight == Decimal("2.5")
    assert team(weight=0.1).weight == Decimal("0.1")
    assert team(weight=3).weight == Decimal(3)


def test_preemption_rules():
    assert_field("reclaim_within_cohort", lambda: team(reclaim_within_cohort="Sometimes"))
    assert_field(
        "borrow_within_cohort",
        lambda: team(reclaim_within_cohort="Never", borrow_within_cohort="LowerPriority"),
    )
    assert_field(
        "borrow_within_cohort_max_priority", lambda: team(borrow_within_cohort_max_priority=10)
    )


def test_taints_and_tolerations():
    assert_field("effect", lambda: Taint(key="nvidia.com/gpu", effect="NoWay"))
    assert_field("key", lambda: Taint(key="bad key"))
    assert_field("value", lambda: Toleration(key="k", operator="Exists", value="v"))
    assert_field("operator", lambda: Toleration(operator="Equal"))
    assert_field("toleration_seconds", lambda: Toleration(key="k", toleration_seconds=30))
    assert_field(
        "node_taints[1]",
        lambda: flavor(node_taints=(Taint(key="a"), Taint(key="a", value="other"))),
    )
    assert_field(
        "node_taints", lambda: flavor(node_taints=tuple(Taint(key=f"k{i}") for i in range(9)))
    )
    assert_field("node_labels['bad key']", lambda: flavor(node_labels={"bad key": "x"}))
    assert_field("node_labels['a']", lambda: flavor(node_labels={"a": "not ok!"}))


def test_priority_value_range():
    assert_field("value", lambda: PriorityClassSpec(name="p", value=1_000_000_001))
    assert_field("value", lambda: PriorityClassSpec(name="p", value=True))
    assert PriorityClassSpec(name="p", value=1_000_000_000).value == 1_000_000_000


def test_specs_are_frozen_hashable_and_normalised():
    spec = flavor(node_labels={"b": "2", "a": "1"}, node_taints=[Taint(key="a")])
    assert isinstance(spec.node_taints, tuple)
    assert list(spec.node_labels) == ["a", "b"]
    hash(spec)
    with pytest.raises(AttributeError):
        spec.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        spec.node_labels["c"] = "3"  # type: ignore[index]
    with pytest.raises(TypeError):
        FlavorSpec("a100", "nvidia.com/gpu", "A100")  # type: ignore[misc]  # keyword-only


def test_render_time_errors_name_the_field():
    assert_field(
        "quotas[0].flavor",
        lambda: kueue.cluster_queue(team(quotas=(quota(flavor="h100"),)), FLAVORS_BY_NAME),
    )
    assert_field(
        "quotas[0].gpu_resource",
        lambda: kueue.cluster_queue(
            team(quotas=(quota(gpu_resource="nvidia.com/mig-1g.10gb"),)), FLAVORS_BY_NAME
        ),
    )


def test_cohort_cycle_is_an_error():
    cohorts = [CohortSpec(name="a", parent="b"), CohortSpec(name="b", parent="a")]
    assert_field("parent", lambda: amounts.cohort_root("a", cohorts))
    assert_field("parent", lambda: kueue.cluster_objects(flavors=(), cohorts=cohorts))
