"""Session-wide test isolation: no network beyond loopback, no shared cache, no telemetry.

Fixtures: ``fake_openai`` (a running FakeOpenAI), ``openai_env`` (the OpenAI environment
variables pointed at it), ``browser`` (a headless Chromium for the report's browser tests, one
per test module).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rageval.testing import FAKE_API_KEY, FakeOpenAI, install_network_guard

if TYPE_CHECKING:
    from playwright.sync_api import Browser

# Libraries read these when imported, so they are set for the whole process, not per test.
_QUIET_ENV = {"HF_HUB_OFFLINE": "1", "DO_NOT_TRACK": "1"}
# Real credentials or endpoints in the developer's shell must never reach a test.
_OPENAI_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "OPENAI_ADMIN_KEY",
    "AZURE_OPENAI_API_KEY",
    "AZURE_OPENAI_ENDPOINT",
)

_uninstall_guard: Callable[[], None] | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _uninstall_guard
    os.environ.update(_QUIET_ENV)
    _uninstall_guard = install_network_guard()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _uninstall_guard is not None:
        _uninstall_guard()


@pytest.fixture(autouse=True)
def rageval_cache_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """Each test gets its own cache directories, whatever HOME is, and no OpenAI settings;
    returns the test's RAGEVAL_CACHE_DIR (not created)."""
    root = tmp_path_factory.mktemp("env")
    cache_dir = root / "rageval-cache"
    monkeypatch.setenv("RAGEVAL_CACHE_DIR", str(cache_dir))
    monkeypatch.setenv("XDG_CACHE_HOME", str(root / "xdg-cache"))
    for name in _OPENAI_ENV:
        monkeypatch.delenv(name, raising=False)
    return cache_dir


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A running FakeOpenAI with the default handler; stopped after the test."""
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def openai_env(monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAI) -> FakeOpenAI:
    """OPENAI_API_KEY / OPENAI_BASE_URL point at ``fake_openai``, which is returned."""
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    return fake_openai


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """A headless Chromium, closed after the module's tests (Playwright is imported only by
    the tests that use it)."""
    from browser_helpers import chromium

    with chromium() as b:
        yield b
