"""Cost control against the test server: the dry run's estimate, the budget, and batch mode.

Every run is the CLI (``python -m rageval evaluate``) in its own process, on the synthetic
benchmark's samples and the eight metrics, against ``FakeOpenAI`` on 127.0.0.1 in this process
(so its counters -- every HTTP request, every upload to its Batch API -- are read directly)::

    python benchmarks/bench_cost.py estimate --samples 200 --judge synthetic
    python benchmarks/bench_cost.py estimate --samples 200 --judge random
    python benchmarks/bench_cost.py estimate --samples 200 --judge random --fault-rate 0.1
    python benchmarks/bench_cost.py budget --samples 200 --fraction 0.33
    python benchmarks/bench_cost.py batch --samples 200 [--judge random]

``estimate``: ``--dry-run --json`` (the HTTP requests the server saw during it must be 0), then
the real run; the estimate's requests and prompt tokens against the run's (``summary.json``).

``budget``: an uninterrupted run gives the whole cost; a run with ``--max-cost`` = fraction x
that must exit 5 with the spending at most the budget and less than one request's worst case
below it; ``--resume`` (no budget) then finishes, and its results equal the uninterrupted run's.

``batch``: an online run and a ``--batch`` run (the same judge): the same value and status
in every cell, every row once in ``results.jsonl``, the batches made; then a batch run killed
with SIGKILL while its first batch is in flight, and ``--resume``: exit 0, no request body
uploaded twice, the same results again.

The test server counts tokens as ceil(characters / 4), the same approximation the estimate
uses when no tokenizer of the model is known offline, so the estimate's prompt-token error
measured here is that of its request plan and its predictions (statements, replies), not
that of a tokenizer (``bench_tokens.py`` measures that; a ``TIKTOKEN_CACHE_DIR`` holding
gpt-4o-mini's vocabulary makes the dry run count with it, and then this comparison is off).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import EIGHT, child_env, load_average  # noqa: E402
from synthetic_data import iter_samples  # noqa: E402

if TYPE_CHECKING:
    from rageval.testing import RecordedRequest

MODEL = "gpt-4o-mini"


def rageval(args: list[str], server_url: str) -> subprocess.Popen[str]:
    env = {**child_env(), "OPENAI_API_KEY": "sk-fake-test-key"}
    cmd = [sys.executable, "-m", "rageval", "evaluate", *args]
    if "--resume" not in args:
        cmd += ["--llm", MODEL, "--base-url", server_url, "--embeddings", "local"]
    # the dry run as a user runs it (it sends nothing, the endpoint check included)
    quiet = ["--no-cache", "-q"] if "--dry-run" in args else ["--no-cache", "--no-probe", "-q"]
    return subprocess.Popen(
        [*cmd, *quiet],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str], timeout: float = 1800) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def metric_args() -> list[str]:
    return [a for m in EIGHT for a in ("-m", m)]


def cells(run: Path) -> dict[str, dict[str, tuple[str, float | None]]]:
    """sample id -> metric -> (status, value), from results.jsonl (every row must be once)."""
    from rageval.log import read_lines

    found: dict[str, dict[str, tuple[str, float | None]]] = {}
    for entry in read_lines(run / "results.jsonl"):
        line = entry.line
        assert line.id not in found, f"row {line.id} twice in {run}"
        found[line.id] = {m: (c.status, c.value) for m, c in line.cells.items()}
    return found


def usage(run: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((run / "summary.json").read_text())
    return dict(summary["usage"])


def handler(judge: str) -> Any:
    from rageval.testing import RandomJudge
    from synthetic_judge import handle

    return RandomJudge(7) if judge == "random" else handle


def write_data(path: Path, n: int) -> None:
    with path.open("w") as fh:
        for row in iter_samples(n):
            fh.write(json.dumps(row) + "\n")


# ------------------------------------------------------------------------------ estimate
def bench_estimate(work: Path, samples: int, judge: str, fault_rate: float) -> None:
    from rageval.testing import FakeOpenAI, Fault, FaultPlan

    data = work / "data.jsonl"
    write_data(data, samples)
    # transient errors (retried) and replies that fail validation (re-asked), as judge_server.py
    faults = [
        Fault.rate_limit(0.0),
        Fault.status(500),
        Fault.status(503),
        Fault.garbage(),
        Fault.truncated(),
    ]
    plan = FaultPlan(fault_rate, faults, seed=3) if fault_rate else None
    with FakeOpenAI(handler(judge), faults=plan) as server:
        proc = rageval([str(data), *metric_args(), "--dry-run", "--json"], server.base_url)
        code, out, err = finish(proc)
        assert code == 0, err
        sent_by_dry_run = len(server.requests)
        est = json.loads(out)
        run = work / "run"
        code, _, err = finish(rageval([str(data), *metric_args(), "-o", str(run)], server.base_url))
        assert code == 0, err
        chat = len(server.chat_requests)
    real = usage(run)
    print(
        f"judge {judge}, faults in {fault_rate:.0%} of the requests, {samples} samples x 8 "
        f"metrics, load {load_average():.2f}"
    )
    print(f"- HTTP requests during --dry-run: {sent_by_dry_run}")
    for key, actual in (("requests", real["requests"]), ("prompt_tokens", real["prompt_tokens"])):
        r = est[key]
        err_pct = 100 * (r["estimate"] - actual) / actual
        inside = r["low"] <= actual <= r["high"]
        print(
            f"- {key}: estimate {r['estimate']:.0f} (range {r['low']:.0f}-{r['high']:.0f}), "
            f"real {actual} -> {err_pct:+.1f}% ({'inside' if inside else 'OUTSIDE'} the range)"
        )
    c = est["completion_tokens"]
    print(
        f"- completion_tokens: estimate {c['estimate']:.0f} (range {c['low']:.0f}-"
        f"{c['high']:.0f}), real {real['completion_tokens']}"
    )
    print(f"- chat requests the server answered in the real run: {chat}")
    for name, part in sorted(est["metrics"].items()):
        print(
            f"  - {name}: requests {part['requests']['estimate']:.0f}, prompt tokens "
            f"{part['prompt_tokens']['estimate']:.0f}"
        )


# ------------------------------------------------------------------------------ budget
def worst_case(request: RecordedRequest, input_price: float, output_price: float) -> float:
    """The most one request could cost: all it sent at 4 characters per token (plus 4 per
    message) and its whole reply budget for each of its ``n`` generations (what the budget
    reserves for it)."""
    sent = request.prompt_chars + len(request.schema_text)
    prompt = math.ceil(sent / 4) + 4 * len(request.messages)
    replies = int(request.body.get("max_tokens") or 0) * int(request.body.get("n") or 1)
    return prompt * input_price + replies * output_price


def bench_budget(work: Path, samples: int, fraction: float) -> None:
    from rageval.judge import DEFAULT_PRICES
    from rageval.testing import FakeOpenAI
    from synthetic_judge import handle

    price = DEFAULT_PRICES.get(MODEL)
    assert price is not None
    data = work / "data.jsonl"
    write_data(data, samples)
    whole_run, stopped_run = work / "whole", work / "stopped"
    with FakeOpenAI(handle) as server:
        code, _, err = finish(
            rageval([str(data), *metric_args(), "-o", str(whole_run)], server.base_url)
        )
        assert code == 0, err
        whole = usage(whole_run)
        budget = whole["cost_usd"] * fraction
        server.reset()
        proc = rageval(
            [str(data), *metric_args(), "-o", str(stopped_run), "--max-cost", f"{budget:.6f}"],
            server.base_url,
        )
        code, _, err = finish(proc)
        assert code == 5, (code, err)
        sent = server.chat_requests
        # the CLI's own message: "stopped at the budget: $X spent of --max-cost $Y ..."
        spent = float(err.split("stopped at the budget: $", 1)[1].split(" ", 1)[0])
        budget_cli = float(err.split("--max-cost $", 1)[1].split(" ", 1)[0])
        rates = (price.input / 1e6, price.output / 1e6)
        largest = max(worst_case(r, *rates) for r in sent)
        mean_actual = whole["cost_usd"] / whole["requests"]
        finished = len(cells(stopped_run))
        code, _, err = finish(rageval(["--resume", str(stopped_run)], server.base_url))
        assert code == 0, err
    same = cells(stopped_run) == cells(whole_run)
    print(f"{samples} samples x 8 metrics, scripted judge, load {load_average():.2f}")
    print(f"- uninterrupted run: ${whole['cost_usd']:.6f}, {whole['requests']} requests")
    print(
        f"- --max-cost {budget_cli:.6f} ({fraction:.0%}): exit 5, spent ${spent:.6f} = "
        f"{100 * spent / budget_cli:.2f}% of the budget; {finished} of {samples} rows kept"
    )
    print(
        f"- budget - spent = ${budget_cli - spent:.7f}; largest request's worst case "
        f"${largest:.7f}; mean request ${mean_actual:.7f} -> within one request: "
        f"{0 <= budget_cli - spent < largest}"
    )
    print(f"- --resume: exit 0; union equals the uninterrupted run cell for cell: {same}")


# ------------------------------------------------------------------------------ batch
def bench_batch(work: Path, samples: int, judge: str) -> None:
    from rageval.log import read_batch_events
    from rageval.testing import FakeOpenAI

    data = work / "data.jsonl"
    write_data(data, samples)
    config = work / "rageval.toml"
    config.write_text("batch = { poll_interval = 0.05, settle = 0.2 }\n")
    online_run, batch_run, killed_run = work / "online", work / "batch", work / "killed"
    # each run against a fresh server: the random judge draws anew for a request it saw
    # before at a temperature above 0 (answer_relevancy's generations), as a model would
    with FakeOpenAI(handler(judge)) as server:
        t0 = time.monotonic()
        code, _, err = finish(
            rageval([str(data), *metric_args(), "-o", str(online_run)], server.base_url)
        )
        online_s = time.monotonic() - t0
        assert code == 0, err
    with FakeOpenAI(handler(judge)) as server:
        t0 = time.monotonic()
        code, _, err = finish(
            rageval(
                [str(data), *metric_args(), "-o", str(batch_run), "--config", str(config)],
                server.base_url,
            )
        )
        batch_s = time.monotonic() - t0
        assert code == 0, err
        batches = server.batch_api.batches
        chat_during_batch = len(server.chat_requests)
    online, batched = cells(online_run), cells(batch_run)
    differ = [
        (sid, m)
        for sid, row in online.items()
        for m, cell in row.items()
        if batched[sid][m] != cell
    ]
    ou, bu = usage(online_run), usage(batch_run)
    print(f"{samples} samples x 8 metrics, judge {judge}, load {load_average():.2f}")
    print(
        f"- online: {ou['requests']} requests, ${ou['cost_usd']:.6f}, {online_s:.1f} s; "
        f"batch: {bu['requests']} requests in {len(batches)} batches "
        f"({', '.join(str(b['request_counts']['total']) for b in batches)} lines), "
        f"${bu['cost_usd']:.6f} ({bu['cost_usd'] / ou['cost_usd']:.3f} of online), "
        f"{batch_s:.1f} s; chat requests online during the batch run: {chat_during_batch}"
    )
    print(
        f"- rows: online {len(online)}, batch {len(batched)} (each once); cells that differ: "
        f"{len(differ)} of {sum(len(r) for r in online.values())}"
    )

    with FakeOpenAI(handler(judge), batch_delay=3.0) as server:
        first = rageval(
            [str(data), *metric_args(), "-o", str(killed_run), "--config", str(config)],
            server.base_url,
        )
        deadline = time.monotonic() + 600
        while not any(e.event == "created" for e in read_batch_events(killed_run)):
            assert first.poll() is None, first.communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.02)
        os.kill(first.pid, signal.SIGKILL)
        first.communicate()
        in_flight = [b["status"] for b in server.batch_api.batches]
        uploads_before = len(server.batch_api.uploads)
        code, _, err = finish(rageval(["--resume", str(killed_run)], server.base_url))
        assert code == 0, err
        bodies = Counter(
            json.dumps(json.loads(line)["body"], sort_keys=True)
            for upload in server.batch_api.uploads
            for line in upload.decode().splitlines()
        )
        total_batches = len(server.batch_api.batches)
    resumed = cells(killed_run)
    print(
        f"- kill -9 with the first batch {in_flight} (uploads so far: {uploads_before}); "
        f"--resume: exit 0, {total_batches} batches in all, {sum(bodies.values())} lines "
        f"uploaded, most uploads of one request body: {max(bodies.values())}; rows "
        f"{len(resumed)}, results equal the online run's: {resumed == online}"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("part", choices=("estimate", "budget", "batch"))
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--judge", choices=("synthetic", "random"), default="synthetic")
    parser.add_argument("--fraction", type=float, default=0.33)
    parser.add_argument("--fault-rate", type=float, default=0.0, help="estimate: faults")
    args = parser.parse_args()
    os.environ["HF_HUB_OFFLINE"] = "1"
    with tempfile.TemporaryDirectory(prefix="rageval-cost-") as tmp:
        work = Path(tmp)
        if args.part == "estimate":
            bench_estimate(work, args.samples, args.judge, args.fault_rate)
        elif args.part == "budget":
            bench_budget(work, args.samples, args.fraction)
        else:
            bench_batch(work, args.samples, args.judge)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
