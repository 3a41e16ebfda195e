"""queues.reconcile against a dict-backed fake port (pure logic; the real port is
exercised over HTTP in tests/integration/reconcile)."""

import copy

import pytest

from queues.errors import PermanentError, TransientError
from queues.reconcile import MANAGED_KINDS, content_hash, is_subset, key_of, observe, reconcile
from queues.render.labels import managed_selector, shared_labels, team_labels

KUEUE = "kueue.x-k8s.io/v1beta2"


class FakeCluster:
    """Objects in a dict; adds server-side fields on apply; counts writes; injectable errors."""

    def __init__(self):
        self.objects = {}
        self.writes = 0
        self.lists = 0
        self.gets = 0
        self.errors = {}  # (verb, name) -> exception, raised once

    def _raise(self, verb, name):
        exc = self.errors.pop((verb, name), None)
        if exc is not None:
            raise exc

    def apply(self, obj):
        self._raise("apply", obj["metadata"]["name"])
        self.writes += 1
        key = key_of(obj)
        live = copy.deepcopy(self.objects.get(key) or {})
        merged = {**live, **copy.deepcopy(obj)}
        merged["metadata"] = {**live.get("metadata", {}), **copy.deepcopy(obj["metadata"]),
                              "resourceVersion": str(self.writes)}
        merged.setdefault("status", {})
        self.objects[key] = merged
        return copy.deepcopy(merged)

    def get(self, api_version, kind, name, namespace=None):
        self._raise("get", name)
        self.gets += 1
        obj = self.objects.get((api_version, kind, namespace or "", name))
        return copy.deepcopy(obj)

    def list(self, api_version, kind, label_selector="", namespace=None):
        self._raise("list", kind)
        self.lists += 1
        wanted = dict(part.split("=") for part in label_selector.split(",") if part)
        return [copy.deepcopy(o) for k, o in sorted(self.objects.items())
                if k[:2] == (api_version, kind)
                and all(o["metadata"].get("labels", {}).get(lk) == lv for lk, lv in wanted.items())]

    def delete(self, api_version, kind, name, namespace=None, *, missing_ok=True):
        self._raise("delete", name)
        self.writes += 1
        return self.objects.pop((api_version, kind, namespace or "", name), None) is not None


def flavor(name="h100", gpu_label="H100"):
    return {"apiVersion": KUEUE, "kind": "ResourceFlavor",
            "metadata": {"name": name, "labels": shared_labels("gpu-flavor")},
            "spec": {"nodeLabels": {"nvidia.com/gpu.product": gpu_label}}}


def namespace(slug):
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": slug, "labels": team_labels(slug)}}


def cluster_queue(slug, gpus="8"):
    return {"apiVersion": KUEUE, "kind": "ClusterQueue",
            "metadata": {"name": slug, "labels": team_labels(slug)},
            "spec": {"resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                {"name": "h100", "resources": [{"name": "nvidia.com/gpu",
                                                 "nominalQuota": gpus}]}]}]}}


def local_queue(slug):
    return {"apiVersion": KUEUE, "kind": "LocalQueue",
            "metadata": {"name": slug, "namespace": slug, "labels": team_labels(slug)},
            "spec": {"clusterQueue": slug}}


def world(*slugs, gpus="8"):
    objs = [flavor()]
    for slug in slugs:
        objs += [namespace(slug), cluster_queue(slug, gpus), local_queue(slug)]
    return objs


def applied(result):
    return {r.key: r.hash for r in result.objects if r.applied}


def actions(result):
    return {(r.key[1], r.key[3]): r.action for r in result.objects}


def test_first_run_creates_in_order_and_second_run_writes_nothing():
    cluster = FakeCluster()
    first = reconcile(cluster, world("a", "b"), {})
    assert [r.key[1] for r in first.objects] == [
        "ResourceFlavor", "Namespace", "ClusterQueue", "LocalQueue",
        "Namespace", "ClusterQueue", "LocalQueue"]
    assert {r.action for r in first.objects} == {"created"}
    assert first.writes == cluster.writes == 7
    second = reconcile(cluster, world("a", "b"), applied(first))
    assert {r.action for r in second.objects} == {"unchanged"}
    assert second.writes == 0 and cluster.writes == 7
    assert not second.retry_later and not second.drifted


