"""Cluster state on the team and request pages, and the staff object pages (PostgreSQL).

Rows of ``ManagedObject`` are written here as the reconciler records them;
the reconciler itself writing them over HTTP is tested in
tests/integration/reconcile/test_cluster_state_pages.py.
"""

import pytest
from django.urls import reverse

from portal.models import AuditEvent, ManagedObject
from portal.selectors.cluster_state import object_state
from tests.factories import (
    make_cluster,
    make_cohort,
    make_flavor,
    make_request,
    make_team,
    make_user,
)
from tests.integration.portal.test_pages_quota import TEAM_PAGE_QUERIES

pytestmark = pytest.mark.django_db

KUEUE = "kueue.x-k8s.io/v1beta2"


def managed(team, kind, name, *, namespace="", state="applied", reason="", message="",
            last_error="", applied_generation=None, api_version=None, desired=None,
            observed=None, drift_count=0, cluster=None):
    """A ManagedObject row as the reconciler records it."""
    cluster = cluster or team.cluster
    api_version = api_version or ("v1" if kind in ("Namespace", "ResourceQuota") else KUEUE)
    return ManagedObject.objects.create(
        cluster=cluster, team=team, api_version=api_version, kind=kind, namespace=namespace,
        name=name, desired=desired, observed=observed, applied_hash="" if state == "failed"
        else "h", applied_generation=(cluster.spec_generation if applied_generation is None
                                      else applied_generation),
        observed_state={"state": state, "reason": reason, "message": message},
        last_error=last_error, drift_count=drift_count,
    )


def team_objects(team, **states):
    """The four team objects, each ``applied`` unless ``states`` says otherwise."""
    slug = team.slug
    specs = {"Namespace": (slug, ""), "ResourceQuota": ("gpu-quota", slug),
             "ClusterQueue": (slug, ""), "LocalQueue": (slug, slug)}
    return {kind: managed(team, kind, name, namespace=ns, **states.get(kind, {}))
            for kind, (name, ns) in specs.items()}


@pytest.fixture
def site():
    """Cluster ``gpu-east`` (generation 3, applied 3) with teams ``vision`` and ``nlp``.

    Users: ``lena`` leads vision, ``max`` is a member of vision, ``nina`` leads
    nlp, ``olga`` belongs to no team, ``sam`` is staff.
    """
    cluster = make_cluster(name="gpu-east", spec_generation=3, applied_generation=3)
    flavor = make_flavor(cluster=cluster, name="a100", physical_gpus=16)
    cohort = make_cohort(cluster=cluster, name="research")
    vision = make_team(cluster=cluster, slug="vision", cohort=cohort)
    nlp = make_team(cluster=cluster, slug="nlp", cohort=cohort)
    return {
        "cluster": cluster, "flavor": flavor, "vision": vision, "nlp": nlp,
        "lead": make_user("lena", team=vision, role="lead"),
        "member": make_user("max", team=vision, role="member"),
        "nlp_lead": make_user("nina", team=nlp, role="lead"),
        "outsider": make_user("olga"),
        "staff": make_user("sam", staff=True),
    }


def _states(response) -> dict[tuple[str, str], tuple[str, str]]:
    return {(o.kind, o.name): (o.state, o.text) for o in response.context["cluster_state"]}


# --- states in words ------------------------------------------------------------------


