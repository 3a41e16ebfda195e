"""Page objects for the fairness charts: the team page's panel and /staff/fairness/."""

from playwright.sync_api import Page


class ChartsMixin:
    """Server-built Plotly figures drawn by static/js/charts.js."""

    page: Page

    def wait_for_chart(self, chart_id: str) -> None:
        """Wait until charts.js has drawn the figure ``chart_id`` (or failed to)."""
        self.page.wait_for_selector(f"#{chart_id}[data-rendered]", state="attached")

    def chart_state(self, chart_id: str) -> str | None:
        """``"true"`` once drawn, ``"error"`` if drawing failed."""
        return self.page.get_attribute(f"#{chart_id}", "data-rendered")

    def drawn_svg_count(self, chart_id: str) -> int:
        """How many Plotly ``.main-svg`` layers the chart's container holds."""
        return self.page.locator(f"#{chart_id}.js-plotly-plot .main-svg").count()

    def bar_count(self, chart_id: str) -> int:
        """Bars Plotly drew in the chart (``path`` elements of bar points)."""
        return self.page.locator(f"#{chart_id} .barlayer .point path").count()

    def legend(self, chart_id: str) -> list[str]:
        """The legend entries as drawn."""
        return self.page.locator(f"#{chart_id} .legend .legendtext").all_text_contents()

    def sentences(self, chart_id: str) -> list[str]:
        """The sentences under the chart."""
        return self.page.locator(f"#{chart_id}-sentences li").all_inner_texts()


class TeamFairnessPanel(ChartsMixin):
    """The "Fair share" card of ``/teams/<slug>/``."""

    CHART = "team-fairness-chart"

    def __init__(self, page: Page) -> None:
        self.page = page

    def open(self, base_url: str, slug: str) -> "TeamFairnessPanel":
        self.page.goto(f"{base_url}/teams/{slug}/")
        return self


class StaffFairnessPage(ChartsMixin):
    """``/staff/fairness/``."""

    JAIN = "jain-history"

    def __init__(self, page: Page) -> None:
        self.page = page

    def open_from_nav(self) -> "StaffFairnessPage":
        """Follow the staff "Fairness" nav link."""
        self.page.click(".mainnav >> text=Fairness")
        self.page.wait_for_selector("#fairness-title")
        return self

    @staticmethod
    def flavor_chart(flavor: str) -> str:
        return f"fairness-{flavor}"
