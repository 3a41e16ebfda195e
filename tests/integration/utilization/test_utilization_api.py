"""GET /api/v1/utilization/ returns the figures the DCGM series imply, read through a real
Prometheus (and directly from the exporter page when PROMETHEUS_URL is empty).

Served series (tests/dcgm.py), per 5-minute bucket of 300 s:
  team-a: train holds 4 GPUs, busy 0.75 + 0.5 + 0.25 + 0.5 = 2.0 (GPU 3 reports GPU_UTIL 90
          and GR_ENGINE_ACTIVE 0.5: the ratio wins); eval holds 1 GPU whose only sample is
          150 % (dropped): no data. Allocated 5, reporting 4, busy 2.
  team-b: mig-ft holds 2 MIG instances at 0.5 and 0.25: allocated 2, reporting 2, busy 0.75.
  unattributed: one GPU without pod labels at 25 %.
GPU-hours = GPUs x 300 / 3600 = GPUs / 12.
"""

import csv
import io
import socket
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal.models import UsageSample
from portal.services.usage import usage_collect, usage_rollup
from tests.factories import make_team
from tests.integration.utilization.conftest import make_job

pytestmark = pytest.mark.integration
URL = "/api/v1/utilization/"
EXACT = {"rel": 1e-12, "abs": 1e-15}


def hours(gpus):
    return pytest.approx(gpus * 300 / 3600, **EXACT)


def span(start):
    return {"since": start.isoformat(), "until": (start + timedelta(minutes=5)).isoformat()}


def expect_figures(body):
    teams = {t["slug"]: t for t in body["teams"]}
    assert list(teams) == ["team-a", "team-b", "team-c"]
    a, b, c = teams["team-a"], teams["team-b"], teams["team-c"]
    assert a["allocated_gpu_hours"] == hours(5)
    assert a["busy_gpu_hours"] == hours(2.0)
    assert a["idle_gpu_hours"] == hours(2.0)  # 4 reporting - 2 busy; eval's GPU is no data
    assert a["efficiency"] == pytest.approx(0.5, **EXACT)
    assert a["coverage"] == pytest.approx(0.8, **EXACT)
    assert b["allocated_gpu_hours"] == hours(2)
    assert b["busy_gpu_hours"] == hours(0.75)
    assert b["idle_gpu_hours"] == hours(1.25)
    assert b["efficiency"] == pytest.approx(0.375, **EXACT)
    assert b["coverage"] == 1.0
    assert c == {"slug": "team-c", "allocated_gpu_hours": 0.0, "busy_gpu_hours": None,
                 "idle_gpu_hours": None, "efficiency": None, "coverage": None}
    return teams


def test_api_returns_the_figures_the_prometheus_series_imply(usage_world, prometheus, api,
                                                             settings):
    settings.PROMETHEUS_URL = prometheus.url
    settings.DCGM_EXPORTER_URL = ""
    result = usage_collect(at=timezone.now())
    assert (result.source, result.error) == ("prometheus", "")
    assert result.dropped == {"DCGM_FI_DEV_GPU_UTIL": 1}  # the 150 % sample

    jobs = usage_world["jobs"]
    stored = {r.subject: r for r in UsageSample.objects.filter(resolution=300)}
    assert stored[f"job:{jobs['train'].pk}"].busy_gpu_seconds == pytest.approx(600, **EXACT)
    assert stored[f"job:{jobs['eval'].pk}"].busy_gpu_seconds is None  # no data, never 0 %
    assert f"job:{jobs['old'].pk}" not in stored  # Succeeded: holds no GPUs

    body = api(usage_world["staff"]).get(URL, span(result.start)).json()
    expect_figures(body)
    un = body["unattributed"]
    assert un["allocated_gpu_hours"] == 0.0
    assert un["busy_gpu_hours"] == hours(0.25)
    assert un["efficiency"] == pytest.approx(0.25, **EXACT)
    assert un["coverage"] is None
    assert body["idle_jobs"] == []
    assert body["resolution_seconds"] == 300


def test_exporter_page_read_directly_gives_the_same_figures(usage_world, prometheus, api,
                                                            settings):
    settings.PROMETHEUS_URL = ""
    settings.DCGM_EXPORTER_URL = prometheus.endpoint.url
    result = usage_collect(at=timezone.now())
    assert (result.source, result.error) == ("exporter", "")
    expect_figures(api(usage_world["staff"]).get(URL, span(result.start)).json())


def test_prometheus_unreachable_is_no_data_not_zero(usage_world, api, settings):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    settings.PROMETHEUS_URL = f"http://127.0.0.1:{port}"
    result = usage_collect(at=timezone.now())
    assert "connection" in result.error
    a = api(usage_world["staff"]).get(URL, span(result.start)).json()["teams"][0]
    assert a["allocated_gpu_hours"] == hours(5)  # allocations come from the portal
    assert (a["busy_gpu_hours"], a["efficiency"], a["coverage"]) == (None, None, 0.0)


