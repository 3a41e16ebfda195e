"""Replay a real GPU-cluster trace through the portal's REST API (``manage.py replay_trace``).

Everything here talks to a portal over HTTP only (a ``requests`` Session with
token auth), so the same code replays into the local portal or a remote one:

1. :func:`ensure_teams` (``--create-teams``): a cohort, one team per virtual
   cluster of the trace and each team's quota on the flavor, sized by its share
   of GPU-hours (:func:`queues.traces.nominal_quotas`: largest remainder, the
   sum equals the capacity), no borrowing limit (a team can borrow what the
   rest of the cohort lends: large jobs of a small team can still run);
2. :func:`submit_jobs`: ``POST /api/v1/jobs/`` for each trace job at its
   submit time divided by ``speed`` (seconds after the first replayed job), as
   a gang :func:`queues.traces.gang_shape` of the flavor's GPUs per node;
3. :func:`poll_jobs`: ``GET /api/v1/jobs/?team=`` until every submitted job is
   in a final phase (or the timeout);
4. :func:`summarize`: per team, jobs submitted, admitted, finished, and the
   mean and p95 wait (``admitted_at - submitted_at``, seconds of wall time).

How a trace job becomes a portal job (:func:`job_payload`): name
``<prefix>-<job_id>`` (``trace-31567``), team ``<format>-<vc>``
(``philly-6214e9``), ``command: ["sleep", "<duration>"]`` (what the job would
do on a real cluster), the simulator's fields ``sim_duration_seconds`` = the
trace duration rounded up to whole seconds and ``sim_outcome`` =
:data:`SIM_OUTCOME` of the drawn outcome (``completed`` -> ``Succeeded``,
``failed`` and ``cancelled`` -> ``Failed``: the simulated cluster ends a job
only as Succeeded or Failed), so a simulated cluster runs each job for its
trace duration and ends it as drawn; and the trace facts as environment
variables: ``TRACE_FORMAT``, ``TRACE_JOB_ID``, ``TRACE_VC``,
``TRACE_DURATION_SECONDS``, ``TRACE_OUTCOME`` (``completed``/``cancelled``/
``failed``). ``max_runtime_seconds`` (``activeDeadlineSeconds``) is left unset:
a deadline equal to the duration would race the job's own end (and a job
whose duration exceeds its deadline fails with ``DeadlineExceeded``), and the
trace records no limit.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TextIO
from urllib.parse import urljoin

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from queues.traces import TraceJob, gang_shape, nominal_quotas

#: Phases after which a job never changes (``portal.models.Job.FINAL_PHASES``).
FINAL_PHASES = frozenset({"Succeeded", "Failed", "Cancelled"})
#: The simulated cluster's outcome (``sim_outcome``) of a trace outcome
#: (:data:`queues.traces.OUTCOME_MIX`); the simulator knows only Succeeded and Failed,
#: and a cancelled trace job did not succeed.
SIM_OUTCOME = {"completed": "Succeeded", "failed": "Failed", "cancelled": "Failed"}
#: Longest job name the Job API accepts (``queues.jobs.MAX_NAME_LENGTH``).
MAX_JOB_NAME = 47


class ReplayError(Exception):
    """The replay cannot go on: the portal refused a setup step or is unreachable.

    ``field`` names the option or API field at fault; ``message`` says why.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class PortalClient:
    """A token-authenticated ``requests.Session`` on a portal's ``/api/v1/``.

    Connection errors (refused, reset before the request was sent, DNS) are
    retried ``retries`` times with exponential backoff (``backoff`` * 2^n
    seconds) by urllib3's ``Retry`` on every method: a request that never
    reached the server is safe to send again, and so is one the API's throttle
    refused (429, sent again after its ``Retry-After``). Other answers are
    returned as they are (no retry on 4xx/5xx). ``timeout``: seconds per request.
    """

    def __init__(self, api_url: str, token: str, *, retries: int = 5, backoff: float = 0.2,
                 timeout: float = 60.0) -> None:
        self.base = api_url.rstrip("/") + "/"
        self.timeout = timeout
        self._token = token
        # A 429 (the API's throttle) was not processed: retried after its Retry-After.
        self._retry = Retry(total=retries, connect=retries, read=0, redirect=0,
                            status=retries, status_forcelist=(429,), other=0,
                            allowed_methods=None, backoff_factor=backoff,
                            respect_retry_after_header=True, raise_on_status=False)
        self._local = threading.local()

    @property
    def session(self) -> requests.Session:
        """This thread's Session (``requests`` does not promise a Session is safe to share
        between threads; :func:`submit_jobs` with ``concurrency`` > 1 posts from a pool)."""
        session = getattr(self._local, "session", None)
        if session is None:
            session = requests.Session()
            session.headers.update({"Authorization": f"Token {self._token}",
                                    "Accept": "application/json"})
            adapter = HTTPAdapter(max_retries=self._retry)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            self._local.session = session
        return session

    def request(self, method: str, path: str, **kwargs) -> requests.Response:
        """``method`` on ``<api_url>/<path>``; raises :class:`ReplayError` (field
        ``api_url``) when the portal cannot be reached after the retries."""
        url = urljoin(self.base, path.lstrip("/"))
        try:
            return self.session.request(method, url, timeout=self.timeout, **kwargs)
        except requests.ConnectionError as exc:
            raise ReplayError("api_url", f"cannot reach {url}: {exc}") from exc

    def get_json(self, path: str, **params):
        """``GET`` -> parsed JSON; raises :class:`ReplayError` for a non-200 answer."""
        response = self.request("GET", path, params=params or None)
        if response.status_code != 200:
            raise ReplayError(path, f"HTTP {response.status_code}: {_text(response)}")
        return response.json()

    def get_all(self, path: str, **params) -> list:
        """Every row of a paged list (``GET`` with the largest page, then each ``Link:
        rel="next"``); raises :class:`ReplayError` for a non-200 answer."""
        rows: list = []
        response = self.request("GET", path, params={"page_size": 1000, **params})
        while True:
            if response.status_code != 200:
                raise ReplayError(path, f"HTTP {response.status_code}: {_text(response)}")
            rows += response.json()
            following = response.links.get("next", {}).get("url")
            if not following:
                return rows
            response = self.request("GET", following)

    def post_json(self, path: str, body: dict, *, expect: int = 201):
        """``POST`` JSON -> parsed JSON; raises :class:`ReplayError` for another status
        (the message carries the API's field errors)."""
        response = self.request("POST", path, json=body)
        if response.status_code != expect:
            raise ReplayError(path, f"HTTP {response.status_code}: {_text(response)}")
        return response.json()


