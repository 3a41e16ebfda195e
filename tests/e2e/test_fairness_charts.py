"""The team and staff fairness charts render in Chromium: Plotly draws SVG from our JSON."""

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.services.fairness import fairness_snapshot_take
from tests.e2e.pages.auth import LoginPage
from tests.e2e.pages.fairness import StaffFairnessPage, TeamFairnessPanel
from tests.factories import PASSWORD
from tests.integration.portal.fairness_world import build_fairness_world


@pytest.mark.django_db(transaction=True)
def test_team_and_staff_fairness_charts_render(live_server, page):
    build_fairness_world()
    now = timezone.now()
    fairness_snapshot_take(now=now - timedelta(minutes=10))
    fairness_snapshot_take(now=now)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    requests: list[str] = []
    page.on("request", lambda req: requests.append(req.url))

    # a member sees the team's own chart: one flavor, three bars, a fair-share marker
    LoginPage(page, live_server.url).open().log_in("member_c", PASSWORD)
    team = TeamFairnessPanel(page).open(live_server.url, "team-c")
    team.wait_for_chart(team.CHART)
    assert team.chart_state(team.CHART) == "true"
    assert team.drawn_svg_count(team.CHART) >= 1
    assert team.bar_count(team.CHART) == 3  # nominal, usage (0 high) and demand on a100
    assert team.legend(team.CHART) == ["Nominal quota", "Usage (admitted)",
                                       "Demand (admitted + pending)", "Fair share"]
    assert team.sentences(team.CHART) == [
        "a100: team-c is 4 GPUs below its fair share; 3 could be reclaimed from another team "
        "of its cohort (1 GPU cannot be reclaimed)."
    ]
    page.click(".userbox button[type=submit]")

    # staff: every flavor's chart and the Jain history are drawn
    LoginPage(page, live_server.url).open().log_in("staff", PASSWORD)
    staff = StaffFairnessPage(page).open_from_nav()
    for chart_id in (staff.flavor_chart("a100"), staff.flavor_chart("t4-shared"), staff.JAIN):
        staff.wait_for_chart(chart_id)
        assert staff.chart_state(chart_id) == "true", chart_id
        assert staff.drawn_svg_count(chart_id) >= 1, chart_id
    assert staff.bar_count(staff.flavor_chart("a100")) == 9  # 3 teams x 3 bar series
    assert staff.legend(staff.JAIN) == ["a100", "t4-shared"]
    assert ("team-c is 4 GPUs below its fair share; 3 could be reclaimed from team-a "
            "(1 GPU cannot be reclaimed)") in staff.sentences(staff.flavor_chart("a100"))

    assert errors == []
    # everything came from the portal itself: no CDN
    assert all(url.startswith(live_server.url) for url in requests), requests