def test_team_page_shows_each_object_state_in_words(client, site):
    team_objects(site["vision"], ClusterQueue={
        "state": "not-active", "reason": "FlavorNotFound",
        "message": "Can't admit new workloads: references missing ResourceFlavor(s): a100."},
        ResourceQuota={"state": "failed", "last_error": (
            'apply ResourceQuota.v1 vision/gpu-quota: ResourceQuota "gpu-quota" is invalid: '
            'spec.hard[requests.nvidia.com/gpu]: Invalid value: "-1"')})
    client.force_login(site["member"])
    response = client.get(reverse("team-page", args=["vision"]))
    assert response.status_code == 200
    assert _states(response) == {
        ("Namespace", "vision"): ("applied", "applied"),
        ("ResourceQuota", "gpu-quota"): ("failed", (
            'failed: apply ResourceQuota.v1 vision/gpu-quota: ResourceQuota "gpu-quota" is '
            'invalid: spec.hard[requests.nvidia.com/gpu]: Invalid value: "-1"')),
        ("ClusterQueue", "vision"): ("not-active", (
            "not active: FlavorNotFound (Can't admit new workloads: references missing "
            "ResourceFlavor(s): a100.)")),
        ("LocalQueue", "vision"): ("applied", "applied"),
    }
    # apply order: namespace first, the LocalQueue after its ClusterQueue
    assert [o.kind for o in response.context["cluster_state"]] == [
        "Namespace", "ResourceQuota", "ClusterQueue", "LocalQueue"]
    text = response.content.decode()
    assert '<section class="card" id="cluster-state">' in text
    assert 'data-kind="ClusterQueue" data-name="vision" data-namespace="" ' \
           'data-state="not-active"' in text
    assert "not active: FlavorNotFound (Can&#x27;t admit new workloads" in text
    assert 'class="object-link"' not in text  # members get no link to the staff YAML page


def test_objects_not_recorded_yet_or_lagging_are_pending(client, site):
    cluster = site["cluster"]
    # Only the namespace is recorded, at the previous generation (an approval bumped it).
    managed(site["vision"], "Namespace", "vision", applied_generation=2)
    client.force_login(site["lead"])
    states = _states(client.get(reverse("team-page", args=["vision"])))
    assert states[("Namespace", "vision")] == (
        "pending", "pending: approved change not applied yet (generation 2 of 3)")
    for key in [("ResourceQuota", "gpu-quota"), ("ClusterQueue", "vision"),
                ("LocalQueue", "vision")]:
        assert states[key] == ("pending", "pending: not reconciled yet")
    assert cluster.spec_generation == 3


def test_object_state_rules():
    cluster = make_cluster(spec_generation=5, applied_generation=5)
    team = make_team(cluster=cluster)
    row = managed(team, "ClusterQueue", team.slug, state="pending",
                  reason="NoActiveCondition", message="the Kueue controller has not reported "
                  "the queue yet")
    assert object_state(row=row, spec_generation=5) == (
        "pending", "pending: NoActiveCondition (the Kueue controller has not reported the "
        "queue yet)")
    row.observed_state = {"state": "retained", "reason": "NotDesired", "message": "kept"}
    assert object_state(row=row, spec_generation=5) == ("retained", "retained: kept")
    # a failure wins over a lagging generation; lagging wins over the last observation
    row.observed_state = {"state": "failed", "reason": "Invalid", "message": "bad"}
    row.last_error = "apply: bad"
    assert object_state(row=row, spec_generation=6) == ("failed", "failed: apply: bad")
    row.observed_state, row.last_error = {"state": "not-active", "reason": "R"}, ""
    assert object_state(row=row, spec_generation=6)[0] == "pending"
    assert object_state(row=row, spec_generation=5) == ("not-active", "not active: R")
    assert object_state(row=None, spec_generation=5) == ("pending",
                                                         "pending: not reconciled yet")


def test_request_pages_show_the_objects_approval_changes(client, site):
    objs = team_objects(site["vision"])
    managed(site["vision"], "Workload", "job-1", namespace="vision")  # not touched by approval
    request = make_request(team=site["vision"], flavor=site["flavor"], state="approved",
                           requested_by=site["lead"])
    client.force_login(site["member"])
    response = client.get(reverse("team-request", args=["vision", request.pk]))
    assert response.status_code == 200
    assert _states(response) == {
        ("Namespace", "vision"): ("applied", "applied"),
        ("ResourceQuota", "gpu-quota"): ("applied", "applied"),
        ("ClusterQueue", "vision"): ("applied", "applied"),
        ("LocalQueue", "vision"): ("applied", "applied"),
    }
    assert 'id="request-nominal">8<' in response.content.decode()
    # the team page links each request to its page
    team_page = client.get(reverse("team-page", args=["vision"])).content.decode()
    assert reverse("team-request", args=["vision", request.pk]) in team_page

    # staff see the same section on the review page, with links to the YAML pages
    client.force_login(site["staff"])
    review = client.get(reverse("review-detail", args=[request.pk]))
    assert _states(review) == _states(response)
    text = review.content.decode()
    assert reverse("staff-object-detail", args=["gpu-east", objs["ClusterQueue"].pk]) in text


