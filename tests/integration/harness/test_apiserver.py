"""The Kubernetes API emulator, driven only through the official kubernetes client."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import (
    ConflictError,
    NotFoundError,
    UnprocessibleEntityError,
)

from harness.apiserver import EmulatorServer

REPO = Path(__file__).resolve().parents[3]
CRD_DIR = (REPO / ".." / "shared" / "crds").resolve()
KUEUE = "kueue.x-k8s.io/v1beta2"
MANAGER = "gpu-quota-portal"

if not CRD_DIR.is_dir():
    reason = f"CRD folder {CRD_DIR} not found (expected at <repo>/../shared/crds)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason, allow_module_level=True)


@pytest.fixture(scope="module")
def server():
    with EmulatorServer(crd_dir=CRD_DIR) as srv:
        yield srv


@pytest.fixture(scope="module")
def api_client(server, tmp_path_factory):
    kubeconfig = server.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
    config.load_kube_config(config_file=str(kubeconfig))  # the global loader accepts it too
    return config.new_client_from_config(config_file=str(kubeconfig))


@pytest.fixture(scope="module")
def dyn(api_client, tmp_path_factory):
    cache = tmp_path_factory.mktemp("discovery") / "cache.json"
    return DynamicClient(api_client, cache_file=str(cache))


@pytest.fixture
def core(api_client):
    return client.CoreV1Api(api_client)


@pytest.fixture(autouse=True)
def clean(server):
    server.reset()
    server.faults.clear()
    server.counters.reset()
    yield
    server.faults.clear()


def res(dyn, kind, api_version=KUEUE):
    return dyn.resources.get(api_version=api_version, kind=kind)


def flavor(name="a100", labels=None, node_labels=None):
    return {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"nodeLabels": node_labels or {"nvidia.com/gpu.product": "A100"}},
    }


def cluster_queue(name="team-a", quota=8):
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/managed-by": MANAGER}},
        "spec": {
            "cohortName": "research",
            "resourceGroups": [{
                "coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "a100",
                             "resources": [{"name": "nvidia.com/gpu", "nominalQuota": quota}]}],
            }],
        },
    }


def status_of(excinfo):
    """The Status object of an ApiException / DynamicApiError."""
    return json.loads(excinfo.value.body)


def make_ns(core, name):
    return core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))


# ------------------------------------------------------------------ discovery


def test_discovery_lists_crds_core_and_status_subresources(dyn):
    cq = res(dyn, "ClusterQueue")
    assert cq.namespaced is False
    assert cq.short_names == ["cq"]
    assert "status" in cq.subresources
    assert res(dyn, "ClusterQueue", "kueue.x-k8s.io/v1beta1").name == "clusterqueues"
    assert res(dyn, "LocalQueue").namespaced is True
    assert res(dyn, "Job", "batch.volcano.sh/v1alpha1").short_names == ["vcjob", "vj"]
    assert res(dyn, "JobSet", "jobset.x-k8s.io/v1alpha2").namespaced is True
    assert res(dyn, "PriorityClass", "scheduling.k8s.io/v1").namespaced is False
    assert "status" in res(dyn, "Job", "batch/v1").subresources
    listing = dyn.request("GET", "/apis/kueue.x-k8s.io/v1beta2")
    names = {r["name"] for r in listing.resources}
    assert {"clusterqueues", "clusterqueues/status", "workloads/status"} <= names
    group = dyn.request("GET", "/apis/kueue.x-k8s.io")
    assert group.preferredVersion.version == "v1beta2"
    assert dyn.version["kubernetes"]["major"] == "1"


# ------------------------------------------------------------------ namespaces


def test_typed_create_namespace_and_ssa_namespace(core, dyn):
    created = make_ns(core, "team-a")
    assert created.status.phase == "Active"
    assert created.metadata.uid
    assert int(created.metadata.resource_version) > 0
    assert created.metadata.labels == {"kubernetes.io/metadata.name": "team-a"}

    ns = res(dyn, "Namespace", "v1")
    body = {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "team-b", "labels": {"portal/team": "b"}}}
    applied = dyn.server_side_apply(ns, body=body, field_manager=MANAGER)
    assert applied.metadata.labels["portal/team"] == "b"
    assert applied.metadata.managedFields[0].manager == MANAGER
    assert applied.metadata.managedFields[0].operation == "Apply"
    assert core.read_namespace("team-b").metadata.uid == applied.metadata.uid
    names = {n.metadata.name for n in core.list_namespace().items}
    assert {"default", "team-a", "team-b"} <= names


# ------------------------------------------------------------------ CRUD


def test_crd_create_get_and_list_by_selectors(dyn):
    rf = res(dyn, "ResourceFlavor")
    first = dyn.create(rf, body=flavor("a100", {"tier": "gold", "team": "a"}))
    dyn.create(rf, body=flavor("h100", {"tier": "silver", "team": "b"}))
    dyn.create(rf, body=flavor("t4", {"tier": "bronze"}))
    assert first.kind == "ResourceFlavor"
    assert first.metadata.generation == 1
    assert first.metadata.creationTimestamp.endswith("Z")
    got = dyn.get(rf, name="a100")
    assert got.metadata.uid == first.metadata.uid
    assert got.spec.nodeLabels["nvidia.com/gpu.product"] == "A100"

    def names(**kw):
        return sorted(i.metadata.name for i in dyn.get(rf, **kw).items)

    assert names(label_selector="tier=gold") == ["a100"]
    assert names(label_selector="tier!=gold") == ["h100", "t4"]
    assert names(label_selector="tier in (gold,silver)") == ["a100", "h100"]
    assert names(label_selector="tier notin (gold,silver)") == ["t4"]
    assert names(label_selector="team") == ["a100", "h100"]
    assert names(label_selector="!team") == ["t4"]
    assert names(label_selector="team,tier in (silver, bronze)") == ["h100"]
    assert names(field_selector="metadata.name=t4") == ["t4"]
    listing = dyn.get(rf)
    assert listing.kind == "ResourceFlavorList"
    assert listing.apiVersion == KUEUE
    assert int(listing.metadata.resourceVersion) >= int(first.metadata.resourceVersion)
    assert all(i.kind == "ResourceFlavor" and i.apiVersion == KUEUE for i in listing.items)


def test_list_across_namespaces_and_field_selector_on_namespace(core, dyn):
    make_ns(core, "team-a")
    make_ns(core, "team-b")
    lq = res(dyn, "LocalQueue")
    for ns in ("team-a", "team-b"):
        dyn.create(lq, namespace=ns, body={
            "apiVersion": KUEUE, "kind": "LocalQueue",
            "metadata": {"name": "gpu", "namespace": ns}, "spec": {"clusterQueue": ns}})
    everywhere = dyn.get(lq)
    assert sorted(i.metadata.namespace for i in everywhere.items) == ["team-a", "team-b"]
    only_b = dyn.get(lq, field_selector="metadata.namespace=team-b")
    assert [i.spec.clusterQueue for i in only_b.items] == ["team-b"]
    assert len(dyn.get(lq, namespace="team-a").items) == 1


def test_not_found_already_exists_and_missing_namespace(dyn):
    rf = res(dyn, "ResourceFlavor")
    with pytest.raises(NotFoundError) as err:
        dyn.get(rf, name="nope")
    assert err.value.status == 404
    assert status_of(err)["message"] == 'resourceflavors.kueue.x-k8s.io "nope" not found'
    assert status_of(err)["reason"] == "NotFound"

    dyn.create(rf, body=flavor())
    with pytest.raises(ConflictError) as err:
        dyn.create(rf, body=flavor())
    assert err.value.status == 409
    assert status_of(err)["reason"] == "AlreadyExists"

    lq = res(dyn, "LocalQueue")
    with pytest.raises(NotFoundError) as err:
        dyn.create(lq, namespace="ghost", body={
            "apiVersion": KUEUE, "kind": "LocalQueue",
            "metadata": {"name": "gpu"}, "spec": {"clusterQueue": "x"}})
    assert status_of(err)["message"] == 'namespaces "ghost" not found'


def test_invalid_quota_and_uppercase_name_are_422_naming_the_field(dyn):
    cq = res(dyn, "ClusterQueue")
    with pytest.raises(UnprocessibleEntityError) as err:
        dyn.create(cq, body=cluster_queue(quota="abc"))
    status = status_of(err)
    assert status["kind"] == "Status"
    assert status["reason"] == "Invalid"
    assert status["code"] == 422
    assert status["details"]["kind"] == "ClusterQueue"
    fields = [c["field"] for c in status["details"]["causes"]]
    assert fields == ["spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"]

    rf = res(dyn, "ResourceFlavor")
    with pytest.raises(UnprocessibleEntityError) as err:
        dyn.create(rf, body=flavor(name="A100"))
    status = status_of(err)
    assert status["details"]["causes"][0]["field"] == "metadata.name"
    assert "RFC 1123" in status["message"]

    bad = cluster_queue()
    del bad["spec"]["resourceGroups"][0]["flavors"][0]["name"]
    with pytest.raises(UnprocessibleEntityError) as err:
        dyn.create(cq, body=bad)
    cause = status_of(err)["details"]["causes"][0]
    assert cause == {"reason": "FieldValueRequired", "message": "Required value",
                     "field": "spec.resourceGroups[0].flavors[0].name"}


def test_core_kind_validated_with_upstream_schema(dyn):
    # (the typed SchedulingV1Api rejects this client-side with pydantic; dynamic does not)
    pc = res(dyn, "PriorityClass", "scheduling.k8s.io/v1")
    with pytest.raises(UnprocessibleEntityError) as err:
        dyn.create(pc, body={"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                             "metadata": {"name": "high"}, "value": "very"})
    assert err.value.status == 422
    assert status_of(err)["details"]["causes"][0]["field"] == "value"


def test_unknown_fields_are_pruned_and_defaults_applied(dyn):
    cq = res(dyn, "ClusterQueue")
    body = cluster_queue()
    body["spec"]["notAField"] = 1
    created = dyn.create(cq, body=body)
    assert "notAField" not in created.spec
    assert created.spec.queueingStrategy == "BestEffortFIFO"


# ------------------------------------------------------------------ server-side apply


def test_ssa_creates_then_reapply_is_a_noop(dyn, server):
    cq = res(dyn, "ClusterQueue")
    first = dyn.server_side_apply(cq, body=cluster_queue(), field_manager=MANAGER)
    assert first.metadata.generation == 1
    server.counters.reset()
    again = dyn.server_side_apply(cq, body=cluster_queue(), field_manager=MANAGER)
    assert again.metadata.resourceVersion == first.metadata.resourceVersion
    assert again.metadata.generation == 1
    assert server.counters.writes == 1  # the request is a write even though nothing changed

    changed = dyn.server_side_apply(cq, body=cluster_queue(quota=16), field_manager=MANAGER)
    assert int(changed.metadata.resourceVersion) > int(first.metadata.resourceVersion)
    assert changed.metadata.generation == 2
    quota = changed.spec.resourceGroups[0].flavors[0].resources[0].nominalQuota
    assert quota == 16


def test_ssa_removes_fields_dropped_from_the_apply_config(dyn):
    rf = res(dyn, "ResourceFlavor")
    body = flavor(labels={"keep": "1", "drop": "1"},
                  node_labels={"gpu": "a100", "zone": "eu"})
    dyn.server_side_apply(rf, body=body, field_manager=MANAGER)
    body = flavor(labels={"keep": "1"}, node_labels={"gpu": "a100"})
    after = dyn.server_side_apply(rf, body=body, field_manager=MANAGER)
    assert dict(after.metadata.labels) == {"keep": "1"}
    assert dict(after.spec.nodeLabels) == {"gpu": "a100"}
    assert after.metadata.generation == 2


def test_ssa_conflict_with_other_manager_and_force_takeover(dyn):
    rf = res(dyn, "ResourceFlavor")
    dyn.server_side_apply(rf, body=flavor(node_labels={"gpu": "a100"}), field_manager=MANAGER)
    with pytest.raises(ConflictError) as err:
        dyn.server_side_apply(rf, body=flavor(node_labels={"gpu": "h100"}),
                              field_manager="intruder")
    status = status_of(err)
    assert status["reason"] == "Conflict"
    assert status["message"] == (f'Apply failed with 1 conflict: conflict with "{MANAGER}" '
                                 f"using {KUEUE}: .spec.nodeLabels.gpu")
    assert status["details"]["causes"][0]["field"] == ".spec.nodeLabels.gpu"

    # Same value: shared ownership, no conflict.
    dyn.server_side_apply(rf, body=flavor(node_labels={"gpu": "a100"}), field_manager="friend")

    taken = dyn.server_side_apply(rf, body=flavor(node_labels={"gpu": "h100"}),
                                  field_manager="intruder", force_conflicts=True)
    assert taken.spec.nodeLabels.gpu == "h100"
    owners = {m["manager"]: m["fieldsV1"] for m in taken.to_dict()["metadata"]["managedFields"]}
    assert "f:gpu" in owners["intruder"]["f:spec"]["f:nodeLabels"]
    assert "f:spec" not in owners[MANAGER]
    # The original manager now conflicts when re-applying its old value.
    with pytest.raises(ConflictError):
        dyn.server_side_apply(rf, body=flavor(node_labels={"gpu": "a100"}),
                              field_manager=MANAGER)


def test_fields_changed_by_patch_are_owned_by_the_patcher(dyn):
    rf = res(dyn, "ResourceFlavor")
    dyn.server_side_apply(rf, body=flavor(node_labels={"gpu": "a100"}), field_manager=MANAGER)
    dyn.patch(rf, name="a100", body={"spec": {"nodeLabels": {"gpu": "l4"}}},
              content_type="application/merge-patch+json", field_manager="kubectl-edit")
    with pytest.raises(ConflictError) as err:
        dyn.server_side_apply(rf, body=flavor(node_labels={"gpu": "a100"}),
                              field_manager=MANAGER)
    assert 'conflict with "kubectl-edit"' in status_of(err)["message"]
    got = dyn.get(rf, name="a100")
    ops = {(m.manager, m.operation) for m in got.metadata.managedFields}
    assert ("kubectl-edit", "Update") in ops


# ------------------------------------------------------------------ patch and update


def test_merge_patch_and_json_patch(dyn, core):
    rf = res(dyn, "ResourceFlavor")
    created = dyn.create(rf, body=flavor(labels={"a": "1"}))
    patched = dyn.patch(rf, name="a100", content_type="application/merge-patch+json",
                        body={"metadata": {"labels": {"a": None, "b": "2"}},
                              "spec": {"nodeLabels": {"zone": "eu"}}})
    assert dict(patched.metadata.labels) == {"b": "2"}
    assert patched.spec.nodeLabels.zone == "eu"
    assert patched.metadata.generation == 2
    label_only = dyn.patch(rf, name="a100", content_type="application/merge-patch+json",
                           body={"metadata": {"labels": {"c": "3"}}})
    assert label_only.metadata.generation == 2  # metadata changes do not bump generation
    assert int(label_only.metadata.resourceVersion) > int(created.metadata.resourceVersion)

    jp = dyn.patch(rf, name="a100", content_type="application/json-patch+json",
                   body=[{"op": "replace", "path": "/spec/nodeLabels/zone", "value": "us"}])
    assert jp.spec.nodeLabels.zone == "us"

    make_ns(core, "team-a")
    ns = core.patch_namespace("team-a", {"metadata": {"labels": {"x": "y"}}})  # strategic
    assert ns.metadata.labels["x"] == "y"


def test_put_with_stale_resource_version_conflicts(dyn):
    rf = res(dyn, "ResourceFlavor")
    created = dyn.create(rf, body=flavor()).to_dict()
    fresh = dict(created, spec={"nodeLabels": {"gpu": "h100"}})
    updated = dyn.replace(rf, body=fresh)
    assert updated.metadata.generation == 2
    stale = dict(created, spec={"nodeLabels": {"gpu": "t4"}})
    with pytest.raises(ConflictError) as err:
        dyn.replace(rf, body=stale)
    assert "the object has been modified" in status_of(err)["message"]
    assert dyn.get(rf, name="a100").spec.nodeLabels.gpu == "h100"


def test_status_subresource_isolation_and_generation(dyn):
    cq = res(dyn, "ClusterQueue")
    body = cluster_queue()
    body["status"] = {"pendingWorkloads": 99}
    created = dyn.create(cq, body=body)
    assert "status" not in created.to_dict()
    status_body = {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "team-a"},
                   "status": {"pendingWorkloads": 3}, "spec": {"cohortName": "ignored"}}
    after = dyn.patch(cq.subresources["status"], name="team-a", body=status_body,
                      content_type="application/merge-patch+json")
    assert after.status.pendingWorkloads == 3
    assert after.spec.cohortName == "research"  # spec ignored on /status
    assert after.metadata.generation == 1  # status writes never bump generation
    assert int(after.metadata.resourceVersion) > int(created.metadata.resourceVersion)

    main = dyn.patch(cq, name="team-a", content_type="application/merge-patch+json",
                     body={"status": {"pendingWorkloads": 0}})
    assert main.status.pendingWorkloads == 3  # status ignored on the main resource
    assert main.metadata.resourceVersion == after.metadata.resourceVersion  # nothing changed
    assert dyn.get(cq.subresources["status"], name="team-a").status.pendingWorkloads == 3


# ------------------------------------------------------------------ deletion


def test_namespace_deletion_removes_its_objects(core, dyn):
    make_ns(core, "team-a")
    make_ns(core, "team-b")
    lq = res(dyn, "LocalQueue")
    for ns in ("team-a", "team-b"):
        dyn.create(lq, namespace=ns, body={"apiVersion": KUEUE, "kind": "LocalQueue",
                                           "metadata": {"name": "gpu"},
                                           "spec": {"clusterQueue": "x"}})
    core.create_namespaced_config_map("team-a", client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="cfg"), data={"a": "b"}))
    core.delete_namespace("team-a")
    with pytest.raises(ApiException) as err:
        core.read_namespace("team-a")
    assert err.value.status == 404
    assert [i.metadata.namespace for i in dyn.get(lq).items] == ["team-b"]
    assert core.list_config_map_for_all_namespaces().items == []


def test_delete_collection_by_label(dyn):
    rf = res(dyn, "ResourceFlavor")
    dyn.create(rf, body=flavor("a100", {"managed": "yes"}))
    dyn.create(rf, body=flavor("h100", {"managed": "yes"}))
    dyn.create(rf, body=flavor("t4"))
    dyn.delete(rf, label_selector="managed=yes")
    assert [i.metadata.name for i in dyn.get(rf).items] == ["t4"]


# ------------------------------------------------------------------ faults and counters


def test_fault_500_twice_then_success(server, dyn):
    rf = res(dyn, "ResourceFlavor")
    server.faults.add("GET", r"/resourceflavors$", 500, count=2)
    for _ in range(2):
        with pytest.raises(ApiException) as err:
            dyn.get(rf)
        assert err.value.status == 500
    assert dyn.get(rf).kind == "ResourceFlavorList"
    assert server.counters.snapshot()["by_resource"]["kueue.x-k8s.io/resourceflavors"] == {
        "list": 3}


def test_fault_429_with_retry_after_via_http_control(dyn):
    dyn.request("POST", "/_emulator/faults",
                body={"method": "POST", "path": "/resourceflavors", "status": 429,
                      "retry_after": 7, "count": 1})
    rf = res(dyn, "ResourceFlavor")
    with pytest.raises(ApiException) as err:
        dyn.create(rf, body=flavor())
    assert err.value.status == 429
    assert err.value.headers["Retry-After"] == "7"
    assert dyn.request("GET", "/_emulator/faults").faults == []
    assert dyn.create(rf, body=flavor()).metadata.name == "a100"


def test_fault_delay(server, dyn):
    rf = res(dyn, "ResourceFlavor")
    server.faults.add("GET", "/resourceflavors", delay=0.5, count=1)
    start = time.monotonic()
    assert dyn.get(rf).items == []
    assert time.monotonic() - start >= 0.5
    start = time.monotonic()
    dyn.get(rf)
    assert time.monotonic() - start < 0.5


def test_fault_gate_holds_a_request_until_released(server, dyn):
    import threading

    rf = res(dyn, "ResourceFlavor")
    gate = threading.Event()
    fault = server.faults.add("POST", "/resourceflavors$", gate=gate)
    assert server.faults.list()[0]["gate"] is True  # JSON-ready: whether a gate is set
    done = []
    thread = threading.Thread(target=lambda: done.append(dyn.create(rf, body=flavor())))
    thread.start()
    deadline = time.monotonic() + 10
    while fault.hits == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert fault.hits == 1 and done == []
    assert dyn.get(rf).items == []  # other requests are served meanwhile; nothing created
    gate.set()
    thread.join(10)
    assert [f.metadata.name for f in done] == ["a100"]
    assert [i.metadata.name for i in dyn.get(rf).items] == ["a100"]


def test_dropped_connection_makes_the_client_raise(server, dyn):
    rf = res(dyn, "ResourceFlavor")
    server.faults.add("POST", "/resourceflavors", drop=True, count=1)
    with pytest.raises(urllib3.exceptions.HTTPError):
        dyn.create(rf, body=flavor())
    assert dyn.create(rf, body=flavor()).metadata.name == "a100"


def test_write_counters_and_http_reset(server, dyn):
    rf = res(dyn, "ResourceFlavor")
    dyn.server_side_apply(rf, body=flavor(), field_manager=MANAGER)
    dyn.get(rf, name="a100")
    dyn.get(rf)
    dyn.delete(rf, name="a100")
    counts = dyn.request("GET", "/_emulator/counters")
    assert counts.writes == 2
    assert counts.by_resource["kueue.x-k8s.io/resourceflavors"].to_dict() == {
        "patch": 1, "get": 1, "list": 1, "delete": 1}
    dyn.request("DELETE", "/_emulator/counters")
    assert server.counters.snapshot()["total"] == 0
    dyn.create(rf, body=flavor())
    dyn.request("POST", "/_emulator/reset")
    assert dyn.get(rf).items == []


def test_registered_get_handler_is_served_and_discovered(server, dyn):
    def pending(req):
        return {"kind": "PendingWorkloadsSummary",
                "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
                "metadata": {"name": req.match["lq"], "namespace": req.match["ns"]},
                "items": []}

    server.register_get(
        r"/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/(?P<ns>[^/]+)"
        r"/localqueues/(?P<lq>[^/]+)/pendingworkloads", pending,
        group="visibility.kueue.x-k8s.io", version="v1beta2",
        resources=[{"name": "localqueues/pendingworkloads", "singularName": "",
                    "namespaced": True, "kind": "PendingWorkloadsSummary", "verbs": ["get"]}])
    got = dyn.request("GET", "/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/team-a"
                             "/localqueues/gpu/pendingworkloads")
    assert got.metadata.name == "gpu"
    assert got.metadata.namespace == "team-a"
    groups = {g["name"] for g in dyn.request("GET", "/apis").groups}
    assert "visibility.kueue.x-k8s.io" in groups
