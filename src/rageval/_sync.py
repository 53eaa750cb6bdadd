"""Run a coroutine from synchronous code, including from inside a running event loop.

Jupyter, FastAPI handlers and pytest-asyncio already run a loop on the calling thread, where
`asyncio.run` refuses to start. Instead of patching the loop (nest_asyncio), the coroutine runs
on a fresh loop in a private worker thread while the caller blocks.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
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
