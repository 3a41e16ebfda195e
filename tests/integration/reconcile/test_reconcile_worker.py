"""Approve -> a real Celery worker -> the official client over HTTP -> the emulator.

Nothing is faked: the worker is a separate process running
``portal.reconcile_cluster``, which drives ``queues.cluster.KubernetesCluster``
against the Kubernetes API emulator; the tests read the cluster back through
the same port and count the emulator's write requests.
"""

import pytest
from django.conf import settings
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from portal.models import AuditEvent, ManagedObject
from portal.selectors.specs import cluster_specs, desired_objects
from portal.services.quota import quota_request_approve, quota_request_create
from portal.services.teams import team_delete
from portal.tasks import reconcile_cluster_task
from queues.cluster import KubernetesCluster
from queues.reconcile import key_of

pytestmark = pytest.mark.usefixtures("celery_worker_process")

KUEUE = "kueue.x-k8s.io/v1beta2"
MANAGED = {"app.kubernetes.io/managed-by": "gpu-quota-portal"}


@pytest.fixture
def port(world):
    """The cluster as the tests see it: the same port the worker uses."""
    return KubernetesCluster(kubeconfig=settings.KUBECONFIG)


def approve(world, *, team="team_a", nominal, borrowing=None):
    requester = world["lead_a"] if team == "team_a" else world["staff"]
    request = quota_request_create(
        actor=requester, team=world[team], flavor=world["h100"], nominal_gpus=nominal,
        borrowing_limit_gpus=borrowing, justification="training run",
    )
    return quota_request_approve(actor=world["staff"], request=request)


def nominal_gpus(cluster_queue):
    [group] = cluster_queue["spec"]["resourceGroups"]
    [flavor] = group["flavors"]
    return {r["name"]: r["nominalQuota"] for r in flavor["resources"]}["nvidia.com/gpu"]


def test_approval_reaches_the_cluster_through_the_worker(world, port, converged):
    approve(world, nominal=24)
    cluster = converged(world["cluster"])
    assert cluster.last_error == ""

    ns = port.get("v1", "Namespace", "team-a")
    assert ns["metadata"]["labels"]["portal.gpu/team"] == "team-a"
    assert ns["metadata"]["labels"].items() >= MANAGED.items()
    # Pod Security admission: enforce baseline, warn and audit restricted (the defaults)
    assert ns["metadata"]["labels"].items() >= {
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/warn": "restricted",
        "pod-security.kubernetes.io/audit": "restricted"}.items()
    quota = port.get("v1", "ResourceQuota", "gpu-quota", "team-a")
    # Never stricter than what Kueue can admit: 24 nominal + borrowing up to the cohort (24+8).
    assert int(quota["spec"]["hard"]["requests.nvidia.com/gpu"]) >= 24
    cq = port.get(KUEUE, "ClusterQueue", "team-a")
    assert cq["spec"]["cohortName"] == "research"
    assert nominal_gpus(cq) == "24"
    assert cq["spec"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "team-a"}}
    lq = port.get(KUEUE, "LocalQueue", "team-a", "team-a")
    assert lq["spec"]["clusterQueue"] == "team-a"
    flavor = port.get(KUEUE, "ResourceFlavor", "h100")
    assert flavor["spec"]["nodeLabels"] == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert port.get(KUEUE, "Cohort", "research") is not None
    assert port.get(KUEUE, "ClusterQueue", "team-b") is not None

    rows = {row.key: row for row in ManagedObject.objects.filter(cluster=cluster)}
    desired = desired_objects(cluster_specs(cluster=cluster))
    assert set(rows) == {key_of(obj) for obj in desired}
    for row in rows.values():
        assert row.applied_generation == cluster.spec_generation
        assert row.applied_hash and row.last_error == ""
    # No Kueue controller in the emulator: the queue's Active condition is not reported yet.
    assert rows[(KUEUE, "ClusterQueue", "", "team-a")].observed_state["state"] == "pending"
    assert rows[(KUEUE, "ClusterQueue", "", "team-a")].team == world["team_a"]


