"""What-if before approval: the cluster's recent demand, replayed with and without a request.

Reads the jobs submitted on the request's cluster in the last ``WHATIF_DAYS``
days (at most ``WHATIF_MAX_JOBS``, the most recent), turns them into
:class:`queues.whatif.Demand` rows and lets :func:`queues.whatif.what_if` run
the scheduler simulator on the cluster as it is and as approval would leave it.
A fixed number of queries whatever the number of jobs and teams: 1 when the
result is cached, 3 otherwise (plus the specs the caller builds).

Settings: ``WHATIF_DAYS`` (7), ``WHATIF_MAX_JOBS`` (2000),
``WHATIF_DEFAULT_DURATION_SECONDS`` (3600: a job with neither a measured run
time nor a ``max_runtime_seconds``), ``WHATIF_CACHE_SECONDS`` (600).
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.cache import cache
from django.db.models import Max, Q
from django.utils import timezone

from portal.models import Cluster, GpuFlavor, Job, QuotaRequest
from portal.selectors.specs import ClusterSpecs
from queues import whatif

#: Bump when the shape of the cached result changes.
_CACHE_VERSION = 1


def _days() -> int:
    return int(getattr(settings, "WHATIF_DAYS", 7))


def _max_jobs() -> int:
    return int(getattr(settings, "WHATIF_MAX_JOBS", 2000))


def _default_duration() -> int:
    return int(getattr(settings, "WHATIF_DEFAULT_DURATION_SECONDS", 3600))


@dataclass(frozen=True)
class RecentDemand:
    """The demand window of a cluster.

    ``demand``: the jobs as :class:`queues.whatif.Demand`, ``submit_time`` in
    seconds since ``start`` (the first job's submission); ``since``: the window's
    lower bound; ``truncated``: more jobs were submitted in the window than
    ``WHATIF_MAX_JOBS`` (the oldest were left out); ``measured``: jobs whose
    duration is their measured run time (``finished_at - started_at``).
    """

    since: datetime
    start: datetime | None
    demand: tuple[whatif.Demand, ...]
    truncated: bool
    measured: int


def recent_demand(*, cluster: Cluster, now: datetime | None = None) -> RecentDemand:
    """The jobs submitted on ``cluster`` in the last ``WHATIF_DAYS`` days (one query).

    Duration of each job (seconds): ``finished_at - started_at`` when both are
    known and positive, else ``max_runtime_seconds``, else
    ``WHATIF_DEFAULT_DURATION_SECONDS``. Jobs cancelled before they started are
    left out (they never used GPUs). Priority: the priority class value (0 without).
    """
    now = now or timezone.now()
    since = now - timedelta(days=_days())
    limit = _max_jobs()
    rows = list(
        Job.objects.filter(team__cluster=cluster, submitted_at__gte=since)
        .exclude(Q(phase=Job.Phase.CANCELLED) & Q(started_at__isnull=True))
        .order_by("-submitted_at", "-id")
        .values_list("id", "team__slug", "flavor__name", "flavor__gpu_resource", "workers",
                     "gpus_per_worker", "priority_class__value", "submitted_at", "started_at",
                     "finished_at", "max_runtime_seconds")[:limit + 1]
    )
    truncated = len(rows) > limit
    rows = rows[:limit]
    rows.reverse()
    if not rows:
        return RecentDemand(since=since, start=None, demand=(), truncated=False, measured=0)
    start = rows[0][7]
    default = _default_duration()
    demand, measured = [], 0
    for (pk, team, flavor, resource, workers, gpus, priority, submitted, started, finished,
         max_runtime) in rows:
        duration = (finished - started).total_seconds() if started and finished else 0
        if duration > 0:
            measured += 1
        else:
            duration = max_runtime or default
        demand.append(whatif.Demand(
            name=f"job-{pk}", team=team, submit_time=(submitted - start).total_seconds(),
            workers=workers, gpus_per_worker=gpus, flavor=flavor, gpu_resource=resource,
            priority=priority or 0, duration=duration,
        ))
    return RecentDemand(since=since, start=start, demand=tuple(demand), truncated=truncated,
                        measured=measured)


def sim_cluster(*, specs: ClusterSpecs, devices_per_node: dict[str, int]) -> whatif.SimCluster:
    """``specs`` (from ``cluster_specs``) as a :class:`queues.whatif.SimCluster`, with
    node pools from each flavor's capacity and ``devices_per_node`` (flavor name ->
    ``GpuFlavor.gpus_per_node``)."""
    return whatif.SimCluster(
        backend=specs.backend, flavors=specs.flavors, cohorts=specs.cohorts, teams=specs.teams,
        node_pools=whatif.node_pools_for(specs.flavors, devices_per_node),
    )


def _cache_key(request: QuotaRequest, cluster: Cluster, latest_job: int | None) -> str:
    return (f"whatif:v{_CACHE_VERSION}:req{request.pk}:gen{cluster.spec_generation}:"
            f"job{latest_job or 0}:{_days()}:{_max_jobs()}:{_default_duration()}")


def quota_request_what_if(*, request: QuotaRequest, before: ClusterSpecs, after: ClusterSpecs,
                          now: datetime | None = None, use_cache: bool = True) -> dict:
    """The what-if of approving ``request``: recent demand, simulated before and after.

    ``before`` / ``after``: the request's cluster as it is and with the request
    applied (``cluster_specs(cluster=..., overrides=...)``, as the preview builds
    them). Cached by (request id, the cluster's ``spec_generation``, the newest
    job id of the cluster) for ``WHATIF_CACHE_SECONDS``.

    Returns ``{days, since (ISO 8601), jobs, truncated, max_jobs,
    measured_durations, backend, horizon_seconds, sentences: [str], teams:
    [{team, before, after, delta}]}`` (see :class:`queues.whatif.WhatIfResult`;
    waits in seconds, GPUs in units of each flavor); with no recent jobs,
    ``jobs == 0``, ``teams == []`` and one sentence saying so. Raises
    :class:`queues.specs.SpecError` when the specs cannot be simulated.
    """
    cluster = request.team.cluster
    latest = Job.objects.filter(team__cluster=cluster).aggregate(latest=Max("id"))["latest"]
    key = _cache_key(request, cluster, latest)
    if use_cache:
        hit = cache.get(key)
        if hit is not None:
            return hit
    window = recent_demand(cluster=cluster, now=now)
    out = {
        "days": _days(),
        "since": window.since.isoformat(),
        "jobs": len(window.demand),
        "truncated": window.truncated,
        "max_jobs": _max_jobs(),
        "measured_durations": window.measured,
        "backend": before.backend,
        "horizon_seconds": 0.0,
        "sentences": [],
        "teams": [],
    }
    if not window.demand:
        out["sentences"] = [f"No jobs were submitted on cluster {cluster.name} in the last "
                            f"{_days()} days: there is no recent demand to replay."]
    else:
        devices = dict(GpuFlavor.objects.filter(cluster=cluster)
                       .values_list("name", "gpus_per_node"))
        result = whatif.what_if(
            before=sim_cluster(specs=before, devices_per_node=devices),
            after=sim_cluster(specs=after, devices_per_node=devices),
            demand=window.demand,
        ).as_dict()
        result.pop("jobs")
        out.update(result)
    cache.set(key, out, int(getattr(settings, "WHATIF_CACHE_SECONDS", 600)))
    return out
