"""GPU utilization from NVIDIA dcgm-exporter series, via Prometheus or an exporter's /metrics.

Pure except :class:`PrometheusClient` (HTTP over ``requests``); no Django, no ``kubernetes``.

Pieces
    * :data:`DCGM_METRICS`: one alias table of dcgm-exporter metric names across
      versions, with each one's unit, valid range and normalisation to 0..1 (activity)
      or bytes (framebuffer).
    * :class:`PrometheusClient`: ``instant_query`` / ``range_query`` against the HTTP API
      (``/api/v1/query``, ``/api/v1/query_range``); errors become
      :class:`PrometheusError` with Prometheus' ``errorType`` and ``error``.
    * :func:`parse_exposition`: the Prometheus text format an exporter serves on
      ``/metrics`` (parsed by ``prometheus_client.parser``), for the demo without a
      Prometheus server; :func:`samples_from_vector` for a query's vector result.
    * :func:`utilization`: samples -> per team and per job: allocated GPUs, busy
      GPU-equivalents, coverage, idle; dropped-sample counts.

Metric names (checked against NVIDIA/dcgm-exporter ``etc/default-counters.csv``,
``etc/dcp-metrics-included.csv`` and ``etc/1.x-compatibility-metrics.csv``):

    ==================================  =======  ======  =====================================
    name                                unit     range   note
    ==================================  =======  ======  =====================================
    DCGM_FI_PROF_GR_ENGINE_ACTIVE       ratio    0..1    DCP field; the one MIG instances have
    DCGM_FI_DEV_GPU_UTIL                percent  0..100  default counters; whole GPUs only
    dcgm_fi_prof_gr_engine_active       ratio    0..1    1.x-compatible name of the first
    dcgm_gpu_utilization                percent  0..100  1.x-compatible name of the second
    DCGM_FI_DEV_FB_USED                 MiB      >= 0    framebuffer used
    dcgm_fb_used                        MiB      >= 0    1.x-compatible name
    ==================================  =======  ======  =====================================

No upstream counters file names a ``*_RATIO`` metric; a site that renames series with
recording rules passes its own table as ``aliases``. When one GPU reports several
activity metrics, the lowest ``priority`` wins (GR_ENGINE_ACTIVE over GPU_UTIL: it is
the finer measure and the only one defined for MIG instances), so nothing is counted
twice.

Attribution (dcgm-exporter's Kubernetes pod mapping, ``pkg/.../transformation``):
labels ``namespace``/``pod`` (current), ``pod_namespace``/``pod_name`` (with
``--use-old-namespace``), and ``exported_namespace``/``exported_pod`` when Prometheus
renamed the exporter's labels because the scrape target had its own (``honor_labels:
false``); the ``exported_*`` pair wins when present. Team = namespace. A series without
both a namespace and a pod (a GPU no pod holds) goes to the *unattributed* bucket, never
to a team named "".
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import requests
from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "ACTIVITY",
    "DCGM_METRICS",
    "FB_USED",
    "DcgmMetric",
    "JobAllocation",
    "JobUsage",
    "PodAllocation",
    "PrometheusClient",
    "PrometheusError",
    "QueryResult",
    "Sample",
    "UsageRow",
    "UsageSnapshot",
    "UtilizationReport",
    "activity_queries",
    "fetch_samples",
    "job_name_from_pod",
    "parse_exposition",
    "samples_from_vector",
    "usage_snapshot",
    "utilization",
]

ACTIVITY = "activity"
FB_USED = "fb_used"
MIB = 2**20


@dataclass(frozen=True)
class DcgmMetric:
    """One dcgm-exporter metric name and how to read it.

    Fields:
        name: the Prometheus metric name.
        kind: :data:`ACTIVITY` (how busy the GPU is) or :data:`FB_USED` (memory used).
        unit: "percent", "ratio" or "MiB", as the exporter emits it.
        scale: raw value x scale = normalised value (0..1 ratio, or bytes).
        low, high: the valid raw range, inclusive (``high`` None = unbounded). A sample
            outside it, or NaN/inf, is impossible and dropped.
        priority: among activity metrics of one GPU, the lowest wins.
        source: where the name and unit come from.
    """

    name: str
    kind: str
    unit: str
    scale: float
    low: float
    high: float | None
    priority: int = 0
    source: str = ""


_UPSTREAM = "NVIDIA/dcgm-exporter etc/"
DCGM_METRICS: Mapping[str, DcgmMetric] = {
    m.name: m
    for m in (
        DcgmMetric("DCGM_FI_PROF_GR_ENGINE_ACTIVE", ACTIVITY, "ratio", 1.0, 0.0, 1.0, 0,
                   _UPSTREAM + "dcp-metrics-included.csv"),
        DcgmMetric("dcgm_fi_prof_gr_engine_active", ACTIVITY, "ratio", 1.0, 0.0, 1.0, 1,
                   _UPSTREAM + "1.x-compatibility-metrics.csv (DCGM field 1001, a ratio)"),
        DcgmMetric("DCGM_FI_DEV_GPU_UTIL", ACTIVITY, "percent", 0.01, 0.0, 100.0, 2,
                   _UPSTREAM + "default-counters.csv"),
        DcgmMetric("dcgm_gpu_utilization", ACTIVITY, "percent", 0.01, 0.0, 100.0, 3,
                   _UPSTREAM + "1.x-compatibility-metrics.csv"),
        DcgmMetric("DCGM_FI_DEV_FB_USED", FB_USED, "MiB", float(MIB), 0.0, None, 0,
                   _UPSTREAM + "default-counters.csv"),
        DcgmMetric("dcgm_fb_used", FB_USED, "MiB", float(MIB), 0.0, None, 1,
                   _UPSTREAM + "1.x-compatibility-metrics.csv"),
    )
}

NAMESPACE_LABELS = ("exported_namespace", "namespace", "pod_namespace")
POD_LABELS = ("exported_pod", "pod", "pod_name")
NODE_LABELS = ("Hostname", "instance")
DEVICE_LABELS = ("UUID", "gpu", "device")
MIG_INSTANCE_LABEL = "GPU_I_ID"
MIG_PROFILE_LABEL = "GPU_I_PROFILE"
MODEL_LABEL = "modelName"


# --------------------------------------------------------------------------- samples


@dataclass(frozen=True)
class Sample:
    """One series value.

    Fields: ``metric`` (Prometheus metric name), ``labels`` (label -> value, without
    ``__name__``), ``value`` (raw, in the metric's own unit), ``timestamp`` (unix
    seconds, or ``None`` when the exposition carried none).
    """

    metric: str
    labels: Mapping[str, str]
    value: float
    timestamp: float | None = None


def parse_exposition(text: str) -> list[Sample]:
    """Samples of a Prometheus text exposition (what dcgm-exporter serves on /metrics).

    Uses ``prometheus_client.parser.text_string_to_metric_families`` (the reference
    Python parser). Returns every sample, DCGM or not; :func:`utilization` ignores
    names it does not know. ``NaN`` values are kept (and later dropped and counted).
    Raises :class:`ValueError` on text that is not valid exposition format.
    """
    out: list[Sample] = []
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.append(Sample(s.name, dict(s.labels), float(s.value), s.timestamp))
    return out


def samples_from_vector(result: QueryResult | list[dict[str, Any]],
                        metric: str | None = None) -> list[Sample]:
    """Samples of an instant-vector query result.

    Shapes: ``result`` is a :class:`QueryResult` of type "vector" or its ``result``
    list, each item ``{"metric": {labels}, "value": [unix_seconds, "string value"]}``.
    The metric name is ``metric`` when given (functions such as ``avg_over_time`` drop
    ``__name__``), else the series' ``__name__``. Raises :class:`ValueError` on a
    result that is not a vector or a series with no name.
    """
    if isinstance(result, QueryResult):
        if result.result_type != "vector":
            raise ValueError(f"expected a vector result, got {result.result_type!r}")
        items = result.result
    else:
        items = result
    out: list[Sample] = []
    for item in items:
        labels = dict(item.get("metric", {}))
        name = metric or labels.get("__name__")
        if not name:
            raise ValueError(f"series without a metric name: {labels}")
        labels.pop("__name__", None)
        ts, raw = item["value"]
        out.append(Sample(name, labels, float(raw), float(ts)))
    return out


# --------------------------------------------------------------------------- Prometheus


class PrometheusError(Exception):
    """A failed Prometheus API call.

    Attributes: ``error_type`` (Prometheus' ``errorType`` such as "bad_data",
    "execution", "timeout", or "http", "connection", "invalid_response" for failures
    before a Prometheus answer), ``message`` (Prometheus' ``error`` text or a
    description), ``status_code`` (HTTP status, ``None`` without a response).
    """

    def __init__(self, message: str, *, error_type: str, status_code: int | None = None):
        super().__init__(f"{error_type}: {message}" + (
            f" (HTTP {status_code})" if status_code is not None else ""))
        self.message = message
        self.error_type = error_type
        self.status_code = status_code


@dataclass(frozen=True)
class QueryResult:
    """``data`` of a successful query: ``result_type`` ("vector", "matrix", "scalar",
    "string"), ``result`` (the JSON list or pair as Prometheus sent it) and
    ``warnings`` (strings Prometheus attached, possibly empty)."""

    result_type: str
    result: Any
    warnings: tuple[str, ...] = ()


def _timestamp(value: datetime | float | int, what: str) -> str:
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"{what}: naive datetime; give a timezone-aware one")
        return repr(value.timestamp())
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{what}: expected unix seconds or a datetime, got {value!r}")
    return repr(float(value))


class PrometheusClient:
    """Minimal client of the Prometheus HTTP API (https://prometheus.io/docs/prometheus/
    latest/querying/api/), over ``requests``.

    ``base_url`` is the server root such as ``http://127.0.0.1:9090`` (a path prefix
    like ``/prometheus`` is kept); ``timeout`` is seconds per request; ``session`` an
    optional ``requests.Session`` (auth, TLS settings). Queries are sent as
    form-encoded POST, which the API accepts for both endpoints and which keeps long
    PromQL out of URLs.
    """

    def __init__(self, base_url: str, *, timeout: float = 10.0,
                 session: requests.Session | None = None):
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.session = session or requests.Session()

    def instant_query(self, promql: str, time: datetime | float | None = None) -> QueryResult:
        """Evaluate ``promql`` at ``time`` (unix seconds or aware datetime; default:
        the server's now) via ``/api/v1/query``. Raises :class:`PrometheusError`."""
        params = {"query": promql}
        if time is not None:
            params["time"] = _timestamp(time, "time")
        return self._call("/api/v1/query", params)

    def range_query(self, promql: str, start: datetime | float, end: datetime | float,
                    step: timedelta | float) -> QueryResult:
        """Evaluate ``promql`` over [start, end] every ``step`` (seconds or timedelta)
        via ``/api/v1/query_range``; the result is a "matrix". Raises
        :class:`ValueError` for step <= 0 or end before start (checked locally) and
        :class:`PrometheusError` for what the server rejects."""
        step_s = step.total_seconds() if isinstance(step, timedelta) else float(step)
        if not step_s > 0:
            raise ValueError(f"step must be positive, got {step!r}")
        start_s, end_s = _timestamp(start, "start"), _timestamp(end, "end")
        if float(end_s) < float(start_s):
            raise ValueError("end is before start")
        return self._call(
            "/api/v1/query_range",
            {"query": promql, "start": start_s, "end": end_s, "step": repr(step_s)},
        )

    def _call(self, path: str, params: dict[str, str]) -> QueryResult:
        url = self.base_url + path
        try:
            response = self.session.post(url, data=params, timeout=self.timeout)
        except requests.Timeout as exc:
            raise PrometheusError(f"no answer from {url} within {self.timeout}s",
                                  error_type="timeout") from exc
        except requests.RequestException as exc:
            raise PrometheusError(f"cannot reach {url}: {exc}", error_type="connection") from exc
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or "status" not in body:
            snippet = response.text[:200].strip()
            raise PrometheusError(
                f"{url} answered without a Prometheus JSON body: {snippet!r}",
                error_type="http" if response.status_code >= 400 else "invalid_response",
                status_code=response.status_code,
            )
        if body["status"] != "success":
            raise PrometheusError(
                str(body.get("error", "unknown error")),
                error_type=str(body.get("errorType", "unknown")),
                status_code=response.status_code,
            )
        data = body.get("data")
        if not isinstance(data, dict) or "resultType" not in data:
            raise PrometheusError(f"{url}: success without data.resultType",
                                  error_type="invalid_response",
                                  status_code=response.status_code)
        return QueryResult(data["resultType"], data.get("result"),
                           tuple(body.get("warnings", ())))


_METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_DURATION = re.compile(r"^([0-9]+(ms|[smhdwy]))+$")


def activity_queries(window: str = "5m",
                     aliases: Mapping[str, DcgmMetric] = DCGM_METRICS) -> dict[str, str]:
    """One PromQL per known metric: ``{name: "avg_over_time(name[window])"}``.

    ``window`` is a PromQL duration ("5m", "1h30m"). One query per name because
    ``avg_over_time`` drops ``__name__`` and :func:`utilization` needs it to know the
    unit. Raises :class:`ValueError` for a malformed window or metric name.
    """
    if not _DURATION.match(window):
        raise ValueError(f"not a PromQL duration: {window!r}")
    out = {}
    for name in aliases:
        if not _METRIC_NAME.match(name):
            raise ValueError(f"not a metric name: {name!r}")
        out[name] = f"avg_over_time({name}[{window}])"
    return out


def fetch_samples(client: PrometheusClient, *, time: datetime | float | None = None,
                  window: str = "5m",
                  aliases: Mapping[str, DcgmMetric] = DCGM_METRICS) -> list[Sample]:
    """Every known DCGM metric averaged over ``window`` ending at ``time``, as samples
    (values in each metric's raw unit). Raises :class:`PrometheusError`."""
    out: list[Sample] = []
    for name, promql in activity_queries(window, aliases).items():
        out.extend(samples_from_vector(client.instant_query(promql, time), metric=name))
    return out


# --------------------------------------------------------------------------- utilization


_GENERATED_SUFFIX = re.compile(r"-[bcdfghjklmnpqrstvwxz2456789]{5}$")
_INDEX_SUFFIX = re.compile(r"-[0-9]+$")


def job_name_from_pod(pod: str) -> str:
    """Best guess of the job behind a pod name, used only when the caller's ``pod_jobs``
    mapping does not know the pod.

    Strips the random 5-character suffix Kubernetes appends to ``generateName``
    (alphabet ``bcdfghjklmnpqrstvwxz2456789``, apimachinery ``util/rand``), then one
    trailing ``-<number>`` (the completion index of an Indexed Job, or a Volcano task
    index). ``train-7-x2kq9`` -> ``train``; ``train-x2kq9`` -> ``train``. A JobSet pod
    yields ``<jobset>-<replicatedJob>-<index>`` and a Volcano pod ``<job>-<task>``, not
    the parent's name: that is why a mapping from the portal's records should win.
    """
    name = _GENERATED_SUFFIX.sub("", pod)
    return _INDEX_SUFFIX.sub("", name) or pod


@dataclass(frozen=True)
class PodAllocation:
    """GPUs a pod holds, from the caller's view of the cluster (pod specs).

    Fields:
        namespace: the pod's namespace (= team).
        pod: the pod's name.
        units: allocatable units held: GPUs (``nvidia.com/gpu``), MIG instances
            (``nvidia.com/mig-*``: each instance is one unit) or time-sliced replicas.
        flavor: GPU flavor (or model) name, the key into ``replicas_per_gpu``.
    """

    namespace: str
    pod: str
    units: int
    flavor: str | None = None


@dataclass(frozen=True)
class UsageRow:
    """Utilization of one team, one job, or the unattributed bucket.

    Fields:
        team: namespace, or ``None`` for the unattributed bucket.
        job: job name on job rows, ``None`` on team rows and the unattributed row.
        pods: pod names in this row, sorted.
        allocated_gpus: GPUs allocated per the caller (physical GPU-equivalents: MIG
            instances count 1 each, a time-sliced replica 1/replicas).
        reporting_gpus: how many of them have a valid activity sample (same unit);
            for the unattributed bucket, GPUs seen.
        busy_gpu_equivalents: sum of activity ratios (0..1 each) of reporting GPUs,
            divided by replicas for time-sliced ones; ``None`` = no data (never 0).
        utilization: ``busy / reporting`` in 0..1, ``None`` = no data.
        idle: ``utilization < idle_below``, ``None`` = no data.
        fb_used_bytes: framebuffer used (bytes), ``None`` = no data.
    """

    team: str | None
    job: str | None
    pods: tuple[str, ...]
    allocated_gpus: float
    reporting_gpus: float
    busy_gpu_equivalents: float | None
    utilization: float | None
    idle: bool | None
    fb_used_bytes: int | None

    @property
    def coverage(self) -> str:
        """"N of M allocated GPUs reporting" (for unattributed: "N GPUs reporting")."""
        if self.team is None:
            return f"{_fmt(self.reporting_gpus)} GPUs reporting"
        reporting, allocated = _fmt(self.reporting_gpus), _fmt(self.allocated_gpus)
        return f"{reporting} of {allocated} allocated GPUs reporting"


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.2f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class UtilizationReport:
    """What :func:`utilization` returns.

    Fields:
        teams: one :class:`UsageRow` per team (``job`` None), sorted by team.
        jobs: one :class:`UsageRow` per (team, job), sorted.
        unattributed: GPUs whose series carry no namespace/pod (``None`` if none).
        dropped: impossible samples dropped, by metric name (NaN, inf, out of range).
        ignored_samples: samples of metrics not in the alias table (other exporter
            series: clocks, temperature, ...).
        unallocated_pods: ``(namespace, pod)`` seen in series but absent from the
            caller's allocations (only when allocations were given).
        idle_below: the idle threshold used (0..1 ratio).
    """

    teams: tuple[UsageRow, ...]
    jobs: tuple[UsageRow, ...]
    unattributed: UsageRow | None
    dropped: Mapping[str, int]
    ignored_samples: int
    unallocated_pods: tuple[tuple[str, str], ...]
    idle_below: float

    @property
    def dropped_total(self) -> int:
        """Total impossible samples dropped."""
        return sum(self.dropped.values())


def _first(labels: Mapping[str, str], names: Iterable[str]) -> str:
    for n in names:
        v = labels.get(n)
        if v:
            return v
    return ""


@dataclass
class _Pod:
    team: str | None
    pod: str | None
    model: str = ""
    activity: dict[tuple[str, str, str], dict[str, list[float]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list)))
    fb: dict[tuple[str, str, str], dict[str, list[float]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list)))


