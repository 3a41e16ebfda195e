"""What-if before approval: replay recent demand through the scheduler simulator twice.

Pure (no Django, no ``kubernetes``). The caller gives the cluster as it is
(``before``) and as it would be after a quota change (``after``), both as a
:class:`SimCluster` (the portal's specs plus the nodes of each flavor), and the
recent demand as :class:`Demand` rows. :func:`what_if` runs
the scheduler model of the cluster's backend (``backends.get(name).simulator``, say
``KueueSimulator``) once per side on the same demand and returns, per team, the figures
of :class:`TeamFigures` for both sides and their difference (after - before).

Units: times in **seconds** of simulated time (0 = the first job of the
demand window), GPU amounts in whole units of each flavor's resource (GPUs, or
MIG instances for a MIG flavor).

Deterministic: the demand is sorted by ``(submit_time, team, name)`` before it
is submitted, the simulators read no clock and no randomness, so the same
inputs give the same :class:`WhatIfResult` (and the same fingerprints).

What it models, and what it does not (see ``queues/schedmodel`` for the
scheduler's own simplifications): each job runs for its recorded duration once
admitted and restarts from zero after a preemption; jobs that never got a
duration use the caller's default; a job that can never be admitted on one side
(more GPUs than its queue may ever use, a flavor its team holds no quota on) is
counted in ``not_admitted`` and left out of the waits.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace

from queues import backends
from queues.schedmodel import DEFAULT_GPU_RESOURCE, NodePool, SimJob, SimResult
from queues.specs import CohortSpec, FlavorSpec, SpecError, TeamQueueSpec

__all__ = [
    "BACKENDS",
    "Demand",
    "SimCluster",
    "TeamFigures",
    "TeamWhatIf",
    "WhatIfResult",
    "describe",
    "format_duration",
    "node_pools_for",
    "percentile",
    "simulate",
    "team_figures",
    "what_if",
]

#: The backends whose scheduler model the what-if runs (every registered one).
BACKENDS = backends.names()

#: Figures compared between the two runs; the delta is ``after - before``.
COMPARED = (
    "mean_wait_seconds",
    "p95_wait_seconds",
    "borrowed_mean_gpus",
    "borrowed_peak_gpus",
    "jobs_preempted",
    "preemptions",
    "not_admitted",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class Demand:
    """One job of the recent demand.

    * ``name``: unique within the team (a DNS-1123 label, e.g. ``job-17``).
    * ``team``: the team slug (its ClusterQueue / Volcano Queue).
    * ``submit_time``: seconds (>= 0) since the start of the demand window.
    * ``workers`` x ``gpus_per_worker``: the gang (whole units of ``gpu_resource``).
    * ``flavor``: the flavor the job asked for; ``gpu_resource`` its resource.
    * ``priority``: the priority class value (higher first).
    * ``duration``: seconds (> 0) the job runs once admitted.

    Bad values raise :class:`queues.specs.SpecError` naming the field (when
    turned into a ``SimJob``).
    """

    name: str
    team: str
    submit_time: float
    workers: int
    gpus_per_worker: int
    flavor: str
    duration: float
    priority: int = 0
    gpu_resource: str = DEFAULT_GPU_RESOURCE

    def sim_job(self) -> SimJob:
        """This job as the simulator's ``SimJob`` (namespace = team slug)."""
        return SimJob(
            name=self.name, namespace=self.team, workers=self.workers,
            gpus_per_worker=self.gpus_per_worker, gpu_resource=self.gpu_resource,
            flavor=self.flavor, priority=self.priority, submit_time=self.submit_time,
            duration=self.duration,
        )


@dataclass(frozen=True)
class SimCluster:
    """A cluster to simulate: ``backend`` (``"kueue"`` or ``"volcano"``), the
    flavors, cohorts and teams as :mod:`queues.specs` specs (as the renderers
    take them), and ``node_pools`` (the nodes of each flavor; a Kueue flavor
    without a pool is quota-only, a Volcano flavor without one has no nodes).
    Raises ``SpecError("backend")`` for an unknown backend."""

    backend: str
    flavors: tuple[FlavorSpec, ...]
    cohorts: tuple[CohortSpec, ...]
    teams: tuple[TeamQueueSpec, ...]
    node_pools: tuple[NodePool, ...] = ()

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise SpecError("backend", f"must be one of {', '.join(BACKENDS)}; "
                                       f"got {self.backend!r}")


