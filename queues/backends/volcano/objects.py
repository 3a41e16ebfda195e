"""Volcano ``scheduling.volcano.sh/v1beta1`` Queues for the capacity plugin.

A team becomes a Queue, a cohort a parent Queue (hierarchical queues,
https://volcano.sh/en/docs/hierarchical_queue/ and the capacity plugin,
https://volcano.sh/en/docs/capacity_plugin/). Volcano knows resources, not
flavors, so amounts are summed per resource name over the team's flavors
(``cpu`` in cores, ``memory`` in bytes, each GPU resource in devices):

* ``deserved`` = the nominal grant (Kueue ``nominalQuota``): what the queue
  gets back by reclaiming when it is short;
* ``capability`` = nominal + borrowing limit (Kueue ``borrowingLimit``); an
  unlimited borrower is capped at its cohort's capacity exactly as its
  ResourceQuota is (``core.max_admitted``); no cohort: = nominal;
* ``guarantee.resource`` = nominal - lending limit (what is never lent);
  0 when lending is unlimited, = nominal without a cohort (nothing is lent);
  zero entries are omitted;
* ``reclaimable: true``; ``weight``: the fair-share weight, which Volcano
  takes as an int in 1..65535 (a fractional weight is a ``SpecError``);
* ``parent``: the cohort's Queue; a top-level cohort's Queue has none
  (Volcano's ``root``).

Every Queue is checked to hold ``guarantee <= deserved <= capability`` per
resource (:func:`check_queue`), and every parent to cover its children
(:func:`check_hierarchy`): the sums of the children's ``deserved`` and
``guarantee`` never exceed the parent's, no child's ``capability`` exceeds
the parent's. These are the capacity plugin's hierarchy rules
(https://volcano.sh/en/docs/hierarchical_queue/); a violation is a
``SpecError`` naming the queue and field.

:func:`desired_objects` is the whole Volcano-side desired set (the Kueue
backend's is ``kueue.desired_objects``): core PriorityClasses, cohort
Queues parents first, then per team its Namespace, ResourceQuota (at or
above the Queue's capability, so pending pods never eat the namespace quota
and leave a gang half-created) and Queue.

A cohort Queue covers its children: ``deserved`` and ``guarantee`` are the
sums over its member teams and child cohorts plus its shared pool (nominal,
and nominal - lending limit); ``capability`` is the element-wise maximum of
its own ``deserved`` and its children's capabilities.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal

from queues import quantity
from queues.backends.volcano import rules
from queues.backends.volcano.rules import RESERVED_QUEUE_NAMES
from queues.render import amounts, core
from queues.render.labels import KIND_COHORT, shared_labels, team_labels
from queues.specs import (
    CohortSpec,
    FlavorQuota,
    FlavorSpec,
    PriorityClassSpec,
    SpecError,
    TeamQueueSpec,
)

__all__ = [
    "API_VERSION",
    "RESERVED_QUEUE_NAMES",
    "check_hierarchy",
    "check_queue",
    "cohort_queue",
    "desired_objects",
    "queues",
    "team_objects",
    "team_queue",
]

API_VERSION = "scheduling.volcano.sh/v1beta1"


Totals = dict[str, Decimal]


def _weight(weight: Decimal) -> int:
    """Volcano's ``spec.weight``: an int32 in 1..65535 (Queue CRD); ``SpecError("weight")``."""
    if rules.weight_problem(weight) is not None:
        raise SpecError("weight", f"Volcano queue weights are whole numbers 1..65535, got {weight}")
    return int(weight)


def _add(totals: Totals, resource: str, value: Decimal) -> None:
    totals[resource] = totals.get(resource, Decimal(0)) + value


def _add_amounts(totals: Totals, gpu_resource: str, value: amounts.Amounts) -> None:
    _add(totals, "cpu", value.cpu)
    _add(totals, "memory", value.memory)
    _add(totals, gpu_resource, Decimal(value.gpus))


def _render(totals: Totals, *, binary: bool, drop_zero: bool = False) -> dict[str, str]:
    result = {}
    for resource in ["cpu", "memory", *sorted(r for r in totals if r not in ("cpu", "memory"))]:
        if resource not in totals or (drop_zero and totals[resource] == 0):
            continue
        result[resource] = quantity.format_quantity(
            totals[resource], binary=binary and resource == "memory"
        )
    return result


