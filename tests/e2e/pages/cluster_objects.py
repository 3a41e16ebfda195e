"""Page objects for the staff cluster pages: clusters, a cluster's objects, one object."""

from playwright.sync_api import Page


class ClusterObjectsNav:
    """The staff "Cluster objects" link of the top bar."""

    def __init__(self, page: Page) -> None:
        self.page = page

    def open_clusters(self) -> "ClusterListPage":
        """Follow the "Cluster objects" nav link."""
        self.page.click(".mainnav >> text=Cluster objects")
        return ClusterListPage(self.page)


class ClusterListPage:
    """``/staff/clusters/``."""

    def __init__(self, page: Page) -> None:
        self.page = page

    def object_count(self, cluster: str) -> str:
        """The "Objects" cell of ``cluster``."""
        return self.page.inner_text(f'#cluster-table tr[data-cluster="{cluster}"] .object-count')

    def open_cluster(self, cluster: str) -> "ClusterObjectsPage":
        """Follow the link of ``cluster``."""
        self.page.click(f'#cluster-table tr[data-cluster="{cluster}"] a.objects-link')
        return ClusterObjectsPage(self.page)


class ClusterObjectsPage:
    """``/staff/clusters/<name>/objects/``."""

    def __init__(self, page: Page) -> None:
        self.page = page

    def _row(self, kind: str, name: str) -> str:
        return f'#object-table tr[data-kind="{kind}"][data-name="{name}"]'

    def state(self, kind: str, name: str) -> str:
        """The state text of object ``kind``/``name``."""
        return self.page.inner_text(f"{self._row(kind, name)} .state")

    def drift_count(self, kind: str, name: str) -> str:
        """The drift count of object ``kind``/``name``."""
        return self.page.inner_text(f"{self._row(kind, name)} .drift-count")

    def open_object(self, kind: str, name: str) -> "ObjectDetailPage":
        """Follow the link of object ``kind``/``name``."""
        self.page.click(f"{self._row(kind, name)} a.object-link")
        return ObjectDetailPage(self.page)


class ObjectDetailPage:
    """``/staff/clusters/<name>/objects/<id>/``: desired vs observed YAML, diff, drift events."""

    def __init__(self, page: Page) -> None:
        self.page = page

    @property
    def title(self) -> str:
        return self.page.inner_text("#object-title")

    @property
    def state(self) -> str:
        return self.page.inner_text("#object-state")

    @property
    def desired_yaml(self) -> str:
        return self.page.inner_text("#desired-yaml")

    @property
    def observed_yaml(self) -> str:
        return self.page.inner_text("#observed-yaml")

    @property
    def diff(self) -> str:
        return self.page.inner_text("#yaml-diff")

    def side_by_side(self) -> bool:
        """True when the desired and observed panes sit next to each other."""
        desired = self.page.locator("#desired-yaml").bounding_box()
        observed = self.page.locator("#observed-yaml").bounding_box()
        return observed["x"] > desired["x"] + desired["width"] - 1 and abs(
            observed["y"] - desired["y"]) < 5

    def drift_event_count(self) -> int:
        return self.page.locator("#drift-table tr[data-event]").count()
