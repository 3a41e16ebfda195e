"""Utilization pages: a team's GPU usage over time, showback by day and idle flags (with
the owner's snooze form); the staff view of every team by day and the idle-GPU table
(with reclaim). Charts are Plotly figures built on the server (:mod:`portal.charts`)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from portal import charts
from portal.models import IdleFlag
from portal.selectors.usage import (
    DEFAULT_SPAN,
    efficiency_heatmap,
    live_idle_flags,
    showback_by_day,
    team_timeseries,
    utilization_report,
    visible_team_list,
)
from portal.services.idle import idle_flag_reclaim, idle_flag_snooze
from portal.views.staff import staff_required


def _pct(x: float | None) -> str:
    return "no data" if x is None else f"{x * 100:.0f} %"


def _gh(x: float | None) -> str:
    return "no data" if x is None else f"{x:.1f} GPU-hours"


def _team_charts(team, since, until, now):
    points = team_timeseries(team=team, since=since, until=until, now=now)
    timeline = charts.line_chart(
        chart_id="team-alloc-busy", title="Allocated vs busy GPUs (hourly averages)",
        x=[p.at for p in points], y_title="GPUs",
        series=[charts.Series("Allocated", [round(p.allocated_gpus, 3) for p in points]),
                charts.Series("Busy (DCGM)", [None if p.busy_gpus is None
                                              else round(p.busy_gpus, 3) for p in points])],
        sentences=_timeline_sentences(team.slug, points),
        empty_text="No usage samples in the last 7 days.",
    )
    days = showback_by_day(user=None, teams=[team], since=since, until=until, now=now)
    showback = charts.bar_chart(
        chart_id="team-showback", title="GPU-hours by day: allocated, busy, idle",
        categories=[d["day"].isoformat() for d in days], y_title="GPU-hours",
        series=[charts.Series("Allocated", [round(d["allocated_gpu_hours"], 3) for d in days]),
                charts.Series("Busy", [None if d["busy_gpu_hours"] is None
                                       else round(d["busy_gpu_hours"], 3) for d in days]),
                charts.Series("Idle", [None if d["idle_gpu_hours"] is None
                                       else round(d["idle_gpu_hours"], 3) for d in days])],
        sentences=_showback_sentences(team.slug, days),
        empty_text="No GPU-hours in the last 7 days.",
    )
    return timeline, showback


def _timeline_sentences(slug, points) -> list[str]:
    if not points:
        return []
    last = points[-1]
    measured = [p for p in points if p.busy_gpus is not None]
    out = [f"In the last hour shown, {slug} held {last.allocated_gpus:.1f} GPUs on average; "
           + ("no GPU reported activity (no data, not 0 %)." if last.busy_gpus is None
              else f"{last.busy_gpus:.1f} of them were busy.")]
    if measured:
        peak = max(measured, key=lambda p: p.busy_gpus)
        out.append(f"Busiest hour: {peak.at:%Y-%m-%d %H:00} UTC with {peak.busy_gpus:.1f} "
                   "busy GPUs.")
    return out


def _showback_sentences(slug, days) -> list[str]:
    if not days:
        return []
    allocated = sum(d["allocated_gpu_hours"] for d in days)
    busy = [d["busy_gpu_hours"] for d in days if d["busy_gpu_hours"] is not None]
    idle = [d["idle_gpu_hours"] for d in days if d["idle_gpu_hours"] is not None]
    out = [f"Over {len(days)} day(s) {slug} was allocated {allocated:.1f} GPU-hours"
           + (f", of which {sum(busy):.1f} busy and {sum(idle):.1f} measured idle."
              if busy else "; no GPU reported activity.")]
    unmeasured = allocated - sum(busy) - sum(idle)
    if unmeasured > 0.05:
        out.append(f"{unmeasured:.1f} GPU-hours had no DCGM data: counted neither busy "
                   "nor idle.")
    return out


def _showback_csv_url(team=None) -> str:
    """The utilization API's showback CSV, for one team or (staff) every visible team."""
    return reverse("api:utilization") + (f"?team={team.slug}&format=csv" if team else "?format=csv")


def team_utilization_panel(*, team) -> dict:
    """The team page's utilization panel: the last 7 days' allocated-vs-busy GPUs
    (hourly) and GPU-hours showback by day (figures as :func:`portal.charts` dicts),
    the showback CSV URL and how many of the team's jobs hold an open or snoozed
    idle flag. A fixed number of queries (the two charts' reads and one count)."""
    now = timezone.now()
    timeline, showback = _team_charts(team, now - DEFAULT_SPAN, now, now)
    return {
        "timeline": timeline, "showback": showback,
        "csv_url": _showback_csv_url(team),
        "idle_flags": IdleFlag.objects.filter(job__team=team,
                                              state__in=IdleFlag.LIVE_STATES).count(),
    }