def _grant(
    quotas: Iterable[FlavorQuota],
    flavors_by_name: Mapping[str, FlavorSpec],
    *,
    field: str,
    lends: bool,
) -> tuple[Totals, Totals, bool]:
    """Nominal and guaranteed totals of quotas, and whether memory is binary."""
    deserved: Totals = {}
    guarantee: Totals = {}
    binary = True
    for index, quota in enumerate(quotas):
        flavor = amounts.flavor_of(quota, flavors_by_name, f"{field}[{index}]")
        own = amounts.nominal(quota, flavor)
        _add_amounts(deserved, quota.gpu_resource, own)
        if not lends:
            kept = own
        else:
            lend = amounts.lending_limit(quota, flavor)
            kept = (
                amounts.Amounts.zero()
                if lend is None
                else amounts.Amounts(
                    gpus=own.gpus - lend.gpus,
                    cpu=own.cpu - lend.cpu,
                    memory=own.memory - lend.memory,
                )
            )
        _add_amounts(guarantee, quota.gpu_resource, kept)
        binary = binary and amounts.memory_is_binary(quota, flavor)
    return deserved, guarantee, binary


def _queue(name: str, labels: dict, spec: dict) -> dict:
    return {
        "apiVersion": API_VERSION,
        "kind": "Queue",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def _team_totals(
    team: TeamQueueSpec,
    flavors_by_name: Mapping[str, FlavorSpec],
    cohort_capacity: Mapping[str, amounts.Amounts] | None,
) -> tuple[Totals, Totals, Totals, bool]:
    deserved, guarantee, binary = _grant(
        team.quotas, flavors_by_name, field="quotas", lends=team.cohort is not None
    )
    capability: Totals = {}
    maxima = core.max_admitted(team, flavors_by_name, cohort_capacity=cohort_capacity)
    for quota in team.quotas:
        _add_amounts(capability, quota.gpu_resource, maxima[quota.flavor])
    return deserved, capability, guarantee, binary


def team_queue(
    team: TeamQueueSpec,
    flavors_by_name: Mapping[str, FlavorSpec],
    *,
    cohort_capacity: Mapping[str, amounts.Amounts] | None = None,
) -> dict:
    """The team's Volcano ``Queue`` named ``team.slug`` (shapes in the module doc).

    ``cohort_capacity``: as for ``core.resource_quota``, needed when the team
    may borrow without limit.
    """
    deserved, capability, guarantee, binary = _team_totals(team, flavors_by_name, cohort_capacity)
    spec: dict = {"weight": _weight(team.weight), "reclaimable": True}
    if team.cohort is not None:
        spec["parent"] = team.cohort
    spec["deserved"] = _render(deserved, binary=binary)
    spec["capability"] = _render(capability, binary=binary)
    kept = _render(guarantee, binary=binary, drop_zero=True)
    if kept:
        spec["guarantee"] = {"resource": kept}
    return _queue(team.slug, team_labels(team.slug), spec)


def queues(
    *,
    flavors: Iterable[FlavorSpec],
    cohorts: Iterable[CohortSpec] = (),
    teams: Iterable[TeamQueueSpec] = (),
) -> list[dict]:
    """Every Volcano Queue, parents first: cohort Queues (by depth, name), then teams by slug.

    A team's cohort that has no ``CohortSpec`` gets an implicit cohort Queue
    (weight 1, no pool), since Volcano needs the parent to exist.
    """
    flavors_by_name = {f.name: f for f in flavors}
    cohorts = list(cohorts)
    teams = sorted(teams, key=lambda t: t.slug)
    known = {c.name for c in cohorts}
    implicit = sorted(
        {t.cohort for t in teams if t.cohort and t.cohort not in known}
        | {c.parent for c in cohorts if c.parent and c.parent not in known}
    )
    cohorts += [CohortSpec(name=name) for name in implicit]
    ordered = amounts.cohort_order(cohorts)

    team_totals = {}
    for team in teams:
        capacity = None
        if team.cohort is not None:
            capacity = amounts.cohort_capacity(
                team.cohort, teams=teams, cohorts=cohorts, flavors_by_name=flavors_by_name
            )
        team_totals[team.slug] = _team_totals(team, flavors_by_name, capacity)

    cohort_totals: dict[str, tuple[Totals, Totals, Totals, bool]] = {}
    for spec in reversed(ordered):  # children before parents
        deserved, guarantee, binary = _grant(
            spec.shared_pool, flavors_by_name, field="shared_pool", lends=spec.parent is not None
        )
        capability: Totals = dict(deserved)
        children = [team_totals[t.slug] for t in teams if t.cohort == spec.name]
        children += [cohort_totals[c.name] for c in cohorts if c.parent == spec.name]
        for child_deserved, child_capability, child_guarantee, child_binary in children:
            for resource, value in child_deserved.items():
                _add(deserved, resource, value)
            for resource, value in child_guarantee.items():
                _add(guarantee, resource, value)
            for resource, value in child_capability.items():
                capability[resource] = max(capability.get(resource, Decimal(0)), value)
            binary = binary and child_binary
        for resource, value in deserved.items():
            capability[resource] = max(capability.get(resource, Decimal(0)), value)
        cohort_totals[spec.name] = (deserved, capability, guarantee, binary)

    objects = []
    for spec in ordered:
        deserved, capability, guarantee, binary = cohort_totals[spec.name]
        objects.append(
            cohort_queue(
                spec, deserved=deserved, capability=capability, guarantee=guarantee, binary=binary
            )
        )
    for team in teams:
        capacity = None
        if team.cohort is not None:
            capacity = amounts.cohort_capacity(
                team.cohort, teams=teams, cohorts=cohorts, flavors_by_name=flavors_by_name
            )
        objects.append(team_queue(team, flavors_by_name, cohort_capacity=capacity))
    return objects


def cohort_queue(
    spec: CohortSpec,
    *,
    deserved: Mapping[str, Decimal],
    capability: Mapping[str, Decimal],
    guarantee: Mapping[str, Decimal],
    binary: bool = True,
) -> dict:
    """A cohort's parent ``Queue`` from totals (resource name -> base units).

    ``queues()`` computes the totals so that the parent covers its children;
    use it rather than calling this directly.
    """
    body: dict = {"weight": _weight(spec.weight), "reclaimable": True}
    if spec.parent is not None:
        body["parent"] = spec.parent
    body["deserved"] = _render(dict(deserved), binary=binary)
    body["capability"] = _render(dict(capability), binary=binary)
    kept = _render(dict(guarantee), binary=binary, drop_zero=True)
    if kept:
        body["guarantee"] = {"resource": kept}
    return _queue(spec.name, shared_labels(KIND_COHORT), body)


# --- validation ------------------------------------------------------------------


def _amounts(spec: Mapping, path: tuple[str, ...]) -> dict[str, Decimal]:
    node: object = spec
    for part in path:
        node = node.get(part) if isinstance(node, Mapping) else None
    return {name: quantity.parse(str(value)) for name, value in (node or {}).items()}


def check_queue(queue: Mapping) -> None:
    """Check one rendered Queue: ``guarantee <= deserved <= capability`` per resource.

    A resource missing from ``deserved``/``guarantee`` counts as 0; one
    missing from ``capability`` is unlimited. Raises ``SpecError`` whose
    field is ``"<queue>.spec.guarantee.resource[<resource>]"`` or
    ``"<queue>.spec.deserved[<resource>]"``.
    """
    name = queue["metadata"]["name"]
    spec = queue["spec"]
    guarantee = _amounts(spec, ("guarantee", "resource"))
    deserved = _amounts(spec, ("deserved",))
    capability = _amounts(spec, ("capability",))
    for resource, value in guarantee.items():
        if value > deserved.get(resource, Decimal(0)):
            raise SpecError(
                f"{name}.spec.guarantee.resource[{resource}]",
                f"guarantee {value} exceeds deserved {deserved.get(resource, 0)}",
            )
    for resource, value in deserved.items():
        if resource in capability and value > capability[resource]:
            raise SpecError(
                f"{name}.spec.deserved[{resource}]",
                f"deserved {value} exceeds capability {capability[resource]}",
            )


def check_hierarchy(objects: Iterable[Mapping]) -> None:
    """Check that every parent Queue among ``objects`` covers its children.

    Per parent and resource: sum of children's ``deserved`` <= parent's
    ``deserved``, sum of children's ``guarantee`` <= parent's ``guarantee``,
    each child's ``capability`` <= parent's (where the parent states one).
    A ``parent`` naming no Queue of ``objects`` is a ``SpecError`` too
    (Volcano would leave the child unschedulable). Field:
    ``"<parent>.spec.<deserved|guarantee.resource|capability>[<resource>]"``
    or ``"<child>.spec.parent"``.
    """
    queue_list = [o for o in objects if o.get("kind") == "Queue"]
    by_name = {q["metadata"]["name"]: q for q in queue_list}
    children: dict[str, list[Mapping]] = {}
    for queue in queue_list:
        parent = queue["spec"].get("parent")
        if parent is None or parent == "root":
            continue
        if parent not in by_name:
            raise SpecError(
                f"{queue['metadata']['name']}.spec.parent", f"no Queue named {parent!r}"
            )
        children.setdefault(parent, []).append(queue)
    for parent, kids in sorted(children.items()):
        spec = by_name[parent]["spec"]
        for path, label in ((("deserved",), "deserved"), (("guarantee", "resource"), "guarantee")):
            own = _amounts(spec, path)
            total: Totals = {}
            for kid in kids:
                for resource, value in _amounts(kid["spec"], path).items():
                    _add(total, resource, value)
            for resource, value in sorted(total.items()):
                if value > own.get(resource, Decimal(0)):
                    raise SpecError(
                        f"{parent}.spec.{'.'.join(path)}[{resource}]",
                        f"children's {label} {value} exceeds the parent's "
                        f"{own.get(resource, 0)}",
                    )
        cap = _amounts(spec, ("capability",))
        for kid in kids:
            for resource, value in sorted(_amounts(kid["spec"], ("capability",)).items()):
                if resource in cap and value > cap[resource]:
                    raise SpecError(
                        f"{parent}.spec.capability[{resource}]",
                        f"child {kid['metadata']['name']!r} has capability {value} above the "
                        f"parent's {cap[resource]}",
                    )


# --- the whole desired set -------------------------------------------------------------


def team_objects(
    team: TeamQueueSpec,
    flavors_by_name: Mapping[str, FlavorSpec],
    *,
    cohort_capacity: Mapping[str, amounts.Amounts] | None = None,
) -> list[dict]:
    """A team's Volcano-side objects in apply order: ``[Namespace, ResourceQuota, Queue]``.

    The ResourceQuota (``core.resource_quota``) is at or above the Queue's
    ``capability`` for every resource: both come from ``core.max_admitted``.
    """
    return [
        core.namespace(team),
        core.resource_quota(team, flavors_by_name, cohort_capacity=cohort_capacity),
        team_queue(team, flavors_by_name, cohort_capacity=cohort_capacity),
    ]


def _check_names(cohorts: Iterable[CohortSpec], teams: Iterable[TeamQueueSpec]) -> None:
    cohort_names = set()
    for index, cohort in enumerate(cohorts):
        if cohort.name in RESERVED_QUEUE_NAMES:
            raise SpecError(f"cohorts[{index}].name", f"{cohort.name!r} is a Volcano queue name")
        if cohort.name in cohort_names:
            raise SpecError(f"cohorts[{index}].name", f"{cohort.name!r} listed twice")
        cohort_names.add(cohort.name)
    slugs: set[str] = set()
    for index, team in enumerate(teams):
        if team.slug in RESERVED_QUEUE_NAMES:
            raise SpecError(f"teams[{index}].slug", f"{team.slug!r} is a Volcano queue name")
        if team.slug in cohort_names or team.slug == team.cohort:
            raise SpecError(
                f"teams[{index}].slug",
                f"{team.slug!r} is also a cohort's name: Volcano Queues share one namespace",
            )
        if team.slug in slugs:
            raise SpecError(f"teams[{index}].slug", f"{team.slug!r} listed twice")
        slugs.add(team.slug)


def desired_objects(
    *,
    flavors: Iterable[FlavorSpec],
    cohorts: Iterable[CohortSpec] = (),
    priority_classes: Iterable[PriorityClassSpec] = (),
    teams: Iterable[TeamQueueSpec] = (),
) -> list[dict]:
    """The whole desired Volcano-side set, in apply order (same signature as Kueue's).

    Core PriorityClasses (value descending, then name), cohort Queues
    (parents first), then per team by slug: Namespace, ResourceQuota, Queue.
    Checks every Queue (:func:`check_queue`) and the hierarchy
    (:func:`check_hierarchy`). Raises ``SpecError``: a fractional or
    out-of-range weight (field ``weight``), a team slug equal to a cohort
    name or to ``root``/``default``, an unknown flavor.
    """
    flavors = list(flavors)
    cohorts = list(cohorts)
    teams = list(teams)
    _check_names(cohorts, teams)  # indexes in the caller's order
    teams.sort(key=lambda t: t.slug)
    by_name = {f.name: f for f in flavors}
    pcs = sorted(priority_classes, key=lambda p: (-p.value, p.name))
    seen: set[str] = set()
    for index, pc in enumerate(pcs):
        if pc.name in seen:
            raise SpecError(f"priority_classes[{index}].name", f"{pc.name!r} listed twice")
        seen.add(pc.name)
    all_queues = queues(flavors=flavors, cohorts=cohorts, teams=teams)
    for queue in all_queues:
        check_queue(queue)
    check_hierarchy(all_queues)
    team_queues = {q["metadata"]["name"]: q for q in all_queues[len(all_queues) - len(teams):]}
    objects: list[dict] = [core.priority_class(pc) for pc in pcs]
    objects += all_queues[: len(all_queues) - len(teams)]
    for team in teams:
        capacity = None
        if team.cohort is not None:
            capacity = amounts.cohort_capacity(
                team.cohort, teams=teams, cohorts=cohorts, flavors_by_name=by_name
            )
        objects += [
            core.namespace(team),
            core.resource_quota(team, by_name, cohort_capacity=capacity),
            team_queues[team.slug],
        ]
    return objects
