"""Page objects for the team pages and the staff review pages."""

from playwright.sync_api import Page


class NavBar:
    """The top bar every signed-in page shows."""

    def __init__(self, page: Page) -> None:
        self.page = page

    def open_teams(self) -> "TeamListPage":
        """Follow the "Teams" nav link."""
        self.page.click(".mainnav >> text=Teams")
        return TeamListPage(self.page)

    def open_review_queue(self) -> "ReviewQueuePage":
        """Follow the staff "Review requests" nav link."""
        self.page.click(".mainnav >> text=Review requests")
        return ReviewQueuePage(self.page)

    @property
    def pending_count(self) -> int:
        """The pending-requests badge next to "Review requests"."""
        return int(self.page.inner_text("#nav-pending-count"))

    def log_out(self) -> None:
        """Press "Log out" in the user box."""
        self.page.click(".userbox button[type=submit]")


class TeamListPage:
    """``/teams/``."""

    def __init__(self, page: Page) -> None:
        self.page = page

    def open_team(self, slug: str) -> "TeamDetailPage":
        """Follow the link of team ``slug``."""
        self.page.click(f'#team-table tr[data-team="{slug}"] a')
        return TeamDetailPage(self.page)


class TeamDetailPage:
    """``/teams/<slug>/``: quota, the request form, requests, members."""

    def __init__(self, page: Page) -> None:
        self.page = page

    def open(self, base_url: str, slug: str) -> "TeamDetailPage":
        """Go to the page of team ``slug``."""
        self.page.goto(f"{base_url}/teams/{slug}/")
        return self

    def request_quota(self, *, flavor: str, nominal_gpus: str, justification: str,
                      borrowing_limit_gpus: str = "", lending_limit_gpus: str = "") -> None:
        """Fill in and submit the "Request quota" form."""
        form = self.page.locator("#quota-request-form")
        form.locator("#id_flavor").select_option(label=flavor)
        form.locator("#id_nominal_gpus").fill(nominal_gpus)
        form.locator("#id_borrowing_limit_gpus").fill(borrowing_limit_gpus)
        form.locator("#id_lending_limit_gpus").fill(lending_limit_gpus)
        form.locator("#id_justification").fill(justification)
        form.locator("button[type=submit]").click()

    @property
    def messages(self) -> list[str]:
        """The flash messages shown on top of the page."""
        return self.page.locator(".messages li").all_inner_texts()

    def request_states(self) -> dict[str, str]:
        """``{request id: state}`` from the requests table."""
        rows = self.page.locator("#request-table tr[data-request]")
        return {
            rows.nth(i).get_attribute("data-request"): rows.nth(i).locator(".state").inner_text()
            for i in range(rows.count())
        }

    def nominal_gpus(self, flavor: str) -> str:
        """The nominal GPUs of ``flavor`` in the quota table."""
        return self.page.inner_text(f'#quota-table tr[data-flavor="{flavor}"] .nominal')


class ReviewQueuePage:
    """``/staff/requests/``: pending requests, oldest first."""

    def __init__(self, page: Page) -> None:
        self.page = page

    def request_ids(self) -> list[str]:
        """The ids of the listed requests, in order."""
        rows = self.page.locator("#queue-table tr[data-request]")
        return [rows.nth(i).get_attribute("data-request") for i in range(rows.count())]

    def open_request(self, request_id: str) -> "ReviewPage":
        """Follow the "Review" link of request ``request_id``."""
        self.page.click(f'#queue-table tr[data-request="{request_id}"] a.review-link')
        return ReviewPage(self.page)

    @property
    def messages(self) -> list[str]:
        """The flash messages shown on top of the page."""
        return self.page.locator(".messages li").all_inner_texts()


class ReviewPage:
    """``/staff/requests/<id>/``: preview, manifests, approve and reject."""

    def __init__(self, page: Page) -> None:
        self.page = page

    def preview(self) -> dict[str, str]:
        """The preview's numbers as shown."""
        return {
            "capacity": self.page.inner_text("#capacity"),
            "nominal_sum": self.page.inner_text("#nominal-sum"),
            "nominal_sum_after": self.page.inner_text("#nominal-sum-after"),
            "max_admissible_after": self.page.inner_text("#grant-requested .max-admissible"),
        }

    @property
    def manifests_yaml(self) -> str:
        """The manifests approval would apply, as YAML text."""
        return self.page.inner_text("#manifests-yaml")

    def approve(self, *, comment: str = "", allow_overcommit: bool = False) -> ReviewQueuePage:
        """Approve (ticking over-commit if asked); lands on the queue when it succeeds."""
        form = self.page.locator("#approve-form")
        form.locator("textarea").fill(comment)
        if allow_overcommit:
            form.locator("input[type=checkbox]").check()
        form.locator("#approve").click()
        return ReviewQueuePage(self.page)

    def reject(self, *, comment: str) -> ReviewQueuePage:
        """Reject with ``comment``."""
        form = self.page.locator("#reject-form")
        form.locator("textarea").fill(comment)
        form.locator("#reject").click()
        return ReviewQueuePage(self.page)
