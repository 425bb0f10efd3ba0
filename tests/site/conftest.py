"""Site fixtures: both preview sites built once into a temp folder, served on 127.0.0.1, and one Chromium.

The browser fixtures record every console message, page error and request of a page, so each test can
assert that nothing failed and nothing left localhost.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from site_support import ROOT, ensure_release

from coursekit import preview

SCREENSHOTS = ROOT / "build" / "screenshots"


@pytest.fixture(scope="session")
def sites(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """{branch: site folder} for both preview sites, built from the committed branches and demo."""
    ensure_release(ROOT)
    out = tmp_path_factory.mktemp("sites")
    return {name: preview.build_preview(ROOT, name, out / spec.out_dir) for name, spec in preview.BRANCHES.items()}


@pytest.fixture(scope="session")
def site_urls(sites: dict[str, Path], serve_directory) -> dict[str, str]:
    """{branch: base URL} with both sites served by one static server on 127.0.0.1."""
    base = serve_directory(next(iter(sites.values())).parent)
    return {name: f"{base}{path.name}/" for name, path in sites.items()}



@dataclass
class PageLog:
    """What one page did: console errors, page errors, failed and off-host requests."""

    origin: str
    errors: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def off_host(self) -> list[str]:
        return [u for u in self.requests if not u.startswith(("data:", "blob:", self.origin))]


def _logged_page(page: object) -> tuple[object, PageLog, list[tuple[str, object]]]:
    log = PageLog(origin="http://127.0.0.1:")
    handlers = [("console", lambda m: m.type == "error" and log.errors.append(f"console: {m.text}")),
                ("pageerror", lambda e: log.errors.append(f"pageerror: {e}")),
                ("request", lambda r: log.requests.append(r.url)),
                ("requestfailed", lambda r: log.failed.append(f"{r.url} ({r.failure})")),
                ("response", lambda r: r.status >= 400 and log.failed.append(f"{r.url} (HTTP {r.status})"))]
    for event, handler in handlers:
        page.on(event, handler)
    return page, log, handlers


@pytest.fixture
def page_and_log(tab: object) -> Iterator[tuple[object, PageLog]]:
    """The warm context's reused tab (tests/conftest.py), logged against 127.0.0.1 during the test; no saved
    work is left after it."""
    page, log, handlers = _logged_page(tab)
    yield page, log
    for event, handler in handlers:
        page.remove_listener(event, handler)


@pytest.fixture
def first_visit_page_and_log(browser: object) -> Iterator[tuple[object, PageLog]]:
    """A page in a brand-new context (empty cache and storage), logged against 127.0.0.1: a first visit."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield _logged_page(context.new_page())[:2]
    context.close()


SCREENSHOT_TIMEOUT_MS = 30_000
# FULL_SCREENSHOTS=1 (`make test FULL_SCREENSHOTS=1`): pages are saved full length, not only their visible part
FULL_LENGTH = os.environ.get("FULL_SCREENSHOTS") == "1"


def save_screenshot(target: object, name: str) -> Path:
    """Save a screenshot of a page (its visible part; full length with FULL_SCREENSHOTS=1) or of one element under
    build/screenshots/; return its path.

    A record for people, not a check. The visible part by default: a full-length capture of the lesson costs about
    0.7 s of the browser's CPU (the suite is CPU-bound), and is where a page that stopped giving frames hung (one on
    the demo page past 180 s, in a fresh-clone run at load 7). A full-length capture that Chromium does not finish
    in 30 s falls back to the visible part, with a warning in pytest's summary."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    if not hasattr(target, "goto") or not FULL_LENGTH:
        target.screenshot(path=str(path), timeout=SCREENSHOT_TIMEOUT_MS)
        return path
    try:
        target.screenshot(path=str(path), full_page=True, timeout=SCREENSHOT_TIMEOUT_MS)
    except PlaywrightTimeout:
        warnings.warn(f"{path.name}: the full-length screenshot took over {SCREENSHOT_TIMEOUT_MS // 1000} s; "
                      "saved the visible part", stacklevel=2)
        target.screenshot(path=str(path), timeout=SCREENSHOT_TIMEOUT_MS)
    return path


@pytest.fixture
def screenshot() -> Callable[[object, str], Path]:
    """save_screenshot(page, name), for tests."""
    return save_screenshot