def _pick(by_metric: Mapping[str, list[float]], aliases: Mapping[str, DcgmMetric]) -> float:
    """Normalised value of the preferred metric of one unit (mean of duplicates)."""
    name = min(by_metric, key=lambda n: (aliases[n].priority, n))
    values = by_metric[name]
    return sum(values) / len(values) * aliases[name].scale


def utilization(
    samples: Iterable[Sample],
    *,
    allocations: Iterable[PodAllocation] | None = None,
    pod_jobs: Mapping[tuple[str, str], str] | None = None,
    replicas_per_gpu: Mapping[str, int] | None = None,
    idle_below: float = 0.05,
    aliases: Mapping[str, DcgmMetric] = DCGM_METRICS,
) -> UtilizationReport:
    """Turn DCGM samples into utilization per team and per job.

    Inputs:
        samples: raw samples (:func:`parse_exposition`, :func:`fetch_samples`); values
            in each metric's own unit, typically averaged over a window.
        allocations: the GPUs each pod holds (:class:`PodAllocation`); drives
            ``allocated_gpus`` and coverage. Pods with an allocation but no series are
            rows with no data (``None``), never 0 %.
        pod_jobs: ``{(namespace, pod): job}`` from the portal's records; a pod not in it
            falls back to :func:`job_name_from_pod`.
        replicas_per_gpu: time-slicing replicas per flavor or model name (the device
            plugin's ``replicas``); default 1. Looked up by the pod's allocation flavor,
            then by the series' ``modelName`` label.
        idle_below: activity ratio under which a row is idle (0..1, default 0.05).
        aliases: the metric table (default :data:`DCGM_METRICS`).

    Method:
        1. Samples of unknown names are ignored (counted). Samples that are NaN, inf
           or outside the metric's range (e.g. 150 %, -1) are dropped (counted by name).
        2. A GPU unit is (node, device, MIG instance): node from ``Hostname`` or
           ``instance``, device from ``UUID``, ``gpu`` or ``device``, MIG instance from
           ``GPU_I_ID`` (a MIG instance is its own unit). Per pod and unit the preferred
           activity metric is taken (see the module doc), duplicates averaged, and
           normalised to 0..1; framebuffer to bytes.
        3. Time slicing: dcgm-exporter repeats a shared GPU's series for every pod on
           it, each with the whole GPU's activity, and cannot tell who used it. A pod
           on a GPU with R replicas therefore counts 1/R physical GPU per unit and its
           busy GPU-equivalents are its units' activity / R (the GPU's activity split
           evenly among its R replicas): the pods of one GPU add up to that GPU. Its
           framebuffer bytes are split the same way.
        4. Per pod, reporting units are capped at its allocated units (busy scaled
           alike). Rows add pods up: busy = sum of activity ratios, utilization =
           busy / reporting.

    Raises :class:`ValueError` for ``idle_below`` outside 0..1, replicas < 1, or a
    negative allocation.
    """
    if not 0 <= idle_below <= 1:
        raise ValueError(f"idle_below must be within 0..1, got {idle_below}")
    replicas = dict(replicas_per_gpu or {})
    for key, r in replicas.items():
        if r < 1:
            raise ValueError(f"replicas for {key!r} must be >= 1, got {r}")
    allocated: dict[tuple[str, str], PodAllocation] = {}
    for a in allocations or ():
        if a.units < 0:
            raise ValueError(f"{a.namespace}/{a.pod}: negative units")
        if not a.namespace or not a.pod:
            raise ValueError("an allocation needs a namespace and a pod name")
        allocated[(a.namespace, a.pod)] = a
    jobs = dict(pod_jobs or {})

    dropped: dict[str, int] = defaultdict(int)
    ignored = 0
    pods: dict[tuple[str, str] | None, _Pod] = {}
    for s in samples:
        spec = aliases.get(s.metric)
        if spec is None:
            ignored += 1
            continue
        v = s.value
        if (not math.isfinite(v) or v < spec.low
                or (spec.high is not None and v > spec.high)):
            dropped[s.metric] += 1
            continue
        team, pod = _first(s.labels, NAMESPACE_LABELS), _first(s.labels, POD_LABELS)
        key = (team, pod) if team and pod else None
        entry = pods.get(key)
        if entry is None:
            entry = pods[key] = _Pod(team if key else None, pod if key else None)
        entry.model = entry.model or s.labels.get(MODEL_LABEL, "")
        unit = (_first(s.labels, NODE_LABELS), _first(s.labels, DEVICE_LABELS),
                s.labels.get(MIG_INSTANCE_LABEL, ""))
        target = entry.activity if spec.kind == ACTIVITY else entry.fb
        target[unit][s.metric].append(v)

    for key in allocated:
        if key not in pods:
            pods[key] = _Pod(key[0], key[1])

    # per-pod figures: (allocated, reporting, busy or None, fb bytes or None)
    job_acc: dict[tuple[str, str], list[tuple[str, float, float, float | None, int | None]]]
    job_acc = defaultdict(list)
    unattributed: UsageRow | None = None
    for key, entry in pods.items():
        busy_units = [_pick(m, aliases) for m in entry.activity.values()]
        fb_units = [_pick(m, aliases) for m in entry.fb.values()]
        fb = int(round(sum(fb_units))) if fb_units else None
        if key is None:
            reporting = float(len(busy_units))
            busy = sum(busy_units) if busy_units else None
            unattributed = _row(None, None, (), 0.0, reporting, busy, fb, idle_below)
            continue
        alloc = allocated.get(key)
        flavor = alloc.flavor if alloc and alloc.flavor else None
        r = replicas.get(flavor, 0) if flavor else 0
        r = r or replicas.get(entry.model, 1)
        units_reporting = len(busy_units)
        busy = sum(busy_units) / r if busy_units else None
        if alloc is not None and units_reporting > alloc.units:
            # more GPUs report than the pod holds (stale allocation): keep the mean
            # activity, count only the allocated units
            if busy is not None:
                busy = busy * alloc.units / units_reporting
            units_reporting = alloc.units
        alloc_gpus = alloc.units / r if alloc is not None else 0.0
        if fb is not None:
            fb = int(round(fb / r))
        job = jobs.get(key) or job_name_from_pod(key[1])
        job_acc[(key[0], job)].append((key[1], alloc_gpus, units_reporting / r, busy, fb))

    job_rows: list[UsageRow] = []
    team_acc: dict[str, list[tuple[str, float, float, float | None, int | None]]]
    team_acc = defaultdict(list)
    for (team, job), items in sorted(job_acc.items()):
        job_rows.append(_sum_row(team, job, items, idle_below))
        team_acc[team].extend(items)
    team_rows = [_sum_row(team, None, items, idle_below)
                 for team, items in sorted(team_acc.items())]

    unallocated = tuple(sorted(
        k for k in pods if k is not None and allocations is not None and k not in allocated
    ))
    return UtilizationReport(
        teams=tuple(team_rows),
        jobs=tuple(job_rows),
        unattributed=unattributed,
        dropped=dict(dropped),
        ignored_samples=ignored,
        unallocated_pods=unallocated,
        idle_below=idle_below,
    )


