"""The emulator records the access each request needs, as an RBAC authorizer checks it."""

import pytest
import yaml
from django.conf import settings
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from harness.apiserver.app import rbac_attributes
from queues.cluster import KubernetesCluster

KUEUE = "kueue.x-k8s.io/v1beta2"


@pytest.mark.parametrize(("path", "expected"), [
    ("/api/v1/namespaces", ("", "namespaces")),
    ("/api/v1/namespaces/team-a", ("", "namespaces")),
    ("/api/v1/namespaces/team-a/status", ("", "namespaces/status")),
    ("/api/v1/namespaces/team-a/finalize", ("", "namespaces/finalize")),
    ("/api/v1/resourcequotas", ("", "resourcequotas")),
    ("/api/v1/namespaces/team-a/resourcequotas/gpu-quota", ("", "resourcequotas")),
    ("/apis/scheduling.k8s.io/v1/priorityclasses/high", ("scheduling.k8s.io", "priorityclasses")),
    ("/apis/kueue.x-k8s.io/v1beta2/clusterqueues/a/status",
     ("kueue.x-k8s.io", "clusterqueues/status")),
    ("/apis/kueue.x-k8s.io/v1beta2/namespaces/a/localqueues", ("kueue.x-k8s.io", "localqueues")),
    ("/apis/visibility.kueue.x-k8s.io/v1beta2/namespaces/a/localqueues/a/pendingworkloads",
     ("visibility.kueue.x-k8s.io", "localqueues/pendingworkloads")),
    ("/api", None), ("/api/v1", None), ("/apis", None), ("/apis/kueue.x-k8s.io", None),
    ("/apis/kueue.x-k8s.io/v1beta2", None), ("/version", None),
])
def test_rbac_attributes_of_paths(path, expected):
    assert rbac_attributes(path) == expected


def test_access_is_recorded_per_verb_group_and_resource(kube_emulator):
    server = kube_emulator
    port = KubernetesCluster(kubeconfig=settings.KUBECONFIG)
    api = k8s_config.new_client_from_config(config_file=settings.KUBECONFIG)
    flavor = {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "h100"},
              "spec": {"nodeLabels": {"nvidia.com/gpu.product": "H100"}}}
    port.get(KUEUE, "ResourceFlavor", "h100")  # discovery first, then a 404 get
    server.counters.reset()

    port.apply(flavor)  # creates: checked as patch and as create
    port.apply(flavor)  # exists: patch only
    assert server.counters.access() == {
        ("patch", "kueue.x-k8s.io", "resourceflavors"): 2,
        ("create", "kueue.x-k8s.io", "resourceflavors"): 1,
    }
    server.counters.reset()
    port.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    port.get("v1", "Namespace", "team-a")
    port.list("v1", "ResourceQuota", "app.kubernetes.io/managed-by=gpu-quota-portal")
    port.delete(KUEUE, "ResourceFlavor", "h100")
    port.delete(KUEUE, "ResourceFlavor", "h100")  # already gone: still a delete request
    port.apply({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "team-a"},
                "spec": {"namespaceSelector": {}}})
    k8s.CustomObjectsApi(api).patch_cluster_custom_object_status(
        "kueue.x-k8s.io", "v1beta2", "clusterqueues", "team-a",
        {"status": {"pendingWorkloads": 0}})
    assert server.counters.access() == {
        ("patch", "", "namespaces"): 1, ("create", "", "namespaces"): 1,
        ("get", "", "namespaces"): 1,
        ("list", "", "resourcequotas"): 1,
        ("delete", "kueue.x-k8s.io", "resourceflavors"): 2,
        ("patch", "kueue.x-k8s.io", "clusterqueues"): 1,
        ("create", "kueue.x-k8s.io", "clusterqueues"): 1,
        ("patch", "kueue.x-k8s.io", "clusterqueues/status"): 1,
    }
    snapshot = server.counters.snapshot()
    assert {"user": "admin", "verb": "patch", "apiGroup": "kueue.x-k8s.io",
            "resource": "clusterqueues/status", "count": 1} in snapshot["access"]
    assert snapshot["writes"] == 5  # requests, as before: the implied creates are not requests
    server.counters.reset()
    assert server.counters.access() == {}


def test_access_is_recorded_per_user_and_unknown_tokens_are_refused(kube_emulator, tmp_path):
    server = kube_emulator
    admin = KubernetesCluster(kubeconfig=settings.KUBECONFIG)
    other_config = server.write_kubeconfig(tmp_path / "controller", user="kueue-controller")
    assert server.add_user("kueue-controller") == server.add_user("kueue-controller")
    other = KubernetesCluster(kubeconfig=str(other_config))
    admin.get("v1", "Namespace", "default")
    other.get("v1", "Namespace", "default")  # discovery first, then the get
    server.counters.reset()

    admin.get("v1", "Namespace", "default")
    other.list("v1", "ResourceQuota")
    other.list("v1", "ResourceQuota")
    assert server.counters.access("admin") == {("get", "", "namespaces"): 1}
    assert server.counters.access("kueue-controller") == {("list", "", "resourcequotas"): 2}
    assert server.counters.access() == {("get", "", "namespaces"): 1,
                                        ("list", "", "resourcequotas"): 2}
    assert server.counters.access("nobody") == {}

    config = yaml.safe_load(other_config.read_text())
    config["users"][0]["user"]["token"] = "not-a-token"
    (tmp_path / "stranger").write_text(yaml.safe_dump(config))
    stranger = k8s_config.new_client_from_config(config_file=str(tmp_path / "stranger"))
    with pytest.raises(k8s.ApiException) as refused:
        k8s.CoreV1Api(stranger).read_namespace("default")
    assert refused.value.status == 401
    assert server.counters.access("system:anonymous") == {("get", "", "namespaces"): 1}
