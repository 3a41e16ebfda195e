"""Real GPU-cluster job traces: readers, gang shapes and quota sizing for replays.

Pure: no Django, no ``kubernetes``. Two public trace formats are read (see
``../shared/traces/README.md`` for their provenance and caveats):

* ``philly`` -- the Microsoft Philly trace as published with Pollux
  (``philly.csv``: ``timestamp,duration,num_gpus,gpu_time,cluster``; the
  ``cluster`` column is the Philly virtual cluster, the team). The rows are
  not sorted and hold 65 exact duplicates: :func:`read_philly` sorts by
  submit time and drops every exact duplicate after its first occurrence.
  Timestamps are US-Pacific wall clock (Philly's logs) and are converted
  with ``America/Los_Angeles`` so that seconds between two submissions are
  real elapsed seconds across the DST change of 2017-11-05 (an ambiguous
  wall time in the repeated hour is read as its first occurrence).
  The file carries no job id: a job's ``job_id`` is its 1-based data row
  number in the file (stable whatever ``since``/``limit`` select).
* ``elasticflow`` -- Microsoft ITP traces behind ElasticFlow
  (``clusterNN.csv``: ``job_id,submission_time,duration,num_gpu``), one file
  per physical cluster, each sorted by ``submission_time`` (seconds from the
  start of collection). The traces have no team field: each file is taken as
  one synthetic "team" (``vc`` = the file name without ``.csv``) and the files
  of a folder are merged on ``submission_time`` (a streaming k-way merge).

Neither trace records how a job ended. Every :class:`TraceJob` carries an
``outcome`` drawn deterministically (a hash of the format and job id, no
random state) from the published Philly mix for GPU jobs: 60.4 % completed,
9.0 % cancelled, 30.5 % failed (Jeon et al., ATC'19, as tabulated in
``InternLM/AcmeTrace:data/cluster_summary.csv``; normalised by their sum
99.9 %).

Rows that cannot be replayed are skipped and counted in
:class:`TraceStats.skipped` under ``"<column>: <reason>"`` (0 GPUs, a
duration that is not a positive number, ...). A file whose header lacks a
column, or an ElasticFlow file whose rows are out of order, raises
:class:`TraceError` naming it.
"""

from __future__ import annotations

import csv
import hashlib
import heapq
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from pathlib import Path
from zoneinfo import ZoneInfo

__all__ = [
    "ELASTICFLOW",
    "FORMATS",
    "OUTCOME_MIX",
    "PHILLY",
    "PHILLY_TIMEZONE",
    "TraceError",
    "TraceJob",
    "TraceStats",
    "draw_outcome",
    "gang_shape",
    "gpu_hours_by_vc",
    "nominal_quotas",
    "parse_since",
    "read_elasticflow",
    "read_philly",
    "read_trace",
]

PHILLY = "philly"
ELASTICFLOW = "elasticflow"
#: The trace formats :func:`read_trace` knows.
FORMATS = (PHILLY, ELASTICFLOW)

#: Philly logs are US-Pacific wall clock (trace README).
PHILLY_TIMEZONE = ZoneInfo("America/Los_Angeles")
PHILLY_TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
ELASTICFLOW_COLUMNS = ("job_id", "submission_time", "duration", "num_gpu")

#: Final states of Philly GPU jobs (ATC'19): completed 60.4 %, cancelled 9.0 %,
#: failed 30.5 % (the published figures sum to 99.9 %; drawn proportionally).
OUTCOME_MIX: tuple[tuple[str, Fraction], ...] = (
    ("completed", Fraction(604, 1000)),
    ("cancelled", Fraction(90, 1000)),
    ("failed", Fraction(305, 1000)),
)

#: Team-ish ids must fit in a DNS-1123 label once prefixed (``philly-<vc>``).
_ID = re.compile(r"^[a-z0-9]([-a-z0-9]{0,46}[a-z0-9])?$")


