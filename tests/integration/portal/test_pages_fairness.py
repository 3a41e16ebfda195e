"""Fairness pages: the team page's panel and /staff/fairness/ (values, words, access, queries)."""

import html
import json
import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from portal.services.fairness import fairness_snapshot_take
from tests.factories import make_grant, make_job, make_team, make_user
from tests.integration.portal.fairness_world import build_fairness_world

pytestmark = pytest.mark.django_db
STAFF_URL = "/staff/fairness/"


@pytest.fixture
def fw():
    return build_fairness_world()


def _figure(content: str, chart_id: str) -> dict:
    match = re.search(rf'id="{re.escape(chart_id)}" data-figure="([^"]*)"', content)
    assert match, f"no figure {chart_id}"
    return json.loads(html.unescape(match.group(1)))


def _sentences(content: str, chart_id: str) -> list[str]:
    block = re.search(rf'<ul class="chart-sentences" id="{re.escape(chart_id)}-sentences">'
                      r"(.*?)</ul>", content, re.S)
    return [html.unescape(s) for s in re.findall(r"<li>(.*?)</li>", block.group(1))] if block \
        else []


def test_staff_page_charts_every_team_with_fair_share_and_words(client, fw):
    client.force_login(fw["staff"])
    response = client.get(STAFF_URL)
    assert response.status_code == 200
    content = response.content.decode()
    fig = _figure(content, "fairness-a100")
    traces = {t["name"]: t for t in fig["data"]}
    assert traces["Nominal quota"]["x"] == ["team-a", "team-b", "team-c"]
    assert traces["Nominal quota"]["y"] == [4, 4, 4]
    assert traces["Usage (admitted)"]["y"] == [7, 4, 0]
    assert traces["Demand"]["y"] == [7, 6, 8]
    assert traces["Fair share"]["y"] == [4, 4, 4]
    assert traces["Usage (admitted)"]["text"][0] == "dominant share 86% (memory)<br>weight 1"
    assert _sentences(content, "fairness-a100") == [
        "Jain's index 0.62 over 3 teams with demand (1 = every team at its fair share; "
        "0.33 = one team holds it all).",
        "team-c is 4 GPUs below its fair share; 3 could be reclaimed from team-a "
        "(1 GPU cannot be reclaimed)",
    ]
    t4 = _figure(content, "fairness-t4-shared")
    assert {t["name"]: t["y"] for t in t4["data"]}["Usage (admitted)"] == [0.5]
    # the table shows dominant shares and resources
    assert re.search(r'<tr data-team="team-a">.*?<td class="dominant">86%', content, re.S)
    assert re.search(r'<tr data-team="team-b">.*?<td class="dominant">33% '
                     r'<span class="muted">cpu</span>', content, re.S)
    # no snapshots yet: the Jain chart says so instead of drawing an empty figure
    assert "No fairness snapshots yet" in content
    # the figures are drawn by our static JS with the locally served plotly.js
    assert '<script src="/static/vendor/plotly/plotly.min.js"></script>' in content
    assert '<script src="/static/js/charts.js"></script>' in content


def test_staff_page_jain_history_from_snapshots(client, fw):
    now = timezone.now()
    fairness_snapshot_take(now=now - timedelta(hours=1))
    # team-a's 6-GPU job finishes: its usage and demand drop to 1 GPU, so the pool's
    # 3 spare GPUs go to team-b and team-c (+1.5 each): fair shares 1, 5.5, 5.5.
    fw["team-a"].jobs.filter(gpus_per_worker=6).update(phase="Succeeded")
    fairness_snapshot_take(now=now)
    fairness_snapshot_take(now=now - timedelta(days=8))  # older than the chart's 7 days
    client.force_login(fw["staff"])
    content = client.get(STAFF_URL).content.decode()
    fig = _figure(content, "jain-history")
    lines = {t["name"]: t["y"] for t in fig["data"]}
    assert len(fig["data"][0]["x"]) == 2
    # a100: 121/195, then usage/fair = 1, 4/5.5 = 8/11, 0:
    # (19/11)^2 / (3 * (1 + 64/121)) = (361/121) / (555/121) = 361/555 = 0.65
    assert lines["a100"] == [pytest.approx(121 / 195), pytest.approx(361 / 555)]
    assert lines["t4-shared"] == [1.0, 1.0]
    sentences = _sentences(content, "jain-history")
    assert sentences[0].startswith("a100: Jain's index ranged 0.62 to 0.65 over 2 snapshots; "
                                   "latest 0.65 at ")


