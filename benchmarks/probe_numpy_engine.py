"""Probe: all-MiniLM-L6-v2 on numpy alone (no onnxruntime) -- speed and fidelity.

    python benchmarks/probe_numpy_engine.py [--repeats 3] [--no-st] [--attention group|pad]

A float32 BERT forward written with numpy only, weights mapped from ``model.safetensors``
(``SafetensorsIndex``), tokens from rageval's WordPiece tokenizer. Same batching as rageval:
texts sorted by characters, batches of 32. Inside a batch every Linear is one matrix product on
the real tokens only (the batch's unpadded tokens concatenated; weights transposed once at load);
attention runs per group of equal-length sequences (``group``) or on a padded grid with a mask
(``pad``); GELU is the exact erf form, erf from Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7).

Runs, each in a fresh process (BLAS thread variables set before numpy is imported), alternating
numpy / onnxruntime (``LocalEmbeddings``) / sentence-transformers (bench_embeddings.py's worker,
if /tmp/stvenv exists), for 1 and 2 threads, ``--repeats`` times; prints the medians of
wall-clock sentences/s and sentences per CPU-second, and the minimum cosine of the numpy
vectors to the onnxruntime vectors, as Markdown.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ST_PYTHON = Path("/tmp/stvenv/bin/python")
BATCH = 32
HIDDEN, HEADS, LAYERS = 384, 12, 6
HEAD_DIM = HIDDEN // HEADS
LN_EPS = 1e-12
GELU_CHUNK = 32768

# Abramowitz & Stegun 7.1.26: erfc(z) ~= t*(a1 + t*(a2 + ... a5)) * exp(-z*z), t = 1/(1 + p*z),
# z >= 0, |error| <= 1.5e-7
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _thread_env(threads: int) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = str(threads)
    return env


# ------------------------------------------------------------------------- the engine


class NumpyMiniLM:
    """all-MiniLM-L6-v2 sentence embeddings with numpy only (float32)."""

    def __init__(
        self, model_dir: Path | None = None, attention: str = "group", threads: int = 1
    ) -> None:
        import numpy as np

        from rageval.embeddings._tokenizer import WordPieceTokenizer
        from rageval.embeddings._weights import (
            SafetensorsIndex,
            encoder_tensor_names,
            find_model_dir,
        )

        self.np = np
        resolved = find_model_dir(model_dir)
        index = SafetensorsIndex.open(resolved / "model.safetensors")
        w = index.arrays(encoder_tensor_names(index))
        self.tokenizer = WordPieceTokenizer.from_vocab_file(resolved / "vocab.txt", max_length=256)
        self.attention = attention
        self.threads = threads
        self._buffers: dict[str, Any] = {}
        self._pool = ThreadPoolExecutor(threads) if threads > 1 else None
        f32 = np.float32

        def arr(name: str) -> Any:
            return np.ascontiguousarray(w[name], dtype=f32)

        self.word = w["embeddings.word_embeddings.weight"]  # gathered from, never copied whole
        # position + token type 0 folded into one table
        self.pos = (
            arr("embeddings.position_embeddings.weight")
            + arr("embeddings.token_type_embeddings.weight")[0]
        )
        self.emb_ln = (arr("embeddings.LayerNorm.weight"), arr("embeddings.LayerNorm.bias"))
        scale = f32(1.0 / math.sqrt(HEAD_DIM))
        self.layers: list[dict[str, Any]] = []
        for i in range(LAYERS):
            p = f"encoder.layer.{i}"
            a = f"{p}.attention.self"
            # the 1/sqrt(head_dim) score scale folded into the query weights
            qkv_w = np.concatenate(
                [arr(f"{a}.query.weight") * scale, arr(f"{a}.key.weight"), arr(f"{a}.value.weight")]
            )
            qkv_b = np.concatenate(
                [arr(f"{a}.query.bias") * scale, arr(f"{a}.key.bias"), arr(f"{a}.value.bias")]
            )
            self.layers.append(
                {
                    "qkv": (np.ascontiguousarray(qkv_w.T), qkv_b),
                    "out": self._linear(arr, f"{p}.attention.output.dense"),
                    "ln1": self._ln(arr, f"{p}.attention.output.LayerNorm"),
                    "inter": self._linear(arr, f"{p}.intermediate.dense"),
                    "ffn_out": self._linear(arr, f"{p}.output.dense"),
                    "ln2": self._ln(arr, f"{p}.output.LayerNorm"),
                }
            )

    @staticmethod
    def _linear(arr: Any, prefix: str) -> tuple[Any, Any]:
        import numpy as np

        return np.ascontiguousarray(arr(f"{prefix}.weight").T), arr(f"{prefix}.bias")

    @staticmethod
    def _ln(arr: Any, prefix: str) -> tuple[Any, Any]:
        return arr(f"{prefix}.weight"), arr(f"{prefix}.bias")

    # --------------------------------------------------------------- pieces

    def _layer_norm(self, x: Any, gb: tuple[Any, Any]) -> Any:
        np = self.np
        x -= x.mean(axis=1, keepdims=True)
        var = np.einsum("ij,ij->i", x, x)
        var *= 1.0 / x.shape[1]
        var += LN_EPS
        np.sqrt(var, out=var)
        np.reciprocal(var, out=var)
        x *= var[:, None]
        x *= gb[0]
        x += gb[1]
        return x

    def gelu_(self, x: Any, chunk: int = GELU_CHUNK) -> Any:
        """Exact GELU in place: x * Phi(x) = max(x, 0) - |x| * erfc(|x|/sqrt 2)/2.

        Works through ``x`` in chunks of ``chunk`` elements with three preallocated scratch
        buffers, so the ~20 passes stay in cache and no large temporaries are allocated."""
        np = self.np
        flat = x.reshape(-1)
        n = min(chunk, flat.size)
        a_buf, t_buf, q_buf = (np.empty(n, dtype=np.float32) for _ in range(3))
        p = np.float32(_AS_P / math.sqrt(2.0))
        a1, a2, a3, a4, a5 = (np.float32(0.5 * c) for c in _AS_A)
        half = np.float32(-0.5)
        for start in range(0, flat.size, n):
            xc = flat[start : start + n]
            m = xc.size
            a, t, q = a_buf[:m], t_buf[:m], q_buf[:m]
            np.abs(xc, out=a)
            np.multiply(a, p, out=t)
            t += 1.0
            np.reciprocal(t, out=t)
            np.multiply(t, a5, out=q)
            for c in (a4, a3, a2, a1):
                q += c
                q *= t
            np.multiply(a, a, out=t)  # t is no longer needed
            t *= half
            np.exp(t, out=t)
            q *= t
            q *= a
            np.maximum(xc, 0.0, out=xc)
            xc -= q
        return x

    def _attention(self, qkv: Any, lengths: list[int]) -> Any:
        np = self.np
        out = self._work("ctx", qkv.shape[0], HIDDEN)
        if self.attention == "group":
            start, i = 0, 0
            while i < len(lengths):
                length = lengths[i]
                j = i
                while j < len(lengths) and lengths[j] == length:
                    j += 1
                g = j - i
                end = start + g * length
                heads = qkv[start:end].reshape(g, length, 3, HEADS, HEAD_DIM)
                q = heads[:, :, 0].transpose(0, 2, 1, 3)
                k = heads[:, :, 1].transpose(0, 2, 3, 1)
                v = heads[:, :, 2].transpose(0, 2, 1, 3)
                scores = np.matmul(q, k)
                self._softmax_(scores)
                ctx = np.matmul(scores, v)  # (g, heads, L, head_dim)
                out[start:end].reshape(g, length, HEADS, HEAD_DIM)[...] = ctx.transpose(0, 2, 1, 3)
                start, i = end, j
            return out
        # padded grid with an additive mask
        b, width = len(lengths), max(lengths)
        lens = np.asarray(lengths)
        real = np.arange(width)[None, :] < lens[:, None]
        grid = np.zeros((b, width, 3 * HIDDEN), dtype=np.float32)
        grid[real] = qkv
        heads = grid.reshape(b, width, 3, HEADS, HEAD_DIM)
        q = heads[:, :, 0].transpose(0, 2, 1, 3)
        k = heads[:, :, 1].transpose(0, 2, 3, 1)
        v = heads[:, :, 2].transpose(0, 2, 1, 3)
        scores = np.matmul(q, k)
        scores += np.where(real, np.float32(0.0), np.float32(-1e4))[:, None, None, :]
        self._softmax_(scores)
        ctx = np.matmul(scores, v).transpose(0, 2, 1, 3)  # (b, L, heads, head_dim)
        out[...] = ctx[real].reshape(-1, HIDDEN)
        return out

    def _softmax_(self, s: Any) -> None:
        np = self.np
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s *= np.reciprocal(s.sum(axis=-1, keepdims=True))

    def _work(self, key: str, rows: int, cols: int = 4 * HIDDEN) -> Any:
        """A (rows, cols) float32 scratch matrix, reused across batches (grown when needed)."""
        buf = self._buffers.get(key)
        if buf is None or buf.size < rows * cols:
            buf = self.np.empty(max(rows * cols, 1024 * cols), dtype=self.np.float32)
            self._buffers[key] = buf
        return buf[: rows * cols].reshape(rows, cols)

    def _gelu_parallel(self, x: Any) -> None:
        if self._pool is None:
            self.gelu_(x)
            return
        parts = self.np.array_split(x, self.threads)
        list(self._pool.map(self.gelu_, parts))

    # --------------------------------------------------------------- forward

    def embed_batch(self, texts: list[str]) -> Any:
        np = self.np
        encoded = [self.tokenizer.encode(t) for t in texts]
        # inside the batch, sequences sorted by token count so equal lengths are contiguous
        order = sorted(range(len(encoded)), key=lambda r: len(encoded[r]))
        lengths = [len(encoded[r]) for r in order]
        ids = np.fromiter((i for r in order for i in encoded[r]), dtype=np.int64)
        positions = np.concatenate([np.arange(n) for n in lengths])
        x = self.word[ids] + self.pos[positions]
        x = self._layer_norm(x, self.emb_ln)
        n = x.shape[0]
        qkv, h = self._work("qkv", n, 3 * HIDDEN), self._work("h", n, HIDDEN)
        inter = self._work("i", n, 4 * HIDDEN)
        for layer in self.layers:
            np.matmul(x, layer["qkv"][0], out=qkv)
            qkv += layer["qkv"][1]
            ctx = self._attention(qkv, lengths)
            np.matmul(ctx, layer["out"][0], out=h)
            h += layer["out"][1]
            h += x
            x, h = self._layer_norm(h, layer["ln1"]), x
            np.matmul(x, layer["inter"][0], out=inter)
            inter += layer["inter"][1]
            self._gelu_parallel(inter)
            np.matmul(inter, layer["ffn_out"][0], out=h)
            h += layer["ffn_out"][1]
            h += x
            x, h = self._layer_norm(h, layer["ln2"]), x
        starts = np.cumsum([0, *lengths[:-1]])
        pooled = np.add.reduceat(x, starts, axis=0)
        pooled /= np.asarray(lengths, dtype=np.float32)[:, None]
        norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), np.float32(1e-12))
        pooled /= norms
        result = np.empty_like(pooled)
        result[order] = pooled
        return result

    def embed_texts(self, texts: list[str]) -> Any:
        np = self.np
        order = sorted(range(len(texts)), key=lambda r: len(texts[r]))  # as rageval batches
        out = np.empty((len(texts), HIDDEN), dtype=np.float32)
        for start in range(0, len(order), BATCH):
            rows = order[start : start + BATCH]
            out[rows] = self.embed_batch([texts[r] for r in rows])
        return out


# ------------------------------------------------------------------------- workers


def worker(kind: str, texts: list[str], threads: int, attention: str, save: Path | None) -> None:
    # the onnxruntime side and the timing are bench_embeddings.py's own worker code
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_embeddings import _finish, worker_rageval

    if kind == "numpy":
        t0 = time.perf_counter()
        engine = NumpyMiniLM(attention=attention, threads=threads)
        engine.embed_texts(["warm up"])
        load = time.perf_counter() - t0
        w0, c0 = time.perf_counter(), time.process_time()
        result = _finish(engine.embed_texts(texts), save, load, w0, c0)
    else:
        result = worker_rageval(texts, BATCH, threads, save)
    print(json.dumps(result))


def run(kind: str, texts_file: Path, threads: int, attention: str, save: Path | None) -> Any:
    if kind == "st":
        cmd = [str(ST_PYTHON), str(ROOT / "benchmarks" / "bench_embeddings.py"), "--worker", "st"]
        cmd += ["--texts", str(texts_file), "--batch-size", str(BATCH), "--threads", str(threads)]
    else:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", kind]
        cmd += ["--texts", str(texts_file), "--threads", str(threads), "--attention", attention]
    if save is not None:
        cmd += ["--save", str(save)]
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, env=_thread_env(threads))
    return json.loads(done.stdout.strip().splitlines()[-1])


def erf_max_error() -> float:
    import numpy as np

    z = np.linspace(-6.0, 6.0, 200_001)
    shim: Any = _Shim()  # only .np is used
    approx = NumpyMiniLM.gelu_(shim, z.astype(np.float32).copy()).astype(np.float64)
    exact = np.array([0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0))) for v in z])
    # GELU error / |x| = error of Phi = error of erf / 2
    nz = np.abs(z) > 1e-3
    return float(np.max(np.abs(approx - exact)[nz] / np.abs(z[nz])) * 2.0)


class _Shim:
    def __init__(self) -> None:
        import numpy as np

        self.np = np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--attention", choices=["group", "pad"], default="group")
    parser.add_argument("--no-st", action="store_true")
    parser.add_argument("--threads-list", default="1,2")
    parser.add_argument("--worker", choices=["numpy", "ort"], help=argparse.SUPPRESS)
    parser.add_argument("--texts", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--save", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        texts = json.loads(args.texts.read_text(encoding="utf-8"))
        worker(args.worker, texts, args.threads, args.attention, args.save)
        return

    import numpy as np

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_embeddings import workloads

    texts = workloads(1000)["~20-word sentences"]
    kinds = ["numpy", "ort"] + ([] if args.no_st or not ST_PYTHON.exists() else ["st"])
    load_start = os.getloadavg()[0]
    rows = []
    min_cos: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        texts_file = Path(tmp) / "texts.json"
        texts_file.write_text(json.dumps(texts), encoding="utf-8")
        for threads in (int(t) for t in args.threads_list.split(",")):
            results: dict[str, list[Any]] = {k: [] for k in kinds}
            for rep in range(args.repeats):
                for kind in kinds:
                    save = Path(tmp) / f"{kind}.npy" if rep == 0 and kind != "st" else None
                    results[kind].append(run(kind, texts_file, threads, args.attention, save))
            a, b = np.load(Path(tmp) / "numpy.npy"), np.load(Path(tmp) / "ort.npy")
            cos = np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
            min_cos[threads] = float(cos.min())
            for kind in kinds:
                wall = [len(texts) / r["seconds"] for r in results[kind]]
                cpu = [len(texts) / r["cpu_seconds"] for r in results[kind]]
                ratio = statistics.median(
                    o["seconds"] / r["seconds"]
                    for r, o in zip(results[kind], results["ort"], strict=True)
                )
                rows.append(
                    f"| {kind} | {threads} | {statistics.median(wall):.0f} "
                    f"({', '.join(f'{v:.0f}' for v in wall)}) | {statistics.median(cpu):.0f} "
                    f"| {ratio:.2f} |"
                )
    out = [
        f"1000 ~20-word sentences, batch {BATCH}, attention={args.attention}, "
        f"{args.repeats} fresh processes per row (alternating); load average "
        f"{load_start:.2f} at start, {os.getloadavg()[0]:.2f} at end",
        "",
        "| engine | threads | sentences/s wall, median (runs) | sentences per CPU-second "
        "| speed / onnxruntime (median of pairs) |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "min cosine numpy vs onnxruntime: "
        + ", ".join(f"{v:.7f} ({t} thread(s))" for t, v in min_cos.items()),
        f"GELU erf max abs error (via Phi, on [-6, 6]): {erf_max_error():.2e}",
    ]
    print("\n".join(out))


if __name__ == "__main__":
    main()