# --- permissions ----------------------------------------------------------------------


def test_member_of_another_team_cannot_see_its_objects(client, site):
    team_objects(site["vision"])
    nlp_objects = team_objects(site["nlp"], ClusterQueue={"state": "failed",
                                                          "last_error": "nlp secret error"})
    vision_request = make_request(team=site["vision"], flavor=site["flavor"])
    client.force_login(site["nlp_lead"])
    assert client.get(reverse("team-page", args=["vision"])).status_code == 404
    assert client.get(reverse("team-request", args=["vision", vision_request.pk])
                      ).status_code == 404
    # nor through their own team's URL with the other team's request id
    assert client.get(reverse("team-request", args=["nlp", vision_request.pk])
                      ).status_code == 404
    # their own page lists only their own objects
    own = client.get(reverse("team-page", args=["nlp"]))
    assert {name for _, name in _states(own)} == {"nlp", "gpu-quota"}
    assert {o.row.pk for o in own.context["cluster_state"]} == {
        o.pk for o in nlp_objects.values()}
    client.force_login(site["member"])
    text = client.get(reverse("team-page", args=["vision"])).content.decode()
    assert "nlp secret error" not in text
    client.force_login(site["outsider"])
    assert client.get(reverse("team-page", args=["vision"])).status_code == 404


def test_staff_object_pages_are_for_staff_only(client, site):
    obj = team_objects(site["vision"])["ClusterQueue"]
    urls = [reverse("staff-clusters"), reverse("staff-cluster-objects", args=["gpu-east"]),
            reverse("staff-object-detail", args=["gpu-east", obj.pk])]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]
    for user in (site["lead"], site["member"], site["outsider"]):
        client.force_login(user)
        for url in urls:
            assert client.get(url).status_code == 403
        assert "Cluster objects" not in client.get(reverse("dashboard")).content.decode()
    client.force_login(site["staff"])
    for url in urls:
        assert client.get(url).status_code == 200
    assert client.get(reverse("staff-cluster-objects", args=["nowhere"])).status_code == 404
    other = make_cluster(name="gpu-west")
    assert client.get(reverse("staff-object-detail", args=["gpu-west", obj.pk])
                      ).status_code == 404
    assert other.name == "gpu-west"
    assert client.get(reverse("staff-object-detail", args=["gpu-east", 999999])
                      ).status_code == 404
    nav = client.get(reverse("dashboard")).content.decode()
    assert f'href="{reverse("staff-clusters")}">Cluster objects</a>' in nav


# --- staff pages ------------------------------------------------------------------------


