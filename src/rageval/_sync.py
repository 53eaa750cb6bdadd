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
import threading
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine
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
    """A coroutine :func:`run_sync` runs on the main thread: its loop and task once started."""

    def __init__(self) -> None:
        self.started: tuple[asyncio.AbstractEventLoop, asyncio.Task[Any]] | None = None
        self.interrupted = False


# the runs on the main thread, innermost last, for interrupt_main
_main_runs: list[_MainRun] = []


def interrupt_main() -> bool:
    """Stop the coroutine :func:`run_sync` runs on the main thread as Ctrl-C stops it under
    `asyncio.run`: its main task is cancelled (its ``finally`` blocks and cleanup run on the
    loop) and `run_sync` then raises KeyboardInterrupt. For a signal handler when SIGINT is
    ignored, where asyncio installs no handler of its own: raising KeyboardInterrupt there
    would land in whatever code runs at that moment (a finalizer, a callback) instead.
    False when no such coroutine is running."""
    run = _main_runs[-1] if _main_runs else None
    if run is None or run.started is None:
        return False
    loop, task = run.started
    run.interrupted = True
    loop.call_soon_threadsafe(task.cancel)
    return True


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
    try:
        return asyncio.run(_as_main(coro, run))
    except asyncio.CancelledError:
        if run.interrupted:
            raise KeyboardInterrupt from None
        raise
    finally:
        _main_runs.remove(run)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
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
