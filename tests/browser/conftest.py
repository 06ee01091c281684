"""Headless Chromium (Debian's package) driven by Playwright against a live test server."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, sync_playwright

from tests.conftest import PASSWORD

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make between
# browser steps are still synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """A test database of their own (`test_controlplane_browser`, `.run/test-db-browser.sqlite3`)
    when the browser tests run on their own, so that another test run going on at the same time
    cannot drop or flush it under the live server and the worker. In a whole-suite run the
    database already exists by the time this runs, and the suite's database is used."""
    from django.conf import settings

    for db in settings.DATABASES.values():
        test = db.setdefault("TEST", {})
        name = test.get("NAME")
        if db["ENGINE"] == "django.db.backends.sqlite3":
            if name and name != ":memory:" and not str(name).startswith("file:"):
                path = Path(name)
                test["NAME"] = str(path.with_name(f"{path.stem}-browser{path.suffix}"))
        else:
            test["NAME"] = f"{name or 'test_' + db['NAME']}_browser"


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    # Module scope: Playwright's sync API keeps an event loop running in this thread while it
    # is open, and tests elsewhere call asyncio.run().
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield page
    context.close()


def login(page: Page, base_url: str, username: str) -> None:
    page.goto(f"{base_url}/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")


def screenshot(page: Page, name: str) -> None:
    """Kept for the README's walk-through; refreshed by every browser test run."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


@pytest.fixture
def new_page(browser: Browser) -> Iterator[Callable[[], Page]]:
    """Pages in fresh browser contexts (another person, another browser); closed at teardown."""
    contexts: list[BrowserContext] = []

    def make() -> Page:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        contexts.append(context)
        extra = context.new_page()
        extra.set_default_timeout(15_000)
        return extra

    yield make
    for context in contexts:
        context.close()


def probe(host: Any) -> Any:
    """Take a snapshot now, in the test thread, through the same service the worker runs."""
    from hosts import services
    from hosts.models import Host

    host = Host.objects.select_related("credential").get(pk=host.pk)
    snapshot = services.host_probe(host=host, trigger="manual")
    assert snapshot.status == "ok", snapshot.error
    return snapshot
