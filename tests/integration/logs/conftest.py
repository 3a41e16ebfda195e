"""Log tests start their own workers (with LOG_FORMAT=json)."""

from tests.integration.reconcile.conftest import start_worker  # noqa: F401 - shared fixture
