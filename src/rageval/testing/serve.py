"""The test server as a process of its own, for benchmarks and for other languages' tests::

    python -m rageval.testing.serve --port 0 --latency-ms 300 --handler MODULE:FUNC
    python -m rageval.testing.serve --judge random --fault-rate 0.3

prints its base URL on the first line of stdout and serves until SIGTERM or Ctrl-C. A handler
loaded with ``--handler`` imports :mod:`rageval.testing.server` as this module does, so the two
share one set of ``Reply``/``Fault`` classes.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import signal
import sys
import threading
from collections.abc import Sequence

from rageval.testing.random_judge import GarbageJudge, RandomJudge
from rageval.testing.records import Fault, FaultPlan, Handler
from rageval.testing.server import FakeOpenAI


def _parse_fault(spec: str) -> Fault:
    name, _, arg = spec.partition(":")
    if name == "rate_limit":
        return Fault.rate_limit(float(arg) if arg else 1.0)
    if name == "status":
        return Fault.status(int(arg))
    if name == "timeout":
        return Fault.timeout(float(arg))
    if name == "truncated":
        return Fault.truncated()
    if name == "garbage":
        return Fault.garbage()
    if name in ("drop", "malformed_http"):
        return Fault.drop() if name == "drop" else Fault.malformed_http()
    raise argparse.ArgumentTypeError(f"unknown fault {spec!r}")


def _load_handler(spec: str) -> Handler:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise argparse.ArgumentTypeError("--handler must look like MODULE:FUNC")
    handler = getattr(importlib.import_module(module_name), attr)
    if not callable(handler):
        raise argparse.ArgumentTypeError(f"{spec} is not callable")
    return handler  # type: ignore[no-any-return]


#: the faults --fault-rate draws from when --faults is not given: each kind a client meets
_FAULT_MIX = "rate_limit:0.01,status:500,status:503,drop,malformed_http,truncated,garbage"


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rageval.testing.serve",
        description="Run the rageval fake OpenAI server; prints its base URL on the first line.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--handler", type=_load_handler, default=None, help="MODULE:FUNC")
    parser.add_argument(
        "--judge",
        choices=("default", "random", "garbage"),
        default="default",
        help="random: random replies valid under each request's JSON schema, ignoring the "
        "prompt's prose (seeded by --judge-seed); garbage: prose instead of JSON, always; "
        "default: a minimal schema-valid reply (ignored when --handler is given)",
    )
    parser.add_argument("--judge-seed", type=int, default=0)
    parser.add_argument(
        "--context-window", type=int, default=None, help="tokens; longer requests get a 400"
    )
    parser.add_argument("--embed-dim", type=int, default=8)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--models", type=_csv, default=None, help="comma-separated allow-list")
    parser.add_argument("--supports", type=_csv, default=["json_schema", "tools", "json"])
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument(
        "--faults",
        type=lambda v: [_parse_fault(s) for s in _csv(v)],
        default=[],
        help="comma-separated: rate_limit[:SECONDS], status:CODE, timeout:SECONDS, drop, "
        f"malformed_http, truncated, garbage (default with --fault-rate: {_FAULT_MIX})",
    )
    parser.add_argument("--fault-seed", type=int, default=0)
    parser.add_argument(
        "--batch-delay", type=float, default=0.0, help="seconds a batch is in progress"
    )
    parser.add_argument(
        "--no-prompt-cache", action="store_true", help="report no cached prompt tokens"
    )
    args = parser.parse_args(argv)
    faults = args.faults or [_parse_fault(f) for f in _csv(_FAULT_MIX)]
    try:
        plan = FaultPlan(args.fault_rate, faults, args.fault_seed) if args.fault_rate else None
    except ValueError as e:
        parser.error(f"--fault-rate: {e}")
    handler = args.handler
    if handler is None and args.judge != "default":
        handler = RandomJudge(args.judge_seed) if args.judge == "random" else GarbageJudge()
    server = FakeOpenAI(
        handler,
        latency=args.latency_ms / 1000,
        embed_dim=args.embed_dim,
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        models=args.models,
        supports=args.supports,
        faults=plan,
        keep_records=False,
        context_window=args.context_window,
        prompt_cache=not args.no_prompt_cache,
        batch_delay=args.batch_delay,
    )
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    with server:
        print(server.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            stopping.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