def _text(response: requests.Response) -> str:
    try:
        return str(response.json())
    except ValueError:
        return response.text[:500]


# --- mapping ------------------------------------------------------------------------


def team_slug(fmt: str, vc: str) -> str:
    """The portal team of a virtual cluster: ``<format>-<vc>`` (``philly-6214e9``)."""
    return f"{fmt}-{vc}"


def job_name(prefix: str, job: TraceJob) -> str:
    """``<prefix>-<job_id>`` (``trace-31567``), a DNS-1123 label for the Job API."""
    return f"{prefix}-{job.job_id}"


def job_payload(job: TraceJob, *, fmt: str, flavor: str, gpus_per_node: int, image: str,
                name_prefix: str = "trace", priority: str | None = None) -> dict:
    """The ``POST /api/v1/jobs/`` body for a trace job (see the module docstring).

    ``gpus_per_node``: the flavor's GPUs per node (gang shape); ``image``:
    container image reference; ``priority``: a priority class name or ``None``.
    """
    workers, per_worker = gang_shape(job.gpus, gpus_per_node)
    seconds = max(1, math.ceil(job.duration_seconds))
    body = {
        "team": team_slug(fmt, job.vc),
        "name": job_name(name_prefix, job),
        "image": image,
        "command": ["sleep", str(seconds)],
        "env": [
            {"name": "TRACE_FORMAT", "value": fmt},
            {"name": "TRACE_JOB_ID", "value": job.job_id},
            {"name": "TRACE_VC", "value": job.vc},
            {"name": "TRACE_DURATION_SECONDS", "value": str(seconds)},
            {"name": "TRACE_OUTCOME", "value": job.outcome},
        ],
        "workers": workers,
        "gpus_per_worker": per_worker,
        "flavor": flavor,
        "sim_duration_seconds": seconds,
        "sim_outcome": SIM_OUTCOME[job.outcome],
    }
    if priority:
        body["priority"] = priority
    return body


# --- teams and quotas ----------------------------------------------------------------


