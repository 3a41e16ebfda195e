"""Page objects for the job pages: the submit form and the team's job list."""

from playwright.sync_api import Page, expect


class JobFormPage:
    """``/teams/<slug>/jobs/new/``: the submit form with live validation."""

    def __init__(self, page: Page) -> None:
        self.page = page

    def fill(self, **fields: str) -> "JobFormPage":
        """Type into the named fields (``name``, ``image``, ``workers``...)."""
        form = self.page.locator("#job-form")
        for name, value in fields.items():
            element = form.locator(f"#id_{name}")
            if element.evaluate("e => e.tagName") == "SELECT":
                element.select_option(value)
            else:
                element.fill(value)
        return self

    def expect_live_error(self, field: str, text: str) -> str:
        """Wait until the live-validation errors next to ``field`` contain ``text``
        (checks run after each change, answered asynchronously); return them."""
        locator = self.page.locator(f"#field-{field} ul.live-errors")
        expect(locator).to_contain_text(text)
        return locator.inner_text()

    @property
    def summary(self) -> str:
        """The line under the form (totals once the form is valid)."""
        return self.page.inner_text("#job-summary")

    def submit(self) -> "JobListPage":
        """Press "Submit job"."""
        self.page.click("#job-submit")
        return JobListPage(self.page)


class JobListPage:
    """``/teams/<slug>/jobs/``: the team's jobs, refreshed by the page's script."""

    def __init__(self, page: Page) -> None:
        self.page = page

    @property
    def messages(self) -> list[str]:
        """The flash messages at the top."""
        return [li.inner_text() for li in self.page.query_selector_all(".messages li")]

    def row(self, job_id: int):
        """The row of job ``job_id``."""
        return self.page.locator(f'#job-table tr[data-job="{job_id}"]')

    def names(self) -> list[str]:
        """Job names in list order."""
        return [a.inner_text() for a in self.page.query_selector_all("#job-table td.name a")]

    def wait_for_phase(self, job_id: int, phase: str, timeout_ms: int = 20_000) -> None:
        """Wait until the self-refreshing row of ``job_id`` shows ``phase``."""
        self.page.wait_for_selector(f'#job-table tr[data-job="{job_id}"][data-phase="{phase}"]',
                                    timeout=timeout_ms)
