"""Fault tolerance of reconcile: real workers, the official client over HTTP, the emulator.

Every test approves quota (or bumps the spec) and lets real ``celery
worker`` processes (``start_worker``) converge the cluster while the
emulator injects faults: 500, 409, 429 with Retry-After, read timeouts,
dropped connections, a worker SIGKILLed mid-reconcile, a concurrent second
reconcile, a refused ResourceFlavor. Each asserts that every desired object
exists exactly once (listed by our managed-by label), that the number of
write requests is exactly what the faults explain, and that a further
reconcile writes nothing.
"""

import threading
import time

import pytest
from django.conf import settings
from django.db import connection, transaction
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from portal.models import Cluster, ManagedObject, QuotaGrant
from portal.selectors.specs import cluster_specs, desired_objects
from portal.services.locks import ClusterBusy
from portal.services.outbox import cluster_spec_bump
from portal.services.quota import quota_request_approve, quota_request_create
from portal.services.reconcile import cluster_reconcile, clusters_to_resync
from portal.tasks import reconcile_cluster_task, resync
from queues.backends.kueue.backend import KINDS as KUEUE_KINDS
from queues.cluster import KubernetesCluster
from queues.reconcile import key_of
from queues.render.labels import managed_selector

KUEUE = "kueue.x-k8s.io/v1beta2"
#: Short enough for a timeout test, long enough for a loaded 2-core machine.
REQUEST_TIMEOUT = "3"


@pytest.fixture
def port(world):
    """The cluster as the tests see it: the same port the worker uses."""
    return KubernetesCluster(kubeconfig=settings.KUBECONFIG)


def approve(world, *, nominal=24):
    request = quota_request_create(
        actor=world["lead_a"], team=world["team_a"], flavor=world["h100"],
        nominal_gpus=nominal, justification="training run",
    )
    return quota_request_approve(actor=world["staff"], request=request)


def desired_keys(cluster):
    return sorted(key_of(o) for o in desired_objects(cluster_specs(cluster=cluster)))


def managed_keys(port):
    """Every object on the cluster carrying our managed-by label (duplicates kept)."""
    return sorted(key_of(item) for api_version, kind in KUEUE_KINDS
                  for item in port.list(api_version, kind, managed_selector()))


def verbs(server):
    return server.counters.snapshot()["by_verb"]


