"""Worker-side counters and histograms, kept in Redis so the web process can serve them.

Keys live under ``METRICS_KEY_PREFIX`` (default ``gpuq:metrics``) in the Redis of
``METRICS_REDIS_URL`` (default ``REDIS_URL``). Without a Redis URL (the embedded demo's
filesystem broker) the store is off: writes do nothing, reads return nothing.

Writes never raise: a metrics failure must not fail a task (it is logged once per
minute at most). Histograms keep one count per bucket (not cumulative), the sum and
the count; :func:`read` turns them into Prometheus's cumulative buckets.
"""

from __future__ import annotations

import bisect
import logging
import time
from dataclasses import dataclass, field
from functools import cache

from django.conf import settings

log = logging.getLogger(__name__)

#: Upper bounds (seconds) of the duration histograms; +Inf is implied.
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
SEP = "\x1f"
_last_warning = 0.0


@cache
def _client(url: str):
    import redis

    return redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)


def client():
    """The Redis client of the store, or None when the store is off."""
    url = getattr(settings, "METRICS_REDIS_URL", "") or ""
    return _client(url) if url.startswith(("redis://", "rediss://", "unix://")) else None


def key(name: str) -> str:
    return f"{settings.METRICS_KEY_PREFIX}:{name}"


def _warn(error: Exception) -> None:
    global _last_warning
    now = time.monotonic()
    if now - _last_warning > 60:
        _last_warning = now
        log.warning("metrics store unavailable: %s", error)


def _observe(pipe, name: str, labels: str, seconds: float) -> None:
    hist = key(f"hist:{name}:{labels}")
    index = bisect.bisect_left(BUCKETS, seconds)
    pipe.hincrby(hist, str(index), 1)
    pipe.hincrbyfloat(hist, "sum", seconds)
    pipe.hincrby(hist, "count", 1)
    pipe.sadd(key(f"hists:{name}"), labels)


def record_task(task: str, outcome: str, seconds: float | None) -> None:
    """One finished run of Celery task ``task``: ``outcome`` (success, failure, retry,
    revoked) and, when it ran, its duration in seconds."""
    redis = client()
    if redis is None:
        return
    try:
        pipe = redis.pipeline(transaction=False)
        pipe.hincrby(key("tasks"), f"{task}{SEP}{outcome}", 1)
        if seconds is not None:
            _observe(pipe, "task", task, seconds)
        pipe.execute()
    except Exception as error:  # noqa: BLE001 - never fail the task over metrics
        _warn(error)


def record_reconcile(cluster_id: int, outcome: str, seconds: float | None, *,
                     writes: int = 0, failed: int = 0) -> None:
    """One reconcile task run of cluster ``cluster_id``: ``outcome`` (ok, failed_objects,
    retry, error, skipped), its duration, its writes and its permanently failed objects."""
    redis = client()
    if redis is None:
        return
    try:
        pipe = redis.pipeline(transaction=False)
        pipe.hincrby(key("reconcile"), f"{cluster_id}{SEP}{outcome}", 1)
        if writes:
            pipe.hincrby(key("reconcile_writes"), str(cluster_id), writes)
        if failed:
            pipe.hincrby(key("reconcile_failed_objects"), str(cluster_id), failed)
        if seconds is not None:
            _observe(pipe, "reconcile", str(cluster_id), seconds)
        pipe.execute()
    except Exception as error:  # noqa: BLE001
        _warn(error)


@dataclass
class Histogram:
    """Cumulative buckets ``[(le, count), ...]`` ending with ``+Inf``, sum and count."""

    buckets: list[tuple[str, float]]
    sum: float
    count: float


@dataclass
class Snapshot:
    """Everything the store holds, read at one scrape. ``up`` is False when it could
    not be read (or is off)."""

    up: bool = False
    tasks: dict[tuple[str, str], int] = field(default_factory=dict)
    task_durations: dict[str, Histogram] = field(default_factory=dict)
    reconcile: dict[tuple[str, str], int] = field(default_factory=dict)
    reconcile_writes: dict[str, int] = field(default_factory=dict)
    reconcile_failed_objects: dict[str, int] = field(default_factory=dict)
    reconcile_durations: dict[str, Histogram] = field(default_factory=dict)


def _histogram(raw: dict[bytes, bytes]) -> Histogram:
    values = {k.decode(): float(v) for k, v in raw.items()}
    running, buckets = 0.0, []
    for index, bound in enumerate(BUCKETS):
        running += values.get(str(index), 0.0)
        buckets.append((repr(bound), running))
    running += values.get(str(len(BUCKETS)), 0.0)
    buckets.append(("+Inf", running))
    return Histogram(buckets, values.get("sum", 0.0), values.get("count", 0.0))


def _pairs(raw: dict[bytes, bytes]) -> dict[tuple[str, str], int]:
    out = {}
    for k, v in raw.items():
        first, _, second = k.decode().partition(SEP)
        out[(first, second)] = int(v)
    return out


def _hists(redis, name: str) -> dict[str, Histogram]:
    labels = sorted(m.decode() for m in redis.smembers(key(f"hists:{name}")))
    pipe = redis.pipeline(transaction=False)
    for label in labels:
        pipe.hgetall(key(f"hist:{name}:{label}"))
    return {label: _histogram(raw) for label, raw in zip(labels, pipe.execute(), strict=True)}


def read() -> Snapshot:
    redis = client()
    if redis is None:
        return Snapshot()
    try:
        return Snapshot(
            up=True,
            tasks=_pairs(redis.hgetall(key("tasks"))),
            task_durations=_hists(redis, "task"),
            reconcile=_pairs(redis.hgetall(key("reconcile"))),
            reconcile_writes={k.decode(): int(v) for k, v in
                              redis.hgetall(key("reconcile_writes")).items()},
            reconcile_failed_objects={k.decode(): int(v) for k, v in
                                      redis.hgetall(key("reconcile_failed_objects")).items()},
            reconcile_durations=_hists(redis, "reconcile"),
        )
    except Exception as error:  # noqa: BLE001 - serve the database figures anyway
        _warn(error)
        return Snapshot()


def clear() -> None:
    """Delete every key of the store (tests)."""
    redis = client()
    if redis is None:
        return
    keys = list(redis.scan_iter(match=key("*")))
    if keys:
        redis.delete(*keys)
