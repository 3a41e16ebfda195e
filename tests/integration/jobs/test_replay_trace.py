"""``manage.py replay_trace`` against a live portal (pytest-django ``live_server``) over HTTP,
with a real Celery worker creating the jobs on the Kubernetes API emulator.

The first 50 Philly jobs are replayed at high speed with ``--create-teams``.
No scheduler simulator runs here yet, so no job is admitted or finishes:
the command runs with ``--no-wait`` and the test checks what the portal and
the cluster hold (teams, quotas, gang shapes, the simulator's duration and outcome).
"""

import io
import math
import time

import pytest
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from portal.models import ApiToken, Cluster, GpuFlavor, Job
from portal.replay import (
    PortalClient,
    ReplayError,
    Submission,
    ensure_teams,
    find_flavor,
    job_payload,
    submit_jobs,
)
from portal.services.tokens import token_issue
from queues.cluster import KubernetesCluster
from queues.traces import TraceJob, gang_shape, gpu_hours_by_vc, nominal_quotas, read_philly
from tests.services import shared_path

pytestmark = pytest.mark.usefixtures("celery_worker_process")

FIRST = 50
CAPACITY = 64


def _token(user) -> str:
    """A new API token's secret for ``user`` (tokens are stored hashed: none to read back)."""
    return token_issue(actor=None, user=user, name="test", days=1)[1]


@pytest.fixture
def philly_path():
    return shared_path("traces", "philly-pollux", "philly.csv")


@pytest.fixture
def portal_world(transactional_db, kube_emulator):
    """A staff user, a Kueue cluster with a 64-GPU V100 flavor on 8-GPU nodes, nothing else."""
    staff = get_user_model().objects.create_user("ops", password="pw-ops-123", is_staff=True)
    cluster = Cluster.objects.create(name="philly", backend="kueue")
    flavor = GpuFlavor.objects.create(
        cluster=cluster, name="v100", gpu_resource="nvidia.com/gpu", gpu_model="V100",
        physical_gpus=CAPACITY, gpus_per_node=8, cpu_per_gpu="4", memory_per_gpu="32Gi",
    )
    return {"staff": staff, "cluster": cluster, "flavor": flavor, "server": kube_emulator}