def test_cluster_objects_page_lists_state_drift_and_errors(client, site):
    vision = team_objects(site["vision"], ClusterQueue={"drift_count": 2})
    ManagedObject.objects.filter(pk=vision["ClusterQueue"].pk).update(
        last_drift_at="2026-03-04T05:06:07Z")
    team_objects(site["nlp"], ResourceQuota={"state": "failed", "last_error": "422 Invalid"})
    flavor = managed(None, "ResourceFlavor", "a100", cluster=site["cluster"])
    client.force_login(site["staff"])
    response = client.get(reverse("staff-cluster-objects", args=["gpu-east"]))
    page = response.context["page"]
    assert [(o.kind, o.namespace, o.name) for o in page.objects] == [
        ("ResourceFlavor", "", "a100"),
        ("Namespace", "", "nlp"), ("Namespace", "", "vision"),
        ("ResourceQuota", "nlp", "gpu-quota"), ("ResourceQuota", "vision", "gpu-quota"),
        ("ClusterQueue", "", "nlp"), ("ClusterQueue", "", "vision"),
        ("LocalQueue", "nlp", "nlp"), ("LocalQueue", "vision", "vision"),
    ]
    assert page.counts == {"applied": 8, "failed": 1}
    text = response.content.decode()
    assert reverse("staff-object-detail", args=["gpu-east", flavor.pk]) in text
    row = text[text.index('data-kind="ClusterQueue" data-name="vision"'):]
    row = row[:row.index("</tr>")]
    assert '<td class="drift-count">2</td>' in row
    assert "2026-03-04 05:06:07" in row
    row = text[text.index('data-kind="ResourceQuota" data-name="gpu-quota" '
                          'data-namespace="nlp"'):]
    row = row[:row.index("</tr>")]
    assert "failed: 422 Invalid" in row and '<td class="last-error">422 Invalid</td>' in row

    overview = client.get(reverse("staff-clusters"))
    [cluster] = overview.context["clusters"]
    assert (cluster.object_count, cluster.failed_count, cluster.drift_total) == (9, 1, 2)


def test_object_page_shows_desired_and_observed_yaml_diff_and_drift_events(client, site):
    desired = {"apiVersion": KUEUE, "kind": "ClusterQueue",
               "metadata": {"name": "vision", "labels": {"portal.gpu/team": "vision"}},
               "spec": {"cohortName": "research", "queueingStrategy": "BestEffortFIFO"}}
    observed = {"apiVersion": KUEUE, "kind": "ClusterQueue",
                "metadata": {"name": "vision", "labels": {"portal.gpu/team": "vision"}},
                "spec": {"cohortName": "research", "queueingStrategy": "BestEffortFIFO",
                         "stopPolicy": "None"},
                "status": {"pendingWorkloads": 0}}
    row = managed(site["vision"], "ClusterQueue", "vision", desired=desired, observed=observed,
                  drift_count=2)
    target = {"target_type": "portal.managedobject", "target_id": str(row.pk)}
    first = AuditEvent.objects.create(action="managed_object.drift_corrected",
                                      team=site["vision"], **target,
                                      after={"kind": "ClusterQueue", "namespace": "",
                                             "name": "vision"})
    second = AuditEvent.objects.create(action="managed_object.drift_corrected",
                                       team=site["vision"], **target,
                                       after={"kind": "ClusterQueue", "namespace": "",
                                              "name": "vision"})
    AuditEvent.objects.create(action="quota_request.approved", team=site["vision"], **target)
    AuditEvent.objects.create(action="managed_object.drift_corrected", team=site["vision"],
                              target_type="portal.managedobject", target_id=str(row.pk + 1))
    client.force_login(site["staff"])
    response = client.get(reverse("staff-object-detail", args=["gpu-east", row.pk]))
    detail = response.context["detail"]
    assert [e.pk for e in detail.drift_events] == [second.pk, first.pk]
    assert detail.in_sync is True
    assert "cohortName: research\n" in detail.desired_yaml
    assert "stopPolicy" not in detail.desired_yaml
    assert "  stopPolicy: None\n" in detail.observed_yaml
    assert "+  stopPolicy: None\n" in detail.diff
    assert "+status:\n+  pendingWorkloads: 0\n" in detail.diff
    assert detail.diff.startswith("--- desired\n+++ observed (cluster)\n")
    text = response.content.decode()
    assert '<pre class="yaml" id="desired-yaml" tabindex="0">' in text
    assert '<pre class="yaml" id="observed-yaml" tabindex="0">' in text
    assert "match the desired manifest" in text
    assert text.count('<tr data-event="') == 2

    # a hand edit not corrected yet: our field differs
    observed["spec"]["cohortName"] = "elsewhere"
    ManagedObject.objects.filter(pk=row.pk).update(observed=observed)
    detail = client.get(reverse("staff-object-detail", args=["gpu-east", row.pk])
                        ).context["detail"]
    assert detail.in_sync is False
    assert "-  cohortName: research\n+  cohortName: elsewhere\n" in detail.diff


