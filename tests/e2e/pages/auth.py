"""Page objects for the login page and the dashboard shell."""

from playwright.sync_api import Page


class LoginPage:
    """``/accounts/login/``."""

    def __init__(self, page: Page, base_url: str) -> None:
        self.page = page
        self.base_url = base_url

    def open(self) -> "LoginPage":
        self.page.goto(f"{self.base_url}/accounts/login/")
        return self

    def log_in(self, username: str, password: str) -> "DashboardPage":
        self.page.fill("#id_username", username)
        self.page.fill("#id_password", password)
        self.page.click("button[type=submit]")
        return DashboardPage(self.page)


class DashboardPage:
    """The signed-in landing page."""

    def __init__(self, page: Page) -> None:
        self.page = page

    @property
    def title(self) -> str:
        return self.page.inner_text("#dashboard-title")

    @property
    def username(self) -> str:
        return self.page.inner_text(".userbox .username")

    def nav_links(self) -> list[str]:
        return [a.inner_text() for a in self.page.query_selector_all(".mainnav a")]
