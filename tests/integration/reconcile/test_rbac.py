"""deploy/rbac.yaml: valid objects, and a ClusterRole granting exactly what the portal uses.

The portal's access is measured, not listed by hand. Everything the worker (and the web
process) does on a cluster runs against the API emulator for both scheduler backends:
reconcile, a no-op resync, a resync whose every list fails (so the per-object ``get``
fallback runs), prune, a backend switch, job submit (Job, JobSet, Volcano Job), status
sync, idle reclaim and cancel. The emulator records each (verb, apiGroup, resource) an
RBAC authorizer would check, per authenticated user (``Counters.access``; a server-side
apply that creates is checked as create too). The test plays Kueue's and Volcano's
controllers as another user (``controllers``), so what it writes for them is not counted
as the portal's.
"""

from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from harness.apiserver.app import DEFAULT_USER
from harness.sim import kueue_objects as kueue_sim
from harness.sim import volcano_objects as volcano_sim
from portal.models import Cohort, GpuFlavor, Job, PriorityClass
from portal.services.catalog import cluster_backend_set
from portal.services.reconcile import cluster_reconcile
from portal.tasks import job_deactivate_task, job_sync_task, jobs_sync_task
from queues.backends.kueue.backend import KINDS as KUEUE_KINDS
from queues.backends.volcano.backend import KINDS as VOLCANO_KINDS
from queues.backends.volcano.jobs import COMMAND_API_VERSION
from queues.cluster import KubernetesCluster
from queues.render.labels import managed_selector
from tests.integration.helpers import api_as, live_job, wait_for_job
from tests.schema import validate_manifest

RBAC = Path(__file__).resolve().parents[3] / "deploy" / "rbac.yaml"
NAME = "gpu-quota-portal"
#: The emulator user of the portal's kubeconfig (worker and web process alike).
PORTAL = DEFAULT_USER
#: Every cluster-wide list (``GET /api/v1/<plural>``, ``GET /apis/<group>/<version>/<plural>``):
#: what a reconcile sends, once per managed kind.
CLUSTER_WIDE_LIST = r"^/api/v1/[a-z]+$|^/apis/[^/]+/[^/]+/[a-z]+$"

#: Grants the run need not exercise, each with its reason (also commented in rbac.yaml).
#: Empty: every granted verb is used by the flows below.
JUSTIFIED_UNUSED: dict[tuple[str, str, str], str] = {}


def documents() -> list[dict]:
    return [doc for doc in yaml.safe_load_all(RBAC.read_text()) if doc]


def cluster_role() -> dict:
    return next(doc for doc in documents() if doc["kind"] == "ClusterRole")


def granted(role: dict) -> set[tuple[str, str, str]]:
    """Every (verb, apiGroup, resource) the ClusterRole's rules allow (no wildcards in them)."""
    triples = set()
    for rule in role["rules"]:
        assert "nonResourceURLs" not in rule and "resourceNames" not in rule
        for field in ("apiGroups", "resources", "verbs"):
            assert "*" not in rule[field], f"wildcard in {field}: {rule}"
        triples |= {(verb, group, resource) for verb in rule["verbs"]
                    for group in rule["apiGroups"] for resource in rule["resources"]}
    return triples


def test_every_document_validates_and_the_binding_wires_the_service_account():
    docs = documents()
    for doc in docs:
        validate_manifest(doc)  # kubernetes-validate, strict, Kubernetes 1.33
    by_kind = {doc["kind"]: doc for doc in docs}
    assert sorted(by_kind) == ["ClusterRole", "ClusterRoleBinding", "Namespace", "ServiceAccount"]
    account = by_kind["ServiceAccount"]["metadata"]
    assert (account["name"], account["namespace"]) == (NAME, NAME)
    assert by_kind["Namespace"]["metadata"]["name"] == NAME
    binding = by_kind["ClusterRoleBinding"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                  "kind": "ClusterRole", "name": NAME}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": NAME}]
    assert by_kind["ClusterRole"]["metadata"]["name"] == NAME
    # Not labelled as managed by the portal: the reconciler would treat them as its own.
    for doc in docs:
        assert "app.kubernetes.io/managed-by" not in doc["metadata"].get("labels", {})


