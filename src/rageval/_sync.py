"""Run a coroutine from synchronous code, including from inside a running event loop.

Jupyter, FastAPI handlers and pytest-asyncio already run a loop on the calling thread, where
`asyncio.run` refuses to start. Instead of patching the loop (nest_asyncio), the coroutine runs
on a fresh loop in a private worker thread while the caller blocks.

Resources bound to a loop (HTTP connection pools) register a closer with `close_with_loop`;
it runs when that loop shuts down through `asyncio.run` or `asyncio.Runner` (so also in
`run_sync`, Jupyter's own loop excepted until it stops), so no pool is left to be
garbage-collected against a closed loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Iterator
from typing import Any, ParamSpec, TypeVar

T = TypeVar("T")
P = ParamSpec("P")

# the watchers of each loop; the loop itself only holds its async generators weakly
_watchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[AsyncGenerator[None, None]]]
_watchers = weakref.WeakKeyDictionary()
_watchers_lock = threading.Lock()


def close_with_loop(closer: Callable[[], Awaitable[Any]]) -> None:
    """Await `closer()` when the running loop shuts down.

    `asyncio.run` and `asyncio.Runner` end with `loop.shutdown_asyncgens()`, which closes every
    async generator started on the loop: a suspended watcher generator is started here, and its
    `finally` awaits the closer on the still-running loop.
    """

    async def watcher() -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            # a pool that fails to close must not mask anything else at shutdown
            with contextlib.suppress(Exception):
                await closer()

    loop = asyncio.get_running_loop()
    agen = watcher()
    # one synchronous step up to the `yield` registers the generator with the running loop
    with contextlib.suppress(StopIteration):
        agen.__anext__().send(None)
    with _watchers_lock:
        _watchers.setdefault(loop, []).append(agen)


class _MainRun:
    """A coroutine :func:`run_sync` runs on the main thread: its loop and task once started,
    the Ctrl-C/SIGTERM it got, and who is told of the first one (:func:`first_interrupt`)."""

    def __init__(self) -> None:
        self.started: tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]] | None = None
        self.interrupted = False
        self.interrupts = 0
        self.on_first_interrupt: Callable[[], None] | None = None


# the runs on the main thread, innermost last, for interrupt_main
_main_runs: list[_MainRun] = []


def interrupt_main() -> bool:
    """Ctrl-C (or SIGTERM) for the coroutine :func:`run_sync` runs on the main thread.

    The first one calls the handler :func:`first_interrupt` set, if any (a run stopping
    gracefully), on the loop; otherwise, and for the second, the main task is cancelled as
    Ctrl-C cancels it under `asyncio.run` (its ``finally`` blocks and cleanup run on the loop)
    and `run_sync` then raises KeyboardInterrupt. False when no such coroutine is running, or
    for a third interrupt: the caller raises KeyboardInterrupt itself, as asyncio's own handler
    does for a second one. Used by the SIGINT handler :func:`run_sync` installs, and by a
    SIGTERM handler when SIGINT is ignored: raising KeyboardInterrupt in a signal handler would
    land in whatever code runs at that moment (a finalizer, a callback) instead."""
    run = _main_runs[-1] if _main_runs else None
    if run is None or run.started is None:
        return False
    loop = run.started[0]
    run.interrupts += 1
    if run.interrupts == 1 and run.on_first_interrupt is not None:
        loop.call_soon_threadsafe(run.on_first_interrupt)
        return True
    if run.interrupts > 2 or (run.interrupts == 2 and run.on_first_interrupt is None):
        return False
    stop_main_now()
    return True


def stop_main_now() -> None:
    """Cancel the main task of the innermost :func:`run_sync` coroutine on the main thread, so
    that `run_sync` raises KeyboardInterrupt (what Ctrl-C does without a graceful stop)."""
    run = _main_runs[-1] if _main_runs else None
    if run is None or run.started is None or run.interrupted:
        return  # stopped once already: its cleanup is running, and must not be cut short
    loop, task = run.started
    run.interrupted = True
    loop.call_soon_threadsafe(task.cancel)


@contextlib.contextmanager
def first_interrupt(handler: Callable[[], None]) -> Iterator[bool]:
    """While the block runs, the first Ctrl-C or SIGTERM calls `handler` on the running loop
    instead of stopping at once; the second stops at once (:func:`interrupt_main`). Yields
    whether that applies: only to the coroutine :func:`run_sync` runs on the main thread on
    this loop (a worker thread's run, as in a notebook, or the caller's own `asyncio.run`,
    stops at once as before)."""
    loop = asyncio.get_running_loop()
    run = next((r for r in _main_runs if r.started is not None and r.started[0] is loop), None)
    if run is None or run.on_first_interrupt is not None:
        yield False
        return
    run.on_first_interrupt = handler
    try:
        yield True
    finally:
        run.on_first_interrupt = None


def _on_sigint(signum: int, frame: Any) -> None:
    if not interrupt_main():
        raise KeyboardInterrupt


async def _as_main(coro: Coroutine[Any, Any, T], run: _MainRun) -> T:
    task = asyncio.current_task()
    assert task is not None  # a coroutine asyncio.run runs is a task's
    run.started = (asyncio.get_running_loop(), task)
    return await coro


def _run_on_main_thread(coro: Coroutine[Any, Any, T]) -> T:
    if threading.current_thread() is not threading.main_thread():
        return asyncio.run(coro)
    run = _MainRun()
    _main_runs.append(run)
    # where asyncio.run would install its SIGINT handler (Ctrl-C cancels the main task), this
    # one does, so that a run can stop gracefully on the first Ctrl-C (first_interrupt)
    ours = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    if ours:
        signal.signal(signal.SIGINT, _on_sigint)
    try:
        return asyncio.run(_as_main(coro, run))
    except asyncio.CancelledError:
        if run.interrupted:
            raise KeyboardInterrupt from None
        raise
    finally:
        if ours:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        _main_runs.remove(run)


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    # the run starts outside the `except` that finds no loop: an error it raises would
    # otherwise show "RuntimeError: no running event loop" as its context, first
    if not _loop_running():
        return _run_on_main_thread(coro)
    box: dict[str, Any] = {}

    def worker() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as e:  # re-raised in the caller's thread
            box["error"] = e

    thread = threading.Thread(target=worker, name="rageval-sync", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def synchronous(
    coroutine_function: Callable[P, Coroutine[Any, Any, T]], name: str, doc: str
) -> Callable[P, T]:
    """The synchronous form of `coroutine_function`, named `name`: the same parameters (for
    type checkers, ``help()`` and ``inspect.signature``), run by :func:`run_sync`."""

    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(coroutine_function(*args, **kwargs))

    run.__name__ = run.__qualname__ = name
    run.__module__ = coroutine_function.__module__
    run.__doc__ = doc
    run.__wrapped__ = coroutine_function  # type: ignore[attr-defined]
    return run
