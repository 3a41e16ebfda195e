"""GPU utilization history: collect a 5-minute sample from DCGM, roll it up, prune it.

* :func:`usage_collect` (beat ``portal.usage_collect``, every 5 minutes) reads DCGM
  series - PromQL over the Prometheus HTTP API at ``settings.PROMETHEUS_URL``, or,
  when that is empty, a dcgm-exporter ``/metrics`` page at ``settings.DCGM_EXPORTER_URL``
  through the same parser - attributes them to the jobs in Admitted/Running phases
  (:func:`queues.metrics.usage_snapshot`) and stores one :class:`UsageSample` per job,
  team and the unattributed bucket.
* :func:`usage_rollup` (hourly) sums 5-minute rows into hourly rows and hourly rows into
  daily rows (UTC days).
* :func:`usage_prune` (daily) deletes rows older than each resolution's retention.

All three are idempotent: a bucket is recomputed and replaced whole, in one transaction.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import requests
from django.conf import settings
from django.db import transaction
from django.db.models import Max, Min, Q, Sum
from django.db.models.functions import Trunc
from django.utils import timezone

from portal.models import Job, Team, UsageSample
from portal.models.usage import DAY, HOUR, STEP, retention
from queues.metrics import (
    JobAllocation,
    PrometheusClient,
    PrometheusError,
    Sample,
    fetch_samples,
    parse_exposition,
    usage_snapshot,
)

log = logging.getLogger(__name__)

#: Job phases in which a job holds its GPUs.
HOLDING_PHASES = (Job.Phase.ADMITTED, Job.Phase.RUNNING)
UNATTRIBUTED = "unattributed"


def bucket_of(at: datetime, resolution: int = STEP) -> datetime:
    """Start of the bucket ``(start, start + resolution]`` that contains ``at`` (UTC).

    An aligned ``at`` (10:05:00) is the end of bucket 10:00; 10:03:20 is in bucket
    10:00 too. Raises :class:`ValueError` for a naive datetime.
    """
    if at.tzinfo is None:
        raise ValueError("bucket_of needs a timezone-aware datetime")
    end = math.ceil(at.timestamp() / resolution) * resolution
    return datetime.fromtimestamp(end - resolution, tz=UTC)


def floor_to(at: datetime, resolution: int) -> datetime:
    """``at`` rounded down to a multiple of ``resolution`` seconds since the epoch (UTC)."""
    return datetime.fromtimestamp(math.floor(at.timestamp() / resolution) * resolution, tz=UTC)


@dataclass(frozen=True)
class CollectResult:
    """What :func:`usage_collect` did: the bucket ``start`` (UTC), ``source``
    ("prometheus", "exporter" or "none"), ``error`` (why no series could be read; the
    bucket then stores allocations with no data), ``rows`` written, ``dropped``
    impossible samples by metric, ``unknown_namespaces`` seen in series."""

    start: datetime
    source: str
    error: str
    rows: int
    dropped: dict
    unknown_namespaces: tuple[str, ...]


def read_dcgm_samples(*, at: datetime) -> tuple[list[Sample], str, str]:
    """DCGM samples for the 5 minutes ending at ``at``: ``(samples, source, error)``.

    ``PROMETHEUS_URL`` set: every known metric averaged over ``[5m]`` at ``at``
    (:func:`queues.metrics.fetch_samples`). Else ``DCGM_EXPORTER_URL``: the exporter's
    current page, parsed by :func:`queues.metrics.parse_exposition`. Neither: no samples,
    source "none". A failure returns no samples and the error text (never raises): the
    bucket is then "no data", never 0 %.
    """
    if settings.PROMETHEUS_URL:
        try:
            return fetch_samples(PrometheusClient(settings.PROMETHEUS_URL), time=at,
                                 window="5m"), "prometheus", ""
        except PrometheusError as exc:
            return [], "prometheus", str(exc)
    if settings.DCGM_EXPORTER_URL:
        try:
            response = requests.get(settings.DCGM_EXPORTER_URL, timeout=10)
            response.raise_for_status()
            return parse_exposition(response.text), "exporter", ""
        except (requests.RequestException, ValueError) as exc:
            return [], "exporter", f"{type(exc).__name__}: {exc}"
    return [], "none", "neither PROMETHEUS_URL nor DCGM_EXPORTER_URL is set"


def holding_jobs() -> list[Job]:
    """Jobs holding GPUs now (Admitted or Running, not deleted), with team and flavor."""
    return list(
        Job.objects.filter(phase__in=HOLDING_PHASES, deleted_at__isnull=True)
        .select_related("team", "flavor").order_by("pk")
    )


def usage_collect(*, at: datetime | None = None,
                  samples: list[Sample] | None = None) -> CollectResult:
    """Store the 5-minute sample of the bucket containing ``at`` (default: now).

    ``samples``: DCGM samples to use instead of reading them (:func:`read_dcgm_samples`).
    Allocated GPUs come from the jobs in Admitted/Running phases: ``workers x
    gpus_per_worker`` units, divided by the flavor's time-slicing replicas (physical
    GPUs). Rows (GPU-seconds = GPUs x 300): one per holding job, one per team with
    allocated or reporting GPUs, one unattributed. The bucket's rows are replaced whole
    (idempotent). Returns a :class:`CollectResult`.
    """
    at = at or timezone.now()
    start = bucket_of(at)
    source, error = "given", ""
    if samples is None:
        samples, source, error = read_dcgm_samples(at=at)
        if error:
            log.warning("usage_collect %s: %s", start.isoformat(), error)
    jobs = holding_jobs()
    teams = dict(Team.objects.values_list("slug", "pk"))
    snapshot = usage_snapshot(samples, teams=teams, jobs=[
        JobAllocation(team=j.team.slug, job=j.name, units=j.workers * j.gpus_per_worker,
                      units_per_pod=j.gpus_per_worker, flavor=j.flavor.name,
                      replicas=j.flavor.time_slicing_replicas or 1, key=j.pk)
        for j in jobs
    ])
    team_of_job = {j.pk: j.team_id for j in jobs}

    def row(usage, scope, subject, team_id=None, job_id=None) -> UsageSample:
        busy = usage.busy_gpu_equivalents
        return UsageSample(
            resolution=STEP, start=start, scope=scope, subject=subject, team_id=team_id,
            job_id=job_id, allocated_gpu_seconds=usage.allocated_gpus * STEP,
            reporting_gpu_seconds=usage.reporting_gpus * STEP,
            busy_gpu_seconds=None if busy is None else busy * STEP, samples=1,
        )

    rows = [row(u, UsageSample.Scope.JOB, f"job:{u.key}", team_of_job[u.key], u.key)
            for u in snapshot.jobs]
    rows += [row(u, UsageSample.Scope.TEAM, f"team:{teams[u.team]}", teams[u.team])
             for u in snapshot.teams]
    if snapshot.unattributed is not None:
        rows.append(row(snapshot.unattributed, UsageSample.Scope.UNATTRIBUTED, UNATTRIBUTED))
    with transaction.atomic():
        UsageSample.objects.filter(resolution=STEP, start=start).delete()
        UsageSample.objects.bulk_create(rows)
    return CollectResult(start=start, source=source, error=error, rows=len(rows),
                         dropped=dict(snapshot.dropped),
                         unknown_namespaces=snapshot.unknown_namespaces)


def _rollup(*, source: int, target: int, since: datetime, until: datetime) -> int:
    """Replace the ``target`` rows of buckets in ``[since, until)`` by sums of ``source``
    rows; returns the rows written."""
    kind = {HOUR: "hour", DAY: "day"}[target]
    sums = (
        UsageSample.objects.filter(resolution=source, start__gte=since, start__lt=until)
        .annotate(bucket=Trunc("start", kind, tzinfo=UTC))
        .values("bucket", "scope", "subject", "team_id", "job_id")
        .annotate(allocated=Sum("allocated_gpu_seconds"),
                  reporting=Sum("reporting_gpu_seconds"),
                  busy=Sum("busy_gpu_seconds"), n=Sum("samples"))
        .order_by()
    )
    rows = [UsageSample(resolution=target, start=s["bucket"], scope=s["scope"],
                        subject=s["subject"], team_id=s["team_id"], job_id=s["job_id"],
                        allocated_gpu_seconds=s["allocated"] or 0.0,
                        reporting_gpu_seconds=s["reporting"] or 0.0,
                        busy_gpu_seconds=s["busy"], samples=s["n"] or 0)
            for s in sums]
    with transaction.atomic():
        UsageSample.objects.filter(resolution=target, start__gte=since,
                                   start__lt=until).delete()
        UsageSample.objects.bulk_create(rows)
    return len(rows)


def usage_rollup(*, now: datetime | None = None) -> dict[str, int]:
    """Roll 5-minute rows up into hourly rows and hourly rows into daily rows (UTC).

    Recomputes every hour from the last stored hourly bucket (or the first 5-minute
    row) through the current, partial hour, then every day likewise from hourly rows:
    re-running is harmless. Returns ``{"hourly": rows, "daily": rows}``.
    """
    now = now or timezone.now()
    written = {}
    for name, source, target in (("hourly", STEP, HOUR), ("daily", HOUR, DAY)):
        marks = UsageSample.objects.filter(resolution__in=(source, target)).aggregate(
            last_target=Max("start", filter=Q(resolution=target)),
            first_source=Min("start", filter=Q(resolution=source)),
        )
        since = marks["last_target"] or marks["first_source"]
        if since is None:
            written[name] = 0
            continue
        until = floor_to(now, target) + timedelta(seconds=target)
        written[name] = _rollup(source=source, target=target, since=floor_to(since, target),
                                until=until)
    return written


def usage_prune(*, now: datetime | None = None) -> dict[int, int]:
    """Delete rows older than their resolution's retention; ``{resolution: rows deleted}``."""
    now = now or timezone.now()
    out = {}
    for resolution, keep in retention().items():
        out[resolution], _ = UsageSample.objects.filter(
            resolution=resolution, start__lt=now - keep).delete()
    return out