def _sum_row(team: str, job: str | None,
             items: list[tuple[str, float, float, float | None, int | None]],
             idle_below: float) -> UsageRow:
    busy_values = [b for _, _, _, b, _ in items if b is not None]
    fb_values = [f for *_, f in items if f is not None]
    return _row(
        team, job, tuple(sorted(p for p, *_ in items)),
        sum(a for _, a, _, _, _ in items),
        sum(r for _, _, r, _, _ in items),
        sum(busy_values) if busy_values else None,
        sum(fb_values) if fb_values else None,
        idle_below,
    )


def _row(team: str | None, job: str | None, pods: tuple[str, ...], allocated: float,
         reporting: float, busy: float | None, fb: int | None, idle_below: float) -> UsageRow:
    util = busy / reporting if busy is not None and reporting > 0 else None
    return UsageRow(
        team=team, job=job, pods=pods, allocated_gpus=allocated, reporting_gpus=reporting,
        busy_gpu_equivalents=busy if util is not None else None,
        utilization=util, idle=None if util is None else util < idle_below,
        fb_used_bytes=fb,
    )


# --------------------------------------------------------------------------- jobs


@dataclass(frozen=True)
class JobAllocation:
    """A job holding GPUs, from the portal's records (jobs Admitted or Running).

    Fields:
        team: the team's namespace.
        job: the job's name; its pods are named ``<job>-...`` (Indexed Job
            ``<job>-<index>-<random>``, JobSet ``<job>-<replicatedJob>-...``, Volcano
            ``<job>-<task>-<index>``).
        units: allocatable units the whole gang holds (workers x GPUs per worker):
            GPUs, MIG instances or time-sliced replicas.
        units_per_pod: units each pod holds (GPUs per worker); caps what a pod reports.
        flavor: the GPU flavor's name (key of ``replicas``).
        replicas: time-slicing replicas per physical GPU of the flavor (>= 1).
        key: the caller's identifier of the job (e.g. a database id), passed through.
    """

    team: str
    job: str
    units: int
    units_per_pod: int
    flavor: str | None = None
    replicas: int = 1
    key: Any = None


