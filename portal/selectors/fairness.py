"""Fairness of a cluster's GPU flavors, from the database, in a fixed number of queries.

Reads quotas, weights, cohorts and jobs, turns them into the pure inputs of
:mod:`queues.fairness` (one :class:`~queues.fairness.FlavorSnapshot` per flavor) and
returns its report with the words that explain it. Used by ``GET /api/v1/fairness/``,
the team page, the staff fairness page and the ``portal.fairness_snapshot`` task.

What goes in, per flavor
    capacity
        the flavor's physical GPUs; CPU and memory capacity are the flavor's per-GPU
        host share (``cpu_per_gpu``, ``memory_per_gpu``) times its requestable GPUs
        (``physical_gpus * time_slicing_replicas``).
    nominal quota
        each team's grant (``QuotaGrant``) on the flavor; CPU and memory from the grant
        or derived from the flavor's per-GPU share (as the renderers do).
    weight, cohort
        the team's fair-sharing weight; the pool a team can reach is its cohort tree,
        keyed by the root cohort (Kueue lets a ClusterQueue borrow through the whole
        tree), so teams under one root share one water-filled pool.
    usage
        the GPUs, CPU and memory of the team's Admitted and Running jobs, counted on
        the flavor Kueue admitted them to (``admitted_flavor``) or else the flavor
        they asked for.
    demand
        usage plus the Submitted and Queued jobs' GPUs.

Units
    Every GPU figure is in **physical GPUs** of the flavor. On a time-sliced flavor
    quotas and jobs count slices (``nvidia.com/gpu`` replicas), so they are divided by
    ``time_slicing_replicas`` (4 slices of a 4-replica flavor = 1 GPU); figures may then
    be fractional. CPU in cores, memory in bytes; shares and Jain's index in 0..1.

Simplifications (documented, not hidden)
    Lending limits are not modelled in the fair share (the pool is the sum of the
    cohort's nominal quotas); cohort-owned quota does not exist in the data model yet.

Queries: :func:`cluster_fairness` makes 4 queries for a named flavor (cohorts, teams,
grants, jobs) and 5 for all of a cluster's flavors, whatever the number of teams,
grants or jobs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from django.db.models import Count, Sum

from portal.models import Cluster, Cohort, GpuFlavor, Job, QuotaGrant, Team
from queues import quantity
from queues.fairness import (
    FairnessReport,
    FairnessRow,
    FlavorSnapshot,
    ReclaimSuggestion,
    Resources,
    TeamInput,
    compute_fairness,
)

__all__ = [
    "ADMITTED_PHASES",
    "PENDING_PHASES",
    "FlavorFairness",
    "cluster_fairness",
    "flavor_fairness",
    "fmt_gpus",
]

#: Jobs holding quota: they count as usage (and demand).
ADMITTED_PHASES = (Job.Phase.ADMITTED, Job.Phase.RUNNING)
#: Jobs waiting for quota: they count as demand only.
PENDING_PHASES = (Job.Phase.SUBMITTED, Job.Phase.QUEUED)


def fmt_gpus(value: Fraction | float | int) -> str:
    """``4`` -> ``"4"``, ``10/3`` -> ``"3.33"``: a GPU amount for sentences."""
    value = Fraction(value) if not isinstance(value, Fraction) else value
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.2f}".rstrip("0").rstrip(".")


def _plural(value: Fraction) -> str:
    return f"{fmt_gpus(value)} GPU" + ("" if value == 1 else "s")


def _num(value: Fraction) -> int | float:
    return value.numerator if value.denominator == 1 else float(value)


@dataclass
class _Load:
    """Accumulated amounts of one team on one flavor, in the flavor's own units."""

    nominal_gpus: int = 0
    nominal_cpu: Decimal | None = None
    nominal_memory: Decimal | None = None
    borrowing_limit_gpus: int | None = None
    has_grant: bool = False
    usage_gpus: int = 0
    usage_cpu: Decimal = Decimal(0)
    usage_memory: Decimal = Decimal(0)
    pending_gpus: int = 0
    jobs: int = 0


