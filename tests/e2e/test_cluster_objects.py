"""Staff find a hand-edited ClusterQueue from the nav and read its desired and observed YAML."""

import copy

import pytest
import yaml

from portal.models import AuditEvent, ManagedObject
from portal.selectors.specs import cluster_specs, desired_objects
from tests.e2e.pages.auth import LoginPage
from tests.e2e.pages.cluster_objects import ClusterObjectsNav
from tests.factories import (
    PASSWORD,
    make_cluster,
    make_cohort,
    make_flavor,
    make_grant,
    make_team,
    make_user,
)


@pytest.mark.django_db(transaction=True)
def test_staff_reads_desired_and_observed_yaml_of_an_object(live_server, page):
    cluster = make_cluster(name="gpu-east", spec_generation=2, applied_generation=2)
    flavor = make_flavor(cluster=cluster, name="a100", physical_gpus=16)
    team = make_team(cluster=cluster, slug="vision", cohort=make_cohort(cluster=cluster,
                                                                        name="research"))
    make_grant(team=team, flavor=flavor, nominal_gpus=8)
    make_user("sam", staff=True)
    # What the reconciler records for the team's ClusterQueue after correcting a hand edit:
    # the rendered manifest, and the object as read back (server defaults and status added).
    desired = next(o for o in desired_objects(cluster_specs(cluster=cluster))
                   if o["kind"] == "ClusterQueue")
    observed = copy.deepcopy(desired)
    observed["spec"]["stopPolicy"] = "None"
    observed["status"] = {"conditions": [{"type": "Active", "status": "True", "reason": "Ready",
                                          "message": "Can admit new workloads"}]}
    row = ManagedObject.objects.create(
        cluster=cluster, team=team, api_version=desired["apiVersion"], kind="ClusterQueue",
        name="vision", desired=desired, observed=observed, applied_hash="h",
        applied_generation=2, observed_state={"state": "applied", "reason": "Ready"},
        drift_count=1,
    )
    AuditEvent.objects.create(action="managed_object.drift_corrected", team=team,
                              target_type="portal.managedobject", target_id=str(row.pk),
                              after={"kind": "ClusterQueue", "namespace": "", "name": "vision"})

    LoginPage(page, live_server.url).open().log_in("sam", PASSWORD)
    clusters = ClusterObjectsNav(page).open_clusters()
    assert clusters.object_count("gpu-east") == "1"
    objects = clusters.open_cluster("gpu-east")
    assert objects.state("ClusterQueue", "vision") == "applied"
    assert objects.drift_count("ClusterQueue", "vision") == "1"
    detail = objects.open_object("ClusterQueue", "vision")
    assert detail.title == "ClusterQueue vision"
    assert yaml.safe_load(detail.desired_yaml) == desired
    assert yaml.safe_load(detail.observed_yaml) == observed
    assert detail.side_by_side()
    assert "+  stopPolicy: None" in detail.diff
    assert "nominalQuota: '8'" in detail.desired_yaml
    assert detail.drift_event_count() == 1
