"""all-MiniLM-L6-v2's forward pass in numpy (float32), without torch or onnxruntime.

It computes what ``SentenceTransformer("all-MiniLM-L6-v2").encode(..., normalize_embeddings=True)``
computes: the BERT encoder (6 layers, hidden 384, 12 heads, exact-erf GELU, LayerNorm eps 1e-12,
token type 0), mean pooling over the real tokens, L2 normalisation.

Why numpy alone is fast enough (benchmarks/RESULTS.md compares it with sentence-transformers):

* **(Almost) no padding.** A batch's texts are laid out one after another, token by token, so
  the matrix products run on real tokens, but for the few rows of the layout described next.
  Attention runs on groups of texts of equal token count, which is exactly the masked
  computation of a padded batch without the padding (a padded key gets weight exp(-inf) = 0).
* **Products dominate.** About three quarters of the time is in each layer's four dense matrix
  products, which numpy hands to its BLAS. The query, key and value projections are one product
  (weights packed at load, the 1/sqrt(head_dim) score scale folded into the query weights).
* **Cache-sized element-wise work.** GELU, about twenty element-wise passes and 15% of the time,
  runs on blocks small enough to stay in the core's cache, in preallocated buffers.
* **One encoder per core.** The caller (``local.py``) runs one :class:`MiniLMEncoder` per core on
  separate batches, with BLAS single-threaded, instead of one encoder whose products are split
  across cores but whose element-wise passes run on one.

**A text's vector does not depend on the rest of its batch, to the bit.** Each row of a matrix
product is computed from that row alone, but a BLAS may round it differently depending on the
product's shape, the row's place in it and its threads: OpenBLAS's Haswell kernels (also run on
AMD Zen, or wherever ``OPENBLAS_CORETYPE=Haswell`` is set) sum rows 6-11 of every 12 in another
order than rows 0-5, so a text alone and the same text after another one differed by ~1e-7.
So every dense product runs as calls of a few fixed sizes (``CALL_ROWS``: 384 rows, and 192, 96
and 48 for the rest of a batch, its rows zero-padded to a multiple of 48), and every text starts
at a multiple of the BLAS's *row period*: the period after which a row's place in a call stops
mattering. :func:`measure_row_grid` measures it once per process (1 for OpenBLAS's SkylakeX,
Sandybridge, Nehalem and generic kernels, 12 for its Haswell ones) and checks that the smaller
calls compute each place as the 384-row call does (if not, every call is 384 rows). A row of a
text is then always computed the same way, single-threaded (``local.py``): the same arithmetic
in the same order, whatever else is in the batch. Everything else works row by row or text by
text. What this costs in throughput is in benchmarks/RESULTS.md.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rageval.embeddings._weights import SafetensorsIndex, encoder_tensor_names

__all__ = [
    "CALL_ROWS",
    "HIDDEN",
    "MiniLMEncoder",
    "MiniLMWeights",
    "RowGrid",
    "gelu_",
    "measure_row_grid",
]

FloatArray = npt.NDArray[np.float32]

HIDDEN = 384
HEADS = 12
HEAD_DIM = HIDDEN // HEADS
LAYERS = 6
INTERMEDIATE = 4 * HIDDEN
LN_EPS = 1e-12
NORM_EPS = 1e-12  # torch.nn.functional.normalize's default, as sentence-transformers uses it

# The row counts of the calls every dense product is made of (see the module docstring), largest
# first, each a multiple of the next and of the row periods seen (1 and 12). The largest is big
# enough that OpenBLAS's packing of the weights, done once per call, stays a small part of it
# (per row, calls of 192 rows cost ~8% more than 384, 96 rows twice as much, on the benchmark
# machine); the smaller ones keep a short text's batch from paying for 384 rows.
CALL_ROWS = (384, 192, 96, 48)

# Element-wise work is done in blocks of this many floats (128 kB): with the GELU's scratch
# buffers that stays within a core's L2 cache.
_BLOCK = 32_768
# Attention scores (texts x heads x tokens x tokens) are computed for at most this many floats
# at a time (16 MB), so long texts in a big batch do not need one huge array.
_SCORES_BUDGET = 4 * 1024 * 1024

# erfc(z) ~= t * (a1 + t*(a2 + t*(a3 + t*(a4 + t*a5)))) * exp(-z*z) with t = 1 / (1 + p*z), z >= 0:
# Abramowitz & Stegun 7.1.26, |error| <= 1.5e-7 -- at float32 resolution for GELU's purposes.
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


@dataclass(frozen=True)
class _Dense:
    weight: FloatArray  # (in, out), C-contiguous
    bias: FloatArray  # (out,)


@dataclass(frozen=True)
class _Norm:
    gain: FloatArray
    bias: FloatArray


@dataclass(frozen=True)
class _Layer:
    qkv: _Dense  # query (pre-scaled), key and value side by side: (384, 1152)
    attention_out: _Dense
    attention_norm: _Norm
    up: _Dense
    down: _Dense
    output_norm: _Norm


@dataclass(frozen=True)
class MiniLMWeights:
    """The model's weights in the layout the forward pass wants; read-only, shared by encoders."""

    word: npt.NDArray[Any]  # (vocab, 384), a view of the memory-mapped file: rows are gathered
    position: FloatArray  # position embeddings with token type 0's embedding added
    embedding_norm: _Norm
    layers: tuple[_Layer, ...]

    @classmethod
    def from_safetensors(cls, index: SafetensorsIndex) -> MiniLMWeights:
        tensors = index.arrays(encoder_tensor_names(index))

        def f32(name: str) -> FloatArray:
            return np.ascontiguousarray(tensors[name], dtype=np.float32)

        def dense(prefix: str) -> _Dense:
            # torch stores (out, in); the product wants x @ (in, out)
            return _Dense(np.ascontiguousarray(f32(f"{prefix}.weight").T), f32(f"{prefix}.bias"))

        def norm(prefix: str) -> _Norm:
            return _Norm(f32(f"{prefix}.weight"), f32(f"{prefix}.bias"))

        scale = np.float32(1.0 / math.sqrt(HEAD_DIM))
        layers = []
        for i in range(LAYERS):
            p = f"encoder.layer.{i}"
            q, k, v = (dense(f"{p}.attention.self.{part}") for part in ("query", "key", "value"))
            qkv = _Dense(
                np.ascontiguousarray(
                    np.concatenate([q.weight * scale, k.weight, v.weight], axis=1)
                ),
                np.concatenate([q.bias * scale, k.bias, v.bias]),
            )
            layers.append(
                _Layer(
                    qkv=qkv,
                    attention_out=dense(f"{p}.attention.output.dense"),
                    attention_norm=norm(f"{p}.attention.output.LayerNorm"),
                    up=dense(f"{p}.intermediate.dense"),
                    down=dense(f"{p}.output.dense"),
                    output_norm=norm(f"{p}.output.LayerNorm"),
                )
            )
        return cls(
            word=np.asarray(tensors["embeddings.word_embeddings.weight"]),
            position=f32("embeddings.position_embeddings.weight")
            + f32("embeddings.token_type_embeddings.weight")[0],
            embedding_norm=norm("embeddings.LayerNorm"),
            layers=tuple(layers),
        )