def test_staff_page_access_and_unknown_cluster(client, fw):
    assert client.get(STAFF_URL).status_code == 302  # to the login page
    client.force_login(fw["member_a"])
    assert client.get(STAFF_URL).status_code == 403
    client.force_login(fw["staff"])
    assert client.get(STAFF_URL, {"cluster": "nope"}).status_code == 404
    assert client.get(STAFF_URL, {"cluster": "gpu-east"}).status_code == 200


def test_team_page_panel_shows_the_team_and_names_no_other(client, fw):
    client.force_login(fw["member_c"])
    content = client.get(reverse("team-page", args=["team-c"])).content.decode()
    fig = _figure(content, "team-fairness-chart")
    assert {t["name"]: (t["x"], t["y"]) for t in fig["data"]} == {
        "Nominal quota": (["a100"], [4]),
        "Usage (admitted)": (["a100"], [0]),
        "Demand (admitted + pending)": (["a100"], [8]),
        "Fair share": (["a100"], [4]),
    }
    assert _sentences(content, "team-fairness-chart") == [
        "a100: team-c is 4 GPUs below its fair share; 3 could be reclaimed from another team "
        "of its cohort (1 GPU cannot be reclaimed)."
    ]
    panel = re.search(r'<section class="card" id="fairness">.*?</section>', content, re.S).group(0)
    assert "team-a" not in html.unescape(panel)


def test_team_page_panel_for_two_flavors_and_for_a_team_with_nothing(client, fw):
    client.force_login(fw["lead_a"])
    content = client.get(reverse("team-page", args=["team-a"])).content.decode()
    assert _sentences(content, "team-fairness-chart") == [
        "a100: team-a uses 7 GPUs of a fair share of 4, 3 above it (borrowing 3 beyond its "
        "nominal quota).",
    ]
    empty = make_team(cluster=fw["cluster"], slug="empty")
    make_user("e", team=empty)
    client.force_login(fw["staff"])
    content = client.get(reverse("team-page", args=["empty"])).content.decode()
    assert "The team has no quota and no jobs on any GPU flavor yet." in content
    assert 'id="team-fairness-chart" data-figure' not in content


def _grow(fw, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        team = make_team(cluster=fw["cluster"], slug=f"more-{i}", cohort=fw["research"])
        make_grant(team=team, flavor=fw["a100"], nominal_gpus=1)
        make_grant(team=team, flavor=fw["t4"], nominal_gpus=2)
        make_job(team=team, flavor=fw["a100"], phase="Running")
        make_job(team=team, flavor=fw["t4"], phase="Queued")
        make_user(f"more-user-{i}", team=team)
    fairness_snapshot_take(now=timezone.now() - timedelta(minutes=5 * n))


# session + user (2), nav pending count (1), clusters (1), flavors, cohorts, teams,
# grants, jobs (5), snapshots (1)
STAFF_PAGE_QUERIES = 10


def test_staff_page_query_count_is_the_same_at_two_sizes(client, fw, django_assert_num_queries):
    client.force_login(fw["staff"])
    _grow(fw, 1)
    with django_assert_num_queries(STAFF_PAGE_QUERIES):
        small = client.get(STAFF_URL)
    _grow(fw, 12, start=1)
    with django_assert_num_queries(STAFF_PAGE_QUERIES):
        big = client.get(STAFF_URL)
    assert len(_figure(small.content.decode(), "fairness-a100")["data"][0]["x"]) == 4
    assert len(_figure(big.content.decode(), "fairness-a100")["data"][0]["x"]) == 16
    assert len(_figure(big.content.decode(), "jain-history")["data"][0]["x"]) == 2


def test_team_page_query_count_is_the_same_at_two_sizes(client, fw, django_assert_num_queries):
    from tests.integration.portal.test_pages_quota import TEAM_PAGE_QUERIES

    client.force_login(fw["member_c"])
    url = reverse("team-page", args=["team-c"])
    with django_assert_num_queries(TEAM_PAGE_QUERIES):
        client.get(url)
    _grow(fw, 12)
    with django_assert_num_queries(TEAM_PAGE_QUERIES):
        assert client.get(url).status_code == 200
