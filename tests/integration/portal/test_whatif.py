"""What-if before approval through the database, the API and the staff review page.

The cluster: h100 is one node of 8 GPUs shared by team-a and team-b (4 nominal
each, cohort ``dept``); a100 (16 GPUs) is idle. The recent demand: team-a runs an
8-GPU job for 600 s, team-b a 4-GPU job 10 s later for 600 s (see
tests/unit/queues/test_whatif.py for the same scenario, figure by figure).
"""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from portal.models import Job, PriorityClass
from portal.selectors.whatif import recent_demand
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


@pytest.fixture(autouse=True)
def _fresh_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def site():
    cluster = make_cluster(name="gpu-west")
    h100 = make_flavor(cluster=cluster, name="h100", physical_gpus=8, gpus_per_node=8,
                       gpu_model="H100")
    a100 = make_flavor(cluster=cluster, name="a100", physical_gpus=16, gpus_per_node=8)
    dept = make_cohort(cluster=cluster, name="dept")
    team_a = make_team(cluster=cluster, slug="team-a", cohort=dept)
    team_b = make_team(cluster=cluster, slug="team-b", cohort=dept)
    for team in (team_a, team_b):
        make_grant(team=team, flavor=h100, nominal_gpus=4)
    make_grant(team=team_a, flavor=a100, nominal_gpus=4)
    lead = make_user("lead-a", team=team_a, role="lead")
    member = make_user("member-a", team=team_a)
    staff = make_user("staffer", staff=True)
    return {"cluster": cluster, "h100": h100, "a100": a100, "dept": dept, "team_a": team_a,
            "team_b": team_b, "lead": lead, "member": member, "staff": staff}


_names = iter(range(1, 10**6))


def add_job(team, flavor, *, at, gpus, run=None, workers=1, phase=Job.Phase.SUCCEEDED,
            max_runtime=None, priority=None):
    """A job submitted ``at`` (datetime) that ran ``run`` seconds (None: never started)."""
    job = Job.objects.create(
        team=team, name=f"job-{next(_names)}", image="ghcr.io/acme/train:1", flavor=flavor,
        workers=workers, gpus_per_worker=gpus, phase=phase, max_runtime_seconds=max_runtime,
        priority_class=priority,
    )
    started = at + timedelta(seconds=5) if run is not None else None
    finished = started + timedelta(seconds=run) if run is not None else None
    Job.objects.filter(pk=job.pk).update(submitted_at=at, started_at=started,
                                         finished_at=finished)
    return job


def busy_demand(site, base=None):
    base = base or timezone.now() - timedelta(hours=2)
    add_job(site["team_a"], site["h100"], at=base, gpus=8, run=600)
    add_job(site["team_b"], site["h100"], at=base + timedelta(seconds=10), gpus=4, run=600)


def api(user):
    client = APIClient()
    client.force_authenticate(user)
    return client


def preview(user, request_id):
    response = api(user).get(f"/api/v1/quota-requests/{request_id}/preview/")
    assert response.status_code == 200, response.content
    return response.json()


def rows(what_if):
    return {row["team"]: row for row in what_if["teams"]}


def test_a_request_taking_gpus_from_a_busy_cohort_shows_the_other_team_waiting(site):
    busy_demand(site)
    request = make_request(team=site["team_a"], flavor=site["h100"], nominal_gpus=8)
    what_if = preview(site["staff"], request.pk)["what_if"]
    assert (what_if["jobs"], what_if["days"], what_if["truncated"]) == (2, 7, False)
    assert what_if["measured_durations"] == 2 and what_if["backend"] == "kueue"
    b, a = rows(what_if)["team-b"], rows(what_if)["team-a"]
    assert (b["before"]["p95_wait_seconds"], b["after"]["p95_wait_seconds"]) == (0.0, 590.0)
    assert (b["before"]["mean_wait_seconds"], b["after"]["mean_wait_seconds"]) == (0.0, 590.0)
    assert b["delta"]["p95_wait_seconds"] == 590.0
    assert (a["before"]["mean_wait_seconds"], a["after"]["mean_wait_seconds"]) == (610.0, 0.0)
    assert (a["before"]["jobs_preempted"], a["after"]["jobs_preempted"]) == (1, 0)
    assert (a["before"]["borrowed_peak_gpus"], a["after"]["borrowed_peak_gpus"]) == (4, 0)
    assert "team-b's p95 wait rises from 0 s to 10 min" in what_if["sentences"]
    # the team's lead sees the same preview
    assert preview(site["lead"], request.pk)["what_if"]["teams"] == what_if["teams"]