@dataclass(frozen=True)
class FlavorInfo:
    """A flavor as the API shows it: name, cluster, physical GPUs, GPUs per node."""

    name: str
    cluster: str
    physical_gpus: int
    gpus_per_node: int


def find_flavor(client: PortalClient, *, flavor: str, cluster: str | None) -> FlavorInfo:
    """The flavor named ``flavor`` (in ``cluster`` when given) from ``GET /api/v1/flavors/``.

    Raises :class:`ReplayError` (field ``flavor``) when there is none or the
    name is in several clusters and ``cluster`` is not given.
    """
    rows = [row for row in client.get_json("/api/v1/flavors/")
            if row["name"] == flavor and (not cluster or row["cluster"] == cluster)]
    if not rows:
        where = f" in cluster '{cluster}'" if cluster else ""
        raise ReplayError("flavor", f"no GPU flavor '{flavor}'{where}")
    if len(rows) > 1:
        raise ReplayError("flavor", f"flavor '{flavor}' is in several clusters "
                                    f"({', '.join(r['cluster'] for r in rows)}): give --cluster")
    row = rows[0]
    return FlavorInfo(name=row["name"], cluster=row["cluster"],
                      physical_gpus=int(row["physical_gpus"]),
                      gpus_per_node=int(row["gpus_per_node"]))


@dataclass(frozen=True)
class TeamPlan:
    """What :func:`ensure_teams` did for one virtual cluster.

    ``gpu_hours``: its GPU-hours in the replayed jobs; ``nominal_gpus``: its
    quota on the flavor; ``created``: the team was created; ``changed``: its
    quota was set by an approved request.
    """

    vc: str
    team: str
    gpu_hours: float
    nominal_gpus: int
    created: bool
    changed: bool


def ensure_teams(
    client: PortalClient, *, fmt: str, gpu_hours: Mapping[str, float], flavor: FlavorInfo,
    cohort: str, capacity: int | None = None,
) -> list[TeamPlan]:
    """Create (or reuse) a cohort, one team per virtual cluster and their quotas, via the API.

    ``gpu_hours``: VC -> GPU-hours of the jobs to replay; ``capacity``: GPUs to
    share out (default the flavor's physical GPUs). Quotas:
    :func:`queues.traces.nominal_quotas` (largest remainder, summing to
    ``capacity``), no borrowing or lending limit, all teams in ``cohort`` so
    each can borrow what the others lend. A quota is set by a request
    (``POST /api/v1/quota-requests/``) that is approved at once with
    ``allow_overcommit`` (teams outside the trace may already hold quota on
    the flavor); teams whose quota already matches are left alone, and
    decreases go first. Needs a staff token. Raises :class:`ReplayError` with
    the API's message when a step is refused.
    """
    capacity = flavor.physical_gpus if capacity is None else capacity
    quotas = nominal_quotas(gpu_hours, capacity)
    cohorts = client.get_json("/api/v1/cohorts/")
    if not any(c["name"] == cohort and c["cluster"] == flavor.cluster for c in cohorts):
        client.post_json("/api/v1/cohorts/", {"cluster": flavor.cluster, "name": cohort})
    existing = {t["slug"]: t for t in client.get_json("/api/v1/teams/")}
    created: set[str] = set()
    current: dict[str, int | None] = {}
    for vc in quotas:
        slug = team_slug(fmt, vc)
        team = existing.get(slug)
        if team is None:
            team = client.post_json("/api/v1/teams/", {
                "slug": slug, "name": f"{fmt} VC {vc}", "cluster": flavor.cluster,
                "cohort": cohort})
            created.add(vc)
        grant = next((q for q in team.get("quotas", []) if q["flavor"] == flavor.name), None)
        same = grant is not None and (grant["nominal_gpus"], grant["borrowing_limit_gpus"],
                                      grant["lending_limit_gpus"]) == (quotas[vc], None, None)
        current[vc] = None if same else (grant["nominal_gpus"] if grant else -1)
    changed: set[str] = set()
    # Decreases first, so that the nominal sum overshoots the capacity as little as possible.
    for vc in sorted((v for v in quotas if current[v] is not None),
                     key=lambda v: quotas[v] - current[v]):
        request = client.post_json("/api/v1/quota-requests/", {
            "team": team_slug(fmt, vc), "flavor": flavor.name, "nominal_gpus": quotas[vc],
            "justification": f"Trace replay: {gpu_hours[vc]:.1f} GPU-hours of the replayed "
                             f"jobs, its share of {capacity} GPUs (largest remainder)."})
        client.post_json(f"/api/v1/quota-requests/{request['id']}/approve/",
                         {"allow_overcommit": True, "comment": "trace replay"}, expect=200)
        changed.add(vc)
    return [TeamPlan(vc=vc, team=team_slug(fmt, vc), gpu_hours=gpu_hours[vc],
                     nominal_gpus=quotas[vc], created=vc in created, changed=vc in changed)
            for vc in quotas]


