"""The embeddings interface: de-duplication, caching, batching and thread offload.

A concrete model implements exactly one of two hooks:

* ``_embed_batch(texts)`` -- synchronous, CPU-bound work (the local model). Requests from any
  number of tasks, event loops or threads are queued for one dedicated worker thread per
  instance; it drains the queue, drops texts already cached, sorts what is left by length (so a
  batch carries little padding), cuts it into ``batch_size`` batches and computes them (a model
  may override ``_embed_batches`` to spread a round's batches over threads of its own).
  Requests that arrive while a round is computing are coalesced into the next round, and
  because rounds are serial and consult the cache when they start, a text requested twice is
  never computed twice.
* ``async _aembed_batch(texts)`` -- I/O (a remote endpoint). It runs on the caller's event loop
  so that the endpoint's limiter and client are shared with the caller's other requests.

Returned arrays are float32, shape ``(n, dim)``, rows in the order of the input texts.
"""

from __future__ import annotations

import abc
import asyncio
import os
import threading
from collections import OrderedDict
from collections.abc import Coroutine, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["Embeddings", "FloatArray", "cosine"]

FloatArray = npt.NDArray[np.float32]
_T = TypeVar("_T")

DEFAULT_BATCH_SIZE = 32
DEFAULT_CACHE_SIZE = 50_000


class _VectorCache:
    """Thread-safe LRU map text -> vector (read-only rows)."""

    def __init__(self, max_items: int) -> None:
        self._max = max_items
        self._items: OrderedDict[str, FloatArray] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, texts: Iterable[str]) -> dict[str, FloatArray]:
        found: dict[str, FloatArray] = {}
        with self._lock:
            for text in texts:
                vec = self._items.get(text)
                if vec is not None:
                    self._items.move_to_end(text)
                    found[text] = vec
        return found

    def put_many(self, items: dict[str, FloatArray]) -> None:
        if self._max <= 0:
            return
        with self._lock:
            for text, vec in items.items():
                self._items[text] = vec
                self._items.move_to_end(text)
            while len(self._items) > self._max:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


@dataclass
class _Request:
    texts: list[str]
    future: Future[dict[str, FloatArray]] = field(default_factory=Future)