@dataclass(frozen=True)
class JobUsage:
    """One job's, one team's or the unattributed bucket's GPUs at one instant.

    Fields:
        team: namespace, ``None`` for the unattributed bucket.
        job: job name on job rows, ``None`` on team and unattributed rows.
        key: :attr:`JobAllocation.key` on job rows, else ``None``.
        allocated_gpus: physical GPU-equivalents held (a time-sliced replica counts
            1/replicas). For the unattributed bucket: 0 (nobody holds them per the portal).
        reporting_gpus: how many of them have a valid activity sample (same unit).
        busy_gpu_equivalents: sum of activity ratios (0..1) of reporting GPUs; ``None``
            when nothing reported (no data, never 0).
        unmatched_gpus: on team rows, GPUs held by pods of the namespace that no active
            job of the portal owns (counted as allocated and reporting: the device
            plugin assigned them to a pod).
    """

    team: str | None
    job: str | None
    key: Any
    allocated_gpus: float
    reporting_gpus: float
    busy_gpu_equivalents: float | None
    unmatched_gpus: float = 0.0

    @property
    def coverage(self) -> float | None:
        """``reporting / allocated`` in 0..1, ``None`` when nothing is allocated."""
        if self.allocated_gpus <= 0:
            return None
        return min(1.0, self.reporting_gpus / self.allocated_gpus)

    @property
    def utilization(self) -> float | None:
        """``busy / reporting`` in 0..1, ``None`` = no data."""
        if self.busy_gpu_equivalents is None or self.reporting_gpus <= 0:
            return None
        return self.busy_gpu_equivalents / self.reporting_gpus