def test_members_see_their_teams_staff_see_all(usage_world, prometheus, api, settings):
    settings.PROMETHEUS_URL = prometheus.url
    start = usage_collect(at=timezone.now()).start
    body = api(usage_world["lead_a"]).get(URL, span(start)).json()
    assert [t["slug"] for t in body["teams"]] == ["team-a"]
    assert body["unattributed"] is None
    assert api(usage_world["lead_a"]).get(URL, {"team": "team-b"}).status_code == 404
    assert api(usage_world["lead_a"]).get(URL, {"team": "nope"}).status_code == 404
    only_b = api(usage_world["staff"]).get(URL, {"team": "team-b", **span(start)}).json()
    assert [t["slug"] for t in only_b["teams"]] == ["team-b"]
    assert api(None).get(URL).status_code in (401, 403)


def test_bad_since_until_name_the_field(usage_world, api):
    client = api(usage_world["staff"])
    response = client.get(URL, {"since": "yesterday"})
    assert response.status_code == 400
    assert list(response.json()) == ["since"]
    response = client.get(URL, {"until": "2026-13-45T00:00:00Z"})
    assert (response.status_code, list(response.json())) == (400, ["until"])
    response = client.get(URL, {"since": "2026-01-02T00:00:00Z", "until": "2026-01-01T00:00:00Z"})
    assert response.status_code == 400
    assert response.json() == {"until": ["Must be later than since."]}


@pytest.mark.parametrize(("params", "field"), [
    ({"until": "0001-01-01T00:00:00Z"}, "until"),
    ({"until": "0001-01-03T00:00:00Z"}, "until"),
    ({"since": "0001-01-01T00:00:00Z", "until": "0001-01-02T00:00:00Z"}, "no-error"),
    ({"since": "9999-12-30T00:00:00Z", "until": "9999-12-31T23:59:59Z"}, "no-error"),
    ({"since": "9999-12-31T00:00:00Z"}, "since"),
])
def test_dates_at_the_ends_of_the_calendar_name_the_field(usage_world, api, params, field):
    for extra in ({}, {"format": "csv"}):
        response = api(usage_world["staff"]).get(URL, {**params, **extra})
        if field == "no-error":  # the earliest day there is: an empty report, no 500
            assert response.status_code == 200, response.content
            continue
        assert response.status_code == 400, response.content
        assert field in response.content.decode()


def test_csv_showback_by_team_and_day(usage_world, prometheus, api, settings):
    settings.PROMETHEUS_URL = prometheus.url
    start = usage_collect(at=timezone.now()).start
    response = api(usage_world["staff"]).get(URL, {"format": "csv", **span(start)})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert "attachment" in response["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.content.decode())))
    assert [(r["scope"], r["team"]) for r in rows] == [
        ("team", "team-a"), ("team", "team-b"), ("unattributed", "")]
    assert {r["day"] for r in rows} == {start.date().isoformat()}
    assert float(rows[0]["allocated_gpu_hours"]) == pytest.approx(5 / 12, abs=1e-6)
    assert float(rows[0]["busy_gpu_hours"]) == pytest.approx(2 / 12, abs=1e-6)
    assert float(rows[0]["efficiency"]) == pytest.approx(0.5)
    mine = api(usage_world["lead_a"]).get(URL, {"format": "csv", **span(start)})
    assert [r["team"] for r in csv.DictReader(io.StringIO(mine.content.decode()))] == ["team-a"]


def test_rollups_sum_five_minute_rows_and_prune_keeps_retention(usage_world, settings):
    settings.PROMETHEUS_URL = ""
    settings.DCGM_EXPORTER_URL = ""
    team_a = usage_world["team_a"]
    now = timezone.now().replace(minute=30, second=0, microsecond=0)
    for minutes in (0, 5, 10):  # three 5-minute buckets, allocations only (no data)
        usage_collect(at=now - timedelta(minutes=minutes), samples=[])
    written = usage_rollup(now=now)
    assert written["hourly"] >= 1 and written["daily"] >= 1
    hourly = UsageSample.objects.filter(resolution=3600, subject=f"team:{team_a.pk}")
    assert sum(r.allocated_gpu_seconds for r in hourly) == 3 * 5 * 300
    assert sum(r.samples for r in hourly) == 3
    assert all(r.busy_gpu_seconds is None for r in hourly)
    daily = UsageSample.objects.get(resolution=86400, subject=f"team:{team_a.pk}")
    assert daily.allocated_gpu_seconds == 3 * 5 * 300
    assert usage_rollup(now=now) == written  # idempotent
    settings.USAGE_RETENTION_5M_DAYS = 1
    from portal.services.usage import usage_prune

    deleted = usage_prune(now=now + timedelta(days=2))
    assert deleted[300] > 0 and deleted[3600] == 0
    assert UsageSample.objects.filter(resolution=300).count() == 0


def test_report_queries_are_constant(usage_world, api, settings):
    settings.PROMETHEUS_URL = ""
    usage_collect(at=timezone.now(), samples=[])
    client = api(usage_world["staff"])

    def count():
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(URL).status_code == 200
            assert client.get(URL, {"format": "csv"}).status_code == 200
        return len(ctx)

    small = count()
    for i in range(15):
        team = make_team(cluster=usage_world["cluster"], slug=f"extra-{i}")
        for j in range(3):
            make_job(team=team, flavor=usage_world["h100"], name=f"job-{j}")
    usage_collect(at=timezone.now(), samples=[])
    assert count() == small
