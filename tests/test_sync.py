"""rageval._sync: SIGTERM with SIGINT ignored stops a run the way Ctrl-C does."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time

import pytest

from rageval._sync import first_interrupt, run_sync
from rageval.cli._shared import sigterm_as_sigint


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM")
def test_sigterm_with_sigint_ignored_cancels_the_run_not_the_code_running() -> None:
    seen: list[str] = []

    async def work() -> None:
        # synchronous code that swallows what is raised inside it (as a finalizer or a
        # callback does): a KeyboardInterrupt raised by the signal handler would land here
        try:
            until = time.monotonic() + 1.0
            while time.monotonic() < until:
                pass
        except KeyboardInterrupt:
            seen.append("raised inside running code")
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("cancelled at an await")
            raise
        finally:
            seen.append("cleanup ran")

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    timer = threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGTERM))
    try:
        with sigterm_as_sigint() as received:
            timer.start()
            started = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                run_sync(work())
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert received == [signal.SIGTERM]
    assert seen == ["cancelled at an await", "cleanup ran"]
    assert time.monotonic() - started < 20  # not the 30 s sleep


def test_a_run_that_is_not_interrupted_returns_its_value_and_leaves_nothing_behind() -> None:
    async def answer() -> int:
        return 42

    assert run_sync(answer()) == 42
    from rageval import _sync

    assert _sync._main_runs == []


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT")
@pytest.mark.usefixtures("sigint_as_in_a_terminal")
def test_the_first_ctrl_c_goes_to_the_run_and_the_second_stops_it() -> None:
    seen: list[str] = []

    async def work() -> None:
        told = asyncio.Event()
        with first_interrupt(told.set) as applies:
            assert applies
            signal.raise_signal(signal.SIGINT)
            await told.wait()  # the handler ran on the loop; nothing was cancelled
            seen.append("told")
            signal.raise_signal(signal.SIGINT)
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                seen.append("cancelled")
                raise

    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        run_sync(work())
    assert seen == ["told", "cancelled"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_run_on_a_worker_thread_has_no_graceful_stop() -> None:
    """Inside a running loop (Jupyter, an async app) run_sync runs the coroutine on a worker
    thread, where no signal reaches it: Ctrl-C stops the caller at once, as documented."""

    async def inner() -> bool:
        with first_interrupt(lambda: None) as applies:
            return applies

    async def outer() -> bool:
        return run_sync(inner())

    assert asyncio.run(outer()) is False


def test_an_error_of_the_run_has_no_missing_loop_as_its_context() -> None:
    """A traceback of evaluate() in a script began with "RuntimeError: no running event loop"
    (the check for a running loop), then "During handling of the above exception..."."""

    async def fails() -> None:
        raise ValueError("the run's own error")

    with pytest.raises(ValueError, match="the run's own error") as info:
        run_sync(fails())
    assert info.value.__context__ is None
