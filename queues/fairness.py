"""Fairness arithmetic for one GPU flavor: fair shares, dominant shares, Kueue's share, Jain.

Pure functions over frozen dataclasses; no Django, no ``kubernetes``. Everything is
computed exactly with :class:`fractions.Fraction`; only :class:`FairnessReport` (the
shape ``GET /api/v1/fairness/`` serializes) converts to ``float``.

Units
    GPUs are counted as whole devices of the flavor (``int`` on input); a fair share
    of GPUs may be fractional (e.g. 10 GPUs over 3 equal teams is 10/3 each).
    CPU is in cores (``int``, ``float`` or ``Decimal``), memory in bytes (``int``).
    Shares (dominant share, Jain's index) are unitless ratios in 0..1.

Numbers
    Inputs may be ``int``, ``float``, ``Decimal`` or ``Fraction``. A ``float`` is read
    through its shortest decimal repr, so ``0.1`` is exactly 1/10. NaN, infinities and
    negative amounts raise :class:`ValueError`.

Sources
    * Weighted max-min fairness by progressive filling ("water-filling"):
      D. Bertsekas, R. Gallager, *Data Networks*, 2nd ed., Prentice Hall 1992,
      section 6.5.2 (max-min flow control), with weights as in the weighted
      variant (each claimant's level rises at a rate proportional to its weight).
    * Dominant Resource Fairness: A. Ghodsi, M. Zaharia, B. Hindman, A. Konwinski,
      S. Shenker, I. Stoica, "Dominant Resource Fairness: Fair Allocation of Multiple
      Resource Types", NSDI 2011 (Algorithm 1 and the example of section 4).
    * Kueue fair sharing: kubernetes-sigs/kueue ``pkg/cache/scheduler/fair_sharing.go``
      (``dominantResourceShare``, ``calculateLendable``, ``roundedWeightedShare``) and
      KEP-1714 "Fair Sharing" (``keps/1714-fair-sharing``).
    * Jain's fairness index: R. Jain, D.-M. Chiu, W. Hawe, "A Quantitative Measure of
      Fairness and Discrimination for Resource Allocation in Shared Computer Systems",
      DEC-TR-301, 1984.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from numbers import Rational

__all__ = [
    "RESOURCES",
    "Claim",
    "DominantShare",
    "DrfAllocation",
    "FairnessReport",
    "FairnessRow",
    "FlavorSnapshot",
    "KueueShare",
    "ReclaimSuggestion",
    "Resources",
    "TeamInput",
    "compute_fairness",
    "dominant_shares",
    "drf_allocate",
    "jain_index",
    "kueue_weighted_share",
    "reclaim_suggestions",
    "water_fill",
]

Number = int | float | Decimal | Fraction

#: Resource names, as used in every mapping this module takes or returns.
RESOURCES: tuple[str, ...] = ("gpu", "cpu", "memory")


def _q(value: Number, what: str = "amount", *, allow_negative: bool = False) -> Fraction:
    """Convert a number to an exact Fraction; raise ValueError on NaN, inf, negatives."""
    if isinstance(value, bool):
        raise ValueError(f"{what}: expected a number, got a bool")
    if isinstance(value, Fraction | int | Rational):
        result = Fraction(value)
    elif isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"{what}: {value} is not a finite number")
        result = Fraction(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{what}: {value} is not a finite number")
        result = Fraction(repr(value))
    else:
        raise ValueError(f"{what}: expected a number, got {type(value).__name__}")
    if result < 0 and not allow_negative:
        raise ValueError(f"{what}: {value} is negative")
    return result


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Resources:
    """An amount of each resource of one flavor.

    Fields: ``gpus`` (whole GPUs, int), ``cpu_cores`` (cores; int, float or Decimal),
    ``memory_bytes`` (bytes, int). All must be finite and >= 0 (checked on creation,
    :class:`ValueError` otherwise).
    """

    gpus: int = 0
    cpu_cores: Number = 0
    memory_bytes: int = 0

    def __post_init__(self) -> None:
        for name, value in self._pairs():
            _q(value, name)

    def _pairs(self) -> tuple[tuple[str, Number], ...]:
        return (("gpus", self.gpus), ("cpu_cores", self.cpu_cores),
                ("memory_bytes", self.memory_bytes))

    def as_fractions(self) -> dict[str, Fraction]:
        """``{"gpu": ..., "cpu": ..., "memory": ...}`` as exact Fractions (GPUs, cores, bytes)."""
        return {r: _q(v) for r, (_, v) in zip(RESOURCES, self._pairs(), strict=True)}


@dataclass(frozen=True)
class TeamInput:
    """One team's quota and load on one flavor.

    Fields:
        slug: the team's identifier (its namespace / ClusterQueue name).
        cohort: cohort (department) name, or ``None`` for a team outside any cohort.
        weight: fair-sharing weight (Kueue ``spec.fairSharing.weight``, Volcano queue
            weight); >= 0, default 1. Weight 0 gets only what positive-weight teams
            leave unused, and an infinite Kueue share as soon as it borrows.
        nominal: nominal quota (Kueue ``nominalQuota``).
        usage: admitted usage (workloads holding quota).
        demand: admitted + pending. A demand below usage is read as equal to usage
            (a snapshot taken between two watches can show that).
        borrowing_limit_gpus: how many GPUs above nominal the team may borrow
            (Kueue ``borrowingLimit``); ``None`` means no limit.
    """

    slug: str
    cohort: str | None = None
    weight: Number = 1
    nominal: Resources = field(default_factory=Resources)
    usage: Resources = field(default_factory=Resources)
    demand: Resources = field(default_factory=Resources)
    borrowing_limit_gpus: int | None = None

    def __post_init__(self) -> None:
        if not self.slug:
            raise ValueError("team slug must not be empty")
        _q(self.weight, f"{self.slug}.weight")
        if self.borrowing_limit_gpus is not None:
            _q(self.borrowing_limit_gpus, f"{self.slug}.borrowing_limit_gpus")


@dataclass(frozen=True)
class FlavorSnapshot:
    """Everything :func:`compute_fairness` needs about one GPU flavor.

    Fields:
        flavor: the GPU flavor's name (Kueue ResourceFlavor).
        capacity: the flavor's physical capacity (GPUs, cores, bytes). A resource with
            capacity 0 is treated as "not measured" and left out of dominant shares.
        teams: one :class:`TeamInput` per team with quota on this flavor; slugs unique.
        cohort_shared: per cohort, a pool owned by the cohort itself rather than by a
            team (Kueue ``Cohort.spec.resourceGroups`` nominal quota); default none.
    """

    flavor: str
    capacity: Resources
    teams: tuple[TeamInput, ...]
    cohort_shared: Mapping[str, Resources] = field(default_factory=dict)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for team in self.teams:
            if team.slug in seen:
                raise ValueError(f"team {team.slug!r} appears twice in flavor {self.flavor!r}")
            seen.add(team.slug)


# --------------------------------------------------------------------------- water-filling


@dataclass(frozen=True)
class Claim:
    """One claimant in :func:`water_fill`.

    Fields:
        key: identifier, returned as the key of the result.
        demand: how much it wants (same unit as the capacity, e.g. GPUs); >= 0.
        weight: relative weight; >= 0, default 1.
        cap: the most it can reach (e.g. nominal + borrowing limit); ``None`` = no cap.
        guaranteed: an amount it receives before any sharing (e.g. its nominal quota),
            itself limited by ``demand`` and ``cap``; default 0.
    """

    key: str
    demand: Number
    weight: Number = 1
    cap: Number | None = None
    guaranteed: Number = 0


def _progressive_fill(
    capacity: Fraction, limits: dict[str, Fraction], weights: dict[str, Fraction]
) -> dict[str, Fraction]:
    """Weighted progressive filling of ``capacity`` up to ``limits`` (all weights > 0).

    A water level L rises from 0; every unsaturated claimant i holds ``weights[i] * L``;
    claimant i saturates when that reaches ``limits[i]``; filling stops when the
    capacity is spent or every claimant is saturated. Each loop step raises L to the
    next event (a saturation or the capacity running out), so it runs at most
    ``len(limits)`` times, exactly.
    """
    alloc = {k: Fraction(0) for k in limits}
    active = {k for k, lim in limits.items() if lim > 0}
    remaining = capacity
    while active and remaining > 0:
        total_weight = sum(weights[k] for k in active)
        to_saturate = min((limits[k] - alloc[k]) / weights[k] for k in active)
        step = min(to_saturate, remaining / total_weight)
        for k in active:
            alloc[k] += step * weights[k]
        remaining -= step * total_weight
        active = {k for k in active if alloc[k] < limits[k]}
    return alloc


def water_fill(capacity: Number, claims: Sequence[Claim]) -> dict[str, Fraction]:
    """Weighted max-min fair division of ``capacity`` among ``claims``, exactly.

    Shapes: ``capacity`` is one amount (e.g. GPUs of a cohort's pool); returns
    ``{claim.key: share}`` with each share a :class:`~fractions.Fraction` in the unit
    of ``capacity`` (GPU shares may be fractional; call ``float()`` to display).

    Algorithm (Bertsekas & Gallager, *Data Networks*, 2nd ed., section 6.5.2, weighted
    progressive filling):

    1. Each claim's limit is ``l_i = min(demand_i, cap_i)``.
    2. Guarantees first: ``g_i = min(guaranteed_i, l_i)``. If the guarantees alone
       exceed the capacity (over-committed quota), the capacity is water-filled over
       the guarantees instead (step 3 with limits ``g_i``) and that is the result.
    3. The rest, ``capacity - sum(g_i)``, is water-filled: a level L rises from 0,
       claim i holds ``g_i + w_i * L`` until it reaches ``l_i``, and L stops when the
       capacity is spent or every claim is at its limit. The result is the unique
       allocation in which no claim's ``(share_i - g_i) / w_i`` can grow without
       lowering that of a claim whose value is no larger (weighted max-min fairness).
    4. Zero weights: claims with ``w_i = 0`` get nothing in step 3; what positive-weight
       claims leave unused is then water-filled among them with equal weights.

    With ``guaranteed = nominal`` this is the single-resource equilibrium Kueue's fair
    sharing aims for: every team keeps its nominal quota (up to demand) and borrowed
    amounts are proportional to weights, capped by demand and borrowing limit.

    Raises :class:`ValueError` on negative/NaN amounts or duplicate keys.
    """
    cap_total = _q(capacity, "capacity")
    keys = [c.key for c in claims]
    if len(set(keys)) != len(keys):
        raise ValueError("claim keys must be unique")
    limits: dict[str, Fraction] = {}
    guaranteed: dict[str, Fraction] = {}
    weights: dict[str, Fraction] = {}
    for c in claims:
        limit = _q(c.demand, f"{c.key}.demand")
        if c.cap is not None:
            limit = min(limit, _q(c.cap, f"{c.key}.cap"))
        limits[c.key] = limit
        guaranteed[c.key] = min(_q(c.guaranteed, f"{c.key}.guaranteed"), limit)
        weights[c.key] = _q(c.weight, f"{c.key}.weight")

    if sum(guaranteed.values()) >= cap_total:
        # Over-committed (or exactly committed) guarantees: share the capacity over
        # them with equal weights; nothing is left to borrow.
        return _progressive_fill(cap_total, guaranteed, {k: Fraction(1) for k in keys})

    remaining = cap_total - sum(guaranteed.values())
    positive = {k for k in keys if weights[k] > 0}
    extra = _progressive_fill(
        remaining,
        {k: limits[k] - guaranteed[k] for k in positive},
        {k: weights[k] for k in positive},
    )
    remaining -= sum(extra.values())
    zero = [k for k in keys if weights[k] == 0]
    extra.update(
        _progressive_fill(
            remaining,
            {k: limits[k] - guaranteed[k] for k in zero},
            {k: Fraction(1) for k in zero},
        )
    )
    return {k: guaranteed[k] + extra.get(k, Fraction(0)) for k in keys}


# --------------------------------------------------------------------------- DRF


@dataclass(frozen=True)
class DominantShare:
    """A team's dominant share (Ghodsi et al., NSDI 2011).

    Fields: ``share`` (Fraction in 0..1 when usage fits the capacity: the largest
    ``usage_r / capacity_r`` over resources r) and ``resource`` (the resource name
    that attains it, ``None`` when the team uses nothing; ties go to the name that
    sorts first, as in Kueue).
    """

    share: Fraction
    resource: str | None


def _dominant(
    capacity: Mapping[str, Fraction], usage: Mapping[str, Number], weight: Fraction = Fraction(1)
) -> DominantShare:
    best = DominantShare(Fraction(0), None)
    for resource in sorted(usage):
        amount = _q(usage[resource], f"usage[{resource}]")
        cap = capacity.get(resource, Fraction(0))
        if cap == 0 or amount == 0:
            continue
        share = amount / cap / weight
        if share > best.share:
            best = DominantShare(share, resource)
    return best


def dominant_shares(
    capacity_by_resource: Mapping[str, Number],
    usage_by_team: Mapping[str, Mapping[str, Number]],
) -> dict[str, DominantShare]:
    """Each team's DRF dominant share and the resource that is dominant.

    Shapes: ``capacity_by_resource`` ``{"gpu": 16, "cpu": 512, "memory": 2**40}``
    (GPUs, cores, bytes); ``usage_by_team`` ``{team: {resource: amount}}`` in the same
    units. Returns ``{team: DominantShare}``.

    Formula (Ghodsi et al., NSDI 2011, section 4): ``s_i = max_r u_{i,r} / C_r``.
    A resource with capacity 0 or missing is "not measured" and skipped (so a caller
    that knows only GPU capacity gets GPU-only shares). Raises :class:`ValueError` on
    negative or non-finite amounts.
    """
    capacity = {r: _q(v, f"capacity[{r}]") for r, v in capacity_by_resource.items()}
    return {team: _dominant(capacity, usage) for team, usage in usage_by_team.items()}


@dataclass(frozen=True)
class DrfAllocation:
    """Result of :func:`drf_allocate`.

    Fields: ``tasks`` ``{user: tasks launched}``; ``usage`` ``{user: {resource: amount}}``
    (Fractions, capacity units); ``dominant`` ``{user: DominantShare}`` (weighted by the
    user's weight when weights were given).
    """

    tasks: dict[str, int]
    usage: dict[str, dict[str, Fraction]]
    dominant: dict[str, DominantShare]


def drf_allocate(
    capacity: Mapping[str, Number],
    demands_per_task: Mapping[str, Mapping[str, Number]],
    *,
    max_tasks: Mapping[str, int] | None = None,
    weights: Mapping[str, Number] | None = None,
) -> DrfAllocation:
    """Progressive filling with DRF (Ghodsi et al., NSDI 2011, Algorithm 1).

    Shapes: ``capacity`` ``{resource: amount}``; ``demands_per_task``
    ``{user: {resource: amount per task}}``; optional ``max_tasks`` ``{user: n}`` (a
    user's demand, in tasks; default unbounded) and ``weights`` ``{user: w > 0}``
    (weighted DRF, section 4.3 of the paper: dominant share divided by weight).

    Algorithm: repeatedly pick the user with the lowest (weighted) dominant share
    (ties: user name order) and launch one of its tasks if it fits in what is left.
    Algorithm 1 of the paper stops at the first task that does not fit; here that user
    is only set aside and the others go on, which gives the same result whenever the
    paper's does fill the cluster. Stops when no user can launch another task.

    The paper's example: 9 CPUs and 18 GB, user A tasks <1 CPU, 4 GB>, user B tasks
    <3 CPUs, 1 GB> -> A runs 3 tasks, B runs 2, both with dominant share 2/3.

    Raises :class:`ValueError` for a task that demands nothing of any capacitated
    resource (it could be launched forever), for a non-positive weight, or for
    negative/non-finite amounts.
    """
    cap = {r: _q(v, f"capacity[{r}]") for r, v in capacity.items()}
    demand = {
        u: {r: _q(v, f"{u}.demand[{r}]") for r, v in d.items()}
        for u, d in demands_per_task.items()
    }
    weight = {u: Fraction(1) for u in demand}
    for u, w in (weights or {}).items():
        weight[u] = _q(w, f"{u}.weight")
        if weight[u] == 0:
            raise ValueError(f"{u}.weight must be > 0 for weighted DRF")
    for u, d in demand.items():
        if not any(amount > 0 and cap.get(r, 0) > 0 for r, amount in d.items()):
            raise ValueError(f"user {u!r}: a task must demand some capacitated resource")

    used = {r: Fraction(0) for r in cap}
    usage = {u: {r: Fraction(0) for r in cap} for u in demand}
    tasks = dict.fromkeys(demand, 0)
    limit = dict(max_tasks or {})
    blocked: set[str] = set()

    def share(u: str) -> DominantShare:
        return _dominant(cap, usage[u], weight[u])

    while True:
        candidates = [u for u in demand if u not in blocked
                      and (u not in limit or tasks[u] < limit[u])]
        if not candidates:
            break
        user = min(candidates, key=lambda u: (share(u).share, u))
        d = demand[user]
        if all(used.get(r, Fraction(0)) + a <= cap.get(r, Fraction(0)) for r, a in d.items()):
            for r, a in d.items():
                used[r] += a
                usage[user][r] += a
            tasks[user] += 1
        else:
            blocked.add(user)
    return DrfAllocation(tasks=tasks, usage=usage, dominant={u: share(u) for u in demand})


# --------------------------------------------------------------------------- Kueue


@dataclass(frozen=True)
class KueueShare:
    """Kueue's fair-sharing share value for one ClusterQueue.

    Fields:
        value: the precise weighted share (``float``; ``math.inf`` for a weight-0 queue
            that borrows; 0.0 when not borrowing). Kueue's ``PreciseWeightedShare``.
        rounded: ``ceil(value)`` as Kueue reports it in
            ``ClusterQueue.status.fairSharing.weightedShare`` (``None`` when infinite;
            Kueue writes ``math.MaxInt64`` there).
        dominant_resource: the resource attaining the max, ``None`` if none.
        borrowing: whether usage exceeds nominal for any resource.
    """

    value: float
    rounded: int | None
    dominant_resource: str | None
    borrowing: bool


def kueue_weighted_share(
    *,
    usage: Mapping[str, Number],
    nominal: Mapping[str, Number],
    lendable: Mapping[str, Number],
    weight: Number = 1,
    in_cohort: bool = True,
) -> KueueShare:
    """Kueue's DominantResourceShare of one ClusterQueue, for one or several flavors.

    Shapes: ``usage`` and ``nominal`` ``{resource: amount}`` for this queue (sum them
    over flavors first if the queue spans several: Kueue aggregates borrowing by
    resource name across flavors); ``lendable`` ``{resource: amount}`` is what the
    cohort can lend in total (for a flat cohort, the sum of its queues' nominal quotas
    less lending limits, plus the cohort's own quota). Units per resource as elsewhere
    (GPUs, cores, bytes); the result is unitless.

    Formula (kubernetes-sigs/kueue ``pkg/cache/scheduler/fair_sharing.go``,
    ``dominantResourceShare``; KEP-1714):

        borrowed_r = max(0, usage_r - nominal_r)
        share      = max over r with lendable_r > 0 of (borrowed_r * 1000 / lendable_r)
        value      = share / weight

    with these edge cases, all from that file: a queue outside any cohort
    (``in_cohort=False``) has share 0; a queue that borrows nothing has 0; weight 0
    and borrowing gives +inf (Kueue: ``ZeroWeightBorrows``); weight 0 and not
    borrowing gives 0; ties between resources go to the name that sorts first.

    Raises :class:`ValueError` on negative or non-finite amounts or weight.
    """
    w = _q(weight, "weight")
    if not in_cohort:
        return KueueShare(0.0, 0, None, False)
    borrowed: dict[str, Fraction] = {}
    for resource in set(usage) | set(nominal):
        b = _q(usage.get(resource, 0), f"usage[{resource}]") - _q(
            nominal.get(resource, 0), f"nominal[{resource}]"
        )
        if b > 0:
            borrowed[resource] = b
    if not borrowed:
        return KueueShare(0.0, 0, None, False)
    ratio = Fraction(0)
    dominant: str | None = None
    for resource in sorted(borrowed):
        lend = _q(lendable.get(resource, 0), f"lendable[{resource}]")
        if lend > 0:
            r = borrowed[resource] * 1000 / lend
            if r > ratio:
                ratio, dominant = r, resource
    if w == 0:
        return KueueShare(math.inf, None, dominant, True)
    value = ratio / w
    return KueueShare(float(value), math.ceil(value), dominant, True)


# --------------------------------------------------------------------------- Jain


def jain_index(xs: Iterable[Number]) -> float | None:
    """Jain's fairness index (Jain, Chiu & Hawe, DEC-TR-301, 1984).

    ``J = (sum x_i)^2 / (n * sum x_i^2)`` over ``n`` values ``x_i >= 0``; J is 1 when
    all x_i are equal and 1/n when one of n holds everything. In this portal x_i is
    ``usage_i / fair_share_i`` of each team with demand (the paper's "normalised
    allocation", actual over optimal). Returns ``None`` for no values; all zeros are
    all equal, so 1.0. Raises :class:`ValueError` on a negative or non-finite value.
    """
    values = [_q(x, "x") for x in xs]
    if not values:
        return None
    total = sum(values)
    squares = sum(x * x for x in values)
    if squares == 0:
        return 1.0
    return float(total * total / (len(values) * squares))


# --------------------------------------------------------------------------- reclaim


def _fmt(amount: Fraction) -> str:
    if amount.denominator == 1:
        return str(amount.numerator)
    return f"{float(amount):.2f}".rstrip("0").rstrip(".")


def _gpus(amount: Fraction) -> str:
    return f"{_fmt(amount)} GPU" + ("" if amount == 1 else "s")


@dataclass(frozen=True)
class ReclaimSuggestion:
    """How far a team is below its fair share and where that could come from.

    Fields:
        team: the team below its fair share.
        deficit_gpus: fair share minus usage (GPUs, Fraction, > 0).
        sources: ``((team, gpus), ...)``, teams of the same cohort above their fair
            share, largest surplus first; the amounts add up to at most the deficit.
    """

    team: str
    deficit_gpus: Fraction
    sources: tuple[tuple[str, Fraction], ...]

    @property
    def reclaimable_gpus(self) -> Fraction:
        """Sum of ``sources`` amounts (GPUs)."""
        return sum((g for _, g in self.sources), Fraction(0))

    def sentence(self, *, name_sources: bool = True) -> str:
        """Plain English, e.g. "team-c is 4 GPUs below its fair share; 2 could be
        reclaimed from team-a and 2 from team-b".

        ``name_sources=False`` says where without naming the other teams (for viewers
        who may not see them): "...; 4 could be reclaimed from other teams of its
        cohort".
        """
        head = f"{self.team} is {_gpus(self.deficit_gpus)} below its fair share"
        if not self.sources:
            return f"{head}; no team in its cohort is above its fair share to reclaim from"
        if name_sources:
            parts = [f"{_fmt(g)} from {t}" for t, g in self.sources]
            listed = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
            text = f"{head}; {listed.replace(' from ', ' could be reclaimed from ', 1)}"
        else:
            others = "another team" if len(self.sources) == 1 else "other teams"
            text = (f"{head}; {_fmt(self.reclaimable_gpus)} could be reclaimed from "
                    f"{others} of its cohort")
        shortfall = self.deficit_gpus - self.reclaimable_gpus
        if shortfall > 0:
            text += f" ({_gpus(shortfall)} cannot be reclaimed)"
        return text


def reclaim_suggestions(
    rows: Iterable[FairnessRow], *, team: str | None = None
) -> list[ReclaimSuggestion]:
    """Who is below fair share, and from whom in the same cohort GPUs could come back.

    Shapes: ``rows`` are :class:`FairnessRow` of one flavor (from
    :func:`compute_fairness`). Returns one :class:`ReclaimSuggestion` per team whose
    usage is below its fair share (largest deficit first, then slug), or only for
    ``team`` when given (an empty list if that team is not below its share).

    Method: surplus_j = usage_j - fair_share_j for teams above their fair share.
    Deficits are served largest first, each from the same cohort's surpluses in
    order of largest surplus (then slug), and a surplus promised to one team is not
    promised again. Kueue and Volcano reclaim only within a cohort (or parent
    queue), so a team outside any cohort gets no sources. Amounts are exact GPUs
    (Fractions); a whole job is what is actually preempted, so read them as bounds.
    """
    rows = list(rows)
    surplus = {
        r.slug: r.usage - r.fair_share for r in rows if r.usage > r.fair_share
    }
    deficits = sorted(
        (r for r in rows if r.usage < r.fair_share),
        key=lambda r: (-(r.fair_share - r.usage), r.slug),
    )
    cohort_of = {r.slug: r.cohort for r in rows}
    out: list[ReclaimSuggestion] = []
    for row in deficits:
        need = row.fair_share - row.usage
        sources: list[tuple[str, Fraction]] = []
        if row.cohort is not None:
            donors = sorted(
                (s for s in surplus if cohort_of[s] == row.cohort and surplus[s] > 0),
                key=lambda s: (-surplus[s], s),
            )
            left = need
            for donor in donors:
                if left <= 0:
                    break
                take = min(left, surplus[donor])
                sources.append((donor, take))
                surplus[donor] -= take
                left -= take
        suggestion = ReclaimSuggestion(row.slug, need, tuple(sources))
        if team is None or row.slug == team:
            out.append(suggestion)
    return out


# --------------------------------------------------------------------------- report


@dataclass(frozen=True)
class FairnessRow:
    """One team's fairness on one flavor; exact values (Fractions) plus float views.

    Fields:
        slug, cohort, weight: as in :class:`TeamInput` (weight as Fraction).
        nominal, usage, demand: GPUs (Fractions; demand >= usage).
        fair_share: fair share in GPUs (Fraction, may be fractional).
        dominant: DRF dominant share of admitted usage over the flavor's capacity.
        kueue: Kueue's share value (:class:`KueueShare`).
    """

    slug: str
    cohort: str | None
    weight: Fraction
    nominal: Fraction
    usage: Fraction
    demand: Fraction
    fair_share: Fraction
    dominant: DominantShare
    kueue: KueueShare

    def as_dict(self) -> dict[str, object]:
        """JSON-safe dict: ``slug, cohort, weight, nominal_gpus, usage_gpus, demand_gpus,
        fair_share_gpus, dominant_share, dominant_resource, kueue_share,
        kueue_share_infinite`` (numbers as float/int; an infinite Kueue share is
        ``kueue_share: None`` with ``kueue_share_infinite: True``)."""
        infinite = math.isinf(self.kueue.value)
        return {
            "slug": self.slug,
            "cohort": self.cohort,
            "weight": float(self.weight),
            "nominal_gpus": _num(self.nominal),
            "usage_gpus": _num(self.usage),
            "demand_gpus": _num(self.demand),
            "fair_share_gpus": float(self.fair_share),
            "dominant_share": float(self.dominant.share),
            "dominant_resource": self.dominant.resource,
            "kueue_share": None if infinite else self.kueue.value,
            "kueue_share_infinite": infinite,
        }


def _num(value: Fraction) -> int | float:
    return value.numerator if value.denominator == 1 else float(value)


@dataclass(frozen=True)
class FairnessReport:
    """Fairness of one flavor, what ``GET /api/v1/fairness/`` serializes.

    Fields:
        flavor: flavor name.
        capacity_gpus: the flavor's GPUs (int).
        jain_index: Jain's index over ``usage / fair_share`` of teams with demand and a
            positive fair share (0..1, ``None`` when no team has demand).
        rows: one :class:`FairnessRow` per team, in slug order.
        reclaim: :func:`reclaim_suggestions` for every team below its fair share.
        quota_exceeds_capacity: True when the fair shares add up to more GPUs than the
            flavor has (nominal quotas over-commit the hardware).
    """

    flavor: str
    capacity_gpus: int
    jain_index: float | None
    rows: tuple[FairnessRow, ...]
    reclaim: tuple[ReclaimSuggestion, ...]
    quota_exceeds_capacity: bool

    def as_dict(self) -> dict[str, object]:
        """JSON-safe dict with ``teams`` (rows' ``as_dict``) and ``reclaim`` entries
        ``{team, deficit_gpus, sources: [{team, gpus}], sentence}``."""
        return {
            "flavor": self.flavor,
            "capacity_gpus": self.capacity_gpus,
            "jain_index": self.jain_index,
            "quota_exceeds_capacity": self.quota_exceeds_capacity,
            "teams": [r.as_dict() for r in self.rows],
            "reclaim": [
                {
                    "team": s.team,
                    "deficit_gpus": _num(s.deficit_gpus),
                    "sources": [{"team": t, "gpus": _num(g)} for t, g in s.sources],
                    "sentence": s.sentence(),
                }
                for s in self.reclaim
            ],
        }


def _cohort_fair_shares(snapshot: FlavorSnapshot) -> dict[str, Fraction]:
    """Fair share in GPUs of every team: water-filled per cohort pool (see compute_fairness)."""
    shares: dict[str, Fraction] = {}
    by_cohort: dict[str, list[TeamInput]] = {}
    for team in snapshot.teams:
        nominal = _q(team.nominal.gpus)
        demand = max(_q(team.demand.gpus), _q(team.usage.gpus))
        if team.cohort is None:
            shares[team.slug] = min(nominal, demand)
        else:
            by_cohort.setdefault(team.cohort, []).append(team)
    for cohort, members in by_cohort.items():
        shared = snapshot.cohort_shared.get(cohort, Resources())
        pool = sum((_q(t.nominal.gpus) for t in members), Fraction(0)) + _q(shared.gpus)
        claims = [
            Claim(
                key=t.slug,
                demand=max(_q(t.demand.gpus), _q(t.usage.gpus)),
                weight=_q(t.weight),
                cap=None
                if t.borrowing_limit_gpus is None
                else _q(t.nominal.gpus) + _q(t.borrowing_limit_gpus),
                guaranteed=_q(t.nominal.gpus),
            )
            for t in members
        ]
        shares.update(water_fill(pool, claims))
    return shares


def compute_fairness(snapshot: FlavorSnapshot) -> FairnessReport:
    """Fair shares, dominant shares, Kueue shares and Jain's index for one flavor.

    Fair share (GPUs): a team without a cohort gets ``min(nominal, demand)``. The
    teams of a cohort share the cohort's pool, ``sum(nominal of its teams) +
    cohort_shared``, by :func:`water_fill` with ``guaranteed = nominal``,
    ``demand = demand`` and ``cap = nominal + borrowing_limit`` (no cap when the
    limit is ``None``): each keeps its nominal quota up to its demand, and the unused
    rest is divided in proportion to the weights, up to demand and cap.

    Dominant share: DRF share of admitted usage (GPUs, cores, bytes) over the
    flavor's capacity (:func:`dominant_shares`). Kueue share:
    :func:`kueue_weighted_share` with lendable = the cohort's pool per resource.
    Jain's index: over ``usage / fair_share`` for teams with demand > 0 and fair
    share > 0. Raises :class:`ValueError` on invalid inputs (see the dataclasses).
    """
    capacity = snapshot.capacity.as_fractions()
    shares = _cohort_fair_shares(snapshot)

    lendable: dict[str, dict[str, Fraction]] = {}
    for team in snapshot.teams:
        if team.cohort is None:
            continue
        pool = lendable.setdefault(
            team.cohort,
            snapshot.cohort_shared.get(team.cohort, Resources()).as_fractions(),
        )
        for resource, amount in team.nominal.as_fractions().items():
            pool[resource] += amount

    rows: list[FairnessRow] = []
    for team in sorted(snapshot.teams, key=lambda t: t.slug):
        usage = team.usage.as_fractions()
        nominal = team.nominal.as_fractions()
        rows.append(
            FairnessRow(
                slug=team.slug,
                cohort=team.cohort,
                weight=_q(team.weight),
                nominal=nominal["gpu"],
                usage=usage["gpu"],
                demand=max(_q(team.demand.gpus), usage["gpu"]),
                fair_share=shares[team.slug],
                dominant=_dominant(capacity, usage),
                kueue=kueue_weighted_share(
                    usage=usage,
                    nominal=nominal,
                    lendable=lendable.get(team.cohort or "", {}),
                    weight=team.weight,
                    in_cohort=team.cohort is not None,
                ),
            )
        )
    jain = jain_index(r.usage / r.fair_share for r in rows if r.demand > 0 and r.fair_share > 0)
    return FairnessReport(
        flavor=snapshot.flavor,
        capacity_gpus=int(capacity["gpu"]),
        jain_index=jain,
        rows=tuple(rows),
        reclaim=tuple(reclaim_suggestions(rows)),
        quota_exceeds_capacity=sum(shares.values(), Fraction(0)) > capacity["gpu"],
    )