def api_get(live_server, token: str, path: str, **params):
    response = requests.get(f"{live_server.url}{path}", params=params,
                            headers={"Authorization": f"Token {token}"}, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def test_replay_first_50_philly_jobs_with_create_teams(portal_world, live_server, philly_path):
    out = io.StringIO()
    call_command("replay_trace", str(philly_path), "--format", "philly", "--limit", str(FIRST),
                 "--speed", "1e9", "--create-teams", "--flavor", "v100",
                 "--api-url", live_server.url, "--no-wait", stdout=out)
    text = out.getvalue()
    expected = list(read_philly(philly_path, limit=FIRST))
    quotas = nominal_quotas(gpu_hours_by_vc(expected), CAPACITY)
    assert len(quotas) == 7 and sum(quotas.values()) == CAPACITY
    assert f"trace: 82247 rows read, 65 exact duplicates dropped, 0 skipped, 0 before --since; " \
           f"{FIRST} jobs to replay (7 teams" in text
    assert f"submitted {FIRST} of {FIRST} jobs" in text
    summary = {line.split()[0]: line.split()[1:5] for line in text.splitlines()
               if line.startswith(("philly-", "all "))}
    assert summary["all"] == [str(FIRST), "0", "0", "0"]   # submitted, refused, admitted, finished
    for vc in quotas:
        count = sum(1 for j in expected if j.vc == vc)
        assert summary[f"philly-{vc}"] == [str(count), "0", "0", "0"]

    # The command made itself a token of the staff user: no --token on loopback.
    assert ApiToken.objects.filter(user=portal_world["staff"], name="replay-trace").count() == 1
    token = _token(portal_world["staff"])

    # Teams, cohort and quotas through the API.
    teams = {t["slug"]: t for t in api_get(live_server, token, "/api/v1/teams/")}
    assert set(teams) == {f"philly-{vc}" for vc in quotas}
    for vc, nominal in quotas.items():
        team = teams[f"philly-{vc}"]
        assert team["cohort"] == "trace-philly" and team["cluster"] == "philly"
        assert [(q["flavor"], q["nominal_gpus"], q["borrowing_limit_gpus"])
                for q in team["quotas"]] == [("v100", nominal, None)]
        assert f"team philly-{vc}: " in text and f"-> {nominal} nominal v100 (created)" in text

    # Every job, with its gang shape and declared run time, through the API.
    jobs = {}
    for slug in teams:
        for row in api_get(live_server, token, "/api/v1/jobs/", team=slug):
            jobs[row["name"]] = row
    assert len(jobs) == FIRST
    shapes = set()
    for trace in expected:
        row = jobs[f"trace-{trace.job_id}"]
        workers, per_worker = gang_shape(trace.gpus, 8)
        shapes.add((trace.gpus, workers, per_worker))
        assert (row["team"], row["workers"], row["gpus_per_worker"], row["flavor"]) == (
            f"philly-{trace.vc}", workers, per_worker, "v100")
        # The simulator's fields: run for the trace duration, end as drawn; no deadline.
        seconds = max(1, math.ceil(trace.duration_seconds))
        assert (row["sim_duration_seconds"], row["sim_outcome"], row["max_runtime_seconds"]) == (
            seconds, {"completed": "Succeeded"}.get(trace.outcome, "Failed"), None)
        assert row["command"] == ["sleep", str(seconds)]
        assert {"name": "TRACE_OUTCOME", "value": trace.outcome} in row["env"]
    # The first 50 Philly jobs hold 1-, 4-, 8- and 16-GPU gangs.
    assert shapes == {(1, 1, 1), (4, 1, 4), (8, 1, 8), (16, 2, 8)}

    # The worker creates each job on the cluster (emulator): a suspended Indexed Job of
    # `workers` pods, each asking for gpus_per_worker GPUs.
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        pending = Job.objects.filter(cluster_uid="").count()
        if not pending:
            break
        time.sleep(0.5)
    assert Job.objects.filter(cluster_uid="").count() == 0, list(
        Job.objects.filter(cluster_uid="").values_list("name", "phase", "last_error")[:5])
    port = KubernetesCluster(kubeconfig=settings.KUBECONFIG)
    sixteen = next(j for j in expected if j.gpus == 16)
    live = port.get("batch/v1", "Job", f"trace-{sixteen.job_id}", f"philly-{sixteen.vc}")
    assert live["spec"]["suspend"] is True
    assert (live["spec"]["parallelism"], live["spec"]["completions"]) == (2, 2)
    assert "activeDeadlineSeconds" not in live["spec"]
    assert live["metadata"]["annotations"] == {
        "sim.portal.gpu/duration-seconds": str(max(1, math.ceil(sixteen.duration_seconds))),
        "sim.portal.gpu/outcome": {"completed": "Succeeded"}.get(sixteen.outcome, "Failed")}
    container = live["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "8"

    # A second replay reuses the teams and leaves quotas that already match alone.
    again = io.StringIO()
    call_command("replay_trace", str(philly_path), "--format", "philly", "--limit", str(FIRST),
                 "--speed", "1e9", "--create-teams", "--flavor", "v100", "--token", token,
                 "--api-url", live_server.url, "--no-wait", "--name-prefix", "again",
                 stdout=again)
    assert "(created)" not in again.getvalue() and "(quota set)" not in again.getvalue()
    assert f"submitted {FIRST} of {FIRST} jobs" in again.getvalue()
    assert Job.objects.count() == 2 * FIRST


def test_replay_refusals_are_counted_and_named(portal_world, live_server, tmp_path):
    """A 128-GPU job cannot fit a 64-GPU flavor: the API refuses it naming the field, the
    replay goes on and the summary counts it."""
    trace = tmp_path / "philly.csv"
    trace.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                     "2017-10-09 07:00:00,60.0,1,60.0,aaaaaa\n"
                     "2017-10-09 07:00:01,60.0,128,7680.0,bbbbbb\n")
    out = io.StringIO()
    call_command("replay_trace", str(trace), "--format", "philly", "--speed", "1e9",
                 "--create-teams", "--flavor", "v100", "--api-url", live_server.url,
                 "--no-wait", stdout=out)
    text = out.getvalue()
    assert "submitted 1 of 2 jobs" in text
    rows = {line.split()[0]: line.split()[1:3] for line in text.splitlines()
            if line.startswith(("philly-", "all "))}
    assert rows == {"philly-aaaaaa": ["1", "0"], "philly-bbbbbb": ["0", "1"], "all": ["1", "1"]}
    assert ("refused x1: gpus_per_worker: needs 128 nvidia.com/gpu on v100; "
            "the team can be admitted at most 64") in text


def test_replay_command_errors_name_the_option(portal_world, live_server, tmp_path):
    with pytest.raises(CommandError, match="^--token: required"):
        call_command("replay_trace", str(tmp_path / "x.csv"), "--format", "philly",
                     "--api-url", "https://portal.example.org")
    with pytest.raises(CommandError, match="nope.csv: cannot read"):
        call_command("replay_trace", str(tmp_path / "nope.csv"), "--format", "philly",
                     "--api-url", live_server.url)
    with pytest.raises(CommandError, match="^since: "):
        call_command("replay_trace", str(tmp_path / "nope.csv"), "--format", "philly",
                     "--since", "yesterday", "--api-url", live_server.url)
    trace = tmp_path / "philly.csv"
    trace.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                     "2017-10-09 07:00:00,60.0,1,60.0,aaaaaa\n")
    with pytest.raises(CommandError, match="^flavor: no GPU flavor 'a100'"):
        call_command("replay_trace", str(trace), "--format", "philly", "--flavor", "a100",
                     "--api-url", live_server.url)