class TraceError(ValueError):
    """A trace (or an option about it) that cannot be read: ``field`` names the column,
    option or file at fault; ``message`` says why."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace, as replayed.

    * ``job_id``: Philly: the 1-based data row number in the file (as a
      string); ElasticFlow: the trace's UUID.
    * ``vc``: the virtual cluster (team) it belongs to: Philly's ``cluster``
      hash, or the ElasticFlow file name (``cluster04``).
    * ``submit_time``: seconds from the trace start (Philly: the earliest valid
      timestamp in the file; ElasticFlow: the start of collection, 0).
    * ``gpus``: GPUs the job held (the gang size), >= 1.
    * ``duration_seconds``: run time in seconds, > 0.
    * ``outcome``: ``completed``, ``cancelled`` or ``failed`` (drawn, see
      :func:`draw_outcome`: neither trace records it).
    """

    job_id: str
    vc: str
    submit_time: float
    gpus: int
    duration_seconds: float
    outcome: str

    @property
    def gpu_hours(self) -> float:
        """``gpus * duration_seconds / 3600`` (GPU-hours)."""
        return self.gpus * self.duration_seconds / 3600.0

    def gang(self, gpus_per_node: int = 8) -> tuple[int, int]:
        """``(workers, gpus_per_worker)`` of this job's gang, see :func:`gang_shape`."""
        return gang_shape(self.gpus, gpus_per_node)


@dataclass
class TraceStats:
    """What a reader did with the rows it read (filled while iterating).

    ``rows``: data rows read (blank lines not counted); ``duplicates``: exact
    duplicates dropped; ``skipped``: rows refused, by ``"<column>: <reason>"``;
    ``before_since``: valid rows submitted before ``since``; ``yielded``: jobs
    handed out; ``trace_start``: Philly's first valid timestamp (naive Pacific
    wall clock; ``None`` for ElasticFlow). With ``limit``, a streaming reader
    (ElasticFlow) stops reading after the last job it hands out, so the counts
    cover only the rows read.
    """

    rows: int = 0
    duplicates: int = 0
    skipped: Counter = field(default_factory=Counter)
    before_since: int = 0
    yielded: int = 0
    trace_start: datetime | None = None

    @property
    def skipped_total(self) -> int:
        """Rows skipped for a bad field, all reasons together."""
        return sum(self.skipped.values())


# --- gang shape and quota sizing ---------------------------------------------------


