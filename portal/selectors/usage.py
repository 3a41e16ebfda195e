"""Read paths for GPU utilization: the API's report, the showback by day, the dashboards.

Every function runs a fixed number of queries whatever the number of teams, jobs and
samples (aggregation happens in the database).

Figures (from stored :class:`portal.models.UsageSample` GPU-seconds, / 3600):
    allocated_gpu_hours  GPUs held by Admitted/Running jobs x hours
    busy_gpu_hours       sum of DCGM activity ratios x hours, over reporting GPUs
    idle_gpu_hours       reporting GPU-hours - busy GPU-hours (measured, not busy)
    efficiency           busy / reporting GPU-hours (0..1); None = no data
    coverage             reporting / allocated GPU-hours (0..1); None = nothing allocated
GPU-hours with no DCGM data are neither busy nor idle: ``allocated = busy + idle +
(allocated - reporting)``; efficiency is never computed over them (no data is not 0 %).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.db.models import Q, QuerySet, Sum
from django.db.models.functions import Trunc
from django.utils import timezone

from portal import access
from portal.models import IdleFlag, Membership, Team, UsageSample
from portal.models.usage import DAY, HOUR, STEP, retention

#: Default span of reports and dashboards.
DEFAULT_SPAN = timedelta(days=7)


@dataclass(frozen=True)
class Figures:
    """GPU-hours and ratios of one team (or the unattributed bucket) over a span.

    Fields: ``allocated_gpu_hours``, ``reporting_gpu_hours`` (GPU-hours with a DCGM
    sample), ``busy_gpu_hours`` (None = no data), ``idle_gpu_hours`` (None = no data),
    ``efficiency`` and ``coverage`` (0..1 or None); see the module doc.
    """

    allocated_gpu_hours: float
    reporting_gpu_hours: float
    busy_gpu_hours: float | None
    idle_gpu_hours: float | None
    efficiency: float | None
    coverage: float | None

    @classmethod
    def from_seconds(cls, allocated: float | None, reporting: float | None,
                     busy: float | None) -> Figures:
        """Figures from summed GPU-seconds (``None`` sums count as 0, busy stays None)."""
        allocated, reporting = (allocated or 0.0) / 3600, (reporting or 0.0) / 3600
        if busy is None or reporting <= 0:
            busy_h = idle_h = efficiency = None
        else:
            busy_h = busy / 3600
            idle_h = max(0.0, reporting - busy_h)
            efficiency = busy_h / reporting
        coverage = min(1.0, reporting / allocated) if allocated > 0 else None
        return cls(allocated, reporting, busy_h, idle_h, efficiency, coverage)

    def as_dict(self) -> dict:
        """The API's figure fields."""
        return {"allocated_gpu_hours": self.allocated_gpu_hours,
                "busy_gpu_hours": self.busy_gpu_hours,
                "idle_gpu_hours": self.idle_gpu_hours,
                "efficiency": self.efficiency,
                "coverage": self.coverage}


def pick_resolution(since: datetime, *, now: datetime) -> int:
    """The finest stored resolution (seconds) still kept at ``since``: 5-minute rows
    within their retention, else hourly, else daily."""
    keep = retention()
    if since >= now - keep[STEP]:
        return STEP
    if since >= now - keep[HOUR]:
        return HOUR
    return DAY


def _sums(qs: QuerySet) -> QuerySet:
    return qs.annotate(allocated=Sum("allocated_gpu_seconds"),
                       reporting=Sum("reporting_gpu_seconds"),
                       busy=Sum("busy_gpu_seconds"), n=Sum("samples"))


def _rows(resolution: int, since: datetime, until: datetime) -> QuerySet:
    return UsageSample.objects.filter(resolution=resolution, start__gte=since, start__lt=until)


