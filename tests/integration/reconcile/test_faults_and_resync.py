"""Transient API failures are retried by the worker; resync re-drives lagging clusters."""

import pytest
from django.conf import settings
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from portal.celery import app
from portal.models import Cluster, ManagedObject
from portal.services.outbox import cluster_spec_bump
from portal.services.reconcile import cluster_reconcile, clusters_to_resync
from portal.tasks import resync
from queues.cluster import KubernetesCluster, PermanentError, TransientError

KUEUE = "kueue.x-k8s.io/v1beta2"


def test_resync_is_scheduled_every_30_seconds():
    entry = app.conf.beat_schedule["resync"]
    assert entry["task"] == "portal.resync"
    assert entry["schedule"] == 30.0


def test_port_maps_errors_to_our_types(world):
    server = world["server"]
    port = KubernetesCluster(kubeconfig=settings.KUBECONFIG)
    server.faults.add("GET", r"/clusterqueues/team-a$", 503)
    with pytest.raises(TransientError) as transient:
        port.get(KUEUE, "ClusterQueue", "team-a")
    assert transient.value.status == 503
    server.faults.add("GET", r"/clusterqueues/team-a$", drop=True)
    with pytest.raises(TransientError):
        port.get(KUEUE, "ClusterQueue", "team-a")
    with pytest.raises(PermanentError) as invalid:
        port.apply({"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "x"},
                    "spec": {"resourceGroups": "not-a-list"}})
    assert invalid.value.status == 422 and invalid.value.reason == "Invalid"
    assert "spec.resourceGroups" in invalid.value.message
    assert port.get(KUEUE, "ClusterQueue", "absent") is None


@pytest.mark.usefixtures("celery_worker_process")
def test_a_500_on_apply_is_retried_by_the_worker_until_converged(world, converged):
    server = world["server"]
    server.faults.add("PATCH", r"/clusterqueues/team-a$", 500, count=2)
    cluster = world["cluster"]
    cluster_spec_bump(cluster_id=cluster.pk)
    resync.delay().get(timeout=10)
    converged(cluster, timeout=60)
    assert cluster.last_error == ""
    row = ManagedObject.objects.get(cluster=cluster, kind="ClusterQueue", name="team-a")
    assert row.last_error == "" and row.applied_hash


def test_transient_failure_leaves_the_cluster_lagging_for_resync(world):
    server = world["server"]
    server.faults.add("PATCH", r"/clusterqueues/team-b$", 500, count=1)
    cluster = world["cluster"]
    result = cluster_reconcile(cluster_id=cluster.pk)
    assert result.retry_later
    cluster.refresh_from_db()
    assert cluster.applied_generation < cluster.spec_generation
    assert "team-b" in cluster.last_error
    assert clusters_to_resync(drift_check_seconds=300) == [cluster.pk]
    row = ManagedObject.objects.get(cluster=cluster, kind="ClusterQueue", name="team-b")
    assert row.applied_hash == "" and "injected" in row.last_error
    # The next pass converges; the cluster stays due only while Kueue has not
    # reported its queues (no controller in the emulator: we write it as Kueue would).
    assert not cluster_reconcile(cluster_id=cluster.pk).retry_later
    cluster.refresh_from_db()
    assert cluster.applied_generation == cluster.spec_generation
    assert Cluster.objects.get(pk=cluster.pk).last_error == ""
    assert clusters_to_resync(drift_check_seconds=300) == [cluster.pk]
    api = k8s_config.new_client_from_config(config_file=settings.KUBECONFIG)
    for name in ("team-a", "team-b"):
        k8s.CustomObjectsApi(api).patch_cluster_custom_object_status(
            "kueue.x-k8s.io", "v1beta2", "clusterqueues", name, {"status": {"conditions": [{
                "type": "Active", "status": "True", "reason": "Ready",
                "message": "Can admit new workloads", "observedGeneration": 1,
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    assert cluster_reconcile(cluster_id=cluster.pk).writes == 0
    assert clusters_to_resync(drift_check_seconds=300) == []