def gang_shape(gpus: int, gpus_per_node: int = 8) -> tuple[int, int]:
    """``(workers, gpus_per_worker)`` for a job of ``gpus`` GPUs on nodes of
    ``gpus_per_node`` GPUs (Philly: 8).

    ``workers = ceil(gpus / gpus_per_node)`` (the fewest nodes that hold the
    job) and ``gpus_per_worker = ceil(gpus / workers)`` (the GPUs spread evenly
    over them). This is the issue's "ceil(GPUs/8) workers of min(GPUs, 8) GPUs"
    whenever ``gpus <= 8`` or ``gpus`` is a multiple of 8 (every size in both
    traces except Philly's 7 jobs of 12 GPUs). For other sizes a gang must
    still be homogeneous (one pod template), so instead of rounding every
    worker up to a full node (12 -> 2 x 8 = 16, 4 GPUs held for nothing) the
    GPUs are spread evenly (12 -> 2 x 6 = 12, exact); when they do not divide
    evenly the per-worker count rounds up (13 -> 2 x 7 = 14, at most
    ``workers - 1`` extra GPUs, never more than a node holds).

    Raises ``ValueError`` for ``gpus < 1`` or ``gpus_per_node < 1``.
    """
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise ValueError(f"gpus must be a whole number >= 1, got {gpus!r}")
    if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int) or gpus_per_node < 1:
        raise ValueError(f"gpus_per_node must be a whole number >= 1, got {gpus_per_node!r}")
    workers = -(-gpus // gpus_per_node)
    return workers, -(-gpus // workers)


def gpu_hours_by_vc(jobs: Iterable[TraceJob]) -> dict[str, float]:
    """GPU-hours (``gpus * duration / 3600``) per virtual cluster, in first-seen order."""
    hours: dict[str, float] = {}
    for job in jobs:
        hours[job.vc] = hours.get(job.vc, 0.0) + job.gpu_hours
    return hours


def nominal_quotas(gpu_hours: Mapping[str, float], capacity: int) -> dict[str, int]:
    """Nominal GPUs per virtual cluster from its share of GPU-hours, summing to ``capacity``.

    Each VC's exact share is ``capacity * hours / total``; every VC gets the
    whole part, and the GPUs left over go one each to the VCs with the
    largest fractional parts (the largest remainder, or Hamilton, method:
    Balinski & Young, *Fair Representation*, 2001; ties go to the VC with
    more GPU-hours, then to the smaller name). The result sums to exactly
    ``capacity`` and no VC is more than one GPU away from its exact share.
    A VC with a tiny share may get 0 (it can still borrow in a cohort).
    Arithmetic is exact (fractions of the given floats).

    ``gpu_hours``: VC -> GPU-hours (>= 0, finite); ``capacity``: GPUs (int >= 0).
    Returns VC -> GPUs in the order of ``gpu_hours``. Raises ``ValueError`` for
    a negative or non-finite figure, a negative capacity, or no GPU-hours at
    all with ``capacity > 0``.
    """
    if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
        raise ValueError(f"capacity must be a whole number >= 0, got {capacity!r}")
    exact_hours: dict[str, Fraction] = {}
    for vc, hours in gpu_hours.items():
        if not math.isfinite(hours) or hours < 0:
            raise ValueError(f"GPU-hours of {vc!r} must be finite and >= 0, got {hours!r}")
        exact_hours[vc] = Fraction(hours)
    total = sum(exact_hours.values(), Fraction(0))
    if total == 0:
        if capacity == 0:
            return dict.fromkeys(exact_hours, 0)
        raise ValueError("no GPU-hours to share the capacity by")
    shares = {vc: capacity * hours / total for vc, hours in exact_hours.items()}
    quotas = {vc: math.floor(share) for vc, share in shares.items()}
    left = capacity - sum(quotas.values())
    ranked = sorted(shares, key=lambda vc: (-(shares[vc] - quotas[vc]), -exact_hours[vc], vc))
    for vc in ranked[:left]:
        quotas[vc] += 1
    return quotas


# --- outcomes ---------------------------------------------------------------------


def draw_outcome(fmt: str, job_id: str) -> str:
    """The outcome of a job, drawn from :data:`OUTCOME_MIX` by a hash of ``fmt`` and
    ``job_id``: the same job always gets the same outcome, across runs and machines.

    ``u = int(sha256(f"{fmt}:{job_id}")[:8 bytes]) / 2**64`` in [0, 1) is
    compared with the cumulative mix (normalised by its sum).
    """
    digest = hashlib.sha256(f"{fmt}:{job_id}".encode()).digest()
    u = Fraction(int.from_bytes(digest[:8], "big"), 2**64)
    total = sum(share for _, share in OUTCOME_MIX)
    cumulative = Fraction(0)
    for name, share in OUTCOME_MIX:
        cumulative += share / total
        if u < cumulative:
            return name
    return OUTCOME_MIX[-1][0]


# --- since ------------------------------------------------------------------------


def parse_since(value: str | float | int | None) -> float | datetime | None:
    """``--since`` as seconds from the trace start (``"3600"``, ``"1.5e4"``) or a
    timestamp (``"2017-10-09 07:01:55"`` or ISO ``2017-10-09T07:01:55``, naive:
    the trace's own wall clock). ``None``/``""`` -> ``None``.

    Raises :class:`TraceError` (field ``since``) for anything else or a
    negative number.
    """
    if value is None or value == "":
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        text = str(value).strip()
        try:
            seconds = float(text)
        except ValueError:
            seconds = None
        if seconds is None:
            try:
                stamp = datetime.fromisoformat(text)
            except ValueError:
                raise TraceError("since", f"{value!r} is neither seconds from the trace start "
                                          "nor a timestamp like 2017-10-09 07:01:55") from None
            if stamp.tzinfo is not None:
                raise TraceError("since", "give the timestamp as the trace's wall clock, "
                                          "without a timezone")
            return stamp
    if not math.isfinite(seconds) or seconds < 0:
        raise TraceError("since", f"{value!r} must be a number of seconds >= 0")
    return seconds


# --- readers ----------------------------------------------------------------------


def _positive_number(text: str, column: str) -> tuple[float | None, str | None]:
    try:
        number = float(text)
    except ValueError:
        return None, f"{column}: not a number"
    if not math.isfinite(number) or number <= 0:
        return None, f"{column}: not > 0"
    return number, None


def _gpu_count(text: str, column: str) -> tuple[int | None, str | None]:
    text = text.strip()
    if not text.isascii() or not text.isdigit():
        return None, f"{column}: not a whole number"
    gpus = int(text)
    if gpus == 0:
        return None, f"{column}: 0 GPUs"
    return gpus, None


def _header(reader, path: Path, columns: tuple[str, ...]) -> dict[str, int]:
    try:
        header = [name.strip() for name in next(reader)]
    except StopIteration:
        raise TraceError(str(path), "empty file (no header)") from None
    missing = [c for c in columns if c not in header]
    if missing:
        raise TraceError(str(path), f"header lacks column(s) {', '.join(missing)}; "
                                    f"expected {','.join(columns)}")
    return {c: header.index(c) for c in columns}


def _select(jobs: Iterable[TraceJob], since: float | None, limit: int | None,
            stats: TraceStats) -> Iterator[TraceJob]:
    if limit is not None and limit <= 0:
        return
    for job in jobs:
        if since is not None and job.submit_time < since:
            stats.before_since += 1
            continue
        stats.yielded += 1
        yield job
        if limit is not None and stats.yielded >= limit:
            return


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise TraceError("limit", f"must be a whole number >= 0, got {limit!r}")


def read_philly(
    path: str | Path, *, since: float | datetime | None = None, limit: int | None = None,
    stats: TraceStats | None = None,
) -> Iterator[TraceJob]:
    """Jobs of a Philly (Pollux) ``philly.csv``, sorted by submit time, exact duplicates dropped.

    ``since``: seconds from the trace start, or a naive timestamp on the
    trace's Pacific wall clock: jobs submitted earlier are left out;
    ``limit``: at most that many jobs (after ``since``); ``stats``: filled as
    the rows are read. Ties in submit time keep file order. The whole file
    is read (and sorted) before the first job is yielded: the rows are not in
    time order; 82,247 rows take a few hundred milliseconds.

    Skipped rows (counted in ``stats.skipped``): a row without 5 columns
    (``row: ...``), a bad ``timestamp``, ``duration`` not a positive number,
    ``num_gpus`` not a whole number or 0, ``gpu_time`` not ``duration x
    num_gpus``, a ``cluster`` that is not lowercase letters, digits and ``-``.
    Raises :class:`TraceError` for a missing file or column, or a ``since``
    that is neither.
    """
    path = Path(path)
    stats = stats if stats is not None else TraceStats()
    _check_limit(limit)
    seen: set[tuple[str, ...]] = set()
    parsed: list[tuple[float, int, str, int, float]] = []  # (epoch, row, vc, gpus, duration)
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise TraceError(str(path), f"cannot read: {exc.strerror or exc}") from None
    with handle:
        reader = csv.reader(handle)
        col = _header(reader, path, PHILLY_COLUMNS)
        width = max(col.values()) + 1
        for row_number, row in enumerate(reader, start=1):
            if not row or all(not cell.strip() for cell in row):
                continue
            stats.rows += 1
            key = tuple(cell.strip() for cell in row)
            if key in seen:
                stats.duplicates += 1
                continue
            seen.add(key)
            if len(row) < width:
                stats.skipped[f"row: fewer than {width} columns"] += 1
                continue
            try:
                wall = datetime.strptime(row[col["timestamp"]].strip(), PHILLY_TIME_FORMAT)
            except ValueError:
                stats.skipped["timestamp: not YYYY-MM-DD HH:MM:SS"] += 1
                continue
            duration, error = _positive_number(row[col["duration"]], "duration")
            if error is None:
                gpus, error = _gpu_count(row[col["num_gpus"]], "num_gpus")
            if error is None:
                gpu_time, error = _positive_number(row[col["gpu_time"]], "gpu_time")
                if error is None and not math.isclose(gpu_time, duration * gpus, rel_tol=1e-9):
                    error = "gpu_time: not duration x num_gpus"
            vc = row[col["cluster"]].strip()
            if error is None and not _ID.match(vc):
                error = "cluster: not lowercase letters, digits and '-'"
            if error is not None:
                stats.skipped[error] += 1
                continue
            epoch = wall.replace(tzinfo=PHILLY_TIMEZONE).timestamp()
            parsed.append((epoch, row_number, vc, gpus, duration))
    if not parsed:
        return
    parsed.sort(key=lambda item: (item[0], item[1]))
    start_epoch = parsed[0][0]
    stats.trace_start = datetime.fromtimestamp(start_epoch, PHILLY_TIMEZONE).replace(tzinfo=None)
    if isinstance(since, datetime):
        since = since.replace(tzinfo=PHILLY_TIMEZONE).timestamp() - start_epoch
    jobs = (
        TraceJob(job_id=str(row_number), vc=vc, submit_time=epoch - start_epoch, gpus=gpus,
                 duration_seconds=duration, outcome=draw_outcome(PHILLY, str(row_number)))
        for epoch, row_number, vc, gpus, duration in parsed
    )
    yield from _select(jobs, since, limit, stats)


def _elasticflow_file(path: Path, order: int, stats: TraceStats,
                      seen: set[tuple[str, ...]]) -> Iterator[tuple[float, int, int, TraceJob]]:
    vc = path.stem.lower()
    if not _ID.match(vc):
        raise TraceError(str(path), "the file name (the team) must be lowercase letters, "
                                    "digits and '-'")
    try:
        handle = path.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise TraceError(str(path), f"cannot read: {exc.strerror or exc}") from None
    with handle:
        reader = csv.reader(handle)
        col = _header(reader, path, ELASTICFLOW_COLUMNS)
        width = max(col.values()) + 1
        previous = -math.inf
        for row_number, row in enumerate(reader, start=1):
            if not row or all(not cell.strip() for cell in row):
                continue
            stats.rows += 1
            key = (vc, *(cell.strip() for cell in row))
            if key in seen:
                stats.duplicates += 1
                continue
            seen.add(key)
            if len(row) < width:
                stats.skipped[f"row: fewer than {width} columns"] += 1
                continue
            job_id = row[col["job_id"]].strip().lower()
            submit_text = row[col["submission_time"]].strip()
            error = None
            try:
                submit = float(submit_text)
                if not math.isfinite(submit) or submit < 0:
                    error = "submission_time: not >= 0"
            except ValueError:
                error = "submission_time: not a number"
            if error is None:
                duration, error = _positive_number(row[col["duration"]], "duration")
            if error is None:
                gpus, error = _gpu_count(row[col["num_gpu"]], "num_gpu")
            if error is None and not _ID.match(job_id):
                error = "job_id: not lowercase letters, digits and '-'"
            if error is not None:
                stats.skipped[error] += 1
                continue
            if submit < previous:
                raise TraceError(f"{path}:{row_number + 1}",
                                 "rows are not sorted by submission_time")
            previous = submit
            yield submit, order, row_number, TraceJob(
                job_id=job_id, vc=vc, submit_time=submit, gpus=gpus,
                duration_seconds=duration, outcome=draw_outcome(ELASTICFLOW, job_id),
            )


def read_elasticflow(
    path: str | Path, *, since: float | None = None, limit: int | None = None,
    stats: TraceStats | None = None,
) -> Iterator[TraceJob]:
    """Jobs of ElasticFlow ITP traces: one ``clusterNN.csv``, or every ``*.csv`` of a folder
    merged on ``submission_time`` (ties: file name order, then row order).

    Streams: each file is read row by row and merged (``heapq.merge``), so
    ``limit`` stops reading early. ``vc`` is the file name without ``.csv``
    (one synthetic team per physical cluster). ``since``: seconds from the
    start of collection (a timestamp is refused: the trace has no absolute
    start date). Exact duplicate rows of a file are dropped. Skipped rows
    (counted): bad ``submission_time``, ``duration`` not a positive number,
    ``num_gpu`` not a whole number or 0, a ``job_id`` that is not lowercase
    letters, digits and ``-``. Raises :class:`TraceError` for a missing
    file/column, a folder without CSV files, rows out of order.
    """
    path = Path(path)
    stats = stats if stats is not None else TraceStats()
    _check_limit(limit)
    if isinstance(since, datetime):
        raise TraceError("since", "ElasticFlow traces have no absolute start date: give "
                                  "seconds from the start of collection")
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix == ".csv")
        if not files:
            raise TraceError(str(path), "no .csv files in this folder")
    elif path.is_file():
        files = [path]
    else:
        raise TraceError(str(path), "no such file or folder")
    seen: set[tuple[str, ...]] = set()
    streams = [_elasticflow_file(file, order, stats, seen) for order, file in enumerate(files)]
    jobs = (job for *_, job in heapq.merge(*streams, key=lambda item: item[:3]))
    yield from _select(jobs, since, limit, stats)


def read_trace(
    path: str | Path, fmt: str, *, since: float | datetime | None = None,
    limit: int | None = None, stats: TraceStats | None = None,
) -> Iterator[TraceJob]:
    """:func:`read_philly` or :func:`read_elasticflow` by ``fmt`` (one of :data:`FORMATS`).

    Raises :class:`TraceError` (field ``format``) for another format.
    """
    if fmt == PHILLY:
        return read_philly(path, since=since, limit=limit, stats=stats)
    if fmt == ELASTICFLOW:
        return read_elasticflow(path, since=since, limit=limit, stats=stats)
    raise TraceError("format", f"{fmt!r} is not one of {', '.join(FORMATS)}")