@dataclass(frozen=True)
class UsageSnapshot:
    """What :func:`usage_snapshot` returns.

    Fields:
        jobs: one :class:`JobUsage` per given job (in the given order), reporting or not.
        teams: one per team with allocated or reporting GPUs, sorted by team.
        unattributed: GPUs whose series carry no namespace/pod, or a namespace that is
            no team (``None`` when there are none).
        dropped: impossible samples dropped, by metric name.
        unknown_namespaces: namespaces seen in series that are no team, sorted.
    """

    jobs: tuple[JobUsage, ...]
    teams: tuple[JobUsage, ...]
    unattributed: JobUsage | None
    dropped: Mapping[str, int]
    unknown_namespaces: tuple[str, ...]


def usage_snapshot(
    samples: Iterable[Sample],
    *,
    jobs: Iterable[JobAllocation],
    teams: Iterable[str],
    aliases: Mapping[str, DcgmMetric] = DCGM_METRICS,
) -> UsageSnapshot:
    """Attribute DCGM samples to the portal's teams and jobs.

    Inputs: ``samples`` (as for :func:`utilization`), ``jobs`` holding GPUs now (their
    allocation is what the portal admitted, whether their GPUs report or not), ``teams``
    (namespaces that are teams).

    Method:
        1. A pod belongs to the active job of its namespace whose name followed by "-"
           is the longest prefix of the pod's name.
        2. Series whose namespace is no team lose their namespace/pod and so go to the
           unattributed bucket (never a team named ""), as do series without them.
        3. :func:`utilization` then does units, MIG instances, time slicing (each job's
           ``replicas``), metric preference, dropping and per-pod capping.
        4. A job's allocated GPUs = ``units / replicas``; its reporting GPUs never
           exceed that. A job with no valid sample reports 0 GPUs and ``None`` busy.
        5. A team row adds its jobs and the pods of its namespace that no job owns.

    Raises :class:`ValueError` for a job with units < 0, units_per_pod < 1 or
    replicas < 1, or a job without team or name.
    """
    team_set = set(teams)
    job_list = list(jobs)
    by_team: dict[str, list[JobAllocation]] = defaultdict(list)
    for j in job_list:
        if not j.team or not j.job:
            raise ValueError("a job allocation needs a team and a job name")
        if j.units < 0 or j.units_per_pod < 1 or j.replicas < 1:
            raise ValueError(f"{j.team}/{j.job}: units must be >= 0, units_per_pod and "
                             "replicas >= 1")
        by_team[j.team].append(j)
    for team_jobs in by_team.values():
        team_jobs.sort(key=lambda j: len(j.job), reverse=True)  # longest prefix first

    kept: list[Sample] = []
    unknown: set[str] = set()
    owner: dict[tuple[str, str], JobAllocation] = {}
    for s in samples:
        ns, pod = _first(s.labels, NAMESPACE_LABELS), _first(s.labels, POD_LABELS)
        if ns and pod and ns not in team_set:
            unknown.add(ns)
            s = Sample(s.metric, {k: v for k, v in s.labels.items()
                                  if k not in NAMESPACE_LABELS and k not in POD_LABELS},
                       s.value, s.timestamp)
        elif ns and pod and (ns, pod) not in owner:
            for j in by_team.get(ns, ()):
                if pod.startswith(j.job + "-"):
                    owner[(ns, pod)] = j
                    break
        kept.append(s)

    flavor_keys = {j.key if j.key is not None else (j.team, j.job): j for j in job_list}
    # one pseudo-flavor per job so that each job's replicas apply to its own pods
    pseudo = {id(j): f"job:{i}" for i, j in enumerate(flavor_keys.values())}
    allocations = [PodAllocation(ns, pod, j.units_per_pod, pseudo[id(j)])
                   for (ns, pod), j in owner.items()]
    report = utilization(
        kept, allocations=allocations,
        pod_jobs={key: j.job for key, j in owner.items()},
        replicas_per_gpu={pseudo[id(j)]: j.replicas for j in flavor_keys.values()},
        aliases=aliases,
    )
    rows = {(r.team, r.job): r for r in report.jobs}
    job_rows: list[JobUsage] = []
    team_acc: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0.0])
    matched_names = set()
    for j in job_list:
        allocated = j.units / j.replicas
        row = rows.get((j.team, j.job))
        matched_names.add((j.team, j.job))
        reporting = min(row.reporting_gpus, allocated) if row else 0.0
        busy = row.busy_gpu_equivalents if row and reporting > 0 else None
        if busy is not None and row.reporting_gpus > allocated:
            busy = busy * allocated / row.reporting_gpus
        job_rows.append(JobUsage(j.team, j.job, j.key, allocated, reporting, busy))
        acc = team_acc[j.team]
        acc[0] += allocated
        acc[1] += reporting
        if busy is not None:
            acc[2] += busy
            acc[3] += 1
    for (team, job), row in rows.items():
        if (team, job) in matched_names or row.busy_gpu_equivalents is None:
            continue
        # pods of a team namespace that no active job owns: their GPUs are held
        acc = team_acc[team]
        acc[0] += row.reporting_gpus
        acc[1] += row.reporting_gpus
        acc[2] += row.busy_gpu_equivalents
        acc[3] += 1
        acc[4] += row.reporting_gpus
    team_rows = tuple(
        JobUsage(team, None, None, a, r, b if n else None, unmatched)
        for team, (a, r, b, n, unmatched) in sorted(team_acc.items())
    )
    un = report.unattributed
    unattributed = None
    if un is not None:
        unattributed = JobUsage(None, None, None, 0.0, un.reporting_gpus,
                                un.busy_gpu_equivalents)
    return UsageSnapshot(
        jobs=tuple(job_rows), teams=team_rows, unattributed=unattributed,
        dropped=dict(report.dropped), unknown_namespaces=tuple(sorted(unknown)),
    )