@dataclass(frozen=True)
class FlavorFairness:
    """One flavor's fairness: the pure report plus what the pages and API need.

    Fields:
        cluster: the cluster's name.
        flavor: the :class:`GpuFlavor` row.
        report: :class:`queues.fairness.FairnessReport` (GPU figures in physical GPUs).
        team_ids: ``{slug: team id}`` of the teams in the report.
        team_names: ``{slug: display name}``.
        cohorts: ``{slug: the team's own cohort name or None}`` (the report's
            ``cohort`` is the root of the team's cohort tree: the pool it shares).
    """

    cluster: str
    flavor: GpuFlavor
    report: FairnessReport
    team_ids: dict[str, int] = field(default_factory=dict)
    team_names: dict[str, str] = field(default_factory=dict)
    cohorts: dict[str, str | None] = field(default_factory=dict)

    @property
    def replicas(self) -> int:
        """Time-slicing replicas of the flavor (1 = not time-sliced)."""
        return self.flavor.time_slicing_replicas

    @property
    def rows(self) -> tuple[FairnessRow, ...]:
        """The report's rows, one per team, in slug order."""
        return self.report.rows

    @property
    def teams_with_demand(self) -> int:
        """How many teams have demand (the ``n`` of Jain's index)."""
        return sum(1 for r in self.report.rows if r.demand > 0 and r.fair_share > 0)

    def row(self, slug: str) -> FairnessRow | None:
        """The row of team ``slug``, or ``None`` when the team has nothing on the flavor."""
        return next((r for r in self.report.rows if r.slug == slug), None)

    def reclaim_for(self, slug: str) -> ReclaimSuggestion | None:
        """The reclaim suggestion of team ``slug`` (``None`` unless below its fair share)."""
        return next((s for s in self.report.reclaim if s.team == slug), None)

    # ---------------------------------------------------------------- words

    def summary_sentence(self) -> str:
        """Jain's index in words, e.g. "Jain's index 0.67 over 3 teams with demand
        (1 = every team at its fair share; 0.33 = one team holds it all)"."""
        n = self.teams_with_demand
        if self.report.jain_index is None:
            return f"No team has demand on {self.flavor.name}: nothing to be fair about."
        if n == 1:
            return f"Jain's index {self.report.jain_index:.2f}: one team has demand."
        return (f"Jain's index {self.report.jain_index:.2f} over {n} teams with demand "
                f"(1 = every team at its fair share; {1 / n:.2f} = one team holds it all).")

    def row_sentence(self, row: FairnessRow) -> str:
        """One team's position in words (GPUs are physical GPUs of the flavor)."""
        slug, usage, share = row.slug, row.usage, row.fair_share
        if row.demand == 0:
            if row.nominal > 0 and row.cohort is not None:
                return (f"{slug} has no demand on {self.flavor.name}; its {_plural(row.nominal)}"
                        f" of nominal quota can be lent to its cohort.")
            return f"{slug} has no demand on {self.flavor.name}."
        text = f"{slug} uses {_plural(usage)} of a fair share of {fmt_gpus(share)}"
        if usage > share:
            text += f", {fmt_gpus(usage - share)} above it"
        elif usage == share:
            text += ", exactly its share"
        else:
            text += f", {fmt_gpus(share - usage)} below it"
        if usage > row.nominal:
            text += f" (borrowing {fmt_gpus(usage - row.nominal)} beyond its nominal quota)"
        return text + "."

    def sentences(self, *, slugs: set[str] | None = None) -> list[str]:
        """What the flavor's chart shows, in sentences.

        ``slugs=None`` (staff): the summary, every reclaim suggestion naming the teams
        GPUs could come from, and an over-commit warning. With ``slugs`` (a member's
        teams): the summary, then for each of those teams its position and its reclaim
        suggestion without naming other teams.
        """
        out = [self.summary_sentence()]
        if slugs is None:
            out += [s.sentence() for s in self.report.reclaim]
            if self.report.quota_exceeds_capacity:
                total = sum((r.fair_share for r in self.report.rows), Fraction(0))
                out.append(f"Fair shares add up to {_plural(total)}, more than the "
                           f"{self.report.capacity_gpus} physical GPUs: nominal quotas "
                           f"over-commit {self.flavor.name}.")
        else:
            for row in self.report.rows:
                if row.slug not in slugs:
                    continue
                suggestion = self.reclaim_for(row.slug)
                out.append(suggestion.sentence(name_sources=False) + "."
                           if suggestion else self.row_sentence(row))
        if self.replicas > 1:
            out.append(f"{self.flavor.name} is time-sliced ({self.replicas} slices per GPU): "
                       f"figures count physical GPUs, a slice is 1/{self.replicas} GPU.")
        return out

    # ---------------------------------------------------------------- JSON

    def team_dict(self, row: FairnessRow) -> dict[str, object]:
        """A row as the API shows it: the report's fields (``queues.fairness``
        ``FairnessRow.as_dict``) plus ``name``, ``cohort`` (own), ``cohort_pool`` (root),
        ``kueue_share_rounded``, ``below_fair_share_by`` and ``above_fair_share_by`` (GPUs,
        >= 0) and ``sentence``."""
        data = row.as_dict()
        data.update(
            name=self.team_names.get(row.slug, row.slug),
            cohort=self.cohorts.get(row.slug),
            cohort_pool=row.cohort,
            kueue_share_rounded=row.kueue.rounded,
            below_fair_share_by=_num(max(row.fair_share - row.usage, Fraction(0))),
            above_fair_share_by=_num(max(row.usage - row.fair_share, Fraction(0))),
            sentence=self.row_sentence(row),
        )
        return data

    def as_dict(self, *, slugs: set[str] | None = None) -> dict[str, object]:
        """The ``GET /api/v1/fairness/`` payload; ``slugs`` limits the team rows and the
        sentences to those teams (``None`` = all, for staff). ``capacity_gpus`` and
        ``jain_index`` are always the flavor's, over every team."""
        rows = [r for r in self.report.rows if slugs is None or r.slug in slugs]
        reclaim = [s for s in self.report.reclaim if slugs is None or s.team in slugs]
        named = slugs is None
        return {
            "cluster": self.cluster,
            "flavor": self.flavor.name,
            "capacity_gpus": self.report.capacity_gpus,
            "time_slicing_replicas": self.replicas,
            "jain_index": self.report.jain_index,
            "teams_with_demand": self.teams_with_demand,
            "quota_exceeds_capacity": self.report.quota_exceeds_capacity,
            "teams": [self.team_dict(r) for r in rows],
            "reclaim": [
                {
                    "team": s.team,
                    "deficit_gpus": _num(s.deficit_gpus),
                    "reclaimable_gpus": _num(s.reclaimable_gpus),
                    "sources": [{"team": t, "gpus": _num(g)} for t, g in s.sources]
                    if named else [],
                    "sentence": s.sentence(name_sources=named),
                }
                for s in reclaim
            ],
            "sentences": self.sentences(slugs=slugs),
        }


