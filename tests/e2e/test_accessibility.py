"""Every page, as staff, a lead and a member: axe-core finds no serious or critical
violation, and at 420 px wide nothing scrolls the page sideways.

axe-core is the engine Deque publishes (its ``axe.min.js`` ships inside the PyPI
package axe-playwright-python, injected into the page; nothing is fetched). The world
is the demo's (``seed_demo``) plus jobs in each phase, so lists, badges, forms and
charts are on the pages as users see them.
"""

import datetime as dt

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.core.management import call_command
from django.utils import timezone

from portal.models import IdleFlag, QuotaRequest, Team, UsageSample
from tests.e2e.pages.auth import LoginPage
from tests.factories import make_job

#: axe impacts that fail the test (axe's scale: minor, moderate, serious, critical).
FAILING = {"serious", "critical"}
NARROW = {"width": 420, "height": 800}


@pytest.fixture
def demo_world(transactional_db, settings):
    """The demo world with a job in each phase, an idle flag and usage samples."""
    settings.DEBUG = True   # seed_demo refuses to run without it (public demo passwords)
    call_command("seed_demo", verbosity=0)
    settings.DEBUG = False
    team = Team.objects.get(slug="nlp-research")
    flavor = team.grants.select_related("flavor").first().flavor
    now = timezone.now()
    jobs = {}
    for phase, reason, message in (
        ("Queued", "WaitingForQuota", "Waiting for quota: it needs 8 more nvidia.com/gpu."),
        ("Running", "", ""), ("Succeeded", "", ""), ("Failed", "BackoffLimitExceeded",
                                                      "Job has reached the backoff limit"),
    ):
        jobs[phase] = make_job(team=team, flavor=flavor, name=f"train-{phase.lower()}",
                               phase=phase, reason=reason, message=message, workers=2,
                               gpus_per_worker=4, submitter=team.memberships.get(
                                   user__username="bob").user,
                               submitted_at=now - dt.timedelta(minutes=30))
    IdleFlag.objects.create(job=jobs["Running"], gpus=8, activity=0.02,
                            idle_since=now - dt.timedelta(hours=3), threshold=0.1,
                            window_hours=2, flagged_at=now - dt.timedelta(hours=1),
                            reclaimable_at=now + dt.timedelta(hours=20))
    start = now.replace(minute=0, second=0, microsecond=0) - dt.timedelta(hours=3)
    for hour in range(3):
        UsageSample.objects.create(resolution=3600, start=start + dt.timedelta(hours=hour),
                                   scope="team", subject=f"team:{team.pk}", team=team,
                                   allocated_gpu_seconds=8 * 3600,
                                   reporting_gpu_seconds=8 * 3600,
                                   busy_gpu_seconds=4 * 3600)
    return {"team": team, "jobs": jobs,
            "request": QuotaRequest.objects.filter(team__slug="nlp-research").first()
            or QuotaRequest.objects.first()}


def _pages(world, role: str) -> list[str]:
    team, job = world["team"], world["jobs"]["Queued"]
    request = world["request"]
    own = [
        "/", "/teams/", f"/teams/{team.slug}/", f"/teams/{team.slug}/jobs/",
        f"/teams/{team.slug}/jobs/new/", f"/teams/{team.slug}/jobs/{job.pk}/",
        f"/teams/{team.slug}/jobs/{job.pk}/cancel/", "/jobs/",
        f"/teams/{team.slug}/utilization/", "/api/docs/",
    ]
    if request is not None and request.team_id == team.pk:
        own.append(f"/teams/{team.slug}/requests/{request.pk}/")
    if role == "staff":
        own += ["/staff/requests/", "/staff/fairness/", "/staff/utilization/",
                "/staff/clusters/", "/staff/clusters/demo/objects/"]
        if request is not None:
            own.append(f"/staff/requests/{request.pk}/")
    return own


@pytest.mark.parametrize(("username", "role"), [("admin", "staff"), ("alice", "lead"),
                                                ("bob", "member")])
def test_every_page_passes_axe_and_fits_420_px(live_server, browser, demo_world,
                                               username, role):
    context = browser.new_context(viewport=NARROW)
    page = context.new_page()
    page.set_default_timeout(15_000)
    axe = Axe()
    problems = []
    try:
        LoginPage(page, live_server.url).open().log_in(username, f"{username}-demo-pass")
        for path in _pages(demo_world, role):
            response = page.goto(f"{live_server.url}{path}")
            assert response.status == 200, f"{path} answered {response.status}"
            page.wait_for_load_state("networkidle")
            # Swagger UI's own widgets (a third-party bundle, not ours to restyle) are left
            # out of the check; the portal's layout around them is checked like any page.
            context_ = {"exclude": [["#swagger-ui"]]} if path == "/api/docs/" else None
            for violation in axe.run(page, context=context_).response["violations"]:
                if violation["impact"] in FAILING:
                    targets = [", ".join(n["target"]) for n in violation["nodes"]][:5]
                    problems.append(f"{path}: {violation['id']} ({violation['impact']}): "
                                    f"{violation['help']} at {targets}")
            overflow = page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth")
            if overflow > 0:
                problems.append(f"{path}: the page scrolls sideways by {overflow} px at 420 px")
    finally:
        context.close()
    assert problems == [], "\n".join(problems)


def test_the_login_page_passes_axe_and_fits_420_px(live_server, browser):
    context = browser.new_context(viewport=NARROW)
    page = context.new_page()
    try:
        page.goto(f"{live_server.url}/accounts/login/")
        bad = [v["id"] for v in Axe().run(page).response["violations"]
               if v["impact"] in FAILING]
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth")
    finally:
        context.close()
    assert (bad, overflow) == ([], 0)
