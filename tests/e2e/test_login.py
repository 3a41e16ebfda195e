"""A user logs in through the browser and sees the dashboard shell."""

import pytest

from tests.e2e.pages.auth import LoginPage


@pytest.mark.django_db(transaction=True)
def test_login_shows_the_dashboard_shell(live_server, page, django_user_model):
    django_user_model.objects.create_user("dana", password="dana-pass-123")
    dashboard = LoginPage(page, live_server.url).open().log_in("dana", "dana-pass-123")
    assert dashboard.title == "Dashboard"
    assert dashboard.username == "dana"
    assert "Dashboard" in dashboard.nav_links()
    assert "Admin console" not in dashboard.nav_links()


@pytest.mark.django_db(transaction=True)
def test_wrong_password_stays_on_login(live_server, page, django_user_model):
    django_user_model.objects.create_user("erin", password="erin-pass-123")
    LoginPage(page, live_server.url).open().log_in("erin", "not-it")
    assert "/accounts/login/" in page.url
    assert "didn't match" in page.inner_text(".error")


@pytest.mark.django_db(transaction=True)
def test_staff_sees_the_admin_console_link(live_server, page, django_user_model):
    django_user_model.objects.create_user("sam", password="sam-pass-123", is_staff=True)
    dashboard = LoginPage(page, live_server.url).open().log_in("sam", "sam-pass-123")
    assert "Admin console" in dashboard.nav_links()
    page.click("text=Admin console")
    assert "/admin/" in page.url
