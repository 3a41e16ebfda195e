"""The quota workflow on both scheduler backends, and switching a cluster between them.

REST API -> service -> a real Celery worker -> the official client over HTTP
-> the Kubernetes API emulator (which serves the Kueue and Volcano CRDs).
Each workflow test runs once per backend; what is checked on the cluster is
the backend's own team queue: a Kueue ClusterQueue's ``nominalQuota``, a
Volcano Queue's ``deserved``/``capability``/``guarantee``.
"""

from decimal import Decimal

import pytest
from django.conf import settings
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from rest_framework.test import APIClient

from portal.models import AuditEvent, Cluster, ManagedObject, Team
from portal.selectors.specs import cluster_specs, desired_objects
from portal.services.catalog import cluster_backend_set
from portal.services.teams import team_delete
from portal.tasks import reconcile_cluster_task
from queues.cluster import KubernetesCluster
from queues.reconcile import key_of

pytestmark = pytest.mark.usefixtures("celery_worker_process")

KUEUE = "kueue.x-k8s.io/v1beta2"
VOLCANO = "scheduling.volcano.sh/v1beta1"
KUEUE_KINDS = {"ResourceFlavor", "Cohort", "WorkloadPriorityClass", "ClusterQueue", "LocalQueue"}


@pytest.fixture(params=["kueue", "volcano"])
def backend(request):
    return request.param


@pytest.fixture
def on_backend(world, backend):
    """The reconcile ``world`` with its cluster on ``backend``."""
    Cluster.objects.filter(pk=world["cluster"].pk).update(backend=backend)
    world["cluster"].refresh_from_db()
    return world


@pytest.fixture
def port(world):
    return KubernetesCluster(kubeconfig=settings.KUBECONFIG)


def _api(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def approve_over_api(world, *, nominal, borrowing=None, lending=None):
    body = {"team": "team-a", "flavor": "h100", "nominal_gpus": nominal,
            "justification": "pretraining"}
    if borrowing is not None:
        body["borrowing_limit_gpus"] = borrowing
    if lending is not None:
        body["lending_limit_gpus"] = lending
    created = _api(world["lead_a"]).post("/api/v1/quota-requests/", body, format="json")
    assert created.status_code == 201, created.json()
    approved = _api(world["staff"]).post(
        f"/api/v1/quota-requests/{created.json()['id']}/approve/", {"comment": "ok"},
        format="json")
    assert approved.status_code == 200, approved.json()


def team_queue_gpus(port, backend, slug):
    """What the team's queue grants in GPUs, read back from the cluster."""
    if backend == "kueue":
        cq = port.get(KUEUE, "ClusterQueue", slug)
        [group] = cq["spec"]["resourceGroups"]
        [flavor] = group["flavors"]
        return {r["name"]: r.get("nominalQuota") for r in flavor["resources"]}["nvidia.com/gpu"]
    queue = port.get(VOLCANO, "Queue", slug)
    return queue["spec"]["deserved"]["nvidia.com/gpu"]


def live_kinds(port):
    """(apiVersion, kind, name) of every managed object of both backends' CRDs."""
    found = set()
    for api_version, kind in [(KUEUE, k) for k in sorted(KUEUE_KINDS)] + [(VOLCANO, "Queue")]:
        for item in port.list(api_version, kind, "app.kubernetes.io/managed-by=gpu-quota-portal"):
            found.add((api_version, kind, item["metadata"]["name"]))
    return found


def test_approval_over_the_api_reaches_the_backends_queue(on_backend, backend, port, converged):
    approve_over_api(on_backend, nominal=24, borrowing=8, lending=4)
    cluster = converged(on_backend["cluster"])
    assert cluster.last_error == ""
    assert team_queue_gpus(port, backend, "team-a") == "24"
    quota = port.get("v1", "ResourceQuota", "gpu-quota", "team-a")
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "32"  # 24 + 8 borrowing
    assert port.get("v1", "Namespace", "team-a") is not None
    managed = live_kinds(port)
    if backend == "volcano":
        queue = port.get(VOLCANO, "Queue", "team-a")
        assert queue["spec"].pop("dequeueStrategy") == "traverse"  # the CRD's default
        assert queue["spec"] == {
            "weight": 1, "reclaimable": True, "parent": "research",
            # 24 H100 with 12 cores and 96Gi each
            "deserved": {"cpu": "288", "memory": "2304Gi", "nvidia.com/gpu": "24"},
            "capability": {"cpu": "384", "memory": "3Ti", "nvidia.com/gpu": "32"},
            "guarantee": {"resource": {"cpu": "240", "memory": "1920Gi",
                                       "nvidia.com/gpu": "20"}},
        }
        research = port.get(VOLCANO, "Queue", "research")
        assert research["spec"]["deserved"]["nvidia.com/gpu"] == "32"  # 24 + team-b 8
        assert not [k for k in managed if k[0] == KUEUE]
    else:
        assert not [k for k in managed if k[0] == VOLCANO]
        assert port.get(KUEUE, "LocalQueue", "team-a", "team-a") is not None
    rows = {row.key for row in ManagedObject.objects.filter(cluster=cluster)}
    assert rows == {key_of(o) for o in desired_objects(cluster_specs(cluster=cluster))}


def test_second_reconcile_writes_nothing(on_backend, converged):
    approve_over_api(on_backend, nominal=24)
    cluster = converged(on_backend["cluster"])
    server = on_backend["server"]
    server.counters.reset()
    summary = reconcile_cluster_task.delay(cluster.pk).get(timeout=30)
    assert summary["writes"] == 0
    assert set(summary["actions"]) == {"unchanged"}
    assert server.counters.writes == 0


def test_removing_a_team_prunes_its_queue_and_keeps_its_namespace(on_backend, backend, port,
                                                                  converged):
    approve_over_api(on_backend, nominal=24)
    cluster = converged(on_backend["cluster"])
    team_delete(actor=on_backend["staff"], team=on_backend["team_b"])
    converged(cluster)
    api_version, kind = (KUEUE, "ClusterQueue") if backend == "kueue" else (VOLCANO, "Queue")
    assert port.get(api_version, kind, "team-b") is None
    assert port.get(api_version, kind, "team-a") is not None
    assert port.get("v1", "ResourceQuota", "gpu-quota", "team-b") is None
    assert port.get("v1", "Namespace", "team-b") is not None


def test_fractional_weight_is_refused_for_a_volcano_cluster_only(on_backend, backend):
    response = _api(on_backend["staff"]).post(
        "/api/v1/teams/", {"slug": "new-team", "name": "New", "cluster": "gpu-east",
                           "weight": "1.5"}, format="json")
    if backend == "kueue":
        assert response.status_code == 201, response.json()
        assert Team.objects.get(slug="new-team").weight == Decimal("1.5")
        return
    assert response.status_code == 400
    assert "whole number" in " ".join(response.json()["weight"])
    assert not Team.objects.filter(slug="new-team").exists()
    cohort = _api(on_backend["staff"]).post(
        "/api/v1/cohorts/", {"cluster": "gpu-east", "name": "infra", "weight": "2.5"},
        format="json")
    assert cohort.status_code == 400
    assert "weight" in cohort.json()
    clash = _api(on_backend["staff"]).post(
        "/api/v1/teams/", {"slug": "research", "name": "R", "cluster": "gpu-east"}, format="json")
    assert clash.status_code == 400
    assert "Volcano queue" in " ".join(clash.json()["slug"])


def _unmanaged_objects(port):
    """Objects the portal does not own: they must survive every backend switch."""
    api = k8s_config.new_client_from_config(config_file=settings.KUBECONFIG)
    custom = k8s.CustomObjectsApi(api)
    custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", {
        "apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": "ops-batch"},
        "spec": {"weight": 1, "reclaimable": False}})
    custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", {
        "apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "legacy"},
        "spec": {"namespaceSelector": {}}})
    k8s.CoreV1Api(api).create_namespaced_config_map("team-a", k8s.V1ConfigMap(
        metadata=k8s.V1ObjectMeta(name="notebook-settings"), data={"theme": "dark"}))


