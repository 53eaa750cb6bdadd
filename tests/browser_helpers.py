"""The report's browser tests: a headless Chromium (Debian's, driven by Playwright) and a page
with a report loaded. The ``browser`` fixture (tests/conftest.py) launches it once per module.

Without chromium (``/usr/bin/chromium``, or the binary ``RAGEVAL_CHROMIUM`` names) these tests
are skipped with that reason on a developer's machine; under CI (``.ci/run`` installs chromium
and sets ``RAGEVAL_REQUIRE_BROWSER=1``) they are required and fail instead.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = Path(os.environ.get("RAGEVAL_CHROMIUM") or "/usr/bin/chromium")
#: set by .ci/run: a missing browser is a failure there, not a skip
REQUIRE_BROWSER = os.environ.get("RAGEVAL_REQUIRE_BROWSER") == "1"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextlib.contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium, closed on exit; without it the test is skipped, or fails when
    RAGEVAL_REQUIRE_BROWSER=1 (CI)."""
    if not CHROMIUM.exists():
        missing = (
            f"{CHROMIUM} is missing: run .ci/install-browser.sh (installs Debian chromium) "
            "for the report's browser tests"
        )
        if REQUIRE_BROWSER:
            pytest.fail(f"{missing} (required: RAGEVAL_REQUIRE_BROWSER=1)")
        pytest.skip(missing)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


class Opened:
    """A page with the report loaded, and everything the page complained about."""

    def __init__(self, browser: Browser, path: Path, width: int = 1280) -> None:
        self.page: Page = browser.new_page(viewport={"width": width, "height": 900})
        self.page.set_default_timeout(5000)
        self.problems: list[str] = []
        self.requests: list[str] = []
        self.page.on(
            "console",
            lambda m: (
                self.problems.append(f"console {m.type}: {m.text}")
                if m.type in ("error", "warning")
                else None
            ),
        )
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.as_uri())

    def row_ids(self) -> list[str]:
        return self.page.locator("#samples-table tbody tr[data-i] td.id").all_inner_texts()

    def close(self) -> None:
        self.page.close()
        assert self.problems == []