@dataclass(frozen=True)
class TeamFigures:
    """One team's figures from one simulated run.

    * ``jobs``: jobs of the team in the demand; ``admitted`` of them ran,
      ``not_admitted`` never could.
    * ``mean_wait_seconds`` / ``p95_wait_seconds``: over the admitted jobs,
      seconds from submission to the admission that ran to the end (a preempted
      job's wait includes the time it ran before the preemption); ``None`` when
      no job of the team was admitted. p95 by linear interpolation
      (:func:`percentile`).
    * ``borrowed_mean_gpus``: GPUs used above the team's nominal quota (Kueue) or
      deserved share (Volcano), summed over flavors, averaged over the horizon
      (time-weighted, 0 .. horizon seconds); ``borrowed_peak_gpus`` the most at
      any instant.
    * ``jobs_preempted``: jobs of the team preempted at least once;
      ``preemptions``: all preemptions of its jobs.
    """

    team: str
    jobs: int
    admitted: int
    not_admitted: int
    mean_wait_seconds: float | None
    p95_wait_seconds: float | None
    borrowed_mean_gpus: float
    borrowed_peak_gpus: int
    jobs_preempted: int
    preemptions: int


@dataclass(frozen=True)
class TeamWhatIf:
    """``before`` and ``after`` figures of one team and ``delta``: for each name of
    ``COMPARED``, ``after - before`` (``None`` when either side is ``None``)."""

    team: str
    before: TeamFigures
    after: TeamFigures
    delta: Mapping[str, float | int | None]


@dataclass(frozen=True)
class WhatIfResult:
    """The what-if of one change.

    * ``teams``: one :class:`TeamWhatIf` per team of the cluster (by slug).
    * ``jobs``: jobs in the demand; ``horizon_seconds``: the window the
      borrowed means are taken over (the later end of the two runs).
    * ``fingerprint_before`` / ``fingerprint_after``: hashes of every simulated
      event (``SimResult.fingerprint``), equal inputs give equal hashes.
    """

    backend: str
    jobs: int
    horizon_seconds: float
    teams: tuple[TeamWhatIf, ...]
    fingerprint_before: str
    fingerprint_after: str
    sentences: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict:
        """A JSON-ready dict: ``{backend, jobs, horizon_seconds, fingerprint_before,
        fingerprint_after, sentences: [str], teams: [{team, before: {...},
        after: {...}, delta: {...}}]}``."""
        return {
            "backend": self.backend,
            "jobs": self.jobs,
            "horizon_seconds": self.horizon_seconds,
            "fingerprint_before": self.fingerprint_before,
            "fingerprint_after": self.fingerprint_after,
            "sentences": list(self.sentences),
            "teams": [
                {"team": row.team, "before": asdict(row.before), "after": asdict(row.after),
                 "delta": dict(row.delta)}
                for row in self.teams
            ],
        }


def node_pools_for(
    flavors: Iterable[FlavorSpec], devices_per_node: Mapping[str, int]
) -> tuple[NodePool, ...]:
    """The nodes of each flavor, from its capacity.

    A flavor with ``physical_gpus`` devices (GPUs, or MIG instances), each
    advertised ``time_slicing_replicas`` times, on nodes of
    ``devices_per_node[flavor]`` devices, becomes ``allocatable // per_node``
    nodes of ``per_node`` units (``per_node = devices * replicas``; a remainder
    smaller than a node is left out, and a flavor smaller than one node is one
    node of all its units). Flavors with no physical GPUs recorded get no pool.
    Raises ``SpecError("devices_per_node[<flavor>]")`` for a count below 1.
    """
    pools = []
    for flavor in flavors:
        allocatable = flavor.physical_gpus * flavor.time_slicing_replicas
        if allocatable <= 0:
            continue
        devices = devices_per_node.get(flavor.name, 8)
        if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
            raise SpecError(f"devices_per_node[{flavor.name}]",
                            f"must be an int >= 1, got {devices!r}")
        per_node = min(devices * flavor.time_slicing_replicas, allocatable)
        pools.append(NodePool(
            flavor=flavor.name, nodes=allocatable // per_node, units_per_node=per_node,
            gpu_resource=flavor.gpu_resource, gpu_model=flavor.gpu_model,
        ))
    return tuple(pools)


def _ordered(demand: Iterable[Demand]) -> list[Demand]:
    return sorted(demand, key=lambda d: (d.submit_time, d.team, d.name))