def test_server_defaults_and_status_do_not_cause_writes():
    cluster = FakeCluster()
    last = applied(reconcile(cluster, world("a"), {}))
    key = key_of(cluster_queue("a"))
    live = cluster.objects[key]
    live["spec"]["queueingStrategy"] = "BestEffortFIFO"  # a server default
    live["metadata"]["labels"]["kubernetes.io/metadata.name"] = "a"
    live["status"] = {"conditions": [{"type": "Active", "status": "True", "reason": "Ready"}]}
    result = reconcile(cluster, world("a"), last)
    assert result.writes == 0
    assert result.by_key()[key].observed["state"] == "applied"


def test_changed_content_writes_exactly_that_object():
    cluster = FakeCluster()
    last = applied(reconcile(cluster, world("a", "b"), {}))
    desired = world("a", "b")
    desired[-2] = cluster_queue("b", "16")
    result = reconcile(cluster, desired, last)
    assert result.writes == 1
    assert {k: v for k, v in actions(result).items() if v != "unchanged"} == {
        ("ClusterQueue", "b"): "updated"}
    assert not result.by_key()[key_of(desired[-2])].drift


def test_hand_edit_of_our_field_is_drift_and_is_restored():
    cluster = FakeCluster()
    last = applied(reconcile(cluster, world("a"), {}))
    key = key_of(cluster_queue("a"))
    cluster.objects[key]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0][
        "nominalQuota"] = "800"
    result = reconcile(cluster, world("a"), last)
    assert actions(result)[("ClusterQueue", "a")] == "updated"
    assert [r.key for r in result.drifted] == [key]
    assert cluster.objects[key]["spec"] == cluster_queue("a")["spec"]


def test_deleted_object_is_recreated():
    cluster = FakeCluster()
    last = applied(reconcile(cluster, world("a"), {}))
    del cluster.objects[key_of(local_queue("a"))]
    result = reconcile(cluster, world("a"), last)
    assert actions(result)[("LocalQueue", "a")] == "created"
    assert result.writes == 1


def test_prune_deletes_only_labelled_objects_and_retains_namespaces():
    cluster = FakeCluster()
    last = applied(reconcile(cluster, world("a", "b"), {}))
    unmanaged = {"apiVersion": KUEUE, "kind": "LocalQueue",
                 "metadata": {"name": "hand-made", "namespace": "b", "labels": {}},
                 "spec": {"clusterQueue": "b"}}
    cluster.objects[key_of(unmanaged)] = unmanaged
    result = reconcile(cluster, world("a"), last)
    changed = {k: v for k, v in actions(result).items() if v != "unchanged"}
    assert changed == {("LocalQueue", "b"): "pruned", ("ClusterQueue", "b"): "pruned",
                       ("Namespace", "b"): "retained"}
    # Dependents first: the LocalQueue goes before its ClusterQueue.
    pruned = [r.key[1] for r in result.objects if r.action == "pruned"]
    assert pruned == ["LocalQueue", "ClusterQueue"]
    assert key_of(unmanaged) in cluster.objects
    assert key_of(namespace("b")) in cluster.objects
    assert result.writes == 2


def test_transient_error_is_recorded_and_others_continue():
    cluster = FakeCluster()
    cluster.errors[("apply", "a")] = TransientError("apply: injected 500", status=500,
                                                    reason="InternalError")
    result = reconcile(cluster, world("a"), {})
    by = actions(result)
    assert by[("Namespace", "a")] == "failed"
    assert by[("ClusterQueue", "a")] == "created"
    assert result.retry_later
    failed = result.failed[0]
    assert failed.transient and "injected 500" in failed.error and not failed.applied
    # Next run: the failed object is written, nothing else.
    again = reconcile(cluster, world("a"), applied(result))
    assert again.writes == 1 and not again.retry_later


def test_permanent_error_is_recorded_on_that_object_only():
    cluster = FakeCluster()
    message = 'ClusterQueue.kueue.x-k8s.io "a" is invalid: spec.resourceGroups: Invalid value'
    cluster.errors[("apply", "a")] = PermanentError(message, status=422, reason="Invalid")
    desired = [flavor(), cluster_queue("a"), local_queue("a")]
    desired[2]["metadata"]["name"] = "lq"
    result = reconcile(cluster, desired, {})
    assert actions(result) == {("ResourceFlavor", "h100"): "created",
                               ("ClusterQueue", "a"): "failed", ("LocalQueue", "lq"): "created"}
    assert not result.retry_later
    assert result.failed[0].error == message
    assert result.failed[0].observed == {"state": "failed", "reason": "Invalid",
                                         "message": message}