def test_a_request_on_an_idle_flavor_shows_no_change(site):
    busy_demand(site)
    request = make_request(team=site["team_a"], flavor=site["a100"], nominal_gpus=16)
    what_if = preview(site["staff"], request.pk)["what_if"]
    assert what_if["jobs"] == 2
    for row in what_if["teams"]:
        assert row["before"] == row["after"]
        assert set(row["delta"].values()) <= {0, None}
    assert what_if["fingerprint_before"] == what_if["fingerprint_after"]
    assert what_if["sentences"] == [
        "No team's waits, borrowing or preemptions change noticeably with the "
        "recent demand."]


def test_without_recent_jobs_the_preview_says_so(site, settings):
    add_job(site["team_b"], site["h100"], at=timezone.now() - timedelta(days=8), gpus=4,
            run=60)
    request = make_request(team=site["team_a"], flavor=site["h100"], nominal_gpus=8)
    what_if = preview(site["staff"], request.pk)["what_if"]
    assert (what_if["jobs"], what_if["teams"]) == (0, [])
    assert what_if["sentences"] == [
        "No jobs were submitted on cluster gpu-west in the last 7 days: there is no recent "
        "demand to replay."]
    settings.WHATIF_DAYS = 9
    assert preview(site["staff"], request.pk)["what_if"]["jobs"] == 1


def test_the_same_inputs_give_the_same_what_if(site):
    busy_demand(site)
    request = make_request(team=site["team_a"], flavor=site["h100"], nominal_gpus=8)
    first = preview(site["staff"], request.pk)["what_if"]
    cache.clear()
    second = preview(site["staff"], request.pk)["what_if"]
    # everything but the window's bound, which moves with the clock
    assert first.pop("since") <= second.pop("since")
    assert first == second


def test_recent_demand_durations_priorities_and_cap(site, settings):
    now = timezone.now()
    high = PriorityClass.objects.create(name="high", value=1000)
    t0 = now - timedelta(hours=5)
    measured = add_job(site["team_a"], site["h100"], at=t0, gpus=2, run=300, priority=high)
    limited = add_job(site["team_a"], site["h100"], at=t0 + timedelta(seconds=30), gpus=1,
                      phase=Job.Phase.QUEUED, max_runtime=900, workers=2)
    default = add_job(site["team_b"], site["h100"], at=t0 + timedelta(seconds=60), gpus=4,
                      phase=Job.Phase.QUEUED)
    add_job(site["team_b"], site["h100"], at=t0 + timedelta(seconds=90), gpus=4,
            phase=Job.Phase.CANCELLED)  # cancelled before it started: no demand
    window = recent_demand(cluster=site["cluster"], now=now)
    assert [(d.name, d.team, d.submit_time, d.workers, d.gpus_per_worker, d.flavor,
             d.priority, d.duration) for d in window.demand] == [
        (f"job-{measured.pk}", "team-a", 0.0, 1, 2, "h100", 1000, 300.0),
        (f"job-{limited.pk}", "team-a", 30.0, 2, 1, "h100", 0, 900.0),
        (f"job-{default.pk}", "team-b", 60.0, 1, 4, "h100", 0, 3600.0),
    ]
    assert (window.truncated, window.measured, window.start) == (False, 1, t0)
    settings.WHATIF_MAX_JOBS = 2
    settings.WHATIF_DEFAULT_DURATION_SECONDS = 120
    capped = recent_demand(cluster=site["cluster"], now=now)
    assert capped.truncated is True
    assert [(d.name, d.submit_time, d.duration) for d in capped.demand] == [
        (f"job-{limited.pk}", 0.0, 900.0), (f"job-{default.pk}", 30.0, 120.0)]


def test_the_cache_is_keyed_by_the_newest_job(site):
    busy_demand(site)
    request = make_request(team=site["team_a"], flavor=site["h100"], nominal_gpus=8)
    with CaptureQueriesContext(connection) as cold:
        first = preview(site["staff"], request.pk)["what_if"]
    with CaptureQueriesContext(connection) as warm:
        assert preview(site["staff"], request.pk)["what_if"] == first
    assert len(warm) == len(cold) - 2  # no jobs and no node-size query when cached
    add_job(site["team_b"], site["h100"], at=timezone.now() - timedelta(minutes=30), gpus=4,
            run=60)
    assert preview(site["staff"], request.pk)["what_if"]["jobs"] == 3


