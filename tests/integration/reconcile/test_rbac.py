"""deploy/rbac.yaml: valid objects, and a ClusterRole granting exactly what the worker uses.

The worker's access is measured, not listed by hand: a full reconcile, a no-op
resync and a prune of every managed kind run against the API emulator, which
records each (verb, apiGroup, resource) an RBAC authorizer would check
(``Counters.access``; a server-side apply that creates is checked as create too).
"""

from decimal import Decimal
from pathlib import Path

import pytest
import yaml

from portal.models import Cohort, GpuFlavor, PriorityClass
from portal.services.reconcile import cluster_reconcile
from queues.reconcile import KUEUE_KINDS, RETAINED_KINDS
from tests.schema import validate_manifest

RBAC = Path(__file__).resolve().parents[3] / "deploy" / "rbac.yaml"
NAME = "gpu-quota-portal"

#: Grants the run need not exercise, each with its reason. The run is a Kueue cluster's:
#: it lists Volcano Queues (prune covers both backends) but writes none.
JUSTIFIED_UNUSED: dict[tuple[str, str, str], str] = {
    (verb, "scheduling.volcano.sh", "queues"): "written by a Volcano cluster's reconcile"
    for verb in ("get", "create", "patch", "delete")
}


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


def test_cluster_role_grants_exactly_what_reconcile_and_prune_use(world):
    server, cluster = world["server"], world["cluster"]
    # Shared objects of every kind that the prune step will then remove.
    spare = GpuFlavor.objects.create(cluster=cluster, name="t4", gpu_model="T4", physical_gpus=4,
                                     node_labels={"nvidia.com/gpu.product": "Tesla-T4"})
    parked = Cohort.objects.create(cluster=cluster, name="parked", weight=Decimal("1"))
    priority = PriorityClass.objects.create(name="batch-low", value=100)
    server.counters.reset()

    first = cluster_reconcile(cluster_id=cluster.pk)
    assert not first.failed and {r.action for r in first.objects} == {"created"}
    second = cluster_reconcile(cluster_id=cluster.pk)
    assert second.writes == 0
    world["team_b"].delete()
    spare.delete()
    parked.delete()
    priority.delete()
    third = cluster_reconcile(cluster_id=cluster.pk)
    assert not third.failed
    pruned = {(r.key[1], r.key[3]) for r in third.objects if r.action == "pruned"}
    assert pruned == {("ResourceFlavor", "t4"), ("Cohort", "parked"),
                      ("WorkloadPriorityClass", "batch-low"), ("PriorityClass", "batch-low"),
                      ("ResourceQuota", "gpu-quota"), ("ClusterQueue", "team-b"),
                      ("LocalQueue", "team-b")}
    # every managed kind was created and every prunable kind deleted in this run
    assert {r.key[:2] for r in first.objects} == set(KUEUE_KINDS)
    assert {r.key[:2] for r in third.objects if r.action == "pruned"} == (
        set(KUEUE_KINDS) - RETAINED_KINDS)

    used = set(server.counters.access())
    role = granted(cluster_role())
    assert used - role == set(), f"used but not granted: {sorted(used - role)}"
    assert role - used == set(JUSTIFIED_UNUSED), (
        f"granted but not used: {sorted(role - used - set(JUSTIFIED_UNUSED))}")
    # what least privilege leaves out
    assert ("delete", "", "namespaces") not in role
    assert not {t for t in role if t[0] in ("update", "watch", "deletecollection", "*")}
    assert len(role) == 4 + 5 + 5 + 5 * 5 + 5


@pytest.mark.parametrize("kind", ["ClusterQueue", "ResourceQuota"])
def test_the_access_record_names_each_resources_verbs(kind, world):
    """The comparison is not vacuous: a reconcile without prune records no delete."""
    server, cluster = world["server"], world["cluster"]
    server.counters.reset()
    cluster_reconcile(cluster_id=cluster.pk)
    resource = {"ClusterQueue": ("kueue.x-k8s.io", "clusterqueues"),
                "ResourceQuota": ("", "resourcequotas")}[kind]
    verbs = {v for v, g, r in server.counters.access() if (g, r) == resource}
    assert verbs == {"get", "list", "create", "patch"}  # no prune yet: no delete