def test_second_reconcile_writes_nothing(world, converged):
    approve(world, nominal=24)
    cluster = converged(world["cluster"])
    server = world["server"]
    server.counters.reset()
    summary = reconcile_cluster_task.delay(cluster.pk).get(timeout=30)
    assert summary["writes"] == 0
    assert set(summary["actions"]) == {"unchanged"}
    assert server.counters.writes == 0
    assert server.counters.snapshot()["by_verb"].get("patch", 0) == 0


def test_quota_change_writes_exactly_the_changed_objects(world, converged):
    approve(world, nominal=24)
    cluster = converged(world["cluster"])
    before = {key_of(o): o for o in desired_objects(cluster_specs(cluster=cluster))}
    server = world["server"]
    server.counters.reset()

    approve(world, team="team_b", nominal=8, borrowing=12)
    cluster = converged(cluster)
    after = {key_of(o): o for o in desired_objects(cluster_specs(cluster=cluster))}
    changed = {key for key in after if after[key] != before.get(key)}
    assert (KUEUE, "ClusterQueue", "", "team-b") in changed
    assert (KUEUE, "ClusterQueue", "", "team-a") not in changed
    assert server.counters.writes == len(changed)
    patches = {res: verbs["patch"] for res, verbs in
               server.counters.snapshot()["by_resource"].items() if "patch" in verbs}
    expected: dict[str, int] = {}
    for _, kind, _, _ in changed:
        resource = {"ClusterQueue": "kueue.x-k8s.io/clusterqueues",
                    "ResourceQuota": "/resourcequotas"}[kind]
        expected[resource] = expected.get(resource, 0) + 1
    assert patches == expected


def test_removing_a_team_prunes_only_its_managed_objects(world, port, converged):
    approve(world, nominal=24)
    cluster = converged(world["cluster"])
    # Someone else's object in the team's namespace, without our labels.
    api = k8s_config.new_client_from_config(config_file=settings.KUBECONFIG)
    k8s.CoreV1Api(api).create_namespaced_config_map("team-b", k8s.V1ConfigMap(
        metadata=k8s.V1ObjectMeta(name="notebook-settings", labels={"owner": "alice"}),
        data={"theme": "dark"},
    ))

    team_delete(actor=world["staff"], team=world["team_b"])
    converged(cluster)

    assert port.get(KUEUE, "ClusterQueue", "team-b") is None
    assert port.get(KUEUE, "LocalQueue", "team-b", "team-b") is None
    assert port.get("v1", "ResourceQuota", "gpu-quota", "team-b") is None
    # Kept: the namespace (deleting it would delete what is not ours) and the ConfigMap.
    assert port.get("v1", "Namespace", "team-b") is not None
    config_map = port.get("v1", "ConfigMap", "notebook-settings", "team-b")
    assert config_map["data"] == {"theme": "dark"}
    # The other team is untouched.
    assert port.get(KUEUE, "ClusterQueue", "team-a") is not None
    keys = set(ManagedObject.objects.filter(cluster=cluster).values_list("kind", "name"))
    assert ("ClusterQueue", "team-b") not in keys
    assert ManagedObject.objects.get(kind="Namespace", name="team-b").observed_state[
        "state"] == "retained"


def test_hand_edited_cluster_queue_is_restored_and_drift_recorded(world, port, converged):
    approve(world, nominal=24)
    cluster = converged(world["cluster"])
    api = k8s_config.new_client_from_config(config_file=settings.KUBECONFIG)
    edited = port.get(KUEUE, "ClusterQueue", "team-a")
    edited["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = "64"
    k8s.CustomObjectsApi(api).patch_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", "team-a",
        {"spec": {"resourceGroups": edited["spec"]["resourceGroups"]}},
    )
    assert nominal_gpus(port.get(KUEUE, "ClusterQueue", "team-a")) == "64"

    server = world["server"]
    server.counters.reset()
    summary = reconcile_cluster_task.delay(cluster.pk).get(timeout=30)
    assert summary["writes"] == 1
    assert server.counters.writes == 1
    assert nominal_gpus(port.get(KUEUE, "ClusterQueue", "team-a")) == "24"
    row = ManagedObject.objects.get(cluster=cluster, kind="ClusterQueue", name="team-a")
    assert row.drift_count == 1 and row.last_drift_at is not None
    event = AuditEvent.objects.get(action="managed_object.drift_corrected")
    assert event.team == world["team_a"]
    assert event.after == {"kind": "ClusterQueue", "namespace": "", "name": "team-a"}