class MiniLMEncoder:
    """Sentence vectors for batches of token-id sequences.

    Holds scratch buffers that are reused from batch to batch, so one encoder must not be used
    by two threads at once; any number of encoders may share one :class:`MiniLMWeights`.
    """

    def __init__(self, weights: MiniLMWeights, grid: RowGrid) -> None:
        """``grid``: what :func:`measure_row_grid` found for this process's BLAS."""
        self._w = weights
        self._grid = grid
        self._buffers: dict[str, FloatArray] = {}
        self._gelu_scratch = [np.empty(_BLOCK, dtype=np.float32) for _ in range(3)]

    def __call__(self, sequences: list[list[int]]) -> FloatArray:
        """L2-normalised mean-pooled vectors, shape ``(len(sequences), 384)``, in input order.

        Every sequence is a whole tokenized text ([CLS] ... [SEP]), at most 512 tokens. A
        sequence's vector is the same, bit for bit, whatever the other sequences are."""
        if not sequences:
            return np.zeros((0, HIDDEN), dtype=np.float32)
        w = self._w
        # equal lengths next to each other, for attention
        order = sorted(range(len(sequences)), key=lambda r: len(sequences[r]))
        if not sequences[order[0]]:
            raise ValueError("an empty token sequence (a text has at least [CLS] and [SEP])")
        layout = _Layout([len(sequences[r]) for r in order], self._grid)
        # rows between texts and after the last one hold token 0 at position 0: finite filler
        # that no real row ever reads (products work row by row, attention text by text)
        ids = np.zeros(layout.rows, dtype=np.intp)
        positions = np.zeros(layout.rows, dtype=np.intp)
        for r, start in zip(order, layout.starts, strict=True):
            ids[start : start + len(sequences[r])] = sequences[r]
            positions[start : start + len(sequences[r])] = np.arange(len(sequences[r]))

        x = w.word[ids].astype(np.float32, copy=False)
        x += w.position[positions]
        _layer_norm_(x, w.embedding_norm)
        h = self._buffer("h", layout.rows, HIDDEN)
        qkv = self._buffer("qkv", layout.rows, 3 * HIDDEN)
        context = self._buffer("context", layout.rows, HIDDEN)
        context[...] = 0.0  # attention writes the texts' rows only: the filler stays finite
        for layer in w.layers:
            _dense(x, layer.qkv, self._grid, out=qkv)
            _attention(qkv, layout, out=context)
            _dense(context, layer.attention_out, self._grid, out=h)
            h += x
            x, h = _layer_norm_(h, layer.attention_norm), x
            self._feed_forward(x, layer, out=h)
            h += x
            x, h = _layer_norm_(h, layer.output_norm), x

        pooled = np.stack(
            [
                x[start : start + length].sum(axis=0)
                for start, length in zip(layout.starts, layout.lengths, strict=True)
            ]
        )
        pooled /= np.asarray(layout.lengths, dtype=np.float32)[:, None]
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), np.float32(NORM_EPS))
        vectors = np.empty_like(pooled)
        vectors[order] = pooled
        return vectors

    def _feed_forward(self, x: FloatArray, layer: _Layer, *, out: FloatArray) -> None:
        # call by call: the (rows x 1536) intermediate never exists whole, only one call's
        inner = self._buffer("inner", CALL_ROWS[0], INTERMEDIATE)
        for start, end in self._grid.calls(x.shape[0]):
            _dense(x[start:end], layer.up, self._grid, out=inner[: end - start])
            gelu_(inner[: end - start], self._gelu_scratch)
            _dense(inner[: end - start], layer.down, self._grid, out=out[start:end])

    def _buffer(self, key: str, rows: int, cols: int) -> FloatArray:
        """A (rows, cols) float32 scratch matrix, grown when a batch needs more."""
        buf = self._buffers.get(key)
        if buf is None or buf.size < rows * cols:
            buf = np.empty(rows * cols, dtype=np.float32)
            self._buffers[key] = buf
        return buf[: rows * cols].reshape(rows, cols)