# --- submitting -------------------------------------------------------------------


@dataclass
class Submission:
    """One trace job's submission: the job, its team, and the API's answer.

    ``job_id``: the portal's job id (``None`` when refused); ``status``: HTTP
    status; ``errors``: the API's ``{field: [message]}`` (or ``{"detail": ...}``)
    when refused; ``late``: seconds the POST went out after its scheduled time.
    """

    job: TraceJob
    team: str
    job_id: int | None = None
    status: int = 0
    errors: dict = field(default_factory=dict)
    late: float = 0.0


def submit_jobs(
    client: PortalClient, jobs: Iterable[TraceJob], *, speed: float,
    payload: Callable[[TraceJob], dict], progress=None,
    clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
    concurrency: int = 1,
) -> list[Submission]:
    """POST every job at ``(submit_time - first submit_time) / speed`` seconds after the start.

    ``speed``: time compression factor (> 0; 3600 = an hour of trace per
    second). Jobs are released in trace order; a job whose time has passed
    goes at once (its lateness, seconds between its due time and its POST, is
    recorded). ``concurrency``: POSTs in flight at once (>= 1; a thread pool
    of that many workers, each with its own Session): with 1 they go one after
    another; more keep the schedule when one POST takes longer than the gap
    between jobs (at high ``speed`` the portal's answer time, not the trace,
    sets the pace). The result is in trace order whatever the concurrency. A
    refusal (4xx) is recorded with the API's field errors and the replay goes
    on; a portal that cannot be reached raises :class:`ReplayError`.
    ``progress``: an object with ``update(n)`` and ``set_postfix_str(s)`` (a
    tqdm bar) or ``None``. Raises :class:`ReplayError` (field ``speed`` or
    ``concurrency``) for a bad value.
    """
    if not speed > 0:
        raise ReplayError("speed", f"must be > 0, got {speed}")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ReplayError("concurrency", f"must be a whole number >= 1, got {concurrency!r}")
    lock = threading.Lock()
    refused = 0

    def post(job: TraceJob, due: float) -> Submission:
        nonlocal refused
        body = payload(job)
        record = Submission(job=job, team=body["team"], late=max(0.0, clock() - due))
        response = client.request("POST", "/api/v1/jobs/", json=body)
        record.status = response.status_code
        if response.status_code == 201:
            record.job_id = response.json()["id"]
        else:
            try:
                detail = response.json()
            except ValueError:
                detail = {"detail": response.text[:500]}
            record.errors = detail if isinstance(detail, dict) else {"detail": detail}
        if progress is not None:
            with lock:
                refused += record.job_id is None
                progress.update(1)
                if refused:
                    progress.set_postfix_str(f"refused {refused}")
        return record

    start = clock()
    first: float | None = None
    if concurrency == 1:
        done: list[Submission] = []
        for job in jobs:
            first = job.submit_time if first is None else first
            due = start + (job.submit_time - first) / speed
            wait = due - clock()
            if wait > 0:
                sleep(wait)
            done.append(post(job, due))
        return done
    futures = []
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="replay-post") as pool:
        try:
            for job in jobs:
                first = job.submit_time if first is None else first
                due = start + (job.submit_time - first) / speed
                # Hold the release so no more than `concurrency` POSTs wait in the pool's
                # queue: lateness then measures the portal, not a backlog of our own making.
                while sum(1 for f in futures[-2 * concurrency:] if not f.done()) >= concurrency:
                    sleep(0.005)
                wait = due - clock()
                if wait > 0:
                    sleep(wait)
                futures.append(pool.submit(post, job, due))
        except BaseException:
            for future in futures:
                future.cancel()
            raise
    return [future.result() for future in futures]


# --- waiting ------------------------------------------------------------------------


