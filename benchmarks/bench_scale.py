"""Speed and scale of rageval on its own (the comparison with ragas is bench_vs_ragas.py), one
command per measurement:

    python benchmarks/bench_scale.py scale --sizes 1000 10000 100000
    python benchmarks/bench_scale.py import --repeat 15
    python benchmarks/bench_scale.py rerun --samples 1000 [--profile /tmp/resume.prof]
    python benchmarks/bench_scale.py judge-cpu --requests 2000 [--src OLD_TREE/src]
    python benchmarks/bench_scale.py threads --model qwen1.5b --configs 1/2/0 2/2/50

* ``scale``: time and peak RSS from 1k to 100k rows (offline metrics; a 0 ms judge);
* ``import``: ``import rageval``, ``rageval --help``, and ``import ragas`` for comparison;
* ``rerun``: re-running a finished evaluation (cache, resume, CLI), and its Python calls;
* ``judge-cpu``: client CPU per judge and embeddings request through rageval's layers;
* ``threads``: llama-server's generation speed by ``--threads`` / ``--threads-batch`` /
  ``--poll`` on this machine (the real judge's defaults come from it).

Each measurement's own description: ``python benchmarks/bench_scale.py NAME --help``.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _harness import (
    EIGHT,
    HERE,
    RAGAS_PYTHON,
    ROOT,
    WORK,
    JudgeServer,
    Scratch,
    child_env,
    fmt,
    markdown_table,
    rageval_cmd,
    run_driver,
    run_subcommand,
)
from synthetic_data import make_sample, write_jsonl

# ---------------------------------------------------------------------- scale

_DOC_SCALE = """How time and memory grow with the number of rows: 1k, 10k, 100k samples.

Two workloads, each in a fresh rageval process reading a JSONL file itself
(``evaluate("samples.jsonl", ...)``), with a run directory (the run log on disk):

* ``offline``: metrics that need no model at all (token_f1, rouge_l);
* ``judge``: faithfulness (2 judge requests per sample) against a 0 ms fake judge.

Reported per size: wall, samples/s, CPU, peak RSS of the evaluating process, and the growth
of each from the previous size. The judge server forgets recorded requests every few
seconds so that its own memory stays flat on long runs.

    python benchmarks/bench_scale.py scale --sizes 1000 10000 100000
"""

WORKLOADS = {
    "offline": ["token_f1", "rouge_l"],
    "judge": ["faithfulness"],
}


def run(workload: str, n: int, server: JudgeServer | None) -> dict[str, Any]:
    data = WORK / f"samples-{n}-seed0.jsonl"
    if not data.exists():
        write_jsonl(data, n)
    with Scratch() as scratch:
        if server is not None:
            server.reset()
        result = run_driver(
            rageval_cmd(
                server.base_url if server else None,
                f"path:{data}",
                WORKLOADS[workload],
                scratch / "cache",
                run_dir=scratch / "run",
            )
        )
        result["run_dir_mb"] = (
            sum(p.stat().st_size for p in (scratch / "run").rglob("*") if p.is_file()) / 2**20
        )
    result["server"] = server.stats() if server is not None else None
    return result


def cmd_scale(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=_DOC_SCALE.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1000, 10000, 100000])
    parser.add_argument(
        "--workloads", nargs="+", choices=sorted(WORKLOADS), default=sorted(WORKLOADS)
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    raw: list[dict[str, Any]] = []
    rows = []
    with JudgeServer(0, forget_every=5) as server:
        for workload in args.workloads:
            previous: dict[str, Any] | None = None
            for n in args.sizes:
                result = run(workload, n, server if workload == "judge" else None)
                result.update(workload=workload, n=n)
                raw.append(result)
                growth = ""
                if previous is not None:
                    growth = (
                        f"time ×{result['wall_s'] / previous['wall_s']:.1f}, "
                        f"RSS ×{result['maxrss_mb'] / previous['maxrss_mb']:.2f}"
                    )
                requests = result["server"]["chat_requests"] if result["server"] else 0
                rows.append(
                    [
                        workload,
                        f"{n:,}",
                        fmt(result["wall_s"], 1),
                        fmt(n / result["wall_s"], 0),
                        fmt(result["cpu_s"], 1),
                        fmt(result["maxrss_mb"], 0),
                        fmt(result["run_dir_mb"], 0),
                        f"{requests:,}",
                        growth,
                    ]
                )
                print(f"{workload} {n}: {rows[-1]}", file=sys.stderr, flush=True)
                previous = result
    if args.json is not None:
        args.json.write_text(json.dumps(raw, indent=1, default=str))
    print(
        markdown_table(
            [
                "workload",
                "samples",
                "wall s",
                "samples/s",
                "CPU s",
                "peak RSS MB",
                "run dir MB",
                "judge requests",
                "growth vs previous size",
            ],
            rows,
        )
    )
    return 0


# ---------------------------------------------------------------------- import

_DOC_IMPORT = """Start-up cost: ``import rageval``, ``rageval --help``, and ``import ragas`` for comparison.

