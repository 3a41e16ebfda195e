"""Utilization pages: access, what they show, the snooze and reclaim forms, and a constant
number of SQL queries whatever the number of teams, jobs and samples."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal.models import IdleFlag
from portal.services.usage import STEP, floor_to, usage_collect
from queues.metrics import parse_exposition
from tests.dcgm import DCGM_TEXT, dcgm_line
from tests.factories import make_team, make_user
from tests.integration.utilization.conftest import make_job

pytestmark = pytest.mark.integration


def collect_hours(hours=3, text=DCGM_TEXT):
    now = floor_to(timezone.now(), STEP)
    for k in range(int(hours * 12)):
        usage_collect(at=now - timedelta(seconds=k * STEP), samples=parse_exposition(text))


def flag(job, *, reclaimable_in=timedelta(hours=1)):
    now = timezone.now()
    return IdleFlag.objects.create(job=job, gpus=job.workers * job.gpus_per_worker,
                                   activity=0.01, threshold=0.05, window_hours=24,
                                   idle_since=now - timedelta(hours=30), flagged_at=now,
                                   reclaimable_at=now + reclaimable_in)


def test_team_page_shows_charts_showback_link_and_flags(usage_world, client):
    collect_hours(1)
    flag(usage_world["jobs"]["eval"])
    client.force_login(usage_world["owner"])
    page = client.get("/teams/team-a/utilization/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="team-alloc-busy" data-figure=' in html
    assert 'id="team-showback" data-figure=' in html
    assert "/api/v1/utilization/?team=team-a&amp;format=csv" in html
    assert 'data-job="eval"' in html and "snooze-form" in html  # the owner may snooze
    # efficiency 2 / 4 = 50 %, coverage 4 of 5 = 80 %
    assert "efficiency 50 %, coverage 80 %" in html
    client.force_login(usage_world["member_b"])
    assert client.get("/teams/team-a/utilization/").status_code == 404


def test_team_page_itself_carries_the_utilization_panel(usage_world, client):
    """The team page (not only its utilization sub-page) shows allocated vs busy GPUs,
    the showback with its CSV link and how many of its jobs are flagged idle."""
    collect_hours(1)
    client.force_login(usage_world["owner"])
    html = client.get("/teams/team-a/").content.decode()
    assert 'id="team-utilization"' in html
    assert 'id="team-alloc-busy" data-figure=' in html
    assert 'id="team-showback" data-figure=' in html
    assert 'id="team-showback-csv" href="/api/v1/utilization/?team=team-a&amp;format=csv"' in html
    assert "no job flagged holding idle GPUs" in html
    flag(usage_world["jobs"]["eval"])
    html = client.get("/teams/team-a/").content.decode()
    assert "<strong>1</strong> job flagged holding idle GPUs" in html


def test_snooze_form_and_reclaim_button(usage_world, client, django_capture_on_commit_callbacks):
    f = flag(usage_world["jobs"]["eval"], reclaimable_in=timedelta(hours=-1))
    client.force_login(usage_world["lead_a"])  # not the owner: refused, nothing written
    client.post(f"/teams/team-a/utilization/flags/{f.pk}/snooze/",
                {"justification": "We need it for the paper."})
    f.refresh_from_db()
    assert f.state == "open"
    client.force_login(usage_world["owner"])
    response = client.post(f"/teams/team-a/utilization/flags/{f.pk}/snooze/",
                           {"justification": "We need it for the paper."}, follow=True)
    assert "snoozed" in response.content.decode()
    f.refresh_from_db()
    assert (f.state, f.snooze_justification) == ("snoozed", "We need it for the paper.")

    assert client.get("/staff/utilization/").status_code == 403
    client.force_login(usage_world["staff"])
    f.reclaimable_at = timezone.now() - timedelta(minutes=1)
    f.save()
    page = client.get("/staff/utilization/").content.decode()
    assert 'id="staff-heatmap' in page and "reclaim-form" in page
    assert "1 job(s) hold 1 idle GPUs; 1 can be reclaimed now." in page
    with django_capture_on_commit_callbacks() as callbacks:
        client.post(f"/staff/utilization/flags/{f.pk}/reclaim/")
    f.refresh_from_db()
    assert f.state == "reclaimed"
    assert len(callbacks) == 1  # portal.job_deactivate, on commit


def grow(world, n):
    for i in range(n):
        team = make_team(cluster=world["cluster"], slug=f"grown-{i}")
        make_user(f"grown-member-{i}", team=team)
        for j in range(3):
            job = make_job(team=team, flavor=world["h100"], name=f"job-{j}")
            if j == 0:
                flag(job)
    text = DCGM_TEXT + "\n".join(
        dcgm_line("DCGM_FI_DEV_GPU_UTIL", 40, gpu="0", node=f"n{i}", namespace=f"grown-{i}",
                  pod=f"job-1-x2kq{i}") for i in range(n)) + "\n"
    collect_hours(1, text)


@pytest.mark.parametrize(("path", "user"), [
    ("/teams/team-a/utilization/", "owner"),
    ("/staff/utilization/", "staff"),
])
def test_pages_run_a_constant_number_of_queries(usage_world, client, path, user):
    collect_hours(1)
    flag(usage_world["jobs"]["eval"])
    client.force_login(usage_world[user])

    def count():
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(path).status_code == 200
        return len(ctx)

    small = count()
    grow(usage_world, 12)
    assert count() == small