def _cohort_roots(cohorts: list[Cohort]) -> dict[int, str]:
    """``{cohort id: name of the root of its tree}`` (a cycle stops at the repeat)."""
    by_id = {c.pk: c for c in cohorts}
    roots: dict[int, str] = {}
    for cohort in cohorts:
        seen = {cohort.pk}
        node = cohort
        while node.parent_id is not None and node.parent_id in by_id and node.parent_id not in seen:
            seen.add(node.parent_id)
            node = by_id[node.parent_id]
        roots[cohort.pk] = node.name
    return roots


def _per_gpu(flavor: GpuFlavor) -> tuple[Decimal, Decimal]:
    return quantity.parse(flavor.cpu_per_gpu), quantity.parse(flavor.memory_per_gpu)


def cluster_fairness(
    *, cluster: Cluster, flavor: GpuFlavor | None = None,
    flavors: list[GpuFlavor] | None = None,
) -> list[FlavorFairness]:
    """Fairness of every GPU flavor of ``cluster`` (or only ``flavor``), by flavor name.

    Returns one :class:`FlavorFairness` per flavor, including flavors no team uses
    (their report has no rows). Teams appear on a flavor when they hold a grant on it
    or have live jobs on it. ``flavors``: the cluster's flavors when the caller has
    them already (saves a query). Queries: 4 with ``flavor`` or ``flavors``, 5
    without, whatever the number of teams, grants and jobs. Raises ``ValueError``
    from :mod:`queues.quantity` when a stored quantity is invalid (validated on
    input, so this means a corrupt row).
    """
    if flavor is not None:
        flavors = [flavor]
    elif flavors is None:
        flavors = list(GpuFlavor.objects.filter(cluster=cluster).order_by("name"))
    else:
        flavors = sorted(flavors, key=lambda f: f.name)
    flavor_by_id = {f.pk: f for f in flavors}
    flavor_by_name = {f.name: f for f in flavors}
    cohorts = list(Cohort.objects.filter(cluster=cluster).only("id", "name", "parent_id"))
    roots = _cohort_roots(cohorts)
    cohort_names = {c.pk: c.name for c in cohorts}
    teams = {
        t.pk: t for t in Team.objects.filter(cluster=cluster).only(
            "id", "slug", "name", "cohort_id", "weight")
    }
    loads: dict[tuple[int, int], _Load] = defaultdict(_Load)

    for grant in QuotaGrant.objects.filter(
        team__cluster=cluster, flavor_id__in=list(flavor_by_id)
    ).only("team_id", "flavor_id", "nominal_gpus", "borrowing_limit_gpus", "cpu", "memory"):
        load = loads[(grant.team_id, grant.flavor_id)]
        load.has_grant = True
        load.nominal_gpus = grant.nominal_gpus
        load.borrowing_limit_gpus = grant.borrowing_limit_gpus
        load.nominal_cpu = quantity.parse(grant.cpu) if grant.cpu else None
        load.nominal_memory = quantity.parse(grant.memory) if grant.memory else None

    # One grouped query: jobs of the cluster that hold or wait for quota.
    job_groups = (
        Job.objects.filter(team__cluster=cluster, phase__in=[*ADMITTED_PHASES, *PENDING_PHASES])
        .values("team_id", "flavor_id", "admitted_flavor", "phase", "gpus_per_worker",
                "cpu_per_worker", "memory_per_worker")
        .annotate(pods=Sum("workers"), jobs=Count("id"))
        .order_by()
    )
    for group in job_groups:
        gpus = group["pods"] * group["gpus_per_worker"]  # gpus_per_worker is grouped on
        admitted = group["phase"] in ADMITTED_PHASES
        target = None
        if admitted and group["admitted_flavor"]:
            target = flavor_by_name.get(group["admitted_flavor"])
            if target is None:  # admitted to a flavor we are not looking at
                continue
        else:
            target = flavor_by_id.get(group["flavor_id"])
        if target is None:
            continue
        load = loads[(group["team_id"], target.pk)]
        load.jobs += group["jobs"]
        if not admitted:
            load.pending_gpus += gpus
            continue
        cpu_per_gpu, memory_per_gpu = _per_gpu(target)
        per_worker_gpus = group["gpus_per_worker"]
        cpu = (quantity.parse(group["cpu_per_worker"]) if group["cpu_per_worker"]
               else per_worker_gpus * cpu_per_gpu)
        memory = (quantity.parse(group["memory_per_worker"]) if group["memory_per_worker"]
                  else per_worker_gpus * memory_per_gpu)
        load.usage_gpus += gpus
        load.usage_cpu += cpu * group["pods"]
        load.usage_memory += memory * group["pods"]

    out = []
    for fl in flavors:
        replicas = Fraction(fl.time_slicing_replicas)
        cpu_per_gpu, memory_per_gpu = _per_gpu(fl)
        requestable = fl.physical_gpus * fl.time_slicing_replicas
        inputs, ids, names, own_cohorts = [], {}, {}, {}
        for (team_id, flavor_id), load in sorted(loads.items()):
            if flavor_id != fl.pk or team_id not in teams:
                continue
            team = teams[team_id]
            nominal_cpu = (load.nominal_cpu if load.nominal_cpu is not None
                           else load.nominal_gpus * cpu_per_gpu)
            nominal_memory = (load.nominal_memory if load.nominal_memory is not None
                              else load.nominal_gpus * memory_per_gpu)
            inputs.append(TeamInput(
                slug=team.slug,
                cohort=roots.get(team.cohort_id) if team.cohort_id else None,
                weight=team.weight,
                nominal=Resources(gpus=Fraction(load.nominal_gpus) / replicas,
                                  cpu_cores=nominal_cpu, memory_bytes=nominal_memory),
                usage=Resources(gpus=Fraction(load.usage_gpus) / replicas,
                                cpu_cores=load.usage_cpu, memory_bytes=load.usage_memory),
                demand=Resources(gpus=Fraction(load.usage_gpus + load.pending_gpus) / replicas),
                borrowing_limit_gpus=None if load.borrowing_limit_gpus is None
                else Fraction(load.borrowing_limit_gpus) / replicas,
            ))
            ids[team.slug] = team_id
            names[team.slug] = team.name
            own_cohorts[team.slug] = cohort_names.get(team.cohort_id)
        snapshot = FlavorSnapshot(
            flavor=fl.name,
            capacity=Resources(gpus=fl.physical_gpus, cpu_cores=requestable * cpu_per_gpu,
                               memory_bytes=requestable * memory_per_gpu),
            teams=tuple(inputs),
        )
        out.append(FlavorFairness(cluster=cluster.name, flavor=fl,
                                  report=compute_fairness(snapshot), team_ids=ids,
                                  team_names=names, cohorts=own_cohorts))
    return out


def flavor_fairness(*, flavor: GpuFlavor) -> FlavorFairness:
    """Fairness of one flavor (its ``cluster`` should be loaded with it: 4 queries)."""
    return cluster_fairness(cluster=flavor.cluster, flavor=flavor)[0]