# --------------------------------------------------------------------------- helpers


def _submit(world, name: str, kind: str = "job") -> Job:
    """``POST /api/v1/jobs/`` as team-a's lead; wait until the worker created and read it."""
    body = {"team": "team-a", "name": name, "image": "ghcr.io/acme/train:1.4",
            "command": ["torchrun", "train.py"], "workers": 2, "gpus_per_worker": 4,
            "flavor": "h100", "kind": kind}
    response = api_as(world["lead_a"]).post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201, response.json()
    return wait_for_job(response.json()["id"], lambda j: j.cluster_uid and j.status_synced_at,
                        "created on the cluster")


def _cancel(world, job: Job) -> None:
    response = api_as(world["lead_a"]).post(f"/api/v1/jobs/{job.pk}/cancel/")
    assert response.status_code == 202, response.json()


def _managed(port, kinds) -> set[tuple[str, str]]:
    """(kind, name) of every object of ``kinds`` on the cluster with our managed-by label."""
    return {(kind, item["metadata"]["name"]) for api_version, kind in kinds
            for item in port.list(api_version, kind, managed_selector())}


def _resync_with_every_list_failing(server, cluster_id: int) -> None:
    """A reconcile whose lists all answer 503: each desired object is read with ``get``."""
    server.faults.add("GET", CLUSTER_WIDE_LIST, 503, count=None)
    try:
        result = cluster_reconcile(cluster_id=cluster_id)
    finally:
        server.faults.clear()
    by_action: dict[str, set] = {}
    for r in result.objects:
        by_action.setdefault(r.action, set()).add((r.key[1], r.key[3]))
    assert result.retry_later and result.writes == 0
    assert {kind for kind, name in by_action["failed"]} == {
        kind for _, kind in (KUEUE_KINDS + VOLCANO_KINDS)}  # each list, recorded
    assert all(name == "*" for _, name in by_action["failed"])
    assert set(by_action) == {"failed", "unchanged"}  # read one by one, found in sync


# --------------------------------------------------------------------------- the flows


def _kueue_flows(world, server, controllers) -> None:
    """Reconcile, list fallback, Job and JobSet submit, status sync, idle reclaim, cancel."""
    cluster = world["cluster"]
    first = cluster_reconcile(cluster_id=cluster.pk)
    assert not first.failed and {r.action for r in first.objects} == {"created"}
    assert {r.key[:2] for r in first.objects} == set(KUEUE_KINDS)
    assert cluster_reconcile(cluster_id=cluster.pk).writes == 0
    _resync_with_every_list_failing(server, cluster.pk)

    job = _submit(world, "train-job")
    job_set = _submit(world, "train-set", kind="jobset")
    assert (job.manifest["kind"], job_set.manifest["kind"]) == ("Job", "JobSet")
    workloads = {}
    for item in (job, job_set):  # Kueue: a Workload per job, waiting for quota
        workloads[item.pk] = kueue_sim.create_workload(controllers, live_job(controllers, item))
        kueue_sim.set_pending(controllers, workloads[item.pk],
                              message=kueue_sim.insufficient_quota_message(
                                  "nvidia.com/gpu", "h100", 8))
        kueue_sim.record_event(controllers, workloads[item.pk], reason="Pending",
                               message="waiting for quota")
        job_sync_task.delay(item.pk).get(timeout=30)  # workloads, events, visibility API
    # The periodic sync reads the namespace: its Jobs and JobSets, Workloads, events.
    assert jobs_sync_task.delay().get(timeout=30) == {"synced": 2, "cancelled": 0, "failed": 0}
    synced = {j.pk: j for j in Job.objects.filter(pk__in=workloads)}
    assert {j.phase for j in synced.values()} == {"Queued"}
    assert sorted(j.queue_position for j in synced.values()) == [0, 1]

    # Idle reclaim (what idle_flag_reclaim enqueues): the Workload is deactivated.
    done = job_deactivate_task.delay(job.pk).get(timeout=30)
    assert (done["kind"], done["active"]) == ("Workload", False)
    # Cancel: deactivate (the JobSet's; the Job's already is), then delete.
    for item in (job, job_set):
        _cancel(world, item)
        wait_for_job(item.pk, lambda j: j.deleted_at is not None, "deleted")
        assert live_job(controllers, item) is None
        assert kueue_sim.get_workload(controllers, workloads[item.pk])["spec"]["active"] is False


