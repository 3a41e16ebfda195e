"""Kueue objects (``kueue.x-k8s.io/v1beta2``) and the full desired object set.

Field names follow the v1beta2 CRDs (``spec.cohortName``, Cohort
``spec.parentName``, ``spec.fairSharing.weight``). Quantities and GPU
counts are rendered as strings (the quota fields are int-or-string
quantities), in ``queues.quantity``'s canonical form.

Resource groups
---------------
Kueue requires every flavor of a resource group to list the group's
``coveredResources``, and a resource or a flavor may appear in only *one*
resource group of a ClusterQueue or Cohort (webhook ``validateResourceGroups``).
CPU and memory are charged to the GPU flavor the job lands on, so they must
share the group with the GPU resources. Hence one resource group:
``coveredResources = [cpu, memory, <each GPU resource of the quotas, sorted>]``.
When all flavors expose the same GPU resource this is exactly "one group per
GPU resource"; when a team holds, say, ``nvidia.com/gpu`` and a MIG profile,
each flavor lists ``nominalQuota: "0"`` for the GPU resources it does not
expose (nothing in a cohort can be borrowed there either).
https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/#resource-groups
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal

from queues import quantity
from queues.render import amounts, core
from queues.render.labels import (
    KIND_COHORT,
    KIND_FLAVOR,
    KIND_PRIORITY_CLASS,
    shared_labels,
    team_labels,
)
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
    "cluster_objects",
    "cluster_queue",
    "cohort",
    "desired_objects",
    "local_queue",
    "resource_flavor",
    "resource_groups",
    "team_objects",
    "workload_priority_class",
]

API_VERSION = "kueue.x-k8s.io/v1beta2"


def _weight(weight: Decimal) -> str:
    return quantity.format_quantity(weight)


def resource_flavor(flavor: FlavorSpec) -> dict:
    """``ResourceFlavor`` named ``flavor.name``.

    ``nodeLabels`` steer admitted pods to the pool, ``nodeTaints`` make Kueue
    admit only workloads tolerating them, ``tolerations`` are added to
    admitted pods (https://kueue.sigs.k8s.io/docs/concepts/resource_flavor/).
    Empty fields are omitted.
    """
    spec: dict = {}
    if flavor.node_labels:
        spec["nodeLabels"] = dict(flavor.node_labels)
    if flavor.node_taints:
        spec["nodeTaints"] = [
            {"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect}
            for t in flavor.node_taints
        ]
    if flavor.tolerations:
        spec["tolerations"] = [core.toleration(t) for t in flavor.tolerations]
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": flavor.name, "labels": shared_labels(KIND_FLAVOR)},
        "spec": spec,
    }


def _resource(name: str, nominal: str, borrowing: str | None, lending: str | None) -> dict:
    entry = {"name": name, "nominalQuota": nominal}
    if borrowing is not None:
        entry["borrowingLimit"] = borrowing
    if lending is not None:
        entry["lendingLimit"] = lending
    return entry


def resource_groups(
    quotas: Iterable[FlavorQuota], flavors_by_name: Mapping[str, FlavorSpec], *, field: str
) -> list[dict]:
    """The ``resourceGroups`` list for quotas (one group, see the module doc); ``[]`` if none.

    Per flavor, in the quotas' order (Kueue's preference order): ``cpu``
    (cores), ``memory`` (bytes), then each covered GPU resource (devices):
    ``nominalQuota`` always, ``borrowingLimit`` / ``lendingLimit`` only when
    set (https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/#borrowinglimit,
    #lendinglimit). A borrow-only quota keeps ``nominalQuota: "0"``.
    """
    quotas = list(quotas)
    if not quotas:
        return []
    gpu_resources = sorted({q.gpu_resource for q in quotas})
    flavors = []
    for index, quota in enumerate(quotas):
        flavor = amounts.flavor_of(quota, flavors_by_name, f"{field}[{index}]")
        binary = amounts.memory_is_binary(quota, flavor)
        own = amounts.nominal(quota, flavor)
        borrow = amounts.borrowing_limit(quota, flavor)
        lend = amounts.lending_limit(quota, flavor)

        def fmt(value, *, binary=False):
            return None if value is None else quantity.format_quantity(value, binary=binary)

        resources = [
            _resource("cpu", fmt(own.cpu), fmt(borrow and borrow.cpu), fmt(lend and lend.cpu)),
            _resource(
                "memory",
                fmt(own.memory, binary=binary),
                fmt(borrow and borrow.memory, binary=binary),
                fmt(lend and lend.memory, binary=binary),
            ),
        ]
        for resource in gpu_resources:
            if resource == quota.gpu_resource:
                resources.append(
                    _resource(
                        resource,
                        str(quota.nominal_gpus),
                        None if borrow is None else str(borrow.gpus),
                        None if lend is None else str(lend.gpus),
                    )
                )
            else:
                resources.append(_resource(resource, "0", None, None))
        flavors.append({"name": quota.flavor, "resources": resources})
    return [{"coveredResources": ["cpu", "memory", *gpu_resources], "flavors": flavors}]


def cohort(spec: CohortSpec, flavors_by_name: Mapping[str, FlavorSpec] | None = None) -> dict:
    """``Cohort`` named ``spec.name``.

    ``parentName`` when the cohort has a parent, ``fairSharing.weight``
    always, ``resourceGroups`` only for a shared pool (its nominal quota is
    added to the members' quotas; limits apply towards the parent,
    https://kueue.sigs.k8s.io/docs/concepts/cohort/). ``flavors_by_name`` is
    needed only with a shared pool.
    """
    body: dict = {}
    if spec.parent is not None:
        body["parentName"] = spec.parent
    body["fairSharing"] = {"weight": _weight(spec.weight)}
    if spec.shared_pool:
        if flavors_by_name is None:
            raise SpecError("shared_pool", "flavors_by_name is needed to render a shared pool")
        body["resourceGroups"] = resource_groups(
            spec.shared_pool, flavors_by_name, field="shared_pool"
        )
    return {
        "apiVersion": API_VERSION,
        "kind": "Cohort",
        "metadata": {"name": spec.name, "labels": shared_labels(KIND_COHORT)},
        "spec": body,
    }


def cluster_queue(team: TeamQueueSpec, flavors_by_name: Mapping[str, FlavorSpec]) -> dict:
    """The team's ``ClusterQueue`` named ``team.cluster_queue_name``.

    Admits only from the team namespace (``namespaceSelector`` on the
    API-server-set ``kubernetes.io/metadata.name`` label), joins
    ``cohortName`` when the team has a cohort, ``queueingStrategy:
    BestEffortFIFO`` (a big gang job does not block smaller ones behind it),
    preemption as in the spec, ``fairSharing.weight``
    (https://kueue.sigs.k8s.io/docs/concepts/cluster_queue/,
    https://kueue.sigs.k8s.io/docs/concepts/fair_sharing/). Carries the team
    label although cluster scoped.
    """
    spec: dict = {}
    if team.cohort is not None:
        spec["cohortName"] = team.cohort
    spec["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": team.namespace}}
    spec["queueingStrategy"] = "BestEffortFIFO"
    borrow: dict = {"policy": team.borrow_within_cohort}
    if team.borrow_within_cohort_max_priority is not None:
        borrow["maxPriorityThreshold"] = team.borrow_within_cohort_max_priority
    spec["preemption"] = {
        "reclaimWithinCohort": team.reclaim_within_cohort,
        "withinClusterQueue": team.within_cluster_queue,
        "borrowWithinCohort": borrow,
    }
    spec["fairSharing"] = {"weight": _weight(team.weight)}
    spec["resourceGroups"] = resource_groups(team.quotas, flavors_by_name, field="quotas")
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": team.cluster_queue_name, "labels": team_labels(team.slug)},
        "spec": spec,
    }


def local_queue(team: TeamQueueSpec) -> dict:
    """The team's ``LocalQueue`` in its namespace, pointing at its ClusterQueue.

    ``spec.clusterQueue`` is immutable (CRD rule), which is why the names are
    derived from the slug and never change.
    """
    return {
        "apiVersion": API_VERSION,
        "kind": "LocalQueue",
        "metadata": {
            "name": team.local_queue_name,
            "namespace": team.namespace,
            "labels": team_labels(team.slug),
        },
        "spec": {"clusterQueue": team.cluster_queue_name},
    }


def workload_priority_class(pc: PriorityClassSpec) -> dict:
    """``WorkloadPriorityClass``: Kueue's queueing/preemption priority (``value`` int32).

    https://kueue.sigs.k8s.io/docs/concepts/workload_priority_class/
    """
    obj: dict = {
        "apiVersion": API_VERSION,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": pc.name, "labels": shared_labels(KIND_PRIORITY_CLASS)},
        "value": pc.value,
    }
    if pc.description:
        obj["description"] = pc.description
    return obj


# --- the desired set -------------------------------------------------------------


def team_objects(
    team: TeamQueueSpec,
    flavors_by_name: Mapping[str, FlavorSpec],
    *,
    cohort_capacity: Mapping[str, amounts.Amounts] | None = None,
) -> list[dict]:
    """Everything a team owns, in apply order.

    ``[Namespace, ResourceQuota, ClusterQueue, LocalQueue]``: the namespace
    before what lives in it, the ClusterQueue before the LocalQueue pointing
    at it. The shared objects it refers to come from ``cluster_objects``,
    applied first. ``cohort_capacity``: see ``core.resource_quota``.
    """
    return [
        core.namespace(team),
        core.resource_quota(team, flavors_by_name, cohort_capacity=cohort_capacity),
        cluster_queue(team, flavors_by_name),
        local_queue(team),
    ]


def cluster_objects(
    *,
    flavors: Iterable[FlavorSpec],
    cohorts: Iterable[CohortSpec] = (),
    priority_classes: Iterable[PriorityClassSpec] = (),
) -> list[dict]:
    """Shared objects, in apply order.

    ResourceFlavors (by name), Cohorts (parents first, then by name),
    then for each priority class (by value descending, then name) its
    WorkloadPriorityClass and core PriorityClass.
    """
    flavors = sorted(flavors, key=lambda f: f.name)
    by_name = _index(flavors, "flavors")
    objects = [resource_flavor(f) for f in flavors]
    objects += [cohort(c, by_name) for c in amounts.cohort_order(cohorts)]
    pcs = sorted(priority_classes, key=lambda p: (-p.value, p.name))
    _index(pcs, "priority_classes")
    for pc in pcs:
        objects += [workload_priority_class(pc), core.priority_class(pc)]
    return objects


def _index(specs: Iterable, field: str) -> dict:
    result: dict = {}
    for index, spec in enumerate(specs):
        if spec.name in result:
            raise SpecError(f"{field}[{index}].name", f"{spec.name!r} listed twice")
        result[spec.name] = spec
    return result


def desired_objects(
    *,
    flavors: Iterable[FlavorSpec],
    cohorts: Iterable[CohortSpec] = (),
    priority_classes: Iterable[PriorityClassSpec] = (),
    teams: Iterable[TeamQueueSpec] = (),
) -> list[dict]:
    """The whole desired Kueue-side set: ``cluster_objects`` then each team's objects by slug.

    Computes each team's cohort capacity (``amounts.cohort_capacity``) for its
    ResourceQuota, so callers need not.
    """
    flavors = list(flavors)
    cohorts = list(cohorts)
    teams = sorted(teams, key=lambda t: t.slug)
    by_name = _index(flavors, "flavors")
    slugs: set[str] = set()
    for index, team in enumerate(teams):
        if team.slug in slugs:
            raise SpecError(f"teams[{index}].slug", f"{team.slug!r} listed twice")
        slugs.add(team.slug)
    objects = cluster_objects(flavors=flavors, cohorts=cohorts, priority_classes=priority_classes)
    # Once per cohort, not per team: each computation sums every team (1,000
    # teams made this quadratic loop most of a no-op resync's time).
    capacities: dict[str, dict[str, amounts.Amounts]] = {}
    for team in teams:
        capacity = None
        if team.cohort is not None:
            if team.cohort not in capacities:
                capacities[team.cohort] = amounts.cohort_capacity(
                    team.cohort, teams=teams, cohorts=cohorts, flavors_by_name=by_name
                )
            capacity = capacities[team.cohort]
        objects += team_objects(team, by_name, cohort_capacity=capacity)
    return objects
