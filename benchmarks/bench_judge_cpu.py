"""Client CPU per judge request and per embeddings request, through rageval's own layers.

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

    python benchmarks/bench_judge_cpu.py --requests 2000
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import functools
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from synthetic_data import make_sample  # noqa: E402

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
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


if __name__ == "__main__":
    sys.exit(main())