@dataclass(frozen=True)
class IdleJob:
    """A live idle flag as the API and pages show it."""

    flag: IdleFlag

    def as_dict(self) -> dict:
        """``{job, team, gpus, idle_since, activity, state, flag, reclaimable_at}``."""
        f = self.flag
        return {"job": f.job.name, "team": f.job.team.slug, "gpus": f.gpus,
                "idle_since": f.idle_since, "activity": f.activity, "state": f.state,
                "flag": f.pk, "reclaimable_at": f.reclaimable_at}


def live_idle_flags(*, teams: QuerySet[Team] | list[Team] | None) -> list[IdleFlag]:
    """Open and snoozed flags of ``teams`` (``None``: every team), oldest idle first, with
    job, team, cluster and submitter (one query)."""
    qs = IdleFlag.objects.filter(state__in=IdleFlag.LIVE_STATES)
    if teams is not None:
        qs = qs.filter(job__team__in=teams)
    return list(qs.select_related("job__team__cluster", "job__submitter", "job__flavor")
                .order_by("idle_since", "pk"))


@dataclass(frozen=True)
class UtilizationReport:
    """``GET /api/v1/utilization/``: ``teams`` [(slug, Figures)] in slug order,
    ``unattributed`` (staff only, else None), ``idle_jobs``, the span and the resolution
    (seconds) of the rows read."""

    since: datetime
    until: datetime
    resolution: int
    teams: list[tuple[str, Figures]]
    unattributed: Figures | None
    idle_jobs: list[IdleJob]

    def as_dict(self) -> dict:
        """The API's JSON shape."""
        return {
            "since": self.since, "until": self.until, "resolution_seconds": self.resolution,
            "teams": [{"slug": slug, **f.as_dict()} for slug, f in self.teams],
            "unattributed": self.unattributed.as_dict() if self.unattributed else None,
            "idle_jobs": [j.as_dict() for j in self.idle_jobs],
        }


def utilization_report(*, user, teams: list[Team], since: datetime, until: datetime,
                       now: datetime | None = None) -> UtilizationReport:
    """Figures of ``teams`` (already restricted to what ``user`` may see) over buckets
    starting in ``[since, until)``, the unattributed bucket for staff, and the teams'
    live idle flags. Three or four queries."""
    now = now or timezone.now()
    resolution = pick_resolution(since, now=now)
    rows = _rows(resolution, since, until)
    sums = {r["team_id"]: r for r in _sums(
        rows.filter(scope=UsageSample.Scope.TEAM, team__in=teams)
        .values("team_id").order_by())}
    team_figures = []
    for team in teams:
        s = sums.get(team.pk, {})
        team_figures.append((team.slug, Figures.from_seconds(
            s.get("allocated"), s.get("reporting"), s.get("busy"))))
    unattributed = None
    if access.is_staff(user):
        u = rows.filter(scope=UsageSample.Scope.UNATTRIBUTED).aggregate(
            allocated=Sum("allocated_gpu_seconds"), reporting=Sum("reporting_gpu_seconds"),
            busy=Sum("busy_gpu_seconds"))
        unattributed = Figures.from_seconds(u["allocated"], u["reporting"], u["busy"])
    return UtilizationReport(
        since=since, until=until, resolution=resolution, teams=team_figures,
        unattributed=unattributed,
        idle_jobs=[IdleJob(f) for f in live_idle_flags(teams=teams)],
    )


def showback_by_day(*, user, teams: list[Team], since: datetime, until: datetime,
                    now: datetime | None = None) -> list[dict]:
    """GPU-hours by team and UTC day (the CSV showback): rows ``{day, scope, team,
    allocated_gpu_hours, busy_gpu_hours, idle_gpu_hours, efficiency, coverage}`` sorted
    by day then team; ``scope`` "team", or "unattributed" (staff only, ``team`` empty).
    One query."""
    now = now or timezone.now()
    rows = _rows(pick_resolution(since, now=now), since, until)
    where = Q(scope=UsageSample.Scope.TEAM, team__in=teams)
    if access.is_staff(user):
        where |= Q(scope=UsageSample.Scope.UNATTRIBUTED)
    slugs = {t.pk: t.slug for t in teams}
    out = []
    for r in _sums(rows.filter(where).annotate(day=Trunc("start", "day", tzinfo=UTC))
                   .values("day", "scope", "team_id").order_by()):
        f = Figures.from_seconds(r["allocated"], r["reporting"], r["busy"])
        out.append({"day": r["day"].date(), "scope": r["scope"],
                    "team": slugs.get(r["team_id"], ""), **f.as_dict()})
    out.sort(key=lambda r: (r["day"], r["scope"] != "team", r["team"]))
    return out