def test_each_kind_is_listed_once_and_nothing_is_read_one_by_one():
    cluster = FakeCluster()
    last = applied(reconcile(cluster, world("a", "b", "c"), {}))
    cluster.lists = cluster.gets = 0
    assert reconcile(cluster, world("a", "b", "c"), last).writes == 0
    # one list per kind of either backend (the prune looks at both), whatever the size
    assert cluster.lists == len(MANAGED_KINDS) and cluster.gets == 0


def test_failed_list_falls_back_to_get_and_skips_that_kinds_prune():
    cluster = FakeCluster()
    last = applied(reconcile(cluster, world("a", "b"), {}))
    cluster.errors[("list", "ClusterQueue")] = TransientError("list: 503", status=503)
    result = reconcile(cluster, world("a"), last)
    by = actions(result)
    assert by[("ClusterQueue", "*")] == "failed" and result.retry_later
    assert by[("ClusterQueue", "a")] == "unchanged"  # read with get instead
    assert cluster.gets == 1
    assert ("ClusterQueue", "b") not in by  # its prune waits for the next run
    assert by[("LocalQueue", "b")] == "pruned"


def test_get_failure_is_recorded_without_a_write():
    cluster = FakeCluster()
    cluster.errors[("list", "ResourceFlavor")] = TransientError("timeout", reason="Timeout")
    cluster.errors[("get", "h100")] = TransientError("timeout", reason="ReadTimeoutError")
    result = reconcile(cluster, [flavor()], {})
    assert actions(result) == {("ResourceFlavor", "*"): "failed",
                               ("ResourceFlavor", "h100"): "failed"}
    assert cluster.writes == 0 and result.retry_later


def test_changed_hash_rewrites_even_if_live_matches():
    """A field we stopped setting is still live: only a new apply drops our ownership of it."""
    cluster = FakeCluster()
    last = applied(reconcile(cluster, [flavor()], {}))
    slimmer = flavor()
    del slimmer["spec"]["nodeLabels"]
    slimmer["spec"] = {}
    result = reconcile(cluster, [slimmer], last)
    assert actions(result) == {("ResourceFlavor", "h100"): "updated"}
    assert not result.drifted


def test_cluster_queue_active_condition_is_observed():
    cq = cluster_queue("a")
    assert observe({**cq, "status": {}})["state"] == "pending"
    inactive = observe({**cq, "status": {"conditions": [
        {"type": "Active", "status": "False", "reason": "FlavorNotFound",
         "message": "Can't admit new workloads: references missing ResourceFlavor(s): h100."}]}})
    assert inactive["state"] == "not-active"
    assert inactive["reason"] == "FlavorNotFound"
    assert "missing ResourceFlavor" in inactive["message"]
    assert observe(None)["state"] == "pending"
    assert observe(flavor())["state"] == "applied"


@pytest.mark.parametrize(("desired", "live", "expected"), [
    ({"a": 1}, {"a": 1, "b": 2}, True),
    ({"a": {"b": "8"}}, {"a": {"b": 8}}, True),
    ({"a": [1, 2]}, {"a": [1, 2, 3]}, False),
    ({"a": [{"x": 1}]}, {"a": [{"x": 1, "default": True}]}, True),
    ({"a": "1"}, {"a": "2"}, False),
    ({"a": True}, {"a": "True"}, False),
    ({"a": None}, {}, False),
    # Go zero values desired, omitted by the API server (omitempty): in sync.
    ({"globalDefault": False}, {}, True),
    ({"a": 0, "b": "", "c": [], "d": {}}, {}, True),
    ({"globalDefault": True}, {}, False),
    ({"a": "0"}, {}, False),
    ({}, {"anything": 1}, True),
    # Quantity fields compare by value (the API server may re-spell them) ...
    ({"hard": {"memory": "64Gi"}}, {"hard": {"memory": "68719476736"}}, True),
    ({"hard": {"cpu": "1000m"}}, {"hard": {"cpu": "1"}}, True),
    ({"nominalQuota": "0"}, {"nominalQuota": "0m"}, True),
    ({"lendingLimit": "2"}, {"lendingLimit": "2000m"}, True),
    ({"borrowingLimit": "4"}, {"borrowingLimit": 4}, True),
    ({"x": [{"nominalQuota": "1k"}]}, {"x": [{"nominalQuota": "1000"}]}, True),
    ({"hard": {"memory": "1Gi"}}, {"hard": {"memory": "1G"}}, False),
    ({"nominalQuota": "8"}, {"nominalQuota": "9"}, False),
    # ... other fields by string: a label "1" is not "1000m".
    ({"labels": {"v": "1"}}, {"labels": {"v": "1000m"}}, False),
    ({"name": "0"}, {"name": "0m"}, False),
])
def test_is_subset(desired, live, expected):
    assert is_subset(desired, live) is expected