Each figure is the median of ``--repeat`` fresh processes:

* in-process: ``time.perf_counter()`` around the import statement alone;
* process: the wall time of the whole command, from spawn to exit, and the same for
  ``python -c pass`` (the interpreter's own start-up, included in every process figure).

    python benchmarks/bench_scale.py import --repeat 15
"""

_TIMED_IMPORT = (
    "import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
)


def process_wall(cmd: Sequence[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(list(cmd), check=True, capture_output=True, env=child_env())
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def in_process(python: str, module: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        out = subprocess.run(
            [python, "-c", _TIMED_IMPORT.format(module=module)],
            check=True,
            capture_output=True,
            text=True,
            env=child_env(),
        )
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return statistics.median(times)


def heaviest_imports(python: str, module: str, top: int = 8) -> list[tuple[str, float]]:
    """The modules under `module` with the largest cumulative import time
    (``python -X importtime``; the interpreter's own start-up, e.g. ``site``, is left out)."""
    out = subprocess.run(
        [python, "-X", "importtime", "-c", f"import {module}"],
        check=True,
        capture_output=True,
        text=True,
        env=child_env(),
    )
    rows = []
    for line in out.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = (p.strip() for p in line[len("import time:") :].split("|"))
        if name == module or name.startswith(module + "."):
            rows.append((name, int(cumulative) / 1e6))
    rows.sort(key=lambda r: -r[1])
    return rows[:top]


def cmd_import(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=_DOC_IMPORT.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args(argv)

    rows = []
    base = process_wall([sys.executable, "-c", "pass"], args.repeat)
    rows.append(["python -c pass", "–", fmt(base * 1000, 0)])
    rows.append(
        [
            "import rageval",
            fmt(in_process(sys.executable, "rageval", args.repeat) * 1000, 1),
            fmt(process_wall([sys.executable, "-c", "import rageval"], args.repeat) * 1000, 0),
        ]
    )
    script = shutil.which("rageval")
    help_cmd = [script, "--help"] if script else [sys.executable, "-m", "rageval", "--help"]
    rows.append(
        [
            " ".join(["rageval" if script else "python -m rageval", "--help"]),
            "–",
            fmt(process_wall(help_cmd, args.repeat) * 1000, 0),
        ]
    )
    if RAGAS_PYTHON.exists():
        rows.append(
            [
                "import ragas (its venv)",
                fmt(in_process(str(RAGAS_PYTHON), "ragas", max(3, args.repeat // 3)) * 1000, 0),
                fmt(
                    process_wall(
                        [str(RAGAS_PYTHON), "-c", "import ragas"], max(3, args.repeat // 3)
                    )
                    * 1000,
                    0,
                ),
            ]
        )
    print(markdown_table(["what", "import, in-process ms", "whole process ms"], rows))
    print("\nheaviest modules under `import rageval` (cumulative, -X importtime):")
    for name, seconds in heaviest_imports(sys.executable, "rageval"):
        print(f"- {name}: {seconds * 1000:.1f} ms")
    return 0


# ---------------------------------------------------------------------- rerun

_DOC_RERUN = """Re-running a finished evaluation: requests sent and time taken.

1. A first run scores ``--samples`` samples with the eight metrics against a 0 ms judge,
   writing its run directory and filling the request cache.
2. The same evaluation again in a new process and a new run directory: every judge and
   embedding request must be answered by the request cache.
3. ``resume`` of the finished run directory: nothing is left to do.
4. Steps 2 and 3 through the command line (``rageval evaluate``), timed as whole processes.

The server's counters show how many requests reached it in each step. With ``--profile FILE``
step 3 runs under cProfile (stats written to FILE) and its Python calls are printed: a count
that does not depend on the machine's load, to compare two versions of the code.

    python benchmarks/bench_scale.py rerun --samples 1000
    python benchmarks/bench_scale.py rerun --samples 1000 --profile /tmp/resume.prof
"""


def cli_run(args: list[str], cache_dir: str, base_url: str) -> float:
    """Wall time of ``rageval ARGS`` as a whole process (the judge key and the embeddings'
    endpoint come from the environment, as the CLI documents)."""
    env = child_env()
    env.update(RAGEVAL_CACHE_DIR=cache_dir, OPENAI_API_KEY="sk-bench", OPENAI_BASE_URL=base_url)
    # `python -m rageval` rather than the console script: it runs this tree's `src` (the
    # script would import whatever rageval is installed)
    cmd = [sys.executable, "-m", "rageval"]
    t = time.perf_counter()
    proc = subprocess.run([*cmd, *args], capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise RuntimeError(f"rageval {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return wall


def cmd_rerun(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=_DOC_RERUN.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--profile", default=None, help="cProfile the resume into this file")
    args = parser.parse_args(argv)

    data = write_jsonl(WORK / f"samples-{args.samples}-seed0.jsonl", args.samples)
    rows = []
    with JudgeServer(0) as server, Scratch() as scratch:
        cache = scratch / "cache"
        metrics = list(EIGHT)

        def api(label: str, run_dir: str, resume: bool = False) -> None:
            server.reset()
            t = time.perf_counter()
            result = run_driver(
                rageval_cmd(
                    server.base_url,
                    f"path:{data}",
                    metrics,
                    cache,
                    run_dir=scratch / run_dir,
                    resume=resume,
                    extra=["--profile", args.profile] if resume and args.profile else (),
                )
            )
            process = time.perf_counter() - t
            stats = server.stats()
            rows.append(
                [
                    label,
                    str(stats["chat_requests"]),
                    str(stats["embedding_requests"]),
                    fmt(result["wall_s"], 2),
                    fmt(process, 2),
                    str(result["usage"]["cache_hits"]),
                ]
            )
            print(f"{label}: {rows[-1]}", file=sys.stderr, flush=True)

        api("first run", "run1")
        api("same evaluation, new run dir (cache hits)", "run2")
        api("resume the finished run dir", "run1", resume=True)
        if args.profile:
            calls = pstats.Stats(args.profile).total_calls  # type: ignore[attr-defined]
            print(f"resume of the finished run dir: {calls:,} Python calls", file=sys.stderr)

        cli_common = [
            "evaluate",
            str(data),
            *[a for m in metrics for a in ("-m", m)],
            "--llm",
            "gpt-4o-mini",
            "--base-url",
            server.base_url,
            "--embeddings",
            "openai:text-embedding-3-small",
            "-q",
        ]
        for label, extra in (
            ("CLI: same evaluation, new run dir", ["-o", str(scratch / "cli")]),
            ("CLI: --resume the finished run dir", ["--resume", str(scratch / "run1")]),
        ):
            server.reset()
            wall = cli_run([*cli_common, *extra], str(cache), server.base_url)
            stats = server.stats()
            rows.append(
                [
                    label,
                    str(stats["chat_requests"]),
                    str(stats["embedding_requests"]),
                    "–",
                    fmt(wall, 2),
                    "–",
                ]
            )
            print(f"{label}: {rows[-1]}", file=sys.stderr, flush=True)

    print(
        markdown_table(
            [
                "step",
                "chat requests",
                "embedding requests",
                "evaluate() s",
                "whole process s",
                "cache hits",
            ],
            rows,
        )
    )
    return 0


# ---------------------------------------------------------------------- judge-cpu

_DOC_JUDGE_CPU = """Client CPU per judge request and per embeddings request, through rageval's own layers.

Each scenario sends ``--requests`` distinct requests, ``--concurrency`` at a time, to the
synthetic judge (``python -m rageval.testing.serve --handler synthetic_judge:handle``,
with this directory on the path) running in its **own process**, so that only the
client's work is billed: ``getrusage(RUSAGE_SELF)`` user+sys of this process (worker threads
included) over the sending loop, divided by the number of requests.

* ``floor``: the judge's request bodies sent by a bare ``AsyncOpenAI.post(...,
  cast_to=httpx.Response)`` and ``json.loads`` of the reply: the SDK transport the judge sits on;
* ``judge ask, cache off``: ``Judge.ask`` of a faithfulness verdict request (a real sample's
  contexts and statements, the per-statement-key verdict schema), no request cache;
* ``judge ask, cache on``: the same with the sqlite request cache in a fresh directory (every
  call is a miss, then a write);
* ``embeddings batch``: ``OpenAIEmbeddings.aembed_texts`` of 32 new texts per request,
  1536-dimensional vectors, no cache.

``--profile FILE`` writes a cProfile of the cache-off judge scenario (read it with
``python -m pstats FILE``). ``--src DIR`` measures the rageval source tree in ``DIR`` instead of
this checkout's ``src`` (e.g. an older version, for before/after numbers); the server always
runs from this checkout.

    python benchmarks/bench_scale.py judge-cpu --requests 2000
"""


EMBED_DIM = 1536
EMBED_BATCH = 32
MODEL = "gpt-4o-mini"
SCENARIOS = {
    "floor": "SDK post of the same bodies, no judge (the floor)",
    "off": "judge ask, cache off",
    "on": "judge ask, cache on (all misses)",
    "embeddings": f"embeddings batch ({EMBED_BATCH} x {EMBED_DIM})",
}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextmanager
def judge_server() -> Iterator[str]:
    """The synthetic judge in a child process; yields its base URL."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(HERE)])}
    env.pop("OPENAI_BASE_URL", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rageval.testing.serve",
            "--port",
            "0",
            "--handler",
            "synthetic_judge:handle",
            "--embed-dim",
            str(EMBED_DIM),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        if not base_url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"server did not start (got {base_url!r})")
        yield base_url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _faithfulness_call(index: int) -> tuple[list[dict[str, str]], Any, Any]:
    from rageval.metrics.faithfulness import Faithfulness

    sample = make_sample(index)
    statements = [s.strip() for s in sample["response"].split(". ") if s.strip()]
    request = Faithfulness().question(sample["retrieved_contexts"]).requests(statements)[0]
    # the rules are in the schema now: no separate check
    return request.messages, request.model, None


async def _measure(
    calls: list[Callable[[], Awaitable[Any]]],
    concurrency: int,
    warmup: int,
    profile: cProfile.Profile | None = None,
) -> tuple[float, float]:
    """(CPU ms per call, calls per second) over all but the first ``warmup`` calls."""
    slots = asyncio.Semaphore(concurrency)

    async def one(call: Callable[[], Awaitable[Any]]) -> None:
        async with slots:
            await call()

    await asyncio.gather(*(one(c) for c in calls[:warmup]))  # connections, probing, imports
    timed = calls[warmup:]
    if profile is not None:
        profile.enable()
    cpu0, wall0 = _cpu(), time.perf_counter()
    await asyncio.gather(*(one(c) for c in timed))
    cpu, wall = _cpu() - cpu0, time.perf_counter() - wall0
    if profile is not None:
        profile.disable()
    return cpu / len(timed) * 1000, len(timed) / wall


async def _judge_scenario(
    base_url: str,
    n: int,
    concurrency: int,
    cache: str | bool,
    warmup: int,
    profile: cProfile.Profile | None,
) -> tuple[float, float]:
    from rageval.judge import Judge

    judge = Judge(
        MODEL, base_url=base_url, api_key="sk-bench", cache=cache, max_concurrency=concurrency
    )
    requests = [_faithfulness_call(i) for i in range(n + warmup)]

    def call(messages: list[dict[str, str]], model: Any, check: Any) -> Callable[[], Any]:
        return lambda: judge.ask(messages, model, check=check)

    try:
        return await _measure([call(*r) for r in requests], concurrency, warmup, profile)
    finally:
        await judge.aclose()


async def _floor_scenario(
    base_url: str, n: int, concurrency: int, warmup: int
) -> tuple[float, float]:
    """The judge's request bodies sent by a bare SDK ``post``: the transport under the judge."""
    import openai

    try:  # openai >= 3 ships on httpx2, older releases on httpx
        import httpx2 as httpx
    except ImportError:
        import httpx  # type: ignore[no-redef]
    from rageval.judge._modes import build_request, shape_of

    try:
        from rageval._client._transport import plain_body
    except ImportError:  # a tree from before the client layer moved out of judge/ (--src)
        from rageval.judge._transport import plain_body  # type: ignore[no-redef]

    client = openai.AsyncOpenAI(base_url=base_url, api_key="sk-bench", max_retries=0)
    bodies = []
    for i in range(n + warmup):
        messages, model, _ = _faithfulness_call(i)
        messages, extra = build_request("json_schema", messages, shape_of(model))
        body = {"model": MODEL, "messages": messages, "temperature": 0.0, "max_tokens": 1024}
        bodies.append(plain_body({**body, **extra}))

    async def call(body: dict[str, Any]) -> None:
        reply = await client.post("/chat/completions", body=body, cast_to=httpx.Response)
        json.loads(json.loads(reply.content)["choices"][0]["message"]["content"])

    try:
        return await _measure([functools.partial(call, b) for b in bodies], concurrency, warmup)
    finally:
        await client.close()


async def _embeddings_scenario(
    base_url: str, n: int, concurrency: int, warmup: int
) -> tuple[float, float]:
    from rageval.embeddings.openai import OpenAIEmbeddings

    emb = OpenAIEmbeddings(
        "text-embedding-3-small",
        base_url=base_url,
        api_key="sk-bench",
        cache=False,
        cache_size=0,
        batch_size=EMBED_BATCH,
        max_concurrency=concurrency,
    )
    batches = [
        [f"text {b}-{j}: {make_sample(b)['retrieved_contexts'][j % 3]}" for j in range(EMBED_BATCH)]
        for b in range(n + warmup)
    ]

    async def call(texts: list[str]) -> None:
        vectors = await emb.aembed_texts(texts)
        assert vectors.shape == (EMBED_BATCH, EMBED_DIM)

    try:
        return await _measure([functools.partial(call, t) for t in batches], concurrency, warmup)
    finally:
        await emb.aclose()


def cmd_judge_cpu(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=_DOC_JUDGE_CPU.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--warmup", type=int, default=64)
    parser.add_argument("--embedding-requests", type=int, default=500)
    parser.add_argument("--only", choices=list(SCENARIOS), nargs="*")
    parser.add_argument("--profile", type=Path, help="cProfile of the cache-off judge scenario")
    parser.add_argument("--src", type=Path, default=ROOT / "src", help="rageval tree to measure")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.src.resolve()))
    import rageval

    print(f"measuring {Path(rageval.__file__).parent}", file=sys.stderr)
    rows: list[tuple[str, int, float, float]] = []
    profile = cProfile.Profile() if args.profile else None
    with judge_server() as base_url, tempfile.TemporaryDirectory() as tmp:
        n, c, w = args.requests, args.concurrency, args.warmup
        runs: dict[str, Callable[[], Coroutine[Any, Any, tuple[float, float]]]] = {
            "floor": lambda: _floor_scenario(base_url, n, c, w),
            "off": lambda: _judge_scenario(base_url, n, c, False, w, profile),
            "on": lambda: _judge_scenario(base_url, n, c, tmp, w, None),
            "embeddings": lambda: _embeddings_scenario(base_url, args.embedding_requests, c, w),
        }
        for key in args.only or SCENARIOS:
            count = args.embedding_requests if key == "embeddings" else n
            rows.append((SCENARIOS[key], count, *asyncio.run(runs[key]())))
            print(f"{rows[-1][0]}: {rows[-1][2]:.2f} ms", file=sys.stderr, flush=True)
    if profile is not None:
        profile.dump_stats(str(args.profile))
    print("| scenario | requests | client CPU ms/request | requests/s |")
    print("|---|---:|---:|---:|")
    for name, count, cpu_ms, rate in rows:
        print(f"| {name} | {count} | {cpu_ms:.2f} | {rate:.0f} |")
    return 0


# ---------------------------------------------------------------------- threads

_DOC_THREADS = """llama-server's speed by thread settings, on this (shared) machine: prompt and generated
tokens per second, as the server itself times them.

Each configuration is a server started by judge.py (its own ``--name``, 4 slots); the rounds
alternate between the configurations so that a change in the machine's load falls on all of
them. Every request sends the same ~400-token prompt with the prompt cache off
(``cache_prompt: false``) and generates exactly ``--tokens`` tokens (``ignore_eos``); each round
sends it once alone and once with ``n: 3`` (three sequences decoded together, as several slots
or answer_relevancy's three questions are: llama.cpp decodes a batch of more than one token on
the ``--threads-batch`` threads).

    python benchmarks/bench_scale.py threads --model smollm2 --rounds 5
    python benchmarks/bench_scale.py threads --model qwen1.5b --configs 1/2/0 2/2/50
"""

PROMPT = " ".join(
    f"Sentence {i}: the committee reviewed the report on river water quality and noted "
    "that the readings from the northern station were within the expected range."
    for i in range(16)
)


def post(base_url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=600) as response:
        reply: dict[str, Any] = json.loads(response.read())
    return reply


def judge_tool(*args: str) -> str:
    return subprocess.run(
        [sys.executable, str(HERE / "real_judge" / "judge.py"), *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def cmd_threads(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=_DOC_THREADS.splitlines()[0])
    parser.add_argument("--model", default="smollm2")
    parser.add_argument(
        "--configs",
        nargs="+",
        default=["1/1/0", "1/2/0", "2/2/0", "2/2/50"],
        help="THREADS/THREADS_BATCH/POLL each",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=48)
    opts = parser.parse_args(argv)
    urls: dict[str, str] = {}
    seen: dict[str, dict[str, list[float]]] = {
        c: {"prompt": [], "gen": [], "gen3": []} for c in opts.configs
    }
    loads: list[float] = []
    try:
        for config in opts.configs:
            threads, batch, poll = config.split("/")
            urls[config] = judge_tool(
                "start", "--name", f"threads-{config.replace('/', '-')}", "--model", opts.model,
                "--threads", threads, "--threads-batch", batch, "--poll", poll, "--parallel", "4",
            )  # fmt: skip
        for _ in range(opts.rounds):
            for config, url in urls.items():
                loads.append(os.getloadavg()[0])
                body = {
                    "model": opts.model,
                    "messages": [{"role": "user", "content": PROMPT}],
                    "max_tokens": opts.tokens,
                    "temperature": 0,
                    "ignore_eos": True,
                    "cache_prompt": False,
                }
                timings = post(url, body)["timings"]
                seen[config]["prompt"].append(timings["prompt_per_second"])
                seen[config]["gen"].append(timings["predicted_per_second"])
                # three sequences: tokens generated by all three per second of decoding
                timings = post(url, {**body, "n": 3, "temperature": 1.0})["timings"]
                seen[config]["gen3"].append(3 * timings["predicted_per_second"])
    finally:
        for config in urls:
            judge_tool("stop", "--name", f"threads-{config.replace('/', '-')}")
    print(f"model {opts.model}, {opts.rounds} rounds, 1-min load average during the runs: "
          f"{min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} cores")  # fmt: skip
    print(
        "| threads / threads-batch / poll | prompt tok/s (median, min–max) | generated tok/s, "
        "one sequence | generated tok/s, three sequences together |"
    )
    print("|---|---|---|---|")
    for config, values in seen.items():
        cells = [
            f"{statistics.median(v):.1f} ({min(v):.1f}–{max(v):.1f})"
            for v in (values["prompt"], values["gen"], values["gen3"])
        ]
        print(f"| {config} | {' | '.join(cells)} |")
    return 0


COMMANDS = {
    "scale": (cmd_scale, _DOC_SCALE),
    "import": (cmd_import, _DOC_IMPORT),
    "rerun": (cmd_rerun, _DOC_RERUN),
    "judge-cpu": (cmd_judge_cpu, _DOC_JUDGE_CPU),
    "threads": (cmd_threads, _DOC_THREADS),
}


def main(argv: list[str] | None = None) -> int:
    return run_subcommand(COMMANDS, __doc__, argv)


if __name__ == "__main__":
    sys.exit(main())
