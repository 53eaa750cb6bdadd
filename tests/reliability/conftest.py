"""Fixtures of the reliability suite (the session-wide network guard lives in tests/conftest.py)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from rageval._client import _retry


@pytest.fixture
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Millisecond backoffs, so a run with hundreds of retries stays fast; the retry *counts*
    are what these tests check, not the delays."""
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
