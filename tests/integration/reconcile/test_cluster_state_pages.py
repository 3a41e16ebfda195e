"""The pages show what a real reconcile over HTTP recorded: states, drift, both YAMLs.

``cluster_reconcile`` drives ``queues.cluster.KubernetesCluster`` (the official
client) against the Kubernetes API emulator. The emulator has no Kueue
controller, so the test plays it: it writes the ClusterQueue's ``Active``
condition through the status subresource, as Kueue's controller does.
"""

import pytest
import yaml
from django.conf import settings
from django.test import Client
from django.urls import reverse
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from portal.models import AuditEvent, Cluster, ManagedObject
from portal.services.outbox import cluster_spec_bump
from portal.services.reconcile import cluster_reconcile
from queues.cluster import KubernetesCluster

KUEUE = "kueue.x-k8s.io/v1beta2"


@pytest.fixture
def kube(world):
    """``(port, custom objects API)`` on the emulator, as the tests (not the worker) see it."""
    api = k8s_config.new_client_from_config(config_file=settings.KUBECONFIG)
    return KubernetesCluster(kubeconfig=settings.KUBECONFIG), k8s.CustomObjectsApi(api)


def set_active(custom, name, *, status, reason, message):
    """Write a ClusterQueue's ``Active`` condition as Kueue's controller would."""
    custom.patch_cluster_custom_object_status("kueue.x-k8s.io", "v1beta2", "clusterqueues", name, {
        "status": {"conditions": [{
            "type": "Active", "status": status, "reason": reason, "message": message,
            "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1,
        }]},
    })


def states(client, url):
    response = client.get(url)
    assert response.status_code == 200
    return {(o.kind, o.name): o.text for o in response.context["cluster_state"]}


def test_pages_follow_a_real_reconcile_a_hand_edit_and_the_correction(world, kube):
    port, custom = kube
    cluster = world["cluster"]
    lead, staff = Client(), Client()
    lead.force_login(world["lead_a"])
    staff.force_login(world["staff"])
    team_url = reverse("team-page", args=["team-a"])

    # Before any reconcile: everything pending.
    assert set(states(lead, team_url).values()) == {"pending: not reconciled yet"}

    result = cluster_reconcile(cluster_id=cluster.pk)
    assert not result.failed
    assert states(lead, team_url) == {
        ("Namespace", "team-a"): "applied",
        ("ResourceQuota", "gpu-quota"): "applied",
        ("ClusterQueue", "team-a"): ("pending: NoActiveCondition (the Kueue controller has "
                                     "not reported the queue yet)"),
        ("LocalQueue", "team-a"): "applied",
    }

    # The controller reports the queue inactive, then active; the next pass reads it back.
    set_active(custom, "team-a", status="False", reason="FlavorNotFound",
               message="Can't admit new workloads: references missing ResourceFlavor(s): h100.")
    cluster_reconcile(cluster_id=cluster.pk)
    assert states(lead, team_url)[("ClusterQueue", "team-a")] == (
        "not active: FlavorNotFound (Can't admit new workloads: references missing "
        "ResourceFlavor(s): h100.)")
    set_active(custom, "team-a", status="True", reason="Ready", message="Can admit new workloads")
    assert cluster_reconcile(cluster_id=cluster.pk).writes == 0
    assert set(states(lead, team_url).values()) == {"applied"}

    # An approved change not reconciled yet is pending on the page.
    cluster_spec_bump(cluster_id=cluster.pk)
    assert set(states(lead, team_url).values()) == {
        f"pending: approved change not applied yet (generation {cluster.spec_generation} "
        f"of {cluster.spec_generation + 1})"}
    cluster_reconcile(cluster_id=cluster.pk)
    assert set(states(lead, team_url).values()) == {"applied"}

    # A hand edit of our field on the cluster...
    live = port.get(KUEUE, "ClusterQueue", "team-a")
    groups = live["spec"]["resourceGroups"]
    gpu = next(r for r in groups[0]["flavors"][0]["resources"] if r["name"] == "nvidia.com/gpu")
    assert gpu["nominalQuota"] == "16"
    gpu["nominalQuota"] = "64"
    custom.patch_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "clusterqueues", "team-a",
                                       {"spec": {"resourceGroups": groups}})
    # ...is corrected by the next reconcile, and recorded.
    result = cluster_reconcile(cluster_id=cluster.pk)
    assert [(r.key[1], r.key[3]) for r in result.drifted] == [("ClusterQueue", "team-a")]
    row = ManagedObject.objects.get(cluster=cluster, kind="ClusterQueue", name="team-a")
    event = AuditEvent.objects.get(action="managed_object.drift_corrected")
    assert event.target_id == str(row.pk)

    # The staff objects page lists it with its drift.
    response = staff.get(reverse("staff-cluster-objects", args=[cluster.name]))
    page = response.context["page"]
    by_key = {(o.kind, o.name): o for o in page.objects}
    assert by_key[("ClusterQueue", "team-a")].text == "applied"
    assert by_key[("ClusterQueue", "team-a")].row.drift_count == 1
    assert by_key[("ClusterQueue", "team-b")].row.drift_count == 0
    assert {o.state for o in page.objects} == {"applied", "pending"}  # team-b: no controller
    assert {(k, n) for (k, n), o in by_key.items() if o.state == "pending"} == {
        ("ClusterQueue", "team-b")}
    assert len(page.objects) == ManagedObject.objects.filter(cluster=cluster).count() == 10

    # The object page: desired and observed YAML, the diff, the drift event.
    response = staff.get(reverse("staff-object-detail", args=[cluster.name, row.pk]))
    detail = response.context["detail"]
    assert detail.object.text == "applied"
    assert detail.in_sync is True
    desired = yaml.safe_load(detail.desired_yaml)
    observed = yaml.safe_load(detail.observed_yaml)
    assert desired == row.desired
    assert observed["spec"]["resourceGroups"] == desired["spec"]["resourceGroups"]
    assert observed["status"]["conditions"][0]["reason"] == "Ready"  # from the controller
    assert "managedFields" not in observed["metadata"]
    assert "resourceVersion" not in observed["metadata"]
    assert "status" not in desired
    assert "+status:\n" in detail.diff
    assert [e.pk for e in detail.drift_events] == [event.pk]
    text = response.content.decode()
    assert 'id="desired-yaml"' in text and 'id="observed-yaml"' in text
    assert "nominalQuota: &#x27;16&#x27;" in text
    assert text.count('<tr data-event="') == 1
    assert Cluster.objects.get(pk=cluster.pk).last_error == ""