# --- query counts ---------------------------------------------------------------------


def _populate(site, n: int) -> None:
    """``n`` more teams with their four objects; ``n`` extra objects of vision; drift."""
    for _ in range(n):
        team = make_team(cluster=site["cluster"])
        objs = team_objects(team, ClusterQueue={"drift_count": 1})
        AuditEvent.objects.create(action="managed_object.drift_corrected", team=team,
                                  target_type="portal.managedobject",
                                  target_id=str(objs["ClusterQueue"].pk))
    objs = team_objects(site["vision"])
    for i in range(n):
        managed(site["vision"], "Workload", f"job-{i}", namespace="vision")
        AuditEvent.objects.create(action="managed_object.drift_corrected", team=site["vision"],
                                  target_type="portal.managedobject",
                                  target_id=str(objs["ClusterQueue"].pk))
        make_request(team=site["vision"], flavor=site["flavor"], requested_by=site["lead"])


# One figure for the team page, kept with the quota page tests (it also counts the
# cluster-state and fairness panels).
TEAM_PAGE = TEAM_PAGE_QUERIES
# session + user (2), team with role, grants, members, requests, flavors (5), request (1),
# objects (1)
TEAM_REQUEST_PAGE = 9
# session + user (2), nav pending count (1), clusters with counts (1)
CLUSTERS_PAGE = 4
# session + user (2), nav pending count (1), cluster (1), objects with teams (1)
CLUSTER_OBJECTS_PAGE = 5
# session + user (2), nav pending count (1), object with cluster and team (1), events (1)
OBJECT_PAGE = 5


@pytest.mark.parametrize("n", [1, 12])
def test_team_pages_query_count_is_fixed(client, site, django_assert_num_queries, n):
    _populate(site, n)
    request = make_request(team=site["vision"], flavor=site["flavor"])
    client.force_login(site["member"])
    with django_assert_num_queries(TEAM_PAGE):
        response = client.get(reverse("team-page", args=["vision"]))
    assert len(response.context["cluster_state"]) == 4 + n
    with django_assert_num_queries(TEAM_REQUEST_PAGE):
        response = client.get(reverse("team-request", args=["vision", request.pk]))
    assert len(response.context["cluster_state"]) == 4


@pytest.mark.parametrize("n", [1, 12])
def test_staff_object_pages_query_count_is_fixed(client, site, django_assert_num_queries, n):
    _populate(site, n)
    client.force_login(site["staff"])
    with django_assert_num_queries(CLUSTERS_PAGE):
        response = client.get(reverse("staff-clusters"))
    assert response.context["clusters"][0].object_count == 4 * (n + 1) + n
    with django_assert_num_queries(CLUSTER_OBJECTS_PAGE):
        response = client.get(reverse("staff-cluster-objects", args=["gpu-east"]))
    assert len(response.context["page"].objects) == 4 * (n + 1) + n
    cq = ManagedObject.objects.get(kind="ClusterQueue", name="vision")
    with django_assert_num_queries(OBJECT_PAGE):
        response = client.get(reverse("staff-object-detail", args=["gpu-east", cq.pk]))
    assert len(response.context["detail"].drift_events) == n


def test_volcano_cluster_lists_only_recorded_objects(client, site):
    cluster = make_cluster(name="gpu-volcano", backend="volcano")
    team = make_team(cluster=cluster, slug="sim")
    lead = make_user("vera", team=team, role="lead")
    managed(team, "Queue", "sim", api_version="scheduling.volcano.sh/v1beta1")
    client.force_login(lead)
    assert _states(client.get(reverse("team-page", args=["sim"]))) == {
        ("Queue", "sim"): ("applied", "applied")}