@dataclass(frozen=True)
class TimePoint:
    """Average GPUs over one hour: ``allocated_gpus``, ``busy_gpus`` (None = no data)."""

    at: datetime
    allocated_gpus: float
    busy_gpus: float | None


def team_timeseries(*, team: Team, since: datetime, until: datetime,
                    now: datetime | None = None) -> list[TimePoint]:
    """Allocated vs busy GPUs of ``team`` per hour (averages over the stored samples of
    each hour; hours without samples are absent). One query."""
    now = now or timezone.now()
    resolution = pick_resolution(since, now=now)
    step = min(max(resolution, HOUR), DAY)
    qs = (_rows(resolution, since, until).filter(scope=UsageSample.Scope.TEAM, team=team)
          .annotate(bucket=Trunc("start", "hour" if step == HOUR else "day", tzinfo=UTC))
          .values("bucket").order_by("bucket"))
    points = []
    for r in _sums(qs):
        seconds = (r["n"] or 1) * STEP if resolution == STEP else step
        busy = None if r["busy"] is None else r["busy"] / seconds
        points.append(TimePoint(r["bucket"], (r["allocated"] or 0.0) / seconds, busy))
    return points


def efficiency_heatmap(*, since: datetime, until: datetime, now: datetime | None = None
                       ) -> tuple[list[str], list[date], list[list[float | None]]]:
    """Staff heatmap: ``(team slugs, days, z)`` with ``z[team][day]`` = efficiency (0..1,
    None = no data) of every team with rows in the span. One query."""
    now = now or timezone.now()
    qs = (_rows(pick_resolution(since, now=now), since, until)
          .filter(scope=UsageSample.Scope.TEAM)
          .annotate(day=Trunc("start", "day", tzinfo=UTC))
          .values("team__slug", "day").order_by())
    cells: dict[tuple[str, date], float | None] = {}
    for r in _sums(qs):
        cells[(r["team__slug"], r["day"].date())] = Figures.from_seconds(
            r["allocated"], r["reporting"], r["busy"]).efficiency
    slugs = sorted({s for s, _ in cells})
    days = sorted({d for _, d in cells})
    return slugs, days, [[cells.get((s, d)) for d in days] for s in slugs]


def team_leads(*, team_ids: list[int]) -> dict[int, list]:
    """Leads of each team (users), one query: ``{team_id: [user, ...]}``."""
    out: dict[int, list] = {}
    for m in (Membership.objects.filter(team_id__in=team_ids, role=Membership.Role.LEAD)
              .select_related("user")):
        out.setdefault(m.team_id, []).append(m.user)
    return out


def visible_team_list(*, user, slug: str | None = None) -> list[Team] | None:
    """Teams ``user`` may see, in slug order (one query); with ``slug``, that team only, or
    ``None`` when it does not exist or is invisible to ``user``."""
    qs = access.visible_teams(user).order_by("slug")
    if slug:
        found = list(qs.filter(slug=slug))
        return found or None
    return list(qs)


__all__ = [
    "DEFAULT_SPAN",
    "Figures",
    "IdleJob",
    "TimePoint",
    "UtilizationReport",
    "efficiency_heatmap",
    "live_idle_flags",
    "pick_resolution",
    "showback_by_day",
    "team_leads",
    "team_timeseries",
    "utilization_report",
    "visible_team_list",
]
