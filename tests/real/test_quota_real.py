"""Approve -> the real Celery worker -> the real kube-apiserver (RBAC, CEL, Kueue's webhooks)
-> the real Kueue, which reports each ClusterQueue.

The worker acts as the ``gpu-quota-portal`` ServiceAccount; the tests look at the
cluster as admin. "Writes nothing" is read from the cluster itself: the
resourceVersion of every managed object is unchanged.
"""

import pytest

from portal.models import ManagedObject
from portal.services.quota import quota_request_approve, quota_request_create
from portal.services.teams import team_delete
from portal.tasks import reconcile_cluster_task
from queues.render.labels import managed_selector
from tests.real.conftest import KUEUE, condition, wait_until

pytestmark = pytest.mark.usefixtures("celery_worker_process")

KINDS = (("v1", "Namespace"), ("v1", "ResourceQuota"), (KUEUE, "ResourceFlavor"),
         (KUEUE, "Cohort"), (KUEUE, "ClusterQueue"), (KUEUE, "LocalQueue"),
         (KUEUE, "WorkloadPriorityClass"), ("scheduling.k8s.io/v1", "PriorityClass"))


def approve(world, *, team="team_a", flavor="h100", nominal, borrowing=None):
    request = quota_request_create(
        actor=world["staff"], team=world[team], flavor=world[flavor], nominal_gpus=nominal,
        borrowing_limit_gpus=borrowing, justification="training run",
    )
    return quota_request_approve(actor=world["staff"], request=request)


def managed(world) -> dict[tuple, dict]:
    """The test world's managed objects on the cluster, by (kind, namespace, name)."""
    out = {}
    for api_version, kind in KINDS:
        for obj in world["admin"].list(api_version, kind, managed_selector()):
            meta = obj["metadata"]
            if world["n"] in meta["name"] or world["n"] in (meta.get("namespace") or ""):
                out[(kind, meta.get("namespace") or "", meta["name"])] = obj
    return out


def versions(objects: dict[tuple, dict]) -> dict[tuple, str]:
    return {key: obj["metadata"]["resourceVersion"] for key, obj in objects.items()}


def gpu_quota(cluster_queue: dict, flavor: str) -> str:
    for group in cluster_queue["spec"]["resourceGroups"]:
        for entry in group["flavors"]:
            if entry["name"] == flavor:
                return {r["name"]: r["nominalQuota"] for r in entry["resources"]}["nvidia.com/gpu"]
    raise AssertionError(f"no flavor {flavor} in {cluster_queue['spec']}")


def active(world, queue: str) -> dict:
    """Wait until Kueue reports ClusterQueue ``queue`` Active; its condition."""
    admin = world["admin"]

    def check():
        cond = condition(admin.get(KUEUE, "ClusterQueue", queue), "Active")
        return cond if cond and cond["status"] == "True" else None

    return wait_until(check, f"Kueue to report ClusterQueue {queue} Active")


def settled(world, converged):
    """Reconciled (a resync now, as beat would), every ClusterQueue Active."""
    reconcile_cluster_task.delay(world["cluster"].pk).get(timeout=60)
    cluster = converged(world["cluster"], timeout=60)
    for team in ("team_a", "team_b"):
        active(world, world[team].slug)
    return cluster


