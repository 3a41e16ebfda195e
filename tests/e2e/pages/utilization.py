"""Page objects for the team and staff utilization pages."""

from playwright.sync_api import Page


class _Charts:
    page: Page

    def wait_for_charts(self, *chart_ids: str) -> None:
        """Wait until each chart's container says it was drawn (charts.js)."""
        for chart_id in chart_ids:
            self.page.wait_for_selector(f'#{chart_id}[data-rendered="true"]')

    def svg_count(self, chart_id: str) -> int:
        """How many drawn SVG marks (bars, lines, heatmap images) the chart holds."""
        return self.page.locator(
            f"#{chart_id} svg .scatterlayer path, #{chart_id} svg .barlayer path, "
            f"#{chart_id} svg .heatmaplayer image"
        ).count()

    def sentences(self, chart_id: str) -> list[str]:
        """The sentences under a chart."""
        return [li.inner_text() for li in self.page.query_selector_all(
            f"#{chart_id}-sentences li")]


class TeamUtilizationPage(_Charts):
    """``/teams/<slug>/utilization/``."""

    def __init__(self, page: Page) -> None:
        self.page = page

    def open(self, base_url: str, slug: str) -> "TeamUtilizationPage":
        self.page.goto(f"{base_url}/teams/{slug}/utilization/")
        return self

    def download_csv(self) -> str:
        """Click the showback CSV link; the downloaded file's text."""
        with self.page.expect_download() as info:
            self.page.click("#showback-csv")
        return open(info.value.path(), encoding="utf-8").read()


class StaffUtilizationPage(_Charts):
    """``/staff/utilization/``."""

    def __init__(self, page: Page) -> None:
        self.page = page

    def open(self, base_url: str) -> "StaffUtilizationPage":
        self.page.goto(f"{base_url}/staff/utilization/")
        return self

    def idle_jobs(self) -> list[str]:
        """Job names in the idle-GPU table."""
        return [tr.get_attribute("data-job") for tr in
                self.page.query_selector_all("#idle-gpu-table tbody tr")]

    def reclaim(self, job: str) -> None:
        """Press the reclaim button of ``job``."""
        self.page.click(f'#idle-gpu-table tr[data-job="{job}"] .reclaim-form button')
