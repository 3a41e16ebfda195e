"""Gang jobs on both scheduler backends, end to end.

``POST /api/v1/jobs/`` -> ``job_submit`` -> a real Celery worker -> the official
client over HTTP -> the Kubernetes API emulator. No scheduler runs there, so
each test writes what the backend's controllers would write (Kueue's Workload
through ``queues.sim.kueue_objects``; Volcano's PodGroup, vcjob status and
Command handling through ``queues.sim.volcano_objects``), then asks the worker
to read the status back and checks what the API shows.
"""

import datetime as dt
import threading

import pytest
from django.conf import settings
from django.db import transaction

from portal.models import AuditEvent, Cluster, Job
from portal.services.jobs import job_cancel, job_cancel_execute, job_submit, job_sync
from portal.services.reconcile import cluster_reconcile
from portal.tasks import job_sync_task, jobs_sync_task
from queues.cluster import KubernetesCluster
from queues.sim import kueue_objects as kueue_sim
from queues.sim import volcano_objects as volcano_sim
from queues.volcano_jobs import COMMAND_API_VERSION

from .conftest import build_world, job_payload

pytestmark = pytest.mark.usefixtures("celery_worker_process")

VCJOB = ("batch.volcano.sh/v1alpha1", "Job")


@pytest.fixture(params=["kueue", "volcano"])
def backend(request):
    return request.param


@pytest.fixture
def port(kube_emulator):
    return KubernetesCluster(kubeconfig=settings.KUBECONFIG)


@pytest.fixture
def live_world(transactional_db, kube_emulator, backend, port):
    """The jobs world on ``backend``, reconciled onto the emulator (queues, namespaces)."""
    world = build_world()
    Cluster.objects.filter(pk=world["cluster"].pk).update(backend=backend)
    world["cluster"].refresh_from_db()
    result = cluster_reconcile(cluster_id=world["cluster"].pk, port=port)
    assert result is not None and not result.failed
    return world


def _api(user):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(user)
    return client


def wait_for(predicate, timeout=30.0):
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail("condition not met in time")


def submit(world, **overrides):
    response = _api(world["member_a"]).post("/api/v1/jobs/", job_payload(**overrides),
                                            format="json")
    assert response.status_code == 201, response.json()
    job = Job.objects.get(pk=response.json()["id"])
    wait_for(lambda: Job.objects.get(pk=job.pk).cluster_uid)  # the worker created it
    return Job.objects.get(pk=job.pk)


def live_job(port, job):
    meta = job.manifest["metadata"]
    return port.get(job.manifest["apiVersion"], job.manifest["kind"], meta["name"],
                    meta["namespace"])


def shown(world, job):
    job_sync_task.delay(job.pk).get(timeout=30)
    return _api(world["member_a"]).get(f"/api/v1/jobs/{job.pk}/").json()


