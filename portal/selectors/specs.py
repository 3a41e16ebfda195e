"""Database rows -> the frozen specs of :mod:`queues.specs` for one cluster.

A fixed number of queries whatever the number of teams (5). ``overrides`` lets
the quota preview render the world as it would be after an approval.
"""

from collections import defaultdict
from dataclasses import dataclass

from django.conf import settings

from portal.models import Cluster, Cohort, GpuFlavor, PriorityClass, QuotaGrant, Team
from queues import specs
from queues.render import kueue, volcano

#: Renderer of the whole desired set, by ``Cluster.backend``.
RENDERERS = {
    Cluster.Backend.KUEUE: kueue.desired_objects,
    Cluster.Backend.VOLCANO: volcano.desired_objects,
}


@dataclass(frozen=True)
class ClusterSpecs:
    """Everything the renderers need for one cluster (specs, each list sorted by name)."""

    cluster: str
    backend: str
    flavors: tuple[specs.FlavorSpec, ...]
    cohorts: tuple[specs.CohortSpec, ...]
    priority_classes: tuple[specs.PriorityClassSpec, ...]
    teams: tuple[specs.TeamQueueSpec, ...]

    @property
    def flavors_by_name(self) -> dict[str, specs.FlavorSpec]:
        """Flavor specs keyed by name."""
        return {f.name: f for f in self.flavors}


#: A grant as (nominal, borrowing limit, lending limit) GPUs, keyed by (team id, flavor id).
GrantOverride = dict[tuple[int, int], tuple[int, int | None, int | None]]


def flavor_spec(flavor: GpuFlavor) -> specs.FlavorSpec:
    """One :class:`GpuFlavor` row as a :class:`queues.specs.FlavorSpec`.

    A row without a GPU model (the field is optional) is named by its GPU resource,
    as the pages do: the model is for people and is rendered nowhere.
    """
    return specs.FlavorSpec(
        name=flavor.name,
        gpu_resource=flavor.gpu_resource,
        gpu_model=flavor.gpu_model or flavor.gpu_resource,
        node_labels=dict(flavor.node_labels or {}),
        node_taints=tuple(specs.Taint(**t) for t in flavor.node_taints or ()),
        tolerations=tuple(specs.Toleration(**t) for t in flavor.tolerations or ()),
        physical_gpus=flavor.physical_gpus,
        time_slicing_replicas=flavor.time_slicing_replicas,
        cpu_per_gpu=flavor.cpu_per_gpu,
        memory_per_gpu=flavor.memory_per_gpu,
    )


def cluster_specs(*, cluster: Cluster, overrides: GrantOverride | None = None) -> ClusterSpecs:
    """Build the :class:`ClusterSpecs` of ``cluster`` from the database.

    ``overrides`` replaces (or adds) grants: ``{(team_id, flavor_id): (nominal,
    borrowing, lending)}``. Raises :class:`queues.specs.SpecError` when a row
    cannot be rendered (e.g. limits on a team without cohort).
    """
    flavors = list(GpuFlavor.objects.filter(cluster=cluster).order_by("name"))
    flavor_by_id = {f.pk: f for f in flavors}
    cohorts = list(
        Cohort.objects.filter(cluster=cluster).select_related("parent").order_by("name")
    )
    teams = list(Team.objects.filter(cluster=cluster).select_related("cohort").order_by("slug"))
    grants: dict[int, dict[int, tuple]] = defaultdict(dict)
    for grant in QuotaGrant.objects.filter(team__cluster=cluster):
        grants[grant.team_id][grant.flavor_id] = (
            grant.nominal_gpus, grant.borrowing_limit_gpus, grant.lending_limit_gpus,
            grant.cpu or None, grant.memory or None,
        )
    for (team_id, flavor_id), (nominal, borrowing, lending) in (overrides or {}).items():
        previous = grants[team_id].get(flavor_id, (0, None, None, None, None))
        grants[team_id][flavor_id] = (nominal, borrowing, lending, *previous[3:])
    team_specs = []
    for team in teams:
        quotas = tuple(
            specs.FlavorQuota(
                flavor=flavor_by_id[flavor_id].name,
                gpu_resource=flavor_by_id[flavor_id].gpu_resource,
                nominal_gpus=values[0],
                borrowing_limit_gpus=values[1],
                lending_limit_gpus=values[2],
                cpu=values[3],
                memory=values[4],
            )
            for flavor_id, values in sorted(
                grants[team.pk].items(), key=lambda item: flavor_by_id[item[0]].name
            )
        )
        team_specs.append(
            specs.TeamQueueSpec(
                slug=team.slug,
                display_name=team.name,
                cohort=team.cohort.name if team.cohort else None,
                weight=team.weight,
                quotas=quotas,
                pod_security=settings.POD_SECURITY_LABELS,
            )
        )
    return ClusterSpecs(
        cluster=cluster.name,
        backend=cluster.backend,
        flavors=tuple(flavor_spec(f) for f in flavors),
        cohorts=tuple(
            specs.CohortSpec(name=c.name, parent=c.parent.name if c.parent else None,
                             weight=c.weight)
            for c in cohorts
        ),
        priority_classes=tuple(
            specs.PriorityClassSpec(name=p.name, value=p.value, description=p.description)
            for p in PriorityClass.objects.order_by("name")
        ),
        teams=tuple(team_specs),
    )


def desired_objects(cluster_specs_: ClusterSpecs) -> list[dict]:
    """Every manifest the cluster should hold, in apply order, for its backend.

    ``kueue``: ``queues.render.kueue.desired_objects``; ``volcano``:
    ``queues.render.volcano.desired_objects``. Raises
    :class:`queues.specs.SpecError` (e.g. a fractional weight on a Volcano
    cluster) or ``ValueError`` for an unknown backend.
    """
    render = RENDERERS.get(cluster_specs_.backend)
    if render is None:
        raise ValueError(f"unknown scheduler backend {cluster_specs_.backend!r}")
    return render(
        flavors=cluster_specs_.flavors,
        cohorts=cluster_specs_.cohorts,
        priority_classes=cluster_specs_.priority_classes,
        teams=cluster_specs_.teams,
    )
