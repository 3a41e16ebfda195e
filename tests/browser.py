"""Browser fixtures: Debian's Chromium driven by Playwright (no downloaded browser).

One definition for the whole session (registered in tests/conftest.py), used by
tests/e2e and by the integration tests that click through a real worker: Playwright's
sync API allows one running instance per thread.
"""

import os
import shutil

import pytest

from tests.services import unavailable

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")


@pytest.fixture(scope="session")
def browser():
    """A headless Chromium from Debian's package (``apt-get install chromium``)."""
    if not shutil.which(CHROMIUM) and not os.path.exists(CHROMIUM):
        unavailable(f"Chromium not found at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in the test thread; the ORM calls
    # the tests make for setup are synchronous and safe there.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"],
        )
        yield browser
        browser.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture
def page(browser):
    """A fresh browser context and page per test."""
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()