def test_submissions_follow_the_accelerated_trace_clock(portal_world, live_server):
    """At speed 100, jobs 100 s and 300 s of trace apart go out 1 s and 3 s after the first
    (the clock and sleep are passed in, so the schedule is checked without waiting)."""
    token = _token(portal_world["staff"])
    client = PortalClient(live_server.url, token)
    now = [1000.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    jobs = [TraceJob(job_id=str(i), vc="aaaaaa", submit_time=t, gpus=1, duration_seconds=5.0,
                     outcome="completed") for i, t in ((1, 50.0), (2, 150.0), (3, 350.0))]
    records = submit_jobs(
        client, jobs, speed=100.0, clock=lambda: now[0], sleep=sleep,
        payload=lambda job: job_payload(job, fmt="philly", flavor="v100", gpus_per_node=8,
                                        image="busybox:1.36"))
    assert slept == [1.0, 2.0]
    # No team philly-aaaaaa exists: each refusal is recorded (404) and the replay goes on.
    assert [(r.status, r.job_id) for r in records] == [(404, None)] * 3
    assert all(isinstance(r, Submission) and r.errors for r in records)


def test_concurrent_submissions_keep_trace_order_and_send_the_simulators_fields(
        portal_world, live_server):
    """``concurrency=4``: 12 jobs posted from a pool of four threads (each with its own
    Session), all accepted, the records in trace order, each job holding the body sent."""
    token = _token(portal_world["staff"])
    client = PortalClient(live_server.url, token)
    flavor = find_flavor(client, flavor="v100", cluster=None)
    ensure_teams(client, fmt="philly", gpu_hours={"bbbbbb": 1.0}, flavor=flavor, cohort="c")
    outcomes = ("completed", "failed", "cancelled")
    jobs = [TraceJob(job_id=str(i), vc="bbbbbb", submit_time=float(i), gpus=1 + i % 2 * 7,
                     duration_seconds=100.0 + i, outcome=outcomes[i % 3]) for i in range(12)]
    records = submit_jobs(
        client, jobs, speed=1e9, concurrency=4,
        payload=lambda job: job_payload(job, fmt="philly", flavor="v100", gpus_per_node=8,
                                        image="busybox:1.36"))
    assert [r.job.job_id for r in records] == [str(i) for i in range(12)]
    assert [r.status for r in records] == [201] * 12
    stored = {j.pk: j for j in Job.objects.filter(team__slug="philly-bbbbbb")}
    assert sorted(stored) == sorted(r.job_id for r in records)
    for record in records:
        job = stored[record.job_id]
        assert (job.name, job.total_gpus, job.sim_duration_seconds, job.sim_outcome,
                job.max_runtime_seconds) == (
            f"trace-{record.job.job_id}", record.job.gpus, 100 + int(record.job.job_id),
            "Succeeded" if record.job.outcome == "completed" else "Failed", None)
    with pytest.raises(ReplayError, match="^concurrency: "):
        submit_jobs(client, jobs, speed=1.0, concurrency=0, payload=lambda job: {})


def test_replay_waits_until_every_job_is_final_and_reports_waits(portal_world, live_server,
                                                                  tmp_path):
    """Without --no-wait the command polls the API until every job is final, then prints
    per-team waits. The test plays Kueue (``queues.sim.kueue_objects``) on the emulator:
    it admits the three jobs 10, 20 and 40 s after their submission (the Admitted
    condition's time) and finishes them; the portal reads that back on refresh."""
    import datetime as dt
    import threading

    from queues.sim import kueue_objects as kueue

    token = _token(portal_world["staff"])
    trace = tmp_path / "philly.csv"
    trace.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                     "2017-10-09 07:00:00,60.0,1,60.0,aaaaaa\n"
                     "2017-10-09 07:00:01,60.0,8,480.0,aaaaaa\n"
                     "2017-10-09 07:00:02,60.0,16,960.0,aaaaaa\n")
    out = io.StringIO()
    errors: list[BaseException] = []

    def run() -> None:
        try:
            call_command("replay_trace", str(trace), "--format", "philly", "--speed", "1e9",
                         "--create-teams", "--flavor", "v100", "--token", token,
                         "--api-url", live_server.url, "--timeout", "120",
                         "--poll-interval", "0.2", stdout=out)
        except BaseException as exc:  # reported by the test thread
            errors.append(exc)

    command = threading.Thread(target=run, daemon=True)
    command.start()
    port = KubernetesCluster(kubeconfig=settings.KUBECONFIG)
    session = requests.Session()
    session.headers["Authorization"] = f"Token {token}"
    waits = {"trace-1": 10, "trace-2": 20, "trace-3": 40}
    done: set[str] = set()
    deadline = time.monotonic() + 90
    while len(done) < 3 and time.monotonic() < deadline:
        for job in Job.objects.exclude(cluster_uid="").exclude(name__in=done):
            live = port.get("batch/v1", "Job", job.name, job.team.slug)
            workload = kueue.create_workload(port, live)
            admitted = job.submitted_at + dt.timedelta(seconds=waits[job.name])
            kueue.admit(port, workload, cluster_queue=job.team.slug, flavor="v100",
                        now=admitted)
            kueue.unsuspend_job(port, live)
            kueue.set_job_status(port, live, active=0, ready=0, succeeded=job.workers,
                                 complete=True)
            kueue.finish(port, workload, succeeded=True,
                         now=admitted + dt.timedelta(seconds=60))
            response = session.post(f"{live_server.url}/api/v1/jobs/{job.pk}/refresh/",
                                    timeout=30)
            assert response.status_code == 202
            done.add(job.name)
        time.sleep(0.2)
    command.join(timeout=120)
    assert not command.is_alive() and not errors, errors
    text = out.getvalue()
    assert "timeout" not in text
    [row] = [line.split() for line in text.splitlines() if line.startswith("philly-aaaaaa")]
    # Kueue's condition times have whole seconds: each wait is its target minus the
    # fraction of a second of submitted_at.
    measured = {j.name: (j.admitted_at - j.submitted_at).total_seconds()
                for j in Job.objects.all()}
    assert all(waits[name] - 1 < wait <= waits[name] for name, wait in measured.items())
    # submitted, refused, admitted, finished, mean wait, p95 (nearest rank: the largest of 3)
    assert row[1:] == ["3", "0", "3", "3", f"{sum(measured.values()) / 3:.1f}",
                       f"{measured['trace-3']:.1f}"]
    assert Job.objects.filter(phase="Succeeded").count() == 3
