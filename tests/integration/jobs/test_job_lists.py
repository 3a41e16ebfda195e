"""Job lists that scale: filters shared by the pages and the API, pages with a total,
the API's body an array with the total and links in headers, constant queries."""

import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal.models import Job
from tests.factories import make_job
from tests.integration.helpers import api_as

pytestmark = pytest.mark.django_db


def _jobs(world, n: int, **fields) -> list[Job]:
    return [make_job(team=world["team_a"], flavor=world["h100"], name=f"run-{i:04d}",
                     submitter=world["member_a"], **fields) for i in range(n)]


def test_api_pages_through_every_job_with_the_total_in_headers(world, settings):
    settings.API_PAGE_SIZE = 10
    _jobs(world, 23, phase="Queued")
    client = api_as(world["staff"])
    first = client.get("/api/v1/jobs/")
    assert first.status_code == 200
    assert len(first.json()) == 10 and first["X-Total-Count"] == "23"
    assert (first["X-Page"], first["X-Page-Size"]) == ("1", "10")
    assert 'page=2>; rel="next"' in first["Link"] and 'page=3>; rel="last"' in first["Link"]
    seen = [row["name"] for row in first.json()]
    for page in (2, 3):
        response = client.get("/api/v1/jobs/", {"page": page})
        seen += [row["name"] for row in response.json()]
    assert seen == [f"run-{i:04d}" for i in range(22, -1, -1)]   # newest first, none lost
    assert 'rel="next"' not in response["Link"] and 'rel="prev"' in response["Link"]
    assert len(client.get("/api/v1/jobs/", {"page_size": 50}).json()) == 23
    missing = client.get("/api/v1/jobs/", {"page": 9})
    assert missing.status_code == 404


def test_api_filters_by_submitter_flavor_name_and_age(world):
    old = _jobs(world, 2)
    Job.objects.filter(pk__in=[j.pk for j in old]).update(
        submitted_at=timezone.now() - dt.timedelta(days=3))
    make_job(team=world["team_a"], flavor=world["mig"], name="notebook-1",
             submitter=world["member_a2"])
    client = api_as(world["lead_a"])
    names = lambda **q: sorted(r["name"] for r in client.get("/api/v1/jobs/", q).json())  # noqa: E731
    assert names(submitter="member_a2") == ["notebook-1"]
    assert names(flavor="h100") == ["run-0000", "run-0001"]
    assert names(q="NOTEBOOK") == ["notebook-1"]
    assert names(age="24h") == ["notebook-1"]
    assert names(age="7d") == ["notebook-1", "run-0000", "run-0001"]
    bad = client.get("/api/v1/jobs/", {"age": "3w"})
    assert bad.status_code == 400 and "age" in bad.json()


def test_api_job_list_queries_stay_constant(world):
    client = api_as(world["staff"])
    _jobs(world, 3)
    with CaptureQueriesContext(connection) as small:
        assert client.get("/api/v1/jobs/").status_code == 200
    for i in range(30):
        make_job(team=world["team_b"], flavor=world["h100"], name=f"b-{i}")
    with CaptureQueriesContext(connection) as large:
        assert len(client.get("/api/v1/jobs/").json()) == 33
    assert len(small) == len(large)


def test_list_page_filters_pages_and_counts_without_cutting(client, world, settings):
    settings.PAGE_LIST_SIZE = 20
    _jobs(world, 45, phase="Running")
    make_job(team=world["team_a"], flavor=world["h100"], name="waiting-1", phase="Queued")
    client.force_login(world["lead_a"])
    html = client.get("/teams/team-a/jobs/").content.decode()
    assert "Showing 1–20 of <strong id=\"job-total\">46</strong> jobs" in html
    assert 'id="job-pager-next"' in html and "page 1 of 3" in html
    last = client.get("/teams/team-a/jobs/", {"page": 3}).content.decode()
    assert "Showing 41–46 of" in last and last.count('<tr data-job=') == 6
    queued = client.get("/teams/team-a/jobs/", {"phase": "Queued"}).content.decode()
    assert queued.count('<tr data-job=') == 1 and "waiting-1" in queued
    assert "matching the filters" in queued and 'id="job-filter-clear"' in queued
    rows = client.get("/teams/team-a/jobs/rows.json", {"phase": "Running", "page": 2}).json()
    assert (rows["total"], rows["page"], rows["pages"], len(rows["jobs"])) == (45, 2, 3, 20)
    bad = client.get("/teams/team-a/jobs/", {"age": "forever"}).content.decode()
    assert "Select a valid choice" in bad and "No job matches the filters." in bad


def test_list_page_queries_stay_constant(client, world):
    client.force_login(world["staff"])
    _jobs(world, 2)
    with CaptureQueriesContext(connection) as small:
        client.get("/jobs/")
    for i in range(40):
        make_job(team=world["team_b"], flavor=world["h100"], name=f"b-{i}")
    with CaptureQueriesContext(connection) as large:
        client.get("/jobs/", {"page": 2})
    assert len(small) == len(large)