@login_required
def team_utilization(request: HttpRequest, slug: str) -> HttpResponse:
    """``GET /teams/<slug>/utilization/``: allocated vs busy GPUs over time, GPU-hours
    showback by day (CSV link), idle flags on the team's jobs (snooze form for owners).
    A fixed number of queries."""
    teams = visible_team_list(user=request.user, slug=slug)
    if teams is None:
        raise Http404("No such team.")
    (team,) = teams
    now = timezone.now()
    since = now - DEFAULT_SPAN
    timeline, showback = _team_charts(team, since, now, now)
    report = utilization_report(user=request.user, teams=[team], since=since, until=now,
                                now=now)
    (_, figures), = report.teams
    flags = [j.flag for j in report.idle_jobs]
    return render(request, "portal/team_utilization.html", {
        "team": team, "figures": figures, "timeline": timeline, "showback": showback,
        "flags": flags, "csv_url": _showback_csv_url(team), "now": now,
        "summary": (f"Last 7 days: {_gh(figures.allocated_gpu_hours)} allocated, "
                    f"{_gh(figures.busy_gpu_hours)} busy; efficiency "
                    f"{_pct(figures.efficiency)}, coverage {_pct(figures.coverage)} of "
                    "allocated GPU-hours reporting."),
    })


@login_required
@require_POST
def flag_snooze(request: HttpRequest, slug: str, pk: int) -> HttpResponse:
    """``POST /teams/<slug>/utilization/flags/<id>/snooze/``: the owner snoozes once."""
    teams = visible_team_list(user=request.user, slug=slug)
    if teams is None:
        raise Http404("No such team.")
    flag = get_object_or_404(IdleFlag.objects.select_related("job__team"), pk=pk,
                             job__team=teams[0])
    try:
        idle_flag_snooze(actor=request.user, flag=flag,
                         justification=request.POST.get("justification", ""))
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    except PermissionDenied as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Idle flag on {flag.job.name} snoozed.")
    return redirect("team-utilization", slug=slug)


@staff_required
def staff_utilization(request: HttpRequest) -> HttpResponse:
    """``GET /staff/utilization/``: efficiency by team and day (heatmap), every team's
    GPU-hours, the idle-GPU table with reclaim buttons. A fixed number of queries."""
    now = timezone.now()
    since = now - DEFAULT_SPAN
    slugs, days, z = efficiency_heatmap(since=since, until=now, now=now)
    cells = [(s, d, v) for s, row in zip(slugs, z, strict=True)
             for d, v in zip(days, row, strict=True) if v is not None]
    sentences = []
    if cells:
        low = min(cells, key=lambda c: c[2])
        high = max(cells, key=lambda c: c[2])
        sentences.append(f"Lowest: {low[0]} on {low[1]:%Y-%m-%d} at {_pct(low[2])} of its "
                         "reporting GPU-hours busy.")
        sentences.append(f"Highest: {high[0]} on {high[1]:%Y-%m-%d} at {_pct(high[2])}.")
    sentences.append("Blank cells have no DCGM data (never shown as 0 %).")
    heatmap = charts.heatmap_chart(
        chart_id="staff-heatmap", title="Efficiency (busy / reporting GPU-hours) by team and day",
        x=[d.isoformat() for d in days], y=slugs,
        z=[[None if v is None else round(v, 4) for v in row] for row in z],
        z_title="busy ratio", z_range=(0, 1), sentences=sentences,
        empty_text="No usage samples in the last 7 days.",
    )
    teams = visible_team_list(user=request.user)
    report = utilization_report(user=request.user, teams=teams, since=since, until=now, now=now)
    flags = live_idle_flags(teams=None)
    idle_gpus = sum(f.gpus for f in flags)
    return render(request, "portal/staff/utilization.html", {
        "heatmap": heatmap, "report": report, "flags": flags, "now": now,
        "csv_url": _showback_csv_url(),
        "idle_sentence": (f"{len(flags)} job(s) hold {idle_gpus:g} idle GPUs; "
                          f"{sum(1 for f in flags if f.reclaimable_at <= now)} can be "
                          "reclaimed now." if flags else "No job is flagged idle."),
    })


@staff_required
@require_POST
def flag_reclaim(request: HttpRequest, pk: int) -> HttpResponse:
    """``POST /staff/utilization/flags/<id>/reclaim/``: deactivate the idle job (one click)."""
    flag = get_object_or_404(IdleFlag.objects.select_related("job__team"), pk=pk)
    try:
        idle_flag_reclaim(actor=request.user, flag=flag)
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, f"Reclaiming {flag.gpus:g} GPUs of "
                                  f"{flag.job.team.slug}/{flag.job.name}: the job is being "
                                  "deactivated (not deleted).")
    return redirect("staff-utilization")