def _switch_to_volcano(world, converged, controllers) -> None:
    """The backend switch prunes every Kueue kind and creates the Volcano Queues."""
    cluster = cluster_backend_set(actor=world["staff"], cluster=world["cluster"],
                                  backend="volcano")
    converged(cluster)
    assert cluster.last_error == ""
    assert _managed(controllers, [k for k in KUEUE_KINDS if k not in VOLCANO_KINDS]) == set()
    assert _managed(controllers, [("scheduling.volcano.sh/v1beta1", "Queue")]) == {
        ("Queue", "research"), ("Queue", "parked"), ("Queue", "team-a"), ("Queue", "team-b")}


def _volcano_flows(world, server, controllers) -> None:
    """List fallback, vcjob submit, status sync, idle reclaim, cancel right after it, prune."""
    cluster = world["cluster"]
    assert cluster_reconcile(cluster_id=cluster.pk).writes == 0
    _resync_with_every_list_failing(server, cluster.pk)

    job = _submit(world, "train-vc")  # the web process reads the Queue (closed?) first
    live = live_job(controllers, job)
    assert (live["apiVersion"], live["kind"]) == ("batch.volcano.sh/v1alpha1", "Job")
    volcano_sim.create_podgroup(controllers, live)
    volcano_sim.set_podgroup(controllers, live, phase="Running", running=2, scheduled=True)
    volcano_sim.set_job_state(controllers, live, phase="Running", running=2)
    job_sync_task.delay(job.pk).get(timeout=30)  # vcjob, PodGroup, Queue
    # The periodic sync lists the namespace's vcjobs and PodGroups.
    assert jobs_sync_task.delay().get(timeout=30) == {"synced": 1, "cancelled": 0, "failed": 0}
    assert Job.objects.get(pk=job.pk).phase == "Running"

    # Idle reclaim: an AbortJob Command. Before Volcano consumes it, the owner cancels: the
    # cancel's AbortJob (same name) already exists (409), so the worker reads it instead.
    assert job_deactivate_task.delay(job.pk).get(timeout=30)["action"] == "AbortJob"
    _cancel(world, job)
    wait_for_job(job.pk, lambda j: j.phase == "Cancelled", "Cancelled (aborting)")
    namespace = job.manifest["metadata"]["namespace"]
    assert volcano_sim.execute_commands(controllers, namespace) == [("AbortJob", "train-vc")]
    jobs_sync_task.delay().get(timeout=30)  # TerminateJob, then the vcjob is deleted
    assert Job.objects.get(pk=job.pk).deleted_at is not None
    assert live_job(controllers, job) is None
    assert [c["action"] for c in controllers.list(COMMAND_API_VERSION, "Command", "",
                                                  namespace)] == ["TerminateJob"]

    # Prune: a team, a cohort and a priority class go.
    world["team_b"].delete()
    Cohort.objects.filter(cluster=cluster, name="parked").delete()
    PriorityClass.objects.filter(name="batch-low").delete()
    pruned = cluster_reconcile(cluster_id=cluster.pk)
    assert not pruned.failed
    assert {(r.key[1], r.key[3]) for r in pruned.objects if r.action == "pruned"} == {
        ("Queue", "team-b"), ("Queue", "parked"), ("ResourceQuota", "gpu-quota"),
        ("PriorityClass", "batch-low")}


