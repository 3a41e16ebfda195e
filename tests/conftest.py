"""Test tiers by folder: tests/unit, tests/integration, tests/e2e, tests/real get their marker."""

from pathlib import Path

import pytest

TIERS = ("unit", "integration", "e2e", "real")


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
