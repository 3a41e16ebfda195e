"""Team and quota pages through the Django test client, on PostgreSQL."""

import pytest
import yaml
from django.urls import reverse

from portal.models import AuditEvent, QuotaGrant, QuotaRequest
from tests.factories import (
    make_cluster,
    make_cohort,
    make_flavor,
    make_grant,
    make_request,
    make_team,
    make_user,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def site():
    """One cluster with a 16-GPU flavor, a cohort, team ``vision`` (lead, member), staff.

    Built with tests/factories.py; named apart from the API tests' ``world``.
    """
    cluster = make_cluster(name="gpu-east")
    flavor = make_flavor(cluster=cluster, name="a100", physical_gpus=16)
    other_cluster_flavor = make_flavor(cluster=make_cluster(name="gpu-west"), name="h100")
    cohort = make_cohort(cluster=cluster, name="research")
    team = make_team(cluster=cluster, slug="vision", cohort=cohort)
    return {
        "cluster": cluster, "flavor": flavor, "foreign_flavor": other_cluster_flavor,
        "cohort": cohort, "team": team,
        "lead": make_user("lena", team=team, role="lead"),
        "member": make_user("max", team=team, role="member"),
        "outsider": make_user("olga"),
        "staff": make_user("sam", staff=True),
    }


def _team_url(team) -> str:
    return reverse("team-page", args=[team.slug])


def _request_form(flavor, **overrides) -> dict:
    data = {"flavor": str(flavor.pk), "nominal_gpus": "8", "borrowing_limit_gpus": "",
            "lending_limit_gpus": "", "justification": "Fine-tuning the detector.",
            "ends_at": ""}
    data.update(overrides)
    return data


# --- team pages -------------------------------------------------------------------


def test_lead_requests_quota_through_the_form(client, site):
    client.force_login(site["lead"])
    page = client.get(_team_url(site["team"]))
    assert page.status_code == 200
    assert b'id="quota-request-form"' in page.content
    # the flavor select offers the team's cluster's flavors only
    assert page.context["quota_form"].fields["flavor"].choices == [
        (site["flavor"].pk, "a100 (NVIDIA-A100-SXM4-80GB)")
    ]

    response = client.post(_team_url(site["team"]),
                           _request_form(site["flavor"], borrowing_limit_gpus="4"), follow=True)
    created = QuotaRequest.objects.get()
    assert created.state == QuotaRequest.State.PENDING
    assert (created.nominal_gpus, created.borrowing_limit_gpus, created.lending_limit_gpus) == (
        8, 4, None)
    assert created.requested_by == site["lead"]
    assert response.redirect_chain == [(_team_url(site["team"]), 302)]
    text = response.content.decode()
    assert f"Request #{created.pk} submitted for review." in text
    assert f'data-request="{created.pk}"' in text
    assert "Pending" in text


def test_fractional_gpus_show_the_service_error_next_to_the_field(client, site):
    client.force_login(site["lead"])
    response = client.post(_team_url(site["team"]),
                           _request_form(site["flavor"], nominal_gpus="1.5"))
    assert response.status_code == 200
    assert response.context["quota_form"].errors["nominal_gpus"] == [
        "'1.5' is not a whole number."]
    assert "&#x27;1.5&#x27; is not a whole number." in response.content.decode()
    assert not QuotaRequest.objects.exists()


def test_limits_and_flavor_errors_name_their_fields(client, site):
    client.force_login(site["lead"])
    response = client.post(_team_url(site["team"]), _request_form(
        site["flavor"], nominal_gpus="4", lending_limit_gpus="6", justification=""))
    errors = response.context["quota_form"].errors
    assert "exceeds the nominal quota 4" in errors["lending_limit_gpus"][0]
    assert not QuotaRequest.objects.exists()
    # a flavor of another cluster is not a choice
    response = client.post(_team_url(site["team"]),
                           _request_form(site["foreign_flavor"]))
    assert "flavor" in response.context["quota_form"].errors
    assert not QuotaRequest.objects.exists()


def test_justification_and_end_date_errors(client, site):
    client.force_login(site["lead"])
    response = client.post(_team_url(site["team"]), _request_form(
        site["flavor"], justification="  ", ends_at="2001-01-01"))
    errors = response.context["quota_form"].errors
    # the service reports the first broken rule; fix it and the next one shows
    assert errors == {"justification": ["Say why the team needs this quota."]}
    response = client.post(_team_url(site["team"]),
                           _request_form(site["flavor"], ends_at="2001-01-01"))
    assert response.context["quota_form"].errors == {
        "ends_at": ["The end date must be in the future."]}


def test_member_sees_no_form_and_cannot_post(client, site):
    client.force_login(site["member"])
    page = client.get(_team_url(site["team"]))
    assert page.status_code == 200
    assert b'id="quota-request-form"' not in page.content
    assert b'id="member-form"' not in page.content
    # ... and is told who to ask: the team's leads.
    html = page.content.decode()
    ask = html[html.index('id="ask-for-quota"'):]
    assert f'<strong class="lead-name">{site["lead"].username}</strong>' in ask
    assert client.post(_team_url(site["team"]),
                       _request_form(site["flavor"])).status_code == 403
    assert client.post(reverse("team-member-add", args=["vision"]),
                       {"username": "olga", "role": "lead"}).status_code == 403
    assert not QuotaRequest.objects.exists()


def test_outsider_gets_404_on_the_team_and_every_sub_url(client, site):
    pending = make_request(team=site["team"], flavor=site["flavor"],
                           requested_by=site["lead"])
    client.force_login(site["outsider"])
    assert client.get(_team_url(site["team"])).status_code == 404
    assert client.post(_team_url(site["team"]), _request_form(site["flavor"])).status_code == 404
    assert client.post(reverse("team-request-withdraw", args=["vision", pending.pk])
                       ).status_code == 404
    assert client.post(reverse("team-member-add", args=["vision"]),
                       {"username": "olga", "role": "lead"}).status_code == 404
    assert client.post(reverse("team-member-remove", args=["vision", "max"])).status_code == 404
    assert b"vision" not in client.get(reverse("teams-page")).content
    pending.refresh_from_db()
    assert pending.state == QuotaRequest.State.PENDING


def test_anonymous_is_sent_to_login(client, site):
    response = client.get(_team_url(site["team"]))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_team_page_shows_quotas_members_and_reviews(client, site):
    temporary = make_request(team=site["team"], flavor=site["flavor"], nominal_gpus=12,
                             state="approved", review_comment="OK for the sprint",
                             reviewer=site["staff"],
                             ends_at="2099-03-01T00:00:00+00:00")
    make_grant(team=site["team"], flavor=site["flavor"], nominal_gpus=12,
               borrowing_limit_gpus=None, lending_limit_gpus=2, temporary_request=temporary)
    make_request(team=site["team"], flavor=site["flavor"], nominal_gpus=40, state="rejected",
                 review_comment="Not this quarter", reviewer=site["staff"])
    client.force_login(site["member"])
    text = client.get(_team_url(site["team"])).content.decode()
    assert '<td class="nominal">12</td>' in text
    assert '<td class="borrowing">no limit</td>' in text
    assert '<td class="lending">2</td>' in text
    assert "until 2099-03-01" in text
    assert "Not this quarter" in text
    assert "OK for the sprint" in text
    assert 'data-username="lena"' in text
    assert 'data-username="max"' in text
    assert text.index('data-username="lena"') < text.index('data-username="max"')


def test_lists_and_dashboard_show_the_users_teams(client, site):
    make_grant(team=site["team"], flavor=site["flavor"], nominal_gpus=4)
    make_team(cluster=site["cluster"], slug="nlp")
    client.force_login(site["member"])
    for url in (reverse("teams-page"), reverse("dashboard")):
        text = client.get(url).content.decode()
        assert reverse("team-page", args=["vision"]) in text
        assert "a100: 4 GPUs" in text
        assert "nlp" not in text
    client.force_login(site["staff"])
    assert b"/teams/nlp/" in client.get(reverse("teams-page")).content


def test_lead_withdraws_a_pending_request(client, site):
    pending = make_request(team=site["team"], flavor=site["flavor"],
                           requested_by=site["lead"])
    client.force_login(site["lead"])
    assert reverse("team-request-withdraw", args=["vision", pending.pk]) in (
        client.get(_team_url(site["team"])).content.decode())
    response = client.post(reverse("team-request-withdraw", args=["vision", pending.pk]))
    assert response.status_code == 302
    pending.refresh_from_db()
    assert pending.state == QuotaRequest.State.WITHDRAWN
    # withdrawing twice is a message, not a crash
    response = client.post(reverse("team-request-withdraw", args=["vision", pending.pk]),
                           follow=True)
    assert "is withdrawn, not pending" in response.content.decode()


def test_member_cannot_withdraw(client, site):
    pending = make_request(team=site["team"], flavor=site["flavor"])
    client.force_login(site["member"])
    assert client.post(reverse("team-request-withdraw", args=["vision", pending.pk])
                       ).status_code == 403
    pending.refresh_from_db()
    assert pending.state == QuotaRequest.State.PENDING


def test_lead_adds_and_removes_members(client, site):
    client.force_login(site["lead"])
    response = client.post(reverse("team-member-add", args=["vision"]),
                           {"username": "olga", "role": "member"}, follow=True)
    assert 'data-username="olga"' in response.content.decode()
    response = client.post(reverse("team-member-add", args=["vision"]),
                           {"username": "nobody", "role": "member"})
    assert response.context["member_form"].errors == {"username": ["No user named 'nobody'."]}
    client.post(reverse("team-member-remove", args=["vision", "olga"]))
    assert not site["team"].memberships.filter(user__username="olga").exists()
    assert AuditEvent.objects.filter(action="membership.removed").count() == 1


# --- staff pages ------------------------------------------------------------------


def test_staff_pages_are_for_staff_only(client, site):
    pending = make_request(team=site["team"], flavor=site["flavor"])
    urls = [reverse("review-queue"), reverse("review-detail", args=[pending.pk])]
    for url in urls:
        assert client.get(url).status_code == 302  # anonymous: to the login page
    client.force_login(site["lead"])
    for url in urls:
        assert client.get(url).status_code == 403
    assert client.post(reverse("review-approve", args=[pending.pk])).status_code == 403
    assert client.post(reverse("review-reject", args=[pending.pk]),
                       {"reject-comment": "no"}).status_code == 403
    pending.refresh_from_db()
    assert pending.state == QuotaRequest.State.PENDING


def test_staff_queue_lists_pending_requests_oldest_first(client, site):
    first = make_request(team=site["team"], flavor=site["flavor"], nominal_gpus=8,
                         requested_by=site["lead"])
    second = make_request(team=site["team"], flavor=site["flavor"], nominal_gpus=2)
    make_request(team=site["team"], flavor=site["flavor"], state="rejected")
    client.force_login(site["staff"])
    response = client.get(reverse("review-queue"))
    assert [r.pk for r in response.context["requests"]] == [first.pk, second.pk]
    text = response.content.decode()
    assert reverse("review-detail", args=[first.pk]) in text
    assert "lena" in text
    assert "vision" in text
    assert "a100" in text
    # the nav badge counts the pending requests
    assert '<span class="badge count" id="nav-pending-count">2</span>' in text


def test_review_page_shows_preview_and_manifests(client, site):
    other = make_team(cluster=site["cluster"], slug="nlp", cohort=site["cohort"])
    make_grant(team=other, flavor=site["flavor"], nominal_gpus=6)
    make_grant(team=site["team"], flavor=site["flavor"], nominal_gpus=4)
    pending = make_request(team=site["team"], flavor=site["flavor"], nominal_gpus=8,
                           borrowing_limit_gpus=2)
    client.force_login(site["staff"])
    response = client.get(reverse("review-detail", args=[pending.pk]))
    assert response.status_code == 200
    preview = response.context["preview"]
    assert (preview["capacity_gpus"], preview["nominal_sum_gpus"],
            preview["nominal_sum_after_gpus"]) == (16, 10, 14)
    assert preview["max_admissible_gpus_now"] == 10
    assert preview["max_admissible_gpus"] == 10
    text = response.content.decode()
    assert '<td id="capacity">16</td>' in text
    assert '<td id="nominal-sum">10</td>' in text
    assert "within capacity" in text
    assert "OVER-COMMIT" not in text
    assert 'name="approve-allow_overcommit"' not in text  # no over-commit: no checkbox
    yaml_text = response.context["manifests_yaml"]
    assert '<pre class="yaml" id="manifests-yaml" tabindex="0">' in text
    assert "kind: ClusterQueue\n" in yaml_text
    assert "name: vision\n" in yaml_text
    queue = next(doc for doc in yaml.safe_load_all(yaml_text) if doc["kind"] == "ClusterQueue")
    gpu = next(r for r in queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
               if r["name"] == "nvidia.com/gpu")
    assert (gpu["nominalQuota"], gpu["borrowingLimit"]) == ("8", "2")
    assert "nominalQuota: &#x27;8&#x27;" in text  # shown, HTML-escaped
    # keys stay in renderer order (sort_keys=False): apiVersion before kind before metadata
    first_doc = yaml_text.split("---\n")[0]
    assert first_doc.index("apiVersion") < first_doc.index("kind") < first_doc.index("metadata")


def test_overcommit_needs_the_tick(client, site):
    other = make_team(cluster=site["cluster"], slug="nlp", cohort=site["cohort"])
    make_grant(team=other, flavor=site["flavor"], nominal_gpus=12)
    pending = make_request(team=site["team"], flavor=site["flavor"], nominal_gpus=8)
    client.force_login(site["staff"])
    text = client.get(reverse("review-detail", args=[pending.pk])).content.decode()
    assert "OVER-COMMIT: 20 nominal &gt; 16 physical GPUs" in text
    assert 'name="approve-allow_overcommit"' in text

    response = client.post(reverse("review-approve", args=[pending.pk]),
                           {"approve-comment": "go"})
    assert response.status_code == 200
    errors = response.context["approve_form"].errors["allow_overcommit"]
    assert "Approval would commit 20 nominal GPUs on 'a100'" in errors[0]
    pending.refresh_from_db()
    assert pending.state == QuotaRequest.State.PENDING
    assert not QuotaGrant.objects.filter(team=site["team"]).exists()
    assert not AuditEvent.objects.filter(action="quota_request.approved").exists()

    response = client.post(reverse("review-approve", args=[pending.pk]),
                           {"approve-comment": "go", "approve-allow_overcommit": "on"})
    assert response.status_code == 302
    pending.refresh_from_db()
    assert pending.state == QuotaRequest.State.APPROVED
    assert pending.overcommit_acknowledged


def test_approve_changes_the_grant_and_audits(client, site):
    make_grant(team=site["team"], flavor=site["flavor"], nominal_gpus=2)
    pending = make_request(team=site["team"], flavor=site["flavor"], nominal_gpus=8,
                           requested_by=site["lead"])
    generation = site["cluster"].spec_generation
    client.force_login(site["staff"])
    response = client.post(reverse("review-approve", args=[pending.pk]),
                           {"approve-comment": "Enjoy"}, follow=True)
    assert response.redirect_chain == [(reverse("review-queue"), 302)]
    assert f"Request #{pending.pk} approved" in response.content.decode()
    grant = QuotaGrant.objects.get(team=site["team"], flavor=site["flavor"])
    assert grant.nominal_gpus == 8
    pending.refresh_from_db()
    assert (pending.state, pending.reviewer, pending.review_comment) == (
        "approved", site["staff"], "Enjoy")
    assert pending.previous_grant["nominal_gpus"] == 2
    events = AuditEvent.objects.filter(team=site["team"]).values_list("action", "actor")
    assert set(events) >= {("quota_request.approved", site["staff"].pk),
                           ("quota_grant.changed", site["staff"].pk)}
    site["cluster"].refresh_from_db()
    assert site["cluster"].spec_generation == generation + 1
    # the decided request leaves the queue and shows no buttons any more
    client.force_login(site["staff"])
    assert not client.get(reverse("review-queue")).context["requests"]
    detail = client.get(reverse("review-detail", args=[pending.pk])).content.decode()
    assert 'id="approve"' not in detail
    assert "Approved by sam: Enjoy" in detail


def test_reject_needs_a_comment(client, site):
    pending = make_request(team=site["team"], flavor=site["flavor"])
    client.force_login(site["staff"])
    response = client.post(reverse("review-reject", args=[pending.pk]), {"reject-comment": " "})
    assert response.status_code == 200
    assert response.context["reject_form"].errors == {
        "comment": ["Say why the request is rejected."]}
    assert "Say why the request is rejected." in response.content.decode()
    pending.refresh_from_db()
    assert pending.state == QuotaRequest.State.PENDING

    response = client.post(reverse("review-reject", args=[pending.pk]),
                           {"reject-comment": "Use the shared pool first."})
    assert response.status_code == 302
    pending.refresh_from_db()
    assert pending.state == QuotaRequest.State.REJECTED
    assert pending.review_comment == "Use the shared pool first."
    # the team sees the review comment
    client.force_login(site["member"])
    assert "Use the shared pool first." in client.get(_team_url(site["team"])).content.decode()


def test_deciding_twice_shows_an_error(client, site):
    pending = make_request(team=site["team"], flavor=site["flavor"], state="rejected")
    client.force_login(site["staff"])
    response = client.post(reverse("review-approve", args=[pending.pk]), {})
    assert response.status_code == 200
    assert "is rejected, not pending" in response.content.decode()
    assert client.get(reverse("review-detail", args=[999999])).status_code == 404


# --- query counts -----------------------------------------------------------------


def _populate(site, n: int):
    """``n`` teams with a grant, two members and ``n`` requests each on ``vision``."""
    for i in range(n):
        team = make_team(cluster=site["cluster"], cohort=site["cohort"])
        flavor = make_flavor(cluster=site["cluster"], physical_gpus=8)
        make_grant(team=team, flavor=flavor, nominal_gpus=i)
        make_grant(team=site["team"], flavor=flavor, nominal_gpus=i, lending_limit_gpus=0)
        make_user(team=site["team"])
        make_user(team=team, role="lead")
        make_request(team=site["team"], flavor=flavor, requested_by=site["lead"],
                     reviewer=site["staff"], state="rejected", review_comment="no")
        make_request(team=team, flavor=flavor, requested_by=site["lead"])


# session + user (2), team with role, grants, members, requests, flavors (5), cluster state (1),
# the fairness panel: cohorts, teams, grants, jobs of the cluster (4),
# the utilization panel: hourly samples, daily showback, idle-flag count (3)
TEAM_PAGE_QUERIES = 15
# session + user (2), nav pending count (1), queue (1)
QUEUE_QUERIES = 4
# session + user (2), visible teams with role (1), grants (1)
TEAM_LIST_QUERIES = 4


@pytest.mark.parametrize("n", [1, 10])
def test_team_page_query_count_is_fixed(client, site, django_assert_num_queries, n):
    _populate(site, n)
    client.force_login(site["lead"])
    with django_assert_num_queries(TEAM_PAGE_QUERIES):
        response = client.get(_team_url(site["team"]))
    assert response.status_code == 200
    assert len(response.context["page"].requests) == n
    assert len(response.context["page"].grants) == n


@pytest.mark.parametrize("n", [1, 10])
def test_team_page_query_count_for_staff(client, site, django_assert_num_queries, n):
    _populate(site, n)
    client.force_login(site["staff"])
    with django_assert_num_queries(TEAM_PAGE_QUERIES + 1):  # + the nav pending count
        assert client.get(_team_url(site["team"])).status_code == 200


@pytest.mark.parametrize("n", [1, 10])
def test_staff_queue_query_count_is_fixed(client, site, django_assert_num_queries, n):
    _populate(site, n)
    client.force_login(site["staff"])
    with django_assert_num_queries(QUEUE_QUERIES):
        response = client.get(reverse("review-queue"))
    assert len(response.context["requests"]) == n


@pytest.mark.parametrize("n", [1, 10])
def test_team_list_and_dashboard_query_count_is_fixed(client, site, django_assert_num_queries,
                                                      n):
    _populate(site, n)
    client.force_login(site["staff"])
    with django_assert_num_queries(TEAM_LIST_QUERIES + 1):  # + the nav pending count
        response = client.get(reverse("teams-page"))
    assert len(response.context["teams"]) == n + 1
    with django_assert_num_queries(TEAM_LIST_QUERIES + 1):
        client.get(reverse("dashboard"))
