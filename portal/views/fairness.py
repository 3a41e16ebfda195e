"""Fairness dashboards: the team page's panel and the staff page ``/staff/fairness/``.

The figures are built here from :mod:`portal.selectors.fairness` with the generic
builders of :mod:`portal.charts` (Plotly on the server, drawn by ``static/js/charts.js``);
every chart carries the sentences that say what it shows.
"""

from collections import defaultdict
from datetime import timedelta

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from portal.charts import Chart, Series, bar_chart, line_chart
from portal.models import Cluster, FairnessSnapshot, GpuFlavor, Team
from portal.selectors.fairness import FlavorFairness, cluster_fairness, fmt_gpus
from portal.views.staff import staff_required

#: How far back the staff page's Jain chart reaches (days).
HISTORY_DAYS = 7

NOMINAL, USAGE, DEMAND, FAIR = "#9AA5B8", "#0072B2", "#E69F00", "#D55E00"


def _f(value) -> float:
    return float(value)


def team_fairness_chart(*, team: Team, flavors: list[GpuFlavor]) -> Chart:
    """The team page's chart: per flavor, the team's nominal quota, usage, demand and
    fair share (GPUs), with one sentence per flavor under it.

    ``flavors``: the team's cluster's flavors (already loaded by the page). Four
    queries whatever the number of teams and jobs (:func:`cluster_fairness`). Other
    teams are never named (the reclaim sentence says "other teams of its cohort").
    """
    results = cluster_fairness(cluster=team.cluster, flavors=flavors)
    mine = [(ff, row) for ff in results if (row := ff.row(team.slug)) is not None]
    categories = [ff.flavor.name for ff, _ in mine]
    sentences = []
    for ff, _row in mine:
        for sentence in ff.sentences(slugs={team.slug})[1:]:
            sentences.append(f"{ff.flavor.name}: {sentence}")
    return bar_chart(
        chart_id="team-fairness-chart",
        title="Quota, usage and fair share by GPU flavor",
        categories=categories,
        series=[
            Series("Nominal quota", [_f(r.nominal) for _, r in mine], color=NOMINAL),
            Series("Usage (admitted)", [_f(r.usage) for _, r in mine], color=USAGE),
            Series("Demand (admitted + pending)", [_f(r.demand) for _, r in mine], color=DEMAND),
            Series("Fair share", [_f(r.fair_share) for _, r in mine], color=FAIR,
                   kind="marker"),
        ],
        y_title="physical GPUs",
        sentences=sentences,
        empty_text="The team has no quota and no jobs on any GPU flavor yet.",
    )


def flavor_chart(ff: FlavorFairness) -> Chart:
    """The staff chart of one flavor: every team's nominal quota, usage and demand as
    bars and its fair share as a marker; hover shows the dominant share and resource."""
    rows = ff.rows
    hover = [
        f"dominant share {float(r.dominant.share):.0%}"
        + (f" ({r.dominant.resource})" if r.dominant.resource else "")
        + f"<br>weight {fmt_gpus(r.weight)}" for r in rows
    ]
    return bar_chart(
        chart_id=f"fairness-{ff.flavor.name}",
        title=f"{ff.flavor.name}: {ff.report.capacity_gpus} physical GPUs",
        categories=[r.slug for r in rows],
        series=[
            Series("Nominal quota", [_f(r.nominal) for r in rows], color=NOMINAL),
            Series("Usage (admitted)", [_f(r.usage) for r in rows], color=USAGE, text=hover),
            Series("Demand", [_f(r.demand) for r in rows], color=DEMAND),
            Series("Fair share", [_f(r.fair_share) for r in rows], color=FAIR, kind="marker"),
        ],
        y_title="physical GPUs",
        sentences=ff.sentences(),
        empty_text=f"No team has quota or jobs on {ff.flavor.name}.",
    )


def jain_history_chart(*, cluster: Cluster, flavors: list[GpuFlavor], now=None) -> Chart:
    """Jain's index over the last :data:`HISTORY_DAYS` days, one line per flavor, from
    :class:`FairnessSnapshot` rows (one query). A flavor with no demand at a time has a
    gap there, never a 0."""
    now = now or timezone.now()
    points = list(
        FairnessSnapshot.objects.filter(cluster=cluster,
                                        taken_at__gte=now - timedelta(days=HISTORY_DAYS))
        .order_by("taken_at").values_list("flavor_id", "taken_at", "jain_index")
    )
    times = sorted({t for _, t, _ in points})
    by_flavor: dict[int, dict] = defaultdict(dict)
    for flavor_id, taken_at, jain in points:
        by_flavor[flavor_id][taken_at] = jain
    shown = [f for f in sorted(flavors, key=lambda f: f.name) if f.pk in by_flavor]
    sentences = []
    for fl in shown:
        latest_time = max(by_flavor[fl.pk])
        values = [v for v in by_flavor[fl.pk].values() if v is not None]
        latest = by_flavor[fl.pk][latest_time]
        if values:
            sentences.append(
                f"{fl.name}: Jain's index ranged {min(values):.2f} to {max(values):.2f} over "
                f"{len(by_flavor[fl.pk])} snapshots; latest "
                + (f"{latest:.2f}" if latest is not None else "no demand")
                + f" at {timezone.localtime(latest_time):%Y-%m-%d %H:%M}."
            )
        else:
            sentences.append(f"{fl.name}: no team had demand in any snapshot.")
    return line_chart(
        chart_id="jain-history",
        title=f"Jain's fairness index, last {HISTORY_DAYS} days (1 = every team at its "
              f"fair share)",
        x=times,
        series=[Series(fl.name, [by_flavor[fl.pk].get(t) for t in times]) for fl in shown],
        y_title="Jain's index",
        y_range=(0, 1.05),
        sentences=sentences,
        empty_text="No fairness snapshots yet: the portal.fairness_snapshot task stores "
                   "one every few minutes.",
    )


@staff_required
def staff_fairness(request: HttpRequest) -> HttpResponse:
    """``GET /staff/fairness/?cluster=<name>``: every team's usage vs fair share per
    flavor (with dominant shares), Jain's index over time, and the sentences that
    explain them. Staff only; an unknown ``cluster`` is 404. Ten queries (session, user,
    nav count, clusters, flavors, cohorts, teams, grants, jobs, snapshots) whatever the
    number of teams, jobs and snapshots."""
    clusters = list(Cluster.objects.order_by("name"))
    if not clusters:
        return render(request, "portal/staff/fairness.html", {"clusters": [], "cluster": None})
    name = request.GET.get("cluster")
    cluster = next((c for c in clusters if c.name == name), None) if name else clusters[0]
    if cluster is None:
        raise Http404("No such cluster.")
    results = cluster_fairness(cluster=cluster)
    flavors = [ff.flavor for ff in results]
    return render(request, "portal/staff/fairness.html", {
        "clusters": clusters,
        "cluster": cluster,
        "flavors": [{"fairness": ff, "chart": flavor_chart(ff),
                     "teams": [ff.team_dict(r) for r in ff.rows]} for ff in results],
        "jain_chart": jain_history_chart(cluster=cluster, flavors=flavors),
    })