@dataclass(frozen=True)
class RowGrid:
    """How a batch's rows must be laid out and cut into products for this process's BLAS."""

    period: int  #: every text starts at a multiple of it
    unit: int  #: the smallest call: the rows are padded to a multiple of it

    def calls(self, rows: int) -> Iterator[tuple[int, int]]:
        """``(start, end)`` of the calls of ``rows`` rows (a multiple of ``unit``): as many of
        the largest size as fit, then one each of the smaller ones the rest needs."""
        start = 0
        for size in CALL_ROWS:
            if size < self.unit:
                break
            while rows - start >= size:
                yield start, start + size
                start += size


class _Layout:
    """Where each text's rows go: texts in the given order (ascending length), each starting at
    a multiple of the row period, the whole padded to a multiple of the grid's unit."""

    def __init__(self, lengths: list[int], grid: RowGrid) -> None:
        self.lengths = lengths
        #: rows per text: its length rounded up to the period
        self.slots = [-(-length // grid.period) * grid.period for length in lengths]
        self.starts = [0, *itertools.accumulate(self.slots)][:-1]
        self.rows = -(-sum(self.slots) // grid.unit) * grid.unit

    def groups(self) -> Iterator[tuple[int, int, int, int]]:
        """(first row, texts, length, rows per text) for each run of texts of equal length."""
        for length, run in itertools.groupby(
            zip(self.lengths, self.starts, self.slots, strict=True), key=lambda t: t[0]
        ):
            members = list(run)
            yield members[0][1], len(members), length, members[0][2]


def _dense(x: FloatArray, dense: _Dense, grid: RowGrid, *, out: FloatArray) -> None:
    """``out = x @ weight + bias`` in the grid's calls (the module docstring says why)."""
    for start, end in grid.calls(x.shape[0]):
        np.matmul(x[start:end], dense.weight, out=out[start:end])
    out += dense.bias


def measure_row_grid() -> RowGrid:
    """The row period and the smallest call this process's BLAS allows (module docstring).

    The period is the smallest divisor ``p`` of ``CALL_ROWS[0]`` such that, in a product of that
    many rows with a matrix of any of the model's weight shapes, a row comes out the same at
    every place ``i`` and ``i + p``; the smaller calls are allowed if each of their places
    computes a row as the same place of the largest call does. Measured on random matrices
    (what the BLAS does depends on the shapes, not the values) whose rows are all equal: two
    places give the same bits exactly when the BLAS computes them the same way (another order
    of the same sums differs somewhere in 384+ outputs of random data). Call it with the BLAS
    set up as the encoders will run it: single-threaded (the pattern changes with threads)."""
    largest, smallest = CALL_ROWS[0], CALL_ROWS[-1]
    rng = np.random.default_rng(0)
    period, unit = 1, smallest
    for inputs, outputs in ((HIDDEN, 3 * HIDDEN), (HIDDEN, HIDDEN), (HIDDEN, INTERMEDIATE),
                            (INTERMEDIATE, HIDDEN)):  # fmt: skip
        weight = rng.standard_normal((inputs, outputs), dtype=np.float32)
        rows = np.repeat(rng.standard_normal((1, inputs), dtype=np.float32), largest, axis=0)
        full = np.matmul(rows, weight)
        period = math.lcm(
            period,
            next(
                p
                for p in range(1, largest + 1)
                if largest % p == 0 and np.array_equal(full, np.tile(full[:p], (largest // p, 1)))
            ),
        )
        if not all(np.array_equal(np.matmul(rows[:n], weight), full[:n]) for n in CALL_ROWS[1:]):
            unit = largest
    return RowGrid(period=period, unit=unit if unit % period == 0 else largest)


def _layer_norm_(x: FloatArray, norm: _Norm) -> FloatArray:
    """LayerNorm over the last axis, in place; returns ``x``."""
    x -= x.mean(axis=1, keepdims=True)
    var = np.einsum("ij,ij->i", x, x)
    var *= np.float32(1.0 / x.shape[1])
    var += np.float32(LN_EPS)
    np.sqrt(var, out=var)
    np.reciprocal(var, out=var)
    x *= var[:, None]
    x *= norm.gain
    x += norm.bias
    return x


def _attention(qkv: FloatArray, layout: _Layout, *, out: FloatArray) -> None:
    """Multi-head self-attention of each text over its own tokens.

    The products are stacks of one (tokens x tokens) or (tokens x head_dim) product per text and
    head: their shapes are the text's own."""
    for first_row, texts, length, slot in layout.groups():
        per_chunk = max(1, _SCORES_BUDGET // (HEADS * length * length))
        for first in range(0, texts, per_chunk):
            count = min(per_chunk, texts - first)
            start = first_row + first * slot
            end = start + count * slot
            heads = qkv[start:end].reshape(count, slot, 3, HEADS, HEAD_DIM)[:, :length]
            q = heads[:, :, 0].transpose(0, 2, 1, 3)  # (texts, heads, tokens, head_dim)
            k = heads[:, :, 1].transpose(0, 2, 3, 1)  # (texts, heads, head_dim, tokens)
            v = heads[:, :, 2].transpose(0, 2, 1, 3)
            scores = np.matmul(q, k)
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores *= np.reciprocal(scores.sum(axis=-1, keepdims=True))
            context = np.matmul(scores, v)  # (texts, heads, tokens, head_dim)
            out[start:end].reshape(count, slot, HEADS, HEAD_DIM)[:, :length] = context.transpose(
                0, 2, 1, 3
            )


def gelu_(x: FloatArray, scratch: list[FloatArray] | None = None) -> FloatArray:
    """Exact (erf) GELU in place; returns ``x``.

    x * Phi(x) = max(x, 0) - |x| * erfc(|x| / sqrt 2) / 2, with erfc from ``_AS_A`` (relative
    error of Phi below 1.5e-7). Works through ``x`` in blocks with three scratch buffers of at
    least ``_BLOCK`` floats, so the passes stay in cache and no temporaries are allocated."""
    if scratch is None:
        scratch = [np.empty(_BLOCK, dtype=np.float32) for _ in range(3)]
    flat = x.reshape(-1)
    block = min(_BLOCK, flat.size)
    p = np.float32(_AS_P / math.sqrt(2.0))
    a1, a2, a3, a4, a5 = (np.float32(0.5 * c) for c in _AS_A)  # the 1/2 folded in
    for start in range(0, flat.size, block):
        xb = flat[start : start + block]
        n = xb.size
        a, t, q = scratch[0][:n], scratch[1][:n], scratch[2][:n]
        np.abs(xb, out=a)
        np.multiply(a, p, out=t)
        t += np.float32(1.0)
        np.reciprocal(t, out=t)
        np.multiply(t, a5, out=q)
        for c in (a4, a3, a2, a1):
            q += c
            q *= t
        np.multiply(a, a, out=t)  # t is done with: reuse it for exp(-x^2 / 2)
        t *= np.float32(-0.5)
        np.exp(t, out=t)
        q *= t
        q *= a
        np.maximum(xb, np.float32(0.0), out=xb)
        xb -= q
    return x