@pytest.mark.usefixtures("celery_worker_process")
def test_cluster_role_grants_exactly_what_the_portal_uses_on_both_backends(
        world, converged, tmp_path):
    server, cluster = world["server"], world["cluster"]
    controllers = KubernetesCluster(kubeconfig=str(
        server.write_kubeconfig(tmp_path / "controllers", user="controllers")))
    # Shared objects of every kind, which the backend switch and the prune then remove.
    GpuFlavor.objects.create(cluster=cluster, name="t4", gpu_model="T4", physical_gpus=4,
                             node_labels={"nvidia.com/gpu.product": "Tesla-T4"})
    Cohort.objects.create(cluster=cluster, name="parked", weight=Decimal("1"))
    PriorityClass.objects.create(name="batch-low", value=100)
    server.counters.reset()

    _kueue_flows(world, server, controllers)
    _switch_to_volcano(world, converged, controllers)
    _volcano_flows(world, server, controllers)

    used = set(server.counters.access(PORTAL))
    role = granted(cluster_role())
    assert used - role == set(), f"used but not granted: {sorted(used - role)}"
    assert role - used == set(JUSTIFIED_UNUSED), (
        f"granted but not used: {sorted(role - used - set(JUSTIFIED_UNUSED))}")
    # The controllers' writes were theirs, not the portal's: the comparison is per user.
    theirs = set(server.counters.access("controllers"))
    assert ("patch", "kueue.x-k8s.io", "workloads/status") in theirs
    assert ("create", "scheduling.volcano.sh", "podgroups") in theirs
    assert not {t for t in used if t[2].endswith("/status")}
    # The visibility API is checked as a real API server checks it: get on the subresource.
    assert ("get", "visibility.kueue.x-k8s.io", "localqueues/pendingworkloads") in used
    # What least privilege leaves out.
    assert ("delete", "", "namespaces") not in role
    assert ("get", "kueue.x-k8s.io", "workloads") not in role
    assert not {t for t in role if t[0] in ("update", "watch", "deletecollection", "*")}
    # 5 verbs on 8 reconciled resources, 4 on namespaces; 5 on each of the 3 job kinds;
    # workloads 2, pendingworkloads 1, events 1, podgroups 2, commands 2.
    assert len(role) == 5 * 8 + 4 + 3 * 5 + 2 + 1 + 1 + 2 + 2


@pytest.mark.parametrize("kind", ["ClusterQueue", "ResourceQuota"])
def test_get_is_used_only_when_the_kinds_list_fails(kind, world):
    """The comparison is not vacuous: a reconcile without prune records no delete, and reads
    one object at a time only after its kind's list failed."""
    server, cluster = world["server"], world["cluster"]
    resource = {"ClusterQueue": ("kueue.x-k8s.io", "clusterqueues"),
                "ResourceQuota": ("", "resourcequotas")}[kind]
    server.counters.reset()
    cluster_reconcile(cluster_id=cluster.pk)
    verbs = {v for v, g, r in server.counters.access(PORTAL) if (g, r) == resource}
    assert verbs == {"list", "create", "patch"}  # no prune yet: no delete; no get
    server.counters.reset()
    server.faults.add("GET", rf"/{resource[1]}$", 503, count=1)
    result = cluster_reconcile(cluster_id=cluster.pk)
    assert [r.key[1:] for r in result.failed] == [(kind, "", "*")]
    gets = {(v, g, r): n for (v, g, r), n in server.counters.access(PORTAL).items()
            if v == "get"}
    assert gets == {("get", *resource): 2}  # one per team, instead of the list
