"""The benchmark's judge: ``FakeOpenAI`` with a judge, in its own process, counting.

Run by the benchmark scripts (never in the evaluating process, so the server's CPU is not
billed to the tool under test)::

    python benchmarks/judge_server.py --latency-ms 300
    python benchmarks/judge_server.py --judge random --fault-rate 0.3

``--judge synthetic`` (default) answers rageval's and ragas' prompts plausibly
(``synthetic_judge.py``, next to this script); ``--judge random`` answers at random within the JSON
schema of each request and ignores the prose (``rageval.testing.RandomJudge``: a
constrained-decoding server in front of a model that reads only the schema); ``--judge
garbage`` never answers JSON. ``--fault-rate R`` replaces a fraction R of the chat requests with
one of 429 (retry-after 0), 500, 503, a garbage 200, a truncated 200 and a dropped connection.

prints the base URL on its first stdout line, then reads one command per stdin line and answers
each with one JSON line:

``stats``   counters since the last ``reset`` (see ``Counters``)
``reset``   zero the counters and forget the server's recorded requests
``timeline`` [start, end, path] of each request since the last reset (``time.monotonic()``)
``quit``    stop

Token counts use the same estimate as ``FakeOpenAI``'s ``usage`` block: ceil(characters / 4),
for the message contents (``prompt_tokens``), for the structured-output schema the client sent
in ``response_format``/``tools`` (``schema_tokens``: a real API bills those as prompt tokens too),
and for the reply text (``completion_tokens``, times ``n`` choices).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import sys
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import synthetic_judge  # next to this script, on the path when it runs
from rageval.testing import (
    FakeOpenAI,
    Fault,
    FaultPlan,
    GarbageJudge,
    RandomJudge,
    RecordedRequest,
    Reply,
    hash_embedding,
)

#: the faults a --fault-rate injects, equally likely
FAULTS = (
    Fault.rate_limit(0.0),
    Fault.status(500),
    Fault.status(503),
    Fault.garbage(),
    Fault.truncated(),
    Fault.drop(),
)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _tokens(chars: int) -> int:
    return max(1, math.ceil(chars / 4))


@dataclass
class Counters:
    chat_requests: int = 0
    prompt_tokens: int = 0
    schema_tokens: int = 0
    completion_tokens: int = 0
    #: requests that asked for n > 1 choices, and the choices they asked for in all
    multi_choice_requests: int = 0
    multi_choices: int = 0
    embedding_texts: int = 0
    embedding_requests: int = 0
    max_in_flight: int = 0
    #: CPU (user+sys) of this server process: shows whether the fake judge kept up
    server_cpu_s: float = 0.0
    handler_errors: int = 0
    #: every chat request the server received, those answered by an injected fault included
    all_chat_requests: int = 0
    faults_injected: int = 0
    #: requests per prompt kind the synthetic judge recognised (``ragas:fix_output`` = retries)
    kinds: Counter[str] = field(default_factory=Counter)
    #: the same, for the requests that asked for n > 1 choices
    multi_choice_kinds: Counter[str] = field(default_factory=Counter)


class CountingJudge:
    """A judge (synthetic, random or garbage), plus the counts a benchmark reports."""

    def __init__(self, embed_dim: int, judge: str = "synthetic", seed: int = 0) -> None:
        self.embed_dim = embed_dim
        self.answer: Callable[[str, RecordedRequest], Reply] = synthetic_judge.answer
        if judge == "random":
            random_judge = RandomJudge(seed)
            self.answer = lambda kind, req: random_judge(req)
        elif judge == "garbage":
            garbage = GarbageJudge()
            self.answer = lambda kind, req: garbage(req)
        self.counters = Counters()
        self.cpu_at_reset = _cpu()
        self.lock = threading.Lock()

    def handle(self, req: RecordedRequest) -> Reply:
        kind = synthetic_judge.classify(req)
        try:
            reply = self.answer(kind, req)
        except Exception:
            with self.lock:
                self.counters.handler_errors += 1
            raise
        parts = reply.value if reply.kind == "choices" else (reply,)
        text = "".join(
            p.value if isinstance(p.value, str) else json.dumps(p.value, ensure_ascii=False)
            for p in parts
        )
        structured = req.body.get("tools") or req.body.get("response_format")
        n = req.body.get("n")
        choices = n if isinstance(n, int) and n > 0 else 1
        with self.lock:
            c = self.counters
            c.chat_requests += 1
            c.prompt_tokens += _tokens(req.prompt_chars)
            if structured:
                c.schema_tokens += _tokens(len(json.dumps(structured)))
            c.completion_tokens += _tokens(len(text)) * (1 if reply.kind == "choices" else choices)
            c.kinds[kind] += 1
            if choices > 1:
                c.multi_choice_requests += 1
                c.multi_choices += choices
                c.multi_choice_kinds[kind] += 1
        return reply

    def embed(self, text: str) -> list[float]:
        with self.lock:
            self.counters.embedding_texts += 1
        return hash_embedding(text, self.embed_dim)


def _forget_periodically(server: FakeOpenAI, seconds: float) -> None:
    def loop() -> None:
        while not stop.wait(seconds):
            server.reset()

    stop = threading.Event()
    threading.Thread(target=loop, name="forget-records", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="FakeOpenAI + synthetic judge, with counters")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--embed-dim", type=int, default=384)
    parser.add_argument(
        "--forget-every",
        type=float,
        default=0.0,
        help="forget recorded request bodies every SECONDS (long runs: bounds the server's "
        "memory, but embedding_requests and max_in_flight are then not counted)",
    )
    parser.add_argument("--judge", choices=("synthetic", "random", "garbage"), default="synthetic")
    parser.add_argument("--judge-seed", type=int, default=0)
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument("--fault-seed", type=int, default=0)
    parser.add_argument(
        "--port", type=int, default=0,
        help="listen here (default: a free port); a restarted judge on the port of the one "
        "before keeps the URL, and the URL is part of every request's cache key",
    )  # fmt: skip
    args = parser.parse_args(argv)

    judge = CountingJudge(args.embed_dim, args.judge, args.judge_seed)
    faults = FaultPlan(args.fault_rate, FAULTS, args.fault_seed) if args.fault_rate else None
    server = FakeOpenAI(
        judge.handle, latency=args.latency_ms / 1000, embedder=judge.embed, faults=faults,
        port=args.port,
    )  # fmt: skip
    with server:
        if args.forget_every > 0:
            _forget_periodically(server, args.forget_every)
        print(server.base_url, flush=True)
        for line in sys.stdin:
            command = line.strip()
            if command == "quit":
                break
            if command == "timeline":
                spans = [[r.started, r.finished, r.path] for r in server.requests]
                print(json.dumps(spans), flush=True)
                continue
            if command not in ("stats", "reset"):
                print(json.dumps({"error": f"unknown command {command!r}"}), flush=True)
                continue
            embedding_requests = len(server.embedding_requests)
            with judge.lock:
                judge.counters.embedding_requests = embedding_requests
                judge.counters.all_chat_requests = len(server.chat_requests)
                judge.counters.faults_injected = len(faults.injected) if faults else 0
                judge.counters.max_in_flight = server.max_in_flight
                judge.counters.server_cpu_s = _cpu() - judge.cpu_at_reset
                # asdict() would rebuild the Counter from (key, value) pairs: copy it by hand
                c = judge.counters
                out: dict[str, Any] = {
                    **asdict(replace(c, kinds=Counter(), multi_choice_kinds=Counter())),
                    "kinds": dict(c.kinds),
                    "multi_choice_kinds": dict(c.multi_choice_kinds),
                }
                if command == "reset":
                    judge.counters = Counters()
                    judge.cpu_at_reset = _cpu()
            if command == "reset":
                server.reset()  # (the fault plan's draws start over too)
            print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