def wait_for(predicate, what, timeout=60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def assert_converged_exactly_once(world, port, cluster):
    """Each desired object once on the cluster, every row applied, a rerun writes nothing."""
    keys = desired_keys(cluster)
    assert managed_keys(port) == keys
    rows = ManagedObject.objects.filter(cluster=cluster)
    assert sorted(row.key for row in rows) == keys
    assert all(row.applied_hash and row.last_error == "" for row in rows)
    assert {row.applied_generation for row in rows} == {cluster.spec_generation}
    server = world["server"]
    before = server.counters.writes
    summary = reconcile_cluster_task.delay(cluster.pk).get(timeout=60)
    assert summary["writes"] == 0 and set(summary["actions"]) == {"unchanged"}
    assert server.counters.writes == before


FAULTS = {
    "500 on apply": {"method": "PATCH", "path": r"/clusterqueues/team-a$", "status": 500,
                     "count": 2},
    "409 conflict on apply": {"method": "PATCH", "path": r"/clusterqueues/team-a$",
                              "status": 409, "reason": "Conflict", "count": 2},
    # The run's list of a kind fails: its objects are read one by one, its prune waits.
    "503 on list": {"method": "GET", "path": r"/v1beta2/clusterqueues$", "status": 503,
                    "count": 2},
    "dropped connection on apply": {"method": "PATCH", "path": r"/localqueues/team-a$",
                                    "drop": True, "count": 2},
    # Longer than the worker's read timeout: the client gives up, the server still
    # applies the write late (as a real API server would), the retry applies it again.
    "timeout on apply": {"method": "PATCH", "path": r"/clusterqueues/team-b$",
                         "delay": 2 * float(REQUEST_TIMEOUT), "count": 1},
}


@pytest.mark.parametrize("fault", FAULTS.values(), ids=FAULTS.keys())
def test_transient_faults_converge_with_no_duplicate(world, port, converged, start_worker,
                                                     fault):
    worker = start_worker(KUBE_REQUEST_TIMEOUT=REQUEST_TIMEOUT)
    server = world["server"]
    injected = server.faults.add(**fault)
    approve(world)
    cluster = converged(world["cluster"], timeout=90)
    assert cluster.last_error == ""
    assert injected.hits == fault["count"]  # every injected failure was met
    # One apply per desired object, plus one per failed apply that was retried.
    failed_writes = injected.hits if fault["method"] == "PATCH" else 0
    assert verbs(server).get("patch", 0) == len(desired_keys(cluster)) + failed_writes
    assert verbs(server).get("create", 0) == verbs(server).get("delete", 0) == 0
    if "delay" in fault:
        assert "ReadTimeoutError" in worker.log()
    assert_converged_exactly_once(world, port, cluster)


def test_429_retry_after_is_honoured(world, port, converged, start_worker):
    start_worker()
    server = world["server"]
    injected = server.faults.add("PATCH", r"/clusterqueues/team-a$", 429, count=1,
                                 retry_after=3, reason="TooManyRequests",
                                 message="the server has received too many requests")
    approve(world)
    wait_for(lambda: injected.hits == 1, "the 429")
    refused_at = time.monotonic()
    wait_for(lambda: port.get(KUEUE, "ClusterQueue", "team-a"), "the ClusterQueue")
    # The task's own first backoff is at most 2 s (jitter in [0, 2]); the API asked for 3.
    assert time.monotonic() - refused_at >= 2.5
    cluster = converged(world["cluster"])
    assert verbs(server)["patch"] == len(desired_keys(cluster)) + 1
    assert_converged_exactly_once(world, port, cluster)


def test_worker_killed_mid_reconcile_resync_converges_on_a_new_worker(
        world, port, converged, start_worker):
    server = world["server"]
    first = start_worker()
    # Hold the worker inside the apply of team-b's ClusterQueue, after earlier objects.
    held = server.faults.add("PATCH", r"/clusterqueues/team-b$", delay=3, count=1)
    approve(world)
    wait_for(lambda: held.hits == 1, "the worker to reach team-b's ClusterQueue")
    first.kill()
    writes_before_kill = verbs(server)["patch"]
    cluster = Cluster.objects.get(pk=world["cluster"].pk)
    assert cluster.applied_generation < cluster.spec_generation
    assert not ManagedObject.objects.filter(cluster=cluster).exists()  # nothing recorded
    # The in-flight request still lands on the server after its delay.
    wait_for(lambda: port.get(KUEUE, "ClusterQueue", "team-b"), "the in-flight apply")

    start_worker()
    assert resync.delay().get(timeout=30) == [cluster.pk]  # lagging: re-driven
    cluster = converged(cluster)
    assert cluster.last_error == ""
    # Nothing was recorded before the kill, so the re-drive applies each object once more.
    assert verbs(server)["patch"] == writes_before_kill + len(desired_keys(cluster))
    assert_converged_exactly_once(world, port, cluster)


def _in_thread(fn):
    """Run ``fn`` in a thread with its own database connection; returns (thread, outcome)."""
    outcome = {}

    def run():
        try:
            outcome["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            outcome["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread, outcome


def test_second_concurrent_reconcile_skips_and_the_holder_applies_its_change(world, port):
    """PostgreSQL advisory lock: the second reconcile skips; the change it carried is not lost."""
    server = world["server"]
    cluster = world["cluster"]
    before = {key_of(o): o for o in desired_objects(cluster_specs(cluster=cluster))}
    held = server.faults.add("GET", r"/resourceflavors$", delay=2, count=1)
    thread, outcome = _in_thread(lambda: cluster_reconcile(cluster_id=cluster.pk))
    wait_for(lambda: held.hits == 1, "the first reconcile to hold the lock")

    # A quota change commits while the first reconcile runs; its own reconcile skips.
    with transaction.atomic():
        QuotaGrant.objects.filter(team=world["team_a"]).update(nominal_gpus=20)
        cluster_spec_bump(cluster_id=cluster.pk)
    with pytest.raises(ClusterBusy):
        cluster_reconcile(cluster_id=cluster.pk)
    thread.join(timeout=60)
    assert "error" not in outcome and not outcome["result"].retry_later

    # The holder saw the newer generation when it released the lock and ran again.
    cluster.refresh_from_db()
    assert cluster.applied_generation == cluster.spec_generation
    cq = port.get(KUEUE, "ClusterQueue", "team-a")
    gpus = {r["name"]: r["nominalQuota"]
            for r in cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert gpus["nvidia.com/gpu"] == "20"
    after = {key_of(o): o for o in desired_objects(cluster_specs(cluster=cluster))}
    changed = [key for key in after if after[key] != before[key]]
    assert (KUEUE, "ClusterQueue", "", "team-a") in changed
    # First pass: every object once; second pass: exactly the changed ones. No duplicate.
    assert verbs(server)["patch"] == len(before) + len(changed)
    assert managed_keys(port) == sorted(after)


def test_two_workers_never_reconcile_one_cluster_at_once(world, port, start_worker):
    """Two worker processes, two reconcile tasks: one runs, the other skips (busy)."""
    server = world["server"]
    cluster = world["cluster"]
    start_worker()
    start_worker()
    held = server.faults.add("GET", r"/resourceflavors$", delay=3, count=1)
    first = reconcile_cluster_task.delay(cluster.pk)
    wait_for(lambda: held.hits == 1, "the first task to hold the lock")
    second = reconcile_cluster_task.delay(cluster.pk)
    assert second.get(timeout=30) == {"cluster_id": cluster.pk, "skipped": "busy"}
    summary = first.get(timeout=60)
    assert summary["writes"] == len(desired_keys(cluster))
    assert verbs(server)["patch"] == len(desired_keys(cluster))
    cluster.refresh_from_db()
    assert cluster.applied_generation == cluster.spec_generation
    assert managed_keys(port) == desired_keys(cluster)


REFUSAL = ('ResourceFlavor.kueue.x-k8s.io "h100" is invalid: spec.nodeTaints[0].effect: '
           'Unsupported value: "NoExecut": supported values: "NoSchedule", '
           '"PreferNoSchedule", "NoExecute"')
MISSING_FLAVOR = "Can't admit new workloads: references missing ResourceFlavor(s): h100."


def set_active(api, name, active):
    """Write a ClusterQueue's Active condition as Kueue's controller would."""
    condition = {
        "type": "Active", "status": "True" if active else "False",
        "reason": "Ready" if active else "FlavorNotFound",
        "message": "Can admit new workloads" if active else MISSING_FLAVOR,
        "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1,
    }
    k8s.CustomObjectsApi(api).patch_cluster_custom_object_status(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", name, {"status": {"conditions": [condition]}})


def row(cluster, kind, name):
    return ManagedObject.objects.get(cluster=cluster, kind=kind, name=name)


def test_refused_flavor_shows_not_active_and_recovers_on_resync(world, port, start_worker):
    server = world["server"]
    cluster = world["cluster"]
    api = k8s_config.new_client_from_config(config_file=settings.KUBECONFIG)
    start_worker()
    refusal = server.faults.add("PATCH", r"/resourceflavors/h100$", 422, count=None,
                                reason="Invalid", message=REFUSAL)
    cluster_spec_bump(cluster_id=cluster.pk)
    assert resync.delay().get(timeout=30) == [cluster.pk]
    wait_for(lambda: ManagedObject.objects.filter(cluster=cluster, kind="ClusterQueue",
                                                  name="team-a").exists(), "the first pass")

    # A 422 is permanent: recorded with the API's message, not retried by the task.
    cluster.refresh_from_db()
    assert cluster.applied_generation == cluster.spec_generation
    assert REFUSAL in cluster.last_error
    flavor = row(cluster, "ResourceFlavor", "h100")
    assert flavor.applied_hash == "" and REFUSAL in flavor.last_error
    assert flavor.observed_state["state"] == "failed"
    assert flavor.observed_state["reason"] == "Invalid"
    assert port.get(KUEUE, "ResourceFlavor", "h100") is None
    # The queues were applied; Kueue then reports them inactive: the flavor is missing.
    assert port.get(KUEUE, "ClusterQueue", "team-a") is not None
    for name in ("team-a", "team-b"):
        set_active(api, name, active=False)

    assert cluster.pk in resync.delay().get(timeout=30)  # queues still pending: re-driven
    wait_for(lambda: row(cluster, "ClusterQueue", "team-a").observed_state["state"]
             == "not-active", "the not-active state")
    state = row(cluster, "ClusterQueue", "team-a").observed_state
    assert state["reason"] == "FlavorNotFound" and state["message"] == MISSING_FLAVOR
    assert row(cluster, "ClusterQueue", "team-a").last_error == ""  # our apply succeeded
    assert clusters_to_resync(drift_check_seconds=300) == [cluster.pk]  # not-active: due

    # The refusal goes away; the next resync creates the flavor.
    server.faults.clear()
    assert refusal.hits >= 2
    assert resync.delay().get(timeout=30) == [cluster.pk]
    wait_for(lambda: row(cluster, "ResourceFlavor", "h100").applied_hash, "the flavor")
    assert port.get(KUEUE, "ResourceFlavor", "h100")["spec"]["nodeLabels"] == {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert row(cluster, "ResourceFlavor", "h100").last_error == ""
    assert row(cluster, "ClusterQueue", "team-a").observed_state["state"] == "not-active"

    # Kueue sees the flavor and activates the queues; a later resync records it.
    for name in ("team-a", "team-b"):
        set_active(api, name, active=True)
    assert resync.delay().get(timeout=30) == [cluster.pk]
    wait_for(lambda: row(cluster, "ClusterQueue", "team-a").observed_state["state"]
             == "applied", "the applied state")
    wait_for(lambda: row(cluster, "ClusterQueue", "team-b").observed_state["state"]
             == "applied", "team-b applied")
    cluster.refresh_from_db()
    assert cluster.last_error == ""
    assert clusters_to_resync(drift_check_seconds=300) == []  # settled
