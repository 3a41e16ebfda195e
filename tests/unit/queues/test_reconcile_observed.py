"""The observed object each reconcile result carries (what the staff YAML view shows)."""

from queues.errors import PermanentError, TransientError
from queues.reconcile import key_of, reconcile, strip_server_fields
from tests.unit.queues.test_reconcile import FakeCluster, applied, cluster_queue, namespace, world


def test_strip_server_fields_keeps_content_and_status():
    live = {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "a", "labels": {"x": "y"}, "uid": "u-1", "resourceVersion": "7",
                     "generation": 2, "creationTimestamp": "2026-01-01T00:00:00Z",
                     "managedFields": [{"manager": "gpu-quota-portal"}], "selfLink": None,
                     "annotations": {"note": "kept"}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }
    assert strip_server_fields(live) == {
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "a", "labels": {"x": "y"}, "annotations": {"note": "kept"}},
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }
    assert live["metadata"]["uid"] == "u-1"  # the input is not changed
    assert strip_server_fields(None) is None


def test_created_and_unchanged_objects_carry_the_stored_object():
    cluster = FakeCluster()
    first = reconcile(cluster, world("a"), {})
    by_key = first.by_key()
    cq = by_key[key_of(cluster_queue("a"))]
    assert cq.live_known
    assert cq.live["spec"] == cluster_queue("a")["spec"]
    assert "resourceVersion" not in cq.live["metadata"]
    assert cq.live["status"] == {}
    cluster.objects[key_of(cluster_queue("a"))]["status"] = {"conditions": [
        {"type": "Active", "status": "True", "reason": "Ready"}]}
    second = reconcile(cluster, world("a"), applied(first)).by_key()
    assert second[key_of(cluster_queue("a"))].action == "unchanged"
    assert second[key_of(cluster_queue("a"))].live["status"]["conditions"][0]["reason"] == "Ready"


def test_drifted_object_carries_the_restored_object():
    cluster = FakeCluster()
    last = applied(reconcile(cluster, world("a"), {}))
    key = key_of(cluster_queue("a"))
    cluster.objects[key]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0][
        "nominalQuota"] = "64"
    item = reconcile(cluster, world("a"), last).by_key()[key]
    assert item.drift and item.live_known
    assert item.live["spec"] == cluster_queue("a")["spec"]


def test_failed_apply_carries_what_was_read_and_failed_get_carries_nothing():
    cluster = FakeCluster()
    last = applied(reconcile(cluster, world("a"), {}))
    cluster.errors[("apply", "a")] = PermanentError("apply: invalid", status=422, reason="Invalid")
    changed = [cluster_queue("a", gpus="9") if o["kind"] == "ClusterQueue" else o
               for o in world("a")]
    item = reconcile(cluster, changed, last).by_key()[key_of(cluster_queue("a"))]
    assert item.action == "failed" and item.live_known
    assert item.live["spec"] == cluster_queue("a")["spec"]  # still the old content
    # Namespaces are read from one list per run; when that list fails, each is read with
    # get (the fallback), and a failed get leaves nothing known about the object.
    cluster.errors[("list", "Namespace")] = TransientError("list: 503", status=503)
    cluster.errors[("get", "a")] = TransientError("get: 503", status=503)
    result = reconcile(cluster, world("a"), last).by_key()
    assert result[("v1", "Namespace", "", "*")].action == "failed"
    item = result[key_of(namespace("a"))]
    assert item.action == "failed" and not item.live_known and item.live is None
    assert ("get", "a") not in cluster.errors  # the get was sent (and failed)


def test_retained_namespace_carries_the_listed_object():
    cluster = FakeCluster()
    reconcile(cluster, world("a"), {})
    result = reconcile(cluster, world(), {})
    [retained] = [r for r in result.objects if r.action == "retained"]
    assert retained.live_known and retained.live["metadata"]["name"] == "a"
