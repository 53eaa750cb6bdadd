"""Run a coroutine from synchronous code, including from inside a running event loop.

Jupyter, FastAPI handlers and pytest-asyncio already run a loop on the calling thread, where
`asyncio.run` refuses to start. Instead of patching the loop (nest_asyncio), the coroutine runs
on a fresh loop in a private worker thread while the caller blocks.

Resources bound to a loop (HTTP connection pools) register a closer with `close_with_loop`;
when the loop is one that `run_sync` made, they are closed before that loop ends, so nothing is
left to be garbage-collected against a closed loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_closers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[Callable[[], Awaitable[Any]]]]
_closers = weakref.WeakKeyDictionary()
_closers_lock = threading.Lock()


def close_with_loop(closer: Callable[[], Awaitable[Any]]) -> None:
    """Call `closer` when the running loop's `run_sync` work ends (if `run_sync` made it)."""
    loop = asyncio.get_running_loop()
    with _closers_lock:
        _closers.setdefault(loop, []).append(closer)


async def _then_close(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return await coro
    finally:
        with _closers_lock:
            closers = _closers.pop(asyncio.get_running_loop(), [])
        for closer in closers:
            # a pool that fails to close must not mask the result
            with contextlib.suppress(Exception):
                await closer()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_then_close(coro))
    box: dict[str, Any] = {}

    def worker() -> None:
        try:
            box["value"] = asyncio.run(_then_close(coro))
        except BaseException as e:  # re-raised in the caller's thread
            box["error"] = e

    thread = threading.Thread(target=worker, name="rageval-sync", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]
