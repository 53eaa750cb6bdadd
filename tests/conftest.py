"""Session-wide test isolation: no network beyond loopback, no shared cache, no telemetry.

Fixtures: ``fake_openai`` (a running FakeOpenAI), ``server`` (one answering as the synthetic
judge), ``openai_env`` (the OpenAI environment
variables pointed at it), ``browser`` (a headless Chromium for the report's browser tests, one
per test module), ``fast_backoff`` (millisecond retry backoffs) and ``collect_garbage`` (the
test's garbage finalised at its end). Helpers the test modules share are in tests/helpers.py
(a test module never imports another).

Tests marked ``ray`` start Ray, which may only run inside a network namespace that has nothing
but loopback. They run only with ``--run-ray`` (the CI's ray job: ``.ci/ray-tests``, which
installs the ``ray`` extra and runs pytest through ``.ci/loopback-ns``); without it they are
deselected, and the session header says so. With it, a missing Ray or a network interface
other than loopback stops the session at once: a ray test never turns into a skip.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import signal
import socket
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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--run-ray",
        action="store_true",
        help="run the tests marked ray (needs the ray extra, inside .ci/loopback-ns)",
    )


def pytest_configure(config: pytest.Config) -> None:
    global _uninstall_guard
    config.addinivalue_line(
        "markers", "ray: starts Ray; runs only with --run-ray, inside .ci/loopback-ns"
    )
    os.environ.update(_QUIET_ENV)
    _uninstall_guard = install_network_guard()
    if config.getoption("--run-ray"):
        problem = _ray_test_problem()
        if problem is not None:
            raise pytest.UsageError(f"--run-ray: {problem}")


def _ray_test_problem() -> str | None:
    if importlib.util.find_spec("ray") is None:
        return "Ray is not installed (pip install -e '.[ray]')"
    interfaces = sorted(name for _, name in socket.if_nameindex())  # this network namespace's
    if interfaces != ["lo"]:
        return (
            f"network interfaces {interfaces}: Ray tests run only in a loopback-only network "
            "namespace: .ci/loopback-ns python -m pytest --run-ray ..."
        )
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-ray"):
        return
    ray_items = [item for item in items if item.get_closest_marker("ray") is not None]
    if ray_items:
        config.hook.pytest_deselected(items=ray_items)
        items[:] = [item for item in items if item.get_closest_marker("ray") is None]
        config.stash[_RAY_DESELECTED] = len(ray_items)


_RAY_DESELECTED = pytest.StashKey[int]()


def pytest_report_header(config: pytest.Config) -> str:
    if config.getoption("--run-ray"):
        return "ray tests: running (--run-ray)"
    return "ray tests: deselected; they run in the CI's ray job (.ci/ray-tests)"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    count = terminalreporter.config.stash.get(_RAY_DESELECTED, 0)
    if count:
        terminalreporter.write_line(
            f"{count} ray-marked tests deselected: they run in the CI's ray job (.ci/ray-tests)"
        )


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
    # tiktoken's cache: empty, so the dry run approximates tokens unless a test puts a
    # vocabulary there (a developer's own cache would change the counts)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(root / "tiktoken-cache"))
    for name in _OPENAI_ENV:
        monkeypatch.delenv(name, raising=False)
    return cache_dir


@pytest.fixture(autouse=True)
def no_servers_known(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts knowing no llama.cpp server: a port an earlier test's server had is
    not taken for that server when a later test's reuses it."""
    monkeypatch.setattr("rageval.runner._probe._SERVER_SLOTS", {})
    monkeypatch.setattr("rageval.runner._probe._LISTED_WINDOWS", {})


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A running FakeOpenAI with the default handler; stopped after the test."""
    with FakeOpenAI() as server:
        yield server


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    """A running FakeOpenAI answering as the synthetic judge (tests/helpers.py: ``handle``);
    a module that needs other replies defines its own ``server``."""
    from helpers import handle

    with FakeOpenAI(handle) as s:
        yield s


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


@pytest.fixture
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Millisecond backoffs, so a run with hundreds of retries stays fast; the retry *counts*
    are what these tests check, not the delays."""
    from rageval._client import _retry

    monkeypatch.setattr(_retry, "BACKOFF_BASE", 0.002)
    monkeypatch.setattr(_retry, "BACKOFF_CAP", 0.02)


@pytest.fixture
def collect_garbage() -> Iterator[None]:
    """Finalise the test's garbage at its end, in this thread. A run stopped by a fatal judge
    error leaves tasks whose exception nobody retrieved (see test_secrets); finalised later, at
    a random moment, their traceback report can land inside pytest compiling a module, which
    CPython 3.11.7 turns into "SystemError: AST constructor recursion depth mismatch"."""
    yield
    gc.collect()


@pytest.fixture
def sigint_as_in_a_terminal() -> Iterator[None]:
    """SIGINT raising KeyboardInterrupt, as Python sets it up in a terminal, whatever this
    process inherited: a suite run as a background job (nohup, `cmd &` in a script, some CI
    runners) starts with SIGINT ignored, and an ignored SIGINT stops nothing, by design."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