def test_switching_backends_prunes_the_old_objects_and_converges_to_the_new(
        world, port, converged):
    staff = world["staff"]
    approve_over_api(world, nominal=24)
    cluster = converged(world["cluster"])
    kueue_managed = live_kinds(port)
    assert {k[1] for k in kueue_managed} == {"ResourceFlavor", "Cohort", "ClusterQueue",
                                             "LocalQueue"}
    _unmanaged_objects(port)

    cluster_backend_set(actor=staff, cluster=cluster, backend="volcano")
    cluster = converged(cluster)
    assert cluster.last_error == ""
    assert live_kinds(port) == {(VOLCANO, "Queue", n) for n in ("research", "team-a", "team-b")}
    assert team_queue_gpus(port, "volcano", "team-a") == "24"
    # The Namespace and ResourceQuota are shared by both backends: still there, still ours.
    assert port.get("v1", "ResourceQuota", "gpu-quota", "team-a") is not None
    rows = {row.key for row in ManagedObject.objects.filter(cluster=cluster)}
    assert rows == {key_of(o) for o in desired_objects(cluster_specs(cluster=cluster))}
    assert not [key for key in rows if key[0] == KUEUE]
    assert AuditEvent.objects.filter(action="cluster.backend_changed").count() == 1

    cluster_backend_set(actor=staff, cluster=cluster, backend="kueue")
    cluster = converged(cluster)
    assert live_kinds(port) == kueue_managed
    assert team_queue_gpus(port, "kueue", "team-a") == "24"
    # Never touched: an unlabelled Volcano Queue, an unlabelled ClusterQueue, a ConfigMap.
    assert port.get(VOLCANO, "Queue", "ops-batch")["spec"]["weight"] == 1
    assert port.get(KUEUE, "ClusterQueue", "legacy") is not None
    assert port.get("v1", "ConfigMap", "notebook-settings", "team-a")["data"] == {"theme": "dark"}


def test_switch_to_volcano_is_refused_while_a_weight_is_fractional(world):
    Team.objects.filter(pk=world["team_b"].pk).update(weight=Decimal("1.5"))
    cluster = world["cluster"]
    generation = cluster.spec_generation
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as info:
        cluster_backend_set(actor=world["staff"], cluster=cluster, backend="volcano")
    assert "team 'team-b'" in " ".join(info.value.message_dict["backend"])
    cluster.refresh_from_db()
    assert (cluster.backend, cluster.spec_generation) == ("kueue", generation)