def test_approval_creates_every_object_and_kueue_reports_the_queue_active(rworld, converged):
    w, admin = rworld, rworld["admin"]
    approve(w, nominal=4)
    cluster = converged(w["cluster"], timeout=60)
    assert cluster.last_error == ""
    slug, n = w["team_a"].slug, w["n"]
    assert admin.get("v1", "Namespace", slug)["metadata"]["labels"]["portal.gpu/team"] == slug
    quota = admin.get("v1", "ResourceQuota", "gpu-quota", slug)
    assert quota is not None
    # The resourcequota controller (not the portal) fills in status.hard.
    wait_until(lambda: (admin.get("v1", "ResourceQuota", "gpu-quota", slug).get("status")
                        or {}).get("hard"), "the ResourceQuota's status")
    assert admin.get(KUEUE, "ResourceFlavor", f"h100-{n}")["spec"]["nodeLabels"] == {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert admin.get(KUEUE, "Cohort", f"research-{n}") is not None
    cq = admin.get(KUEUE, "ClusterQueue", slug)
    assert gpu_quota(cq, f"h100-{n}") == "4"
    assert admin.get(KUEUE, "LocalQueue", slug, slug)["spec"]["clusterQueue"] == slug
    assert admin.get(KUEUE, "WorkloadPriorityClass", f"high-{n}")["value"] == 1000
    assert admin.get("scheduling.k8s.io/v1", "PriorityClass", f"high-{n}")["value"] == 1000

    cond = active(w, slug)
    assert cond["reason"] == "Ready"
    # Kueue's webhook defaulted what the portal left out (it is no longer only ours).
    assert cq["spec"]["flavorFungibility"]
    # The next resync reads Kueue's verdict into the portal.
    reconcile_cluster_task.delay(cluster.pk).get(timeout=60)
    row = ManagedObject.objects.get(cluster=cluster, kind="ClusterQueue", name=slug)
    assert row.observed_state["state"] == "applied"
    assert row.observed_state["reason"] == "Ready"


def test_a_second_resync_writes_nothing(rworld, converged):
    approve(rworld, nominal=4)
    cluster = settled(rworld, converged)
    before = versions(managed(rworld))
    assert len(before) >= 10
    summary = reconcile_cluster_task.delay(cluster.pk).get(timeout=60)
    assert summary["writes"] == 0, summary
    assert versions(managed(rworld)) == before


def test_a_quota_change_writes_only_what_changed(rworld, converged):
    w = rworld
    approve(w, nominal=4)
    cluster = settled(w, converged)
    before = versions(managed(w))
    approve(w, team="team_b", nominal=6, borrowing=2)
    converged(cluster, timeout=60)
    after = versions(managed(w))
    changed = {key for key in after if after[key] != before.get(key)}
    slug_a, slug_b = w["team_a"].slug, w["team_b"].slug
    # team-b's ClusterQueue and ResourceQuota, and team-a's ResourceQuota (its hard cap
    # follows what team-a can borrow from team-b); no ClusterQueue of team-a, nothing shared.
    assert changed <= {("ClusterQueue", "", slug_b), ("ResourceQuota", slug_b, "gpu-quota"),
                       ("ResourceQuota", slug_a, "gpu-quota")}
    assert ("ClusterQueue", "", slug_b) in changed
    assert gpu_quota(w["admin"].get(KUEUE, "ClusterQueue", slug_b), f"h100-{w['n']}") == "6"


def test_prune_removes_a_deleted_team_and_leaves_unmanaged_objects(rworld, converged):
    w, admin = rworld, rworld["admin"]
    cluster = settled(w, converged)
    slug_b = w["team_b"].slug
    # Someone else's objects: a ConfigMap in the team namespace, a ClusterQueue of their own.
    admin.create({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "notebook-settings", "namespace": slug_b},
                  "data": {"theme": "dark"}})
    admin.create({"apiVersion": KUEUE, "kind": "ClusterQueue",
                  "metadata": {"name": f"hand-made-{w['n']}"},
                  "spec": {"namespaceSelector": {}, "resourceGroups": []}})
    team_delete(actor=w["staff"], team=w["team_b"])
    converged(cluster, timeout=60)
    wait_until(lambda: admin.get(KUEUE, "ClusterQueue", slug_b) is None,
               "team-b's ClusterQueue to be deleted")
    assert admin.get(KUEUE, "LocalQueue", slug_b, slug_b) is None
    assert admin.get("v1", "ResourceQuota", "gpu-quota", slug_b) is None
    assert admin.get("v1", "Namespace", slug_b) is not None  # retained
    assert admin.get("v1", "ConfigMap", "notebook-settings", slug_b)["data"] == {"theme": "dark"}
    assert admin.get(KUEUE, "ClusterQueue", f"hand-made-{w['n']}") is not None
    assert admin.get(KUEUE, "ClusterQueue", w["team_a"].slug) is not None
    admin.delete(KUEUE, "ClusterQueue", f"hand-made-{w['n']}")


def test_a_hand_edit_by_another_user_is_restored(rworld, converged):
    w, admin = rworld, rworld["admin"]
    cluster = settled(w, converged)
    slug, flavor = w["team_a"].slug, f"h100-{w['n']}"
    cq = admin.get(KUEUE, "ClusterQueue", slug)
    groups = cq["spec"]["resourceGroups"]
    for entry in groups[0]["flavors"]:
        for resource in entry["resources"]:
            if resource["name"] == "nvidia.com/gpu" and entry["name"] == flavor:
                resource["nominalQuota"] = "64"
    admin.patch(KUEUE, "ClusterQueue", slug, None, {"spec": {"resourceGroups": groups}},
                field_manager="kubectl-edit")
    assert gpu_quota(admin.get(KUEUE, "ClusterQueue", slug), flavor) == "64"
    summary = reconcile_cluster_task.delay(cluster.pk).get(timeout=60)
    assert summary["writes"] == 1, summary
    assert gpu_quota(admin.get(KUEUE, "ClusterQueue", slug), flavor) == "8"
    row = ManagedObject.objects.get(cluster=cluster, kind="ClusterQueue", name=slug)
    assert row.drift_count == 1


def test_a_missing_flavor_shows_not_active_in_kueues_words_and_recovers(rworld, converged):
    w, admin = rworld, rworld["admin"]
    cluster = settled(w, converged)
    slug, flavor = w["team_a"].slug, f"h100-{w['n']}"
    # Another user deletes the flavor; Kueue's finalizer keeps it while queues use it,
    # so take the finalizer away as a careless admin would.
    admin.delete(KUEUE, "ResourceFlavor", flavor)
    admin.patch(KUEUE, "ResourceFlavor", flavor, None, {"metadata": {"finalizers": None}},
                field_manager="kubectl-edit")
    wait_until(lambda: admin.get(KUEUE, "ResourceFlavor", flavor) is None, "the flavor gone")

    def inactive():
        cond = condition(admin.get(KUEUE, "ClusterQueue", slug), "Active")
        return cond if cond and cond["status"] == "False" else None

    cond = wait_until(inactive, "Kueue to report the ClusterQueue inactive")
    assert cond["reason"] == "FlavorNotFound"
    assert flavor in cond["message"]
    # The portal records Kueue's own words for the queue, then puts the flavor back.
    from queues.cluster import KubernetesCluster
    from queues.reconcile import observe

    seen = observe(KubernetesCluster(kubeconfig=w["plane"].portal_kubeconfig).get(
        KUEUE, "ClusterQueue", slug))
    assert seen["state"] == "not-active"
    assert seen["message"] == cond["message"]
    reconcile_cluster_task.delay(cluster.pk).get(timeout=60)
    assert admin.get(KUEUE, "ResourceFlavor", flavor) is not None
    active(w, slug)
    reconcile_cluster_task.delay(cluster.pk).get(timeout=60)
    row = ManagedObject.objects.get(cluster=cluster, kind="ClusterQueue", name=slug)
    assert row.observed_state["state"] == "applied"