def simulate(cluster: SimCluster, demand: Iterable[Demand]) -> SimResult:
    """Run ``demand`` through the simulator of ``cluster.backend`` to the end.

    Returns the simulator's ``SimResult``. Raises ``SpecError`` naming the field
    for a demand row the simulator refuses (``demand[i].<field>``, ``i`` in
    submission order), e.g. a team that is not a queue of the cluster.
    """
    sim = backends.get(cluster.backend).simulator(
        flavors=cluster.flavors, teams=cluster.teams, cohorts=cluster.cohorts,
        node_pools=cluster.node_pools,
    )
    for index, row in enumerate(_ordered(demand)):
        try:
            sim.submit(row.sim_job())
        except SpecError as exc:
            raise SpecError(f"demand[{index}].{exc.field}", exc.message) from None
    return sim.run()


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0..100) of ``values`` by linear interpolation between
    closest ranks (Hyndman & Fan type 7, numpy's default ``"linear"``):
    ``x[floor(h)] + (h - floor(h)) * (x[floor(h)+1] - x[floor(h)])`` with
    ``h = (n - 1) * q / 100`` over the sorted values. ``None`` for no values.
    Raises ``ValueError`` for ``q`` outside 0..100."""
    if not 0 <= q <= 100:
        raise ValueError(f"q must be within 0..100, got {q}")
    if not values:
        return None
    ordered = sorted(values)
    h = (len(ordered) - 1) * q / 100
    low = math.floor(h)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (h - low) * (ordered[high] - ordered[low])


def team_figures(result: SimResult, teams: Iterable[str], horizon: float
                 ) -> dict[str, TeamFigures]:
    """:class:`TeamFigures` of each of ``teams`` (slugs) from one run.

    ``horizon``: seconds the borrowed mean is averaged over (``[0, horizon]``;
    a value <= 0 gives a mean of 0).
    """
    teams = list(teams)
    waits: dict[str, list[float]] = {t: [] for t in teams}
    counts = {t: [0, 0, 0, 0] for t in teams}  # jobs, not admitted, preempted, preemptions
    for record in result.workloads.values():
        team = record.job.queue_name
        if team not in counts:
            continue
        count = counts[team]
        count[0] += 1
        if record.wait is None:
            count[1] += 1
        else:
            waits[team].append(record.wait)
        if record.evictions:
            count[2] += 1
            count[3] += record.evictions
    # borrowed: a step function per (queue, flavor), summed per queue
    current: dict[tuple[str, str], int] = {}
    area = dict.fromkeys(teams, 0.0)
    peak = dict.fromkeys(teams, 0)
    total = dict.fromkeys(teams, 0)
    since = dict.fromkeys(teams, 0.0)
    for sample in result.usage:
        team = sample.queue
        if team not in total:
            continue
        end = min(sample.time, horizon)
        if end > since[team]:
            area[team] += total[team] * (end - since[team])
            since[team] = end
        previous = current.get((team, sample.flavor), 0)
        current[(team, sample.flavor)] = sample.borrowed
        total[team] += sample.borrowed - previous
        peak[team] = max(peak[team], total[team])
    out = {}
    for team in teams:
        if horizon > since[team]:
            area[team] += total[team] * (horizon - since[team])
        jobs, not_admitted, preempted, preemptions = counts[team]
        team_waits = waits[team]
        out[team] = TeamFigures(
            team=team,
            jobs=jobs,
            admitted=jobs - not_admitted,
            not_admitted=not_admitted,
            mean_wait_seconds=(round(sum(team_waits) / len(team_waits), 3)
                               if team_waits else None),
            p95_wait_seconds=(round(percentile(team_waits, 95), 3) if team_waits else None),
            borrowed_mean_gpus=round(area[team] / horizon, 3) if horizon > 0 else 0.0,
            borrowed_peak_gpus=peak[team],
            jobs_preempted=preempted,
            preemptions=preemptions,
        )
    return out


def _delta(before: TeamFigures, after: TeamFigures) -> dict[str, float | int | None]:
    out: dict[str, float | int | None] = {}
    for name in COMPARED:
        a, b = getattr(after, name), getattr(before, name)
        out[name] = None if a is None or b is None else round(a - b, 3)
    return out


def what_if(*, before: SimCluster, after: SimCluster, demand: Sequence[Demand],
            min_change_seconds: float = 60.0) -> WhatIfResult:
    """Simulate ``demand`` on ``before`` and on ``after``; compare per team.

    Teams are those of either side (by slug). Returns a :class:`WhatIfResult`
    whose ``sentences`` come from :func:`describe` (``min_change_seconds``: wait
    changes smaller than this are not worth a sentence). Raises ``SpecError``
    naming the field for a demand row the simulator refuses, or
    ``SpecError("after.backend")`` when the two sides have different backends.
    """
    if before.backend != after.backend:
        raise SpecError("after.backend", f"must be {before.backend!r} like before, "
                                         f"got {after.backend!r}")
    demand = list(demand)
    run_before = simulate(before, demand)
    run_after = simulate(after, demand)
    last_submit = max((d.submit_time for d in demand), default=0.0)
    horizon = max(run_before.end, run_after.end, last_submit)
    slugs = sorted({t.slug for t in before.teams} | {t.slug for t in after.teams})
    figures_before = team_figures(run_before, slugs, horizon)
    figures_after = team_figures(run_after, slugs, horizon)
    rows = tuple(
        TeamWhatIf(team=slug, before=figures_before[slug], after=figures_after[slug],
                   delta=_delta(figures_before[slug], figures_after[slug]))
        for slug in slugs
    )
    result = WhatIfResult(
        backend=before.backend, jobs=len(demand), horizon_seconds=round(horizon, 3),
        teams=rows, fingerprint_before=run_before.fingerprint(),
        fingerprint_after=run_after.fingerprint(),
    )
    return replace(result, sentences=tuple(describe(result, min_change_seconds)))


def format_duration(seconds: float | None) -> str:
    """Seconds in words for people: ``"45 s"`` (under 90 s), ``"12 min"`` (under
    90 min), else hours with one decimal (``"2.5 h"``); ``"-"`` for ``None``."""
    if seconds is None:
        return "-"
    if seconds < 90:
        return f"{round(seconds)} s"
    if seconds < 90 * 60:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


def _moves(team: str, what: str, old: int, new: int, unit: str = "") -> str:
    verb = "rises" if new > old else "falls"
    return f"{team}'s {what} {verb} from {old} to {new}{unit}"


def describe(result: WhatIfResult, min_change_seconds: float = 60.0,
             relative: float = 0.1) -> list[str]:
    """Plain sentences on what changes noticeably, one per team and figure:

    * p95 wait, when it moves by at least ``min_change_seconds`` and by at least
      ``relative`` (0..1) of its old value, and the words differ:
      ``"team-b's p95 wait rises from 12 min to 40 min"`` (or "falls");
    * jobs never admitted, on any change: ``"team-c's count of jobs never
      admitted rises from 0 to 3"``;
    * preempted jobs and peak GPUs borrowed, when they move by at least
      ``2 * relative`` of the old value: ``"team-a's count of preempted jobs
      falls from 1 to 0"``, ``"team-b's peak borrowing falls from 8 to 4 GPUs"``.

    The table of figures shows every change; the sentences leave out the noise.
    With nothing noticeable: one sentence saying so.
    """
    sentences = []
    for row in result.teams:
        b, a = row.before, row.after
        if a.p95_wait_seconds is not None and b.p95_wait_seconds is not None:
            change = a.p95_wait_seconds - b.p95_wait_seconds
            old, new = format_duration(b.p95_wait_seconds), format_duration(a.p95_wait_seconds)
            if (abs(change) >= max(min_change_seconds, relative * b.p95_wait_seconds)
                    and old != new):
                verb = "rises" if change > 0 else "falls"
                sentences.append(f"{row.team}'s p95 wait {verb} from {old} to {new}")
        if a.not_admitted != b.not_admitted:
            sentences.append(_moves(row.team, "count of jobs never admitted", b.not_admitted,
                                    a.not_admitted))
        if abs(a.jobs_preempted - b.jobs_preempted) >= max(1, 2 * relative * b.jobs_preempted):
            sentences.append(_moves(row.team, "count of preempted jobs", b.jobs_preempted,
                                    a.jobs_preempted))
        if abs(a.borrowed_peak_gpus - b.borrowed_peak_gpus) >= max(
                1, 2 * relative * b.borrowed_peak_gpus):
            sentences.append(_moves(row.team, "peak borrowing", b.borrowed_peak_gpus,
                                    a.borrowed_peak_gpus, " GPUs"))
    if not sentences:
        sentences.append("No team's waits, borrowing or preemptions change noticeably with "
                         "the recent demand.")
    return sentences
