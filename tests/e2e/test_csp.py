"""Under the Content-Security-Policy every page still works in Chromium: no violation
reported, charts drawn, the job form's live validation and the admin's scripts run."""

import pytest
from django.contrib.auth import get_user_model

from tests.e2e.pages.auth import LoginPage
from tests.e2e.pages.jobs import JobFormPage
from tests.factories import PASSWORD
from tests.integration.portal.fairness_world import build_fairness_world

PAGES = ["/", "/teams/", "/teams/team-a/", "/teams/team-a/jobs/", "/jobs/",
         "/teams/team-a/jobs/new/", "/teams/team-a/utilization/", "/staff/requests/",
         "/staff/fairness/", "/staff/utilization/", "/staff/clusters/", "/admin/",
         "/admin/portal/team/", "/admin/auth/user/add/", "/account/tokens/", "/api/docs/"]


@pytest.mark.django_db(transaction=True)
def test_pages_run_under_the_csp_without_violations(live_server, page):
    build_fairness_world()
    get_user_model().objects.filter(username="staff").update(is_superuser=True)  # admin pages
    violations: list[str] = []
    page.on("console", lambda msg: violations.append(msg.text)
            if "Content Security Policy" in msg.text else None)
    page.on("pageerror", lambda exc: violations.append(f"pageerror: {exc}"))
    # securitypolicyviolation events too (they also cover what the console does not show)
    page.context.add_init_script(
        "document.addEventListener('securitypolicyviolation', e => console.error("
        "'Content Security Policy violation: ' + e.violatedDirective + ' ' + e.blockedURI));")

    response = page.goto(f"{live_server.url}/accounts/login/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    LoginPage(page, live_server.url).log_in("staff", PASSWORD)
    for path in PAGES:
        response = page.goto(f"{live_server.url}{path}")
        assert response.status == 200, path
        page.wait_for_load_state("load")
    # charts are drawn by static JS under the policy
    page.goto(f"{live_server.url}/staff/fairness/")
    page.wait_for_selector("[data-figure][data-rendered='true']")
    assert page.locator("[data-figure][data-rendered='error']").count() == 0
    # the job form's live validation (static/js/job_form.js, XHR to the portal) runs
    page.goto(f"{live_server.url}/teams/team-a/jobs/new/")
    JobFormPage(page).fill(name="probe", image="ghcr.io/a/train:1", command="python t.py",
                           workers="1.5").expect_live_error("workers",
                                                            "'1.5' is not a whole number.")
    assert violations == []