def test_submitted_job_reaches_the_backend_as_its_own_kind(live_world, backend, port):
    job = submit(live_world)
    live = live_job(port, job)
    if backend == "kueue":
        assert (live["apiVersion"], live["kind"]) == ("batch/v1", "Job")
        assert live["spec"]["suspend"] is True
        return
    assert (live["apiVersion"], live["kind"]) == VCJOB
    spec = live["spec"]
    assert (spec["schedulerName"], spec["queue"], spec["minAvailable"]) == ("volcano", "team-a", 2)
    assert [(t["name"], t["replicas"], t["minAvailable"]) for t in spec["tasks"]] == [
        ("master", 1, 1), ("worker", 1, 1)]
    assert spec["plugins"]["pytorch"] == ["--master=master", "--worker=worker", "--port=23456"]
    pod = spec["tasks"][0]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert pod["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] == "4"


def test_pending_then_running_is_explained(live_world, backend, port):
    job = submit(live_world)
    live = live_job(port, job)
    if backend == "kueue":
        workload = kueue_sim.create_workload(port, live)
        kueue_sim.set_pending(port, workload, message=kueue_sim.insufficient_quota_message(
            "nvidia.com/gpu", "h100", 8))
    else:
        volcano_sim.create_podgroup(port, live)
        volcano_sim.set_job_state(port, live, phase="Pending")
        volcano_sim.set_podgroup(port, live, phase="Pending", unschedulable=(
            "NotEnoughResources", volcano_sim.unschedulable_message(
                unschedulable=2, pods=2, min_available=2, pending=2)))
    body = shown(live_world, job)
    assert body["phase"] == "Queued"
    if backend == "volcano":
        assert body["reason"] == "Unschedulable"
        assert body["message"].startswith("pending: needs 8 GPUs. Volcano: NotEnoughResources: "
                                          "2/2 tasks in gang unschedulable")
    else:
        assert "8 more" in body["message"] or "8" in body["message"]

    if backend == "kueue":
        kueue_sim.admit(port, workload, cluster_queue="team-a", flavor="h100")
        kueue_sim.set_pods_ready(port, workload)
    else:
        volcano_sim.set_podgroup(port, live, phase="Running", running=2, scheduled=True)
        volcano_sim.set_job_state(port, live, phase="Running", running=2)
    body = shown(live_world, job)
    assert body["phase"] == "Running"


@pytest.mark.parametrize("backend", ["volcano"])  # Kueue admits a gang whole
def test_volcano_gang_partly_placed_is_distinct_from_pending(live_world, backend, port):
    """The clock starts when a sync first sees 0 < running < minAvailable (stored on the
    job), not at the vcjob's phase transition: 20 minutes in Pending before the first pod
    ran is not 20 minutes partly placed."""
    job = submit(live_world, workers=3, gpus_per_worker=2)
    live = live_job(port, job)
    volcano_sim.create_podgroup(port, live)
    t0 = dt.datetime.now(dt.UTC).replace(microsecond=0)
    volcano_sim.set_podgroup(port, live, phase="Inqueue", running=0)
    volcano_sim.set_job_state(port, live, phase="Pending", running=0,
                              now=t0 - dt.timedelta(minutes=20))
    assert job_sync(job_id=job.pk, port=port, now=t0) == "Admitted"
    assert Job.objects.get(pk=job.pk).partly_placed_since is None  # nothing runs yet

    volcano_sim.set_podgroup(port, live, phase="Inqueue", running=2)
    volcano_sim.set_job_state(port, live, phase="Pending", running=2,
                              now=t0 - dt.timedelta(minutes=20))
    seen = t0 + dt.timedelta(minutes=1)
    job_sync(job_id=job.pk, port=port, now=seen)
    assert Job.objects.get(pk=job.pk).partly_placed_since == seen

    job_sync(job_id=job.pk, port=port, now=seen + dt.timedelta(minutes=9))
    body = _api(live_world["member_a"]).get(f"/api/v1/jobs/{job.pk}/").json()
    assert (body["phase"], body["reason"]) == ("Admitted", "Inqueue")
    assert Job.objects.get(pk=job.pk).partly_placed_since == seen  # kept, not moved

    job_sync(job_id=job.pk, port=port, now=seen + dt.timedelta(minutes=11))
    body = _api(live_world["member_a"]).get(f"/api/v1/jobs/{job.pk}/").json()
    assert (body["phase"], body["reason"]) == ("Admitted", "GangPartlyPlaced")
    assert body["message"] == ("gang partly placed: 2/3 pods, 4 GPUs held without progress "
                               "(for 11 minutes). The remaining pods cannot be placed; "
                               "platform staff may need to free nodes.")

    # The whole gang runs: the clock is cleared; partly placed again later starts anew.
    volcano_sim.set_podgroup(port, live, phase="Running", running=3, scheduled=True)
    volcano_sim.set_job_state(port, live, phase="Running", running=3)
    assert job_sync(job_id=job.pk, port=port, now=seen + dt.timedelta(minutes=12)) == "Running"
    assert Job.objects.get(pk=job.pk).partly_placed_since is None


@pytest.mark.parametrize("backend", ["volcano"])  # queues are closed only on Volcano
def test_submit_to_a_closed_volcano_queue_is_refused(live_world, backend, port):
    volcano_sim.set_queue_state(port, "team-a", "Closed")
    before = Job.objects.count()
    response = _api(live_world["member_a"]).post("/api/v1/jobs/", job_payload(), format="json")
    assert response.status_code == 400
    assert "queue 'team-a' is closed" in " ".join(response.json()["team"])
    assert Job.objects.count() == before
    volcano_sim.set_queue_state(port, "team-a", "Open")
    assert _api(live_world["member_a"]).post(
        "/api/v1/jobs/", job_payload(), format="json").status_code == 201


def test_cancel_stops_the_gang_and_removes_it(live_world, backend, port):
    job = submit(live_world)
    live = live_job(port, job)
    if backend == "volcano":
        volcano_sim.create_podgroup(port, live)
        volcano_sim.set_job_state(port, live, phase="Running", running=2)
    response = _api(live_world["member_a"]).post(f"/api/v1/jobs/{job.pk}/cancel/")
    assert response.status_code == 202
    namespace = job.manifest["metadata"]["namespace"]
    if backend == "volcano":
        # Step 1: an AbortJob Command for the job, in its namespace; the vcjob stays.
        commands = wait_for(lambda: port.list(COMMAND_API_VERSION, "Command", "", namespace))
        assert [(c["action"], c["target"]["name"], c["target"]["uid"]) for c in commands] == [
            ("AbortJob", "train-llm", live["metadata"]["uid"])]
        assert live_job(port, job) is not None
        # The worker writes the phase after the Command is created: wait for it, do not
        # read it the instant the Command shows (that raced on a loaded machine).
        wait_for(lambda: Job.objects.get(pk=job.pk).phase == "Cancelled")
        # Volcano aborts it; the next sync terminates and deletes it.
        assert volcano_sim.execute_commands(port, namespace) == [("AbortJob", "train-llm")]
        jobs_sync_task.delay().get(timeout=30)
        # A TerminateJob Command, then the delete (the emulator has no garbage collector, so
        # the Command owned by the deleted vcjob is still listed).
        assert [(c["action"], c["target"]["uid"]) for c in port.list(
            COMMAND_API_VERSION, "Command", "", namespace)] == [
            ("TerminateJob", live["metadata"]["uid"])]
    wait_for(lambda: Job.objects.get(pk=job.pk).deleted_at is not None)
    assert live_job(port, job) is None
    body = _api(live_world["member_a"]).get(f"/api/v1/jobs/{job.pk}/").json()
    assert body["phase"] == "Cancelled"


# --- a cancel racing the create task (issue 5) ------------------------------------------


def _on_cluster(port, backend: str, namespace: str = "team-a") -> dict:
    """What exists of team-a's jobs on the emulator: {kind: [names]} (empty lists = nothing)."""
    found = {"jobs": [o["metadata"]["name"] for o in port.list(
        *(VCJOB if backend == "volcano" else ("batch/v1", "Job")), "", namespace)]}
    if backend == "volcano":
        found["commands"] = [o["metadata"]["name"] for o in port.list(
            COMMAND_API_VERSION, "Command", "", namespace)]
    else:
        found["workloads"] = [o["metadata"]["name"] for o in port.list_workloads(namespace)]
    return found


def _drain_worker():
    """Every task published so far has run: the solo worker takes its queue in order."""
    jobs_sync_task.delay().get(timeout=60)


def _gate_the_create(server, job_manifest_api: str, name: str = "train-llm"):
    """Hold the create's server-side apply (PATCH) in the emulator until released."""
    gate = threading.Event()
    fault = server.faults.add("PATCH", rf"/apis/{job_manifest_api}/namespaces/team-a/jobs/{name}$",
                              gate=gate)
    return gate, fault


def test_cancel_recorded_before_the_create_task_runs_leaves_nothing(live_world, backend, port,
                                                                     kube_emulator):
    # Submit and cancel commit together: both tasks are published after the cancel exists.
    with transaction.atomic():
        job = job_submit(actor=live_world["member_a"], team=live_world["team_a"],
                         **{k: v for k, v in job_payload().items() if k != "team"})
        job_cancel(actor=live_world["member_a"], job=job)
    job = wait_for(lambda: Job.objects.filter(pk=job.pk, deleted_at__isnull=False).first())
    _drain_worker()
    assert (job.phase, job.reason, job.cluster_uid) == ("Cancelled", "Cancelled", "")
    assert _on_cluster(port, backend) == {"jobs": [], **(
        {"commands": []} if backend == "volcano" else {"workloads": []})}
    writes = {res: verbs for res, verbs in kube_emulator.counters.snapshot()["by_resource"].items()
              if res.endswith("/jobs") and set(verbs) - {"get", "list"}}
    assert writes == {}  # the create never applied anything


def test_create_in_flight_when_the_cancel_ran_deletes_what_it_created(live_world, backend, port,
                                                                       kube_emulator):
    """The create task read "not there" and is applying; meanwhile the cancel is recorded
    and executed (finding nothing). Released, the create re-reads the row under its lock,
    sees the cancel and deletes the object it just made."""
    api = VCJOB[0] if backend == "volcano" else "batch/v1"
    gate, fault = _gate_the_create(kube_emulator, api)
    try:
        response = _api(live_world["member_a"]).post("/api/v1/jobs/", job_payload(),
                                                    format="json")
        assert response.status_code == 201
        job_id = response.json()["id"]
        wait_for(lambda: fault.hits == 1)  # the worker's apply is in flight, held
        assert _api(live_world["member_a"]).post(
            f"/api/v1/jobs/{job_id}/cancel/").status_code == 202
        # The cancel runs now (its task waits behind the held create on the solo worker).
        assert job_cancel_execute(job_id=job_id, port=port) == "cancelled"
        job = Job.objects.get(pk=job_id)
        assert (job.phase, job.deleted_at is not None) == ("Cancelled", True)
        assert _on_cluster(port, backend)["jobs"] == []
    finally:
        gate.set()
    event = wait_for(lambda: AuditEvent.objects.filter(action="job.leftover_deleted").first())
    _drain_worker()
    assert (event.target_id, event.after) == (str(job_id), {
        "deleted": "Job"})
    assert _on_cluster(port, backend) == {"jobs": [], **(
        {"commands": []} if backend == "volcano" else {"workloads": []})}
    counts = kube_emulator.counters.snapshot()["by_resource"]
    resource = "batch.volcano.sh/jobs" if backend == "volcano" else "batch/jobs"
    assert (counts[resource]["patch"], counts[resource]["delete"]) == (1, 1)
    job = Job.objects.get(pk=job_id)
    assert (job.phase, job.cluster_uid) == ("Cancelled", "")
    assert "A job created while the cancel ran was deleted." in [
        e["message"] for e in job.timeline if e["source"] == "Portal"]


def test_cancel_recorded_while_the_create_applies_is_carried_out(live_world, backend, port,
                                                                  kube_emulator):
    """The cancel is recorded while the apply is held, and nothing runs it before the
    create goes on: the create sees it under the row lock and cancels the job itself."""
    api = VCJOB[0] if backend == "volcano" else "batch/v1"
    gate, fault = _gate_the_create(kube_emulator, api)
    try:
        response = _api(live_world["member_a"]).post("/api/v1/jobs/", job_payload(),
                                                    format="json")
        job_id = response.json()["id"]
        wait_for(lambda: fault.hits == 1)
        assert _api(live_world["member_a"]).post(
            f"/api/v1/jobs/{job_id}/cancel/").status_code == 202
    finally:
        gate.set()
    job = wait_for(lambda: Job.objects.filter(pk=job_id, phase="Cancelled").first())
    _drain_worker()
    if backend == "volcano":
        # AbortJob first (a vcjob has no suspend); Volcano aborts, the sync terminates+deletes.
        assert volcano_sim.execute_commands(port, "team-a") == [("AbortJob", "train-llm")]
        jobs_sync_task.delay().get(timeout=60)
        assert volcano_sim.execute_commands(port, "team-a") == [("TerminateJob", "train-llm")]
    job = Job.objects.get(pk=job_id)
    assert job.deleted_at is not None and job.phase == "Cancelled"
    assert _on_cluster(port, backend) == {"jobs": [], **(
        {"commands": []} if backend == "volcano" else {"workloads": []})}
    assert not AuditEvent.objects.filter(action="job.leftover_deleted").exists()


# --- the periodic sync reads a namespace, not each job ------------------------------------


def _make_waiting(port, backend: str, job: Job) -> None:
    """What the backend writes for a gang that waits for GPUs, plus an event about it."""
    live = live_job(port, job)
    if backend == "kueue":
        workload = kueue_sim.create_workload(port, live)
        kueue_sim.set_pending(port, workload, message=kueue_sim.insufficient_quota_message(
            "nvidia.com/gpu", "h100", 1))
        kueue_sim.record_event(port, workload, reason="Pending", message=f"about {job.name}")
    else:
        volcano_sim.create_podgroup(port, live)
        volcano_sim.set_job_state(port, live, phase="Pending")
        volcano_sim.set_podgroup(port, live, phase="Pending", unschedulable=(
            "NotEnoughResources", volcano_sim.unschedulable_message(
                unschedulable=1, pods=1, min_available=1, pending=1)))


def _requests_of_one_pass(server, expected_jobs: int) -> dict:
    _drain_worker()  # the creates' own reads are over
    server.counters.reset()
    assert jobs_sync_task.delay().get(timeout=60) == {"synced": expected_jobs, "cancelled": 0,
                                                       "failed": 0}
    snapshot = server.counters.snapshot()
    assert snapshot["writes"] == 0
    return {verb: n for verb, n in snapshot["by_verb"].items() if verb != "discovery"}


def test_the_periodic_sync_costs_the_same_requests_for_2_or_6_jobs_of_a_namespace(
        live_world, backend, port, kube_emulator):
    jobs = [submit(live_world, name=f"wait-{i}", workers=1, gpus_per_worker=1) for i in range(2)]
    for job in jobs:
        _make_waiting(port, backend, job)
    two = _requests_of_one_pass(kube_emulator, 2)
    more = [submit(live_world, name=f"wait-{i}", workers=1, gpus_per_worker=1)
            for i in range(2, 6)]
    for job in more:
        _make_waiting(port, backend, job)
    six = _requests_of_one_pass(kube_emulator, 6)
    # Kueue: list the Jobs, the Workloads, the events about Jobs and about Workloads, and
    # read the LocalQueue's pending workloads once. Volcano: list the vcjobs and the
    # PodGroups, read the Queue once.
    assert two == six == ({"list": 4, "get": 1} if backend == "kueue" else {"list": 2, "get": 1})

    # Every job was explained from the shared listing, each with its own Workload and events.
    rows = {j.name: j for j in Job.objects.filter(pk__in=[j.pk for j in jobs + more])}
    assert {(j.phase, j.reason) for j in rows.values()} == {
        ("Queued", "WaitingForQuota" if backend == "kueue" else "Unschedulable")}
    if backend == "kueue":
        assert sorted(j.queue_position for j in rows.values()) == list(range(6))
        for name, job in rows.items():
            events = [e["message"] for e in job.timeline if e["source"] == "Event"]
            assert events == [f"about {name}"]
            assert "1 more nvidia.com/gpu on flavor h100" in job.message
    else:
        assert all(j.message.startswith("pending: needs 1 GPUs. Volcano: NotEnoughResources")
                   for j in rows.values())

    # A listing the API refuses fails the namespace's jobs for this pass, each told why.
    kube_emulator.faults.add("GET", r"/namespaces/team-a/(workloads|podgroups)$", 403,
                             count=None, message="listing refused here")
    assert jobs_sync_task.delay().get(timeout=60) == {"synced": 0, "cancelled": 0, "failed": 6}
    assert all("listing refused here" in j.last_error
               for j in Job.objects.filter(pk__in=[j.pk for j in rows.values()]))
    kube_emulator.faults.clear()
    assert jobs_sync_task.delay().get(timeout=60)["synced"] == 6
    assert not Job.objects.exclude(last_error="").exists()
