"""Holding numpy's BLAS to one thread while the local model's encoders run.

The local model runs one encoder per core, each on its own batch (``local.py``). If the BLAS
under numpy split every matrix product across the cores too, each core would carry two busy
threads; on the 2-core benchmark machine that cost about a third of the throughput. So while
encoders are running, BLAS is set to one thread, and set back when the last one finishes.

The setting is process-wide: numpy work in other threads during an embedding round also runs
single-threaded (it only gets slower, never different). Only OpenBLAS -- what numpy's wheels
ship on Linux and Windows -- is found and controlled; with another BLAS nothing is changed.
"""

from __future__ import annotations

import ctypes
import functools
import glob
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["single_threaded_blas"]

# (set, get) entry points: numpy >= 2 (scipy-openblas, 64- and 32-bit integers), numpy 1.x
# wheels (openblas64_), and a plain OpenBLAS (distribution or conda numpy)
_ENTRY_POINTS = (
    ("scipy_openblas_set_num_threads64_", "scipy_openblas_get_num_threads64_"),
    ("scipy_openblas_set_num_threads", "scipy_openblas_get_num_threads"),
    ("openblas_set_num_threads64_", "openblas_get_num_threads64_"),
    ("openblas_set_num_threads", "openblas_get_num_threads"),
)


@dataclass(frozen=True)
class _OpenBLAS:
    set_threads: Callable[[int], None]
    get_threads: Callable[[], int]


def _loaded_openblas_paths() -> list[str]:
    import numpy as np  # BLAS is loaded with numpy's core

    try:
        maps = Path("/proc/self/maps").read_text(encoding="utf-8", errors="replace")
        paths = {line.split(maxsplit=5)[-1] for line in maps.splitlines() if "openblas" in line}
        return sorted(p for p in paths if p.startswith("/"))
    except OSError:  # not Linux: numpy's wheels keep their libraries next to the package
        root = Path(np.__file__).parent
        patterns = [root.parent / "numpy.libs" / "*openblas*", root / ".dylibs" / "*openblas*"]
        return sorted(p for pattern in patterns for p in glob.glob(str(pattern)))


@functools.cache  # the loaded library does not change within a process
def _find_openblas() -> _OpenBLAS | None:
    for path in _loaded_openblas_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for set_name, get_name in _ENTRY_POINTS:
            setter, getter = getattr(lib, set_name, None), getattr(lib, get_name, None)
            if setter is not None and getter is not None:
                setter.argtypes, setter.restype = [ctypes.c_int], None
                getter.argtypes, getter.restype = [], ctypes.c_int
                return _OpenBLAS(setter, getter)
    return None


class _Limiter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._saved = 0  # the thread count before the first holder came; > 1 means we changed it

    @contextmanager
    def one_thread(self) -> Iterator[None]:
        blas = _find_openblas()
        with self._lock:
            if self._users == 0 and blas is not None:
                self._saved = blas.get_threads()
                if self._saved > 1:
                    blas.set_threads(1)
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    self._restore(blas)

    def _restore(self, blas: _OpenBLAS | None) -> None:
        if blas is not None and self._saved > 1:
            blas.set_threads(self._saved)

    def after_fork_in_child(self) -> None:
        # the holders are threads of the parent: in the child they never leave
        self._lock = threading.Lock()
        if self._users:
            self._restore(_find_openblas())
        self._users = 0


_LIMITER = _Limiter()
if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_LIMITER.after_fork_in_child)


def single_threaded_blas() -> AbstractContextManager[None]:
    """Context manager: OpenBLAS runs single-threaded until every holder has left."""
    return _LIMITER.one_thread()