def poll_jobs(
    client: PortalClient, submissions: list[Submission], *, timeout: float,
    interval: float = 2.0, progress=None, clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[dict[int, dict], bool]:
    """Read the submitted jobs (``GET /api/v1/jobs/?team=``, one request per team still
    waiting) until all are in a final phase or ``timeout`` seconds have passed.

    Returns ``({job id: the job as the API shows it}, all_final)``.
    ``progress``: ``update(n)`` gets the number of jobs that became final.
    """
    wanted = {s.job_id: s.team for s in submissions if s.job_id is not None}
    latest: dict[int, dict] = {}
    final: set[int] = set()
    deadline = clock() + timeout
    while True:
        teams = sorted({team for job_id, team in wanted.items() if job_id not in final})
        for team in teams:
            for row in client.get_all("/api/v1/jobs/", team=team):
                if row["id"] in wanted:
                    latest[row["id"]] = row
                    if row["phase"] in FINAL_PHASES and row["id"] not in final:
                        final.add(row["id"])
                        if progress is not None:
                            progress.update(1)
        if len(final) == len(wanted):
            return latest, True
        if clock() >= deadline:
            return latest, False
        sleep(min(interval, max(0.0, deadline - clock())))


# --- summary ------------------------------------------------------------------------


def p95(values: list[float]) -> float | None:
    """The 95th percentile by the nearest-rank method: the ``ceil(0.95 n)``-th smallest
    value (NIST/Hyndman & Fan definition 1; a value that occurred). ``None`` if empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[math.ceil(0.95 * len(ordered)) - 1]


def _when(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


@dataclass(frozen=True)
class TeamSummary:
    """Per team: jobs ``submitted`` (accepted by the API), ``refused``, ``admitted`` (have
    ``admitted_at``), ``finished`` (in a final phase), and the wait of the admitted
    ones (``admitted_at - submitted_at``, seconds of wall time): ``mean_wait``,
    ``p95_wait`` (nearest rank), ``None`` when none was admitted."""

    team: str
    submitted: int
    refused: int
    admitted: int
    finished: int
    mean_wait: float | None
    p95_wait: float | None


def summarize(submissions: list[Submission], latest: Mapping[int, dict]) -> list[TeamSummary]:
    """One :class:`TeamSummary` per team (sorted by slug) and a last one for ``all``."""
    groups: dict[str, list[Submission]] = {}
    for record in submissions:
        groups.setdefault(record.team, []).append(record)

    def one(team: str, records: list[Submission]) -> TeamSummary:
        waits: list[float] = []
        admitted = finished = 0
        for record in records:
            row = latest.get(record.job_id) if record.job_id is not None else None
            if row is None:
                continue
            admitted_at, submitted_at = _when(row.get("admitted_at")), _when(row["submitted_at"])
            if admitted_at is not None:
                admitted += 1
                waits.append(max(0.0, (admitted_at - submitted_at).total_seconds()))
            if row["phase"] in FINAL_PHASES:
                finished += 1
        accepted = sum(1 for r in records if r.job_id is not None)
        return TeamSummary(team=team, submitted=accepted, refused=len(records) - accepted,
                           admitted=admitted, finished=finished,
                           mean_wait=sum(waits) / len(waits) if waits else None,
                           p95_wait=p95(waits))

    rows = [one(team, groups[team]) for team in sorted(groups)]
    rows.append(one("all", submissions))
    return rows


def write_summary(out: TextIO, rows: list[TeamSummary], submissions: list[Submission]) -> None:
    """Print the per-team table and the most common refusal messages."""
    def secs(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    out.write(f"{'team':<24} {'submitted':>9} {'refused':>7} {'admitted':>8} {'finished':>8} "
              f"{'mean wait s':>11} {'p95 wait s':>10}\n")
    for row in rows:
        out.write(f"{row.team:<24} {row.submitted:>9} {row.refused:>7} {row.admitted:>8} "
                  f"{row.finished:>8} {secs(row.mean_wait):>11} {secs(row.p95_wait):>10}\n")
    reasons: dict[str, int] = {}
    for record in submissions:
        for key, messages in record.errors.items():
            text = messages[0] if isinstance(messages, list) and messages else messages
            reasons[f"{key}: {text}"] = reasons.get(f"{key}: {text}", 0) + 1
    for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1])[:5]:
        out.write(f"refused x{count}: {reason}\n")