class Embeddings(abc.ABC):
    """Base class for embedding models; see the module docstring for the two hooks."""

    name: str
    dim: int | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    #: the most tokens of a text the model reads, when it cuts longer texts silently (None:
    #: it does not cut; a remote endpoint refuses an over-long input instead)
    max_tokens: int | None = None

    def __init__(
        self, *, batch_size: int | None = None, cache_size: int = DEFAULT_CACHE_SIZE
    ) -> None:
        if batch_size is not None:
            if batch_size < 1:
                raise ValueError(f"batch_size must be >= 1, got {batch_size}")
            self.batch_size = batch_size
        self._cache = _VectorCache(cache_size)
        self._start_threads_afresh()
        cls = type(self)
        if (cls._embed_batch is Embeddings._embed_batch) == (
            cls._aembed_batch is Embeddings._aembed_batch
        ):
            raise TypeError(
                f"{cls.__name__} must implement exactly one of _embed_batch / _aembed_batch"
            )

    # ----------------------------------------------------------------- hooks

    def _embed_batch(self, texts: list[str]) -> FloatArray:
        """Embed one batch synchronously (CPU work; called on the worker thread)."""
        raise NotImplementedError

    async def _aembed_batch(self, texts: list[str]) -> FloatArray:
        """Embed one batch asynchronously (I/O; called on the caller's event loop)."""
        raise NotImplementedError

    @property
    def _is_sync_model(self) -> bool:
        return type(self)._embed_batch is not Embeddings._embed_batch

    # ---------------------------------------------------------------- public

    async def aembed_texts(self, texts: Sequence[str]) -> FloatArray:
        """Embed ``texts``; returns a float32 array of shape ``(len(texts), dim)``."""
        wanted, found, missing = self._lookup(texts)
        if missing:
            if self._is_sync_model:
                computed: dict[str, FloatArray] = await asyncio.wrap_future(self._submit(missing))
                found.update(computed)
            else:
                found.update(await self._acompute(missing))
        return self._assemble(wanted, found)

    async def aembed_text(self, text: str) -> FloatArray:
        """Embed one text; returns a float32 vector of shape ``(dim,)``."""
        vectors = await self.aembed_texts([text])
        return vectors.reshape(-1)

    def embed_texts(self, texts: Sequence[str]) -> FloatArray:
        """Synchronous :meth:`aembed_texts`; safe to call inside a running event loop."""
        if not self._is_sync_model:
            return self._run_on_private_loop(self.aembed_texts(_check_texts(texts)))
        wanted, found, missing = self._lookup(texts)
        if missing:
            found.update(self._submit(missing).result())
        return self._assemble(wanted, found)

    def embed_text(self, text: str) -> FloatArray:
        """Synchronous :meth:`aembed_text`."""
        return self.embed_texts([text]).reshape(-1)

    def truncated(self, texts: Sequence[str]) -> dict[str, int]:
        """The texts among `texts` that the model cuts to :attr:`max_tokens`, each with its
        whole length in tokens (so a metric can say its value was computed on a cut text)."""
        return {}

    def clear_cache(self) -> None:
        self._cache.clear()

    def describe(self) -> dict[str, Any]:
        """Identity for run manifests and cache keys."""
        return {"name": self.name, "dim": self.dim, "batch_size": self.batch_size}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, dim={self.dim})"

    # ------------------------------------------------------ sync-model worker

    def _start_threads_afresh(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._pending: list[_Request] = []
        self._draining = False
        self._worker: ThreadPoolExecutor | None = None
        self._sync_loop: asyncio.AbstractEventLoop | None = None

    def _in_this_process(self) -> None:
        # A forked child has none of its parent's threads (and maybe a lock one of them held):
        # work handed to the inherited worker or loop would wait forever. Start over instead.
        if self._pid != os.getpid():
            self._start_threads_afresh()

    def _submit(self, texts: list[str]) -> Future[dict[str, FloatArray]]:
        self._in_this_process()
        request = _Request(texts)
        with self._lock:
            self._pending.append(request)
            if not self._draining:
                self._draining = True
                if self._worker is None:
                    self._worker = ThreadPoolExecutor(
                        max_workers=1, thread_name_prefix=f"rageval-embed-{type(self).__name__}"
                    )
                self._worker.submit(self._drain)
        return request.future

    def _drain(self) -> None:
        while True:
            with self._lock:
                # a request whose caller was cancelled before its round started is dropped
                round_ = [r for r in self._pending if r.future.set_running_or_notify_cancel()]
                self._pending.clear()
                if not round_:
                    self._draining = False
                    return
            try:
                computed = self._compute_round(round_)
            except BaseException as exc:  # delivered to every waiting caller; nobody reads ours
                for request in round_:
                    request.future.set_exception(exc)
                continue
            for request in round_:
                request.future.set_result({t: computed[t] for t in request.texts})

    def _compute_round(self, round_: list[_Request]) -> dict[str, FloatArray]:
        wanted = _unique(t for r in round_ for t in r.texts)
        found = self._cache.get_many(wanted)
        todo = sorted((t for t in wanted if t not in found), key=len)
        batches = [todo[i : i + self.batch_size] for i in range(0, len(todo), self.batch_size)]
        for batch, array in zip(batches, self._embed_batches(batches), strict=True):
            fresh = self._rows(batch, array)
            self._cache.put_many(fresh)
            found.update(fresh)
        return found

    def _embed_batches(self, batches: list[list[str]]) -> Iterator[FloatArray]:
        """The arrays of ``batches``, in order; a model may compute several at once."""
        return map(self._embed_batch, batches)

    # ----------------------------------------------------------- async model

    async def _acompute(self, texts: list[str]) -> dict[str, FloatArray]:
        batches = [texts[i : i + self.batch_size] for i in range(0, len(texts), self.batch_size)]
        arrays = await asyncio.gather(*(self._aembed_batch(b) for b in batches))
        found: dict[str, FloatArray] = {}
        for batch, array in zip(batches, arrays, strict=True):
            fresh = self._rows(batch, array)
            self._cache.put_many(fresh)
            found.update(fresh)
        return found

    def _run_on_private_loop(self, coro: Coroutine[Any, Any, _T]) -> _T:
        # One long-lived loop per instance (on its own thread): an async client keeps its
        # connection pool across sync calls, and a running loop in the caller's thread is fine.
        self._in_this_process()
        with self._lock:
            if self._sync_loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(
                    target=loop.run_forever, name="rageval-embed-loop", daemon=True
                ).start()
                self._sync_loop = loop
            loop = self._sync_loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    # --------------------------------------------------------------- helpers

    def _lookup(self, texts: Sequence[str]) -> tuple[list[str], dict[str, FloatArray], list[str]]:
        """(the texts as a list, cached vectors, unique texts still to compute)."""
        wanted = _check_texts(texts)
        found = self._cache.get_many(wanted)
        return wanted, found, _unique(t for t in wanted if t not in found)

    def _rows(self, batch: list[str], array: Any) -> dict[str, FloatArray]:
        matrix = np.asarray(array, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(batch):
            raise ValueError(
                f"{self.name}: expected {len(batch)} vectors, got an array of shape {matrix.shape}"
            )
        if self.dim is None:
            self.dim = int(matrix.shape[1])
        elif matrix.shape[1] != self.dim:
            raise ValueError(f"{self.name}: expected dimension {self.dim}, got {matrix.shape[1]}")
        rows: dict[str, FloatArray] = {}
        for text, row in zip(batch, matrix, strict=True):
            # a copy per row, so a cached row does not keep its whole batch array alive
            vec = row.copy()
            vec.flags.writeable = False
            rows[text] = vec
        return rows

    def _assemble(self, wanted: list[str], found: dict[str, FloatArray]) -> FloatArray:
        if not wanted:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        return np.stack([found[t] for t in wanted])


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str):
        raise TypeError("expected a sequence of strings, got a single str (use embed_text)")
    wanted = list(texts)
    for i, text in enumerate(wanted):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] is {type(text).__name__}, expected str")
    return wanted


def _unique(texts: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(texts))


def cosine(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Plain cosine similarity in [-1, 1] (not clipped). Zero vectors give 0.0."""
    va = np.asarray(a, dtype=np.float64).ravel()
    vb = np.asarray(b, dtype=np.float64).ravel()
    if va.shape != vb.shape:
        raise ValueError(f"cosine of vectors with different shapes {va.shape} and {vb.shape}")
    denom = float(np.linalg.norm(va) * np.linalg.norm(vb))
    if denom == 0.0:
        return 0.0
    return float(np.dot(va, vb) / denom)
