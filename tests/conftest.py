"""Test tiers by folder: tests/unit, tests/integration, tests/e2e, tests/real get their marker."""

import uuid
from pathlib import Path

import pytest

TIERS = ("unit", "integration", "e2e", "real")

#: ``browser`` and ``page`` (headless Chromium) for every tier that drives pages.
pytest_plugins = ["tests.browser"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test with the tier of the folder it lives in."""
    root = Path(__file__).parent
    for item in items:
        try:
            tier = Path(item.path).relative_to(root).parts[0]
        except ValueError:
            continue
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))


@pytest.fixture(scope="session", autouse=True)
def _fast_password_hashing():
    """Tests create many users: use a fast hasher (production keeps Django's default)."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _throttle_counts_per_test(settings):
    """Each test starts with no API throttle counts, in a cache of its own process (the
    settings put them in Redis when REDIS_URL is set; the suite shares one client IP)."""
    from django.core.cache import caches

    settings.CACHES = {**settings.CACHES, "throttle": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "throttle-test"}}
    caches["throttle"].clear()


@pytest.fixture
def unconsumed_queue():
    """Tasks published during the test go to a private queue that no worker consumes,
    emptied afterwards: for tests of committed transactions (``transactional_db``) that
    check only what the web process writes, so the session's worker (``celery_worker_process``)
    is never handed their on-commit tasks for rows that are flushed after the test."""
    from portal.celery import app

    queue = f"unconsumed-{uuid.uuid4().hex[:8]}"
    previous = app.conf.task_default_queue
    app.conf.task_default_queue = queue
    try:
        yield queue
    finally:
        app.conf.task_default_queue = previous
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(queue)
