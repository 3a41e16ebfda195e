"""Test tiers by folder: tests/unit, tests/integration, tests/e2e get their marker."""

from pathlib import Path

import pytest

TIERS = ("unit", "integration", "e2e")


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