def _grow(site, teams, jobs_per_team):
    base = timezone.now() - timedelta(days=3)
    extra = [make_team(cluster=site["cluster"], slug=f"extra-{next(_names)}", cohort=site["dept"])
             for _ in range(teams)]
    for team in extra:
        make_grant(team=team, flavor=site["h100"], nominal_gpus=1)
    for index, team in enumerate([site["team_a"], site["team_b"], *extra]):
        for n in range(jobs_per_team):
            add_job(team, site["h100"], at=base + timedelta(minutes=7 * n + index), gpus=1,
                    run=900 + 60 * n)


def _count(user, request_id):
    cache.clear()
    with CaptureQueriesContext(connection) as ctx:
        what_if = preview(user, request_id)["what_if"]
    return len(ctx), what_if


def test_the_preview_runs_a_fixed_number_of_queries(site):
    request = make_request(team=site["team_a"], flavor=site["h100"], nominal_gpus=8)
    _grow(site, teams=1, jobs_per_team=2)
    small, small_wi = _count(site["staff"], request.pk)
    _grow(site, teams=4, jobs_per_team=25)
    large, large_wi = _count(site["staff"], request.pk)
    assert (small_wi["jobs"], large_wi["jobs"]) == (3 * 2, 3 * 2 + 6 * 25)
    assert len(large_wi["teams"]) == 7
    assert small == large


def test_the_review_page_shows_the_table_and_the_sentences(site, client):
    busy_demand(site)
    request = make_request(team=site["team_a"], flavor=site["h100"], nominal_gpus=8)
    client.force_login(get_user_model().objects.get(username="staffer"))
    response = client.get(f"/staff/requests/{request.pk}/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="what-if-table"' in html
    assert "team-b&#x27;s p95 wait rises from 0 s to 10 min" in html
    assert '<td class="p95-wait up">0 s → 10 min</td>' in html  # team-b
    assert '<td class="p95-wait down">10 min → 0 s</td>' in html  # team-a
    assert '<td class="preempted down">1 → 0</td>' in html
    assert "2 jobs submitted on this cluster" in html
    what_if = response.context["preview"]["what_if"]
    assert rows(what_if)["team-b"]["after"]["p95_wait_seconds"] == 590.0


def test_the_review_page_says_when_there_is_no_recent_demand(site, client):
    request = make_request(team=site["team_a"], flavor=site["h100"], nominal_gpus=8)
    client.force_login(get_user_model().objects.get(username="staffer"))
    html = client.get(f"/staff/requests/{request.pk}/").content.decode()
    assert 'id="what-if-empty"' in html and 'id="what-if-table"' not in html
    assert "No jobs were submitted on cluster gpu-west in the last 7 days" in html


def test_the_review_page_query_count_is_fixed(site, client):
    request = make_request(team=site["team_a"], flavor=site["h100"], nominal_gpus=8)
    client.force_login(get_user_model().objects.get(username="staffer"))
    counts = []
    for teams, jobs in ((1, 2), (4, 25)):
        _grow(site, teams=teams, jobs_per_team=jobs)
        cache.clear()
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(f"/staff/requests/{request.pk}/").status_code == 200
        counts.append(len(ctx))
    assert counts[0] == counts[1]


def test_members_cannot_preview(site):
    request = make_request(team=site["team_a"], flavor=site["h100"], nominal_gpus=8)
    response = api(site["member"]).get(f"/api/v1/quota-requests/{request.pk}/preview/")
    assert response.status_code == 403


def test_the_openapi_schema_describes_what_if(site):
    schema = api(site["staff"]).get("/api/schema/", {"format": "json"}).json()
    components = schema["components"]["schemas"]
    assert components["Preview"]["properties"]["what_if"]["allOf"][0]["$ref"] == (
        "#/components/schemas/WhatIf")
    assert set(components["WhatIfFigures"]["properties"]) == {
        "team", "jobs", "admitted", "not_admitted", "mean_wait_seconds", "p95_wait_seconds",
        "borrowed_mean_gpus", "borrowed_peak_gpus", "jobs_preempted", "preemptions"}