def test_content_hash_is_by_value_for_quantities_only():
    def quota(memory, cpu, label="1"):
        return {"kind": "ResourceQuota", "metadata": {"labels": {"v": label}},
                "spec": {"hard": {"requests.memory": memory, "requests.cpu": cpu}}}

    assert content_hash(quota("64Gi", "1")) == content_hash(quota("68719476736", "1000m"))
    assert content_hash(quota("64Gi", "1")) != content_hash(quota("64G", "1"))
    assert content_hash(quota("64Gi", "1")) != content_hash(quota("64Gi", "1", label="1000m"))


def test_respelled_quantity_writes_nothing_changed_value_writes():
    cluster = FakeCluster()
    last = applied(reconcile(cluster, world("a"), {}))
    key = key_of(cluster_queue("a"))
    # The server answers with its own spelling of our quantity: no drift, no write.
    cluster.objects[key]["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0][
        "nominalQuota"] = "8000m"
    result = reconcile(cluster, world("a"), last)
    assert result.writes == 0 and not result.drifted
    # We render the same value spelled differently: same hash, no write.
    respelled = world("a")
    respelled[-2] = cluster_queue("a", "8000m")
    assert reconcile(cluster, respelled, last).writes == 0
    # A different value is a write.
    changed = world("a")
    changed[-2] = cluster_queue("a", "9")
    assert reconcile(cluster, changed, last).writes == 1


def test_retry_after_is_carried_to_the_result():
    cluster = FakeCluster()
    cluster.errors[("apply", "a")] = TransientError("apply: too many requests", status=429,
                                                    reason="TooManyRequests", retry_after=7)
    result = reconcile(cluster, world("a"), {})
    assert result.retry_later and result.retry_after == 7
    assert reconcile(cluster, world("a"), applied(result)).retry_after is None


def test_content_hash_is_order_independent():
    assert content_hash({"a": 1, "b": [1, 2]}) == content_hash({"b": [1, 2], "a": 1})
    assert content_hash({"a": 1}) != content_hash({"a": 2})


def test_duplicate_desired_keys_are_refused():
    with pytest.raises(ValueError, match="distinct"):
        reconcile(FakeCluster(), [flavor(), flavor()], {})


def test_managed_selector_is_what_prune_uses():
    assert managed_selector() == "app.kubernetes.io/managed-by=gpu-quota-portal"


VOLCANO = "scheduling.volcano.sh/v1beta1"


def volcano_queue(name, parent=None, team=None):
    spec = {"weight": 1, "reclaimable": True}
    if parent:
        spec["parent"] = parent
    labels = team_labels(team) if team else shared_labels("cohort")
    return {"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": name, "labels": labels},
            "spec": spec}


def test_switching_backend_prunes_the_other_backends_objects_children_first():
    port = FakeCluster()
    deleted = []
    real_delete = port.delete

    def recording_delete(api_version, kind, name, namespace=None, *, missing_ok=True):
        deleted.append((kind, name))
        return real_delete(api_version, kind, name, namespace, missing_ok=missing_ok)

    port.delete = recording_delete
    volcano_set = [volcano_queue("company"), volcano_queue("research", parent="company"),
                   namespace("a-team"), volcano_queue("a-team", parent="research", team="a-team")]
    reconcile(port, volcano_set)
    # Back to Kueue: the Queues go (child before parent), the Namespace is shared.
    result = reconcile(port, [namespace("a-team"), flavor(), cluster_queue("a-team"),
                              local_queue("a-team")])
    assert deleted == [("Queue", "a-team"), ("Queue", "research"), ("Queue", "company")]
    assert {r.key[3] for r in result.objects if r.action == "pruned"} == {
        "a-team", "research", "company"}
    assert not [k for k in port.objects if k[0] == VOLCANO]


def test_a_kind_the_cluster_does_not_serve_is_skipped_by_prune():
    port = FakeCluster()
    real_list = port.list

    def list_(api_version, kind, label_selector="", namespace=None):
        if api_version == VOLCANO:
            raise PermanentError("discovery of Queue: not served", status=404,
                                 reason="UnknownKind")
        return real_list(api_version, kind, label_selector, namespace)

    port.list = list_
    result = reconcile(port, [flavor()])
    assert result.failed == []
    assert [r.action for r in result.objects] == ["created"]
