"""A lead filters the team's job list and pages through it in Chromium."""

import pytest

from tests.e2e.pages.auth import LoginPage
from tests.factories import PASSWORD, make_cluster, make_flavor, make_job, make_team, make_user


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("unconsumed_queue")
def test_lead_filters_by_phase_and_pages_through_the_jobs(live_server, page, settings):
    settings.PAGE_LIST_SIZE = 5
    cluster = make_cluster(name="gpu-east")
    flavor = make_flavor(cluster=cluster, name="a100", physical_gpus=16)
    team = make_team(cluster=cluster, slug="vision")
    make_user("lena", team=team, role="lead")
    for i in range(7):
        make_job(team=team, flavor=flavor, name=f"run-{i}", phase="Running")
    make_job(team=team, flavor=flavor, name="waiting-1", phase="Queued")

    LoginPage(page, live_server.url).open().log_in("lena", PASSWORD)
    page.goto(f"{live_server.url}/teams/vision/jobs/")
    assert page.inner_text("#job-total") == "8"
    assert page.locator("#job-table tr[data-job]").count() == 5
    page.click("#job-pager-next")
    assert "page=2" in page.url
    assert page.locator("#job-table tr[data-job]").count() == 3

    page.select_option("#id_phase", "Queued")
    page.click("#job-filter-apply")
    assert "phase=Queued" in page.url
    assert page.inner_text("#job-total") == "1"
    assert [a.inner_text() for a in page.query_selector_all("#job-table td.name a")] == [
        "waiting-1"]
    page.click("#job-filter-clear")
    assert page.inner_text("#job-total") == "8"
