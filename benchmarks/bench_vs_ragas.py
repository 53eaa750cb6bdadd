"""rageval vs ragas 0.4.3 on the same synthetic samples, against the same fake judge.

Each (metric set, tool) run is a fresh driver process (so CPU and peak RSS are that run's
alone) against one judge server process with the injected latency; the server's counters are
reset before and read after each run. The two tools alternate which goes first.

    python benchmarks/bench_vs_ragas.py --samples 200 --latency-ms 0 --sets each all
    python benchmarks/bench_vs_ragas.py --samples 100 --latency-ms 300 --sets all
    python benchmarks/bench_vs_ragas.py --judge random --fault-rate 0.3 --tools rageval

``--judge random`` is a judge that answers at random within each request's JSON schema and
ignores the prompt's prose; ``--fault-rate`` injects transport and content faults (see
``judge_server.py``).

Writes the raw rows as JSON (``--json``) and prints markdown tables.

``--real-judge MODEL`` compares the two on a real model instead: llama.cpp's llama-server
(``real_judge/judge.py``, started as ``--name bench-vs-ragas`` for each run and stopped after
it, so no run finds another's prompts in the server's cache) behind ``metered_proxy.py``, which
adds up the server's own report of every completion. Each of the eight metrics runs alone, once
per tool (``--sets each``, the default), or the eight together in one evaluation per tool
(``--sets all``: the way a user scores a dataset; requests of different metrics for one row can
then share what their prompts begin with): rageval with its defaults (the endpoint check
on, so it sends as many requests at once as the server has slots, 600 s per attempt), rageval
with ``reasons`` off (only the metrics that have the switch and write reasons by default:
faithfulness, answer_correctness, context_precision and context_recall; the others are the
defaults' run) and ragas with its own
prompts and retries, given the same requests at once, 600 s and a reply cap (``--reply-cap``,
default 1,024 tokens: rageval's smallest reply budget). Both embed with the same
all-MiniLM-L6-v2 (ragas through the proxy's ``/v1/embeddings``). Per metric and in total: cells
with a value (ragas: its NaN), chat requests, prompt tokens (and how many the server's prompt
cache served), generated tokens, the server's seconds (``timings.prompt_ms + predicted_ms``)
and wall time, per sample::

    python benchmarks/bench_vs_ragas.py --real-judge smollm2 --samples 3 \
        --json out.json --markdown out.md

``--from-json A.json B.json --price`` prices two sessions' real-judge files at the first's
per-token server times, which the machine's load does not move.

``--skip K`` scores only the rows after the first K of the ``--samples`` (the data of seed S is
the same rows in the same order whatever their number): a long measurement split over
sessions or servers, each part's rows disjoint from the others'.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _harness import (
    EIGHT,
    HERE,
    WORK,
    JudgeServer,
    MeteredProxy,
    Row,
    Scratch,
    ensure_ragas_venv,
    fmt,
    load_average,
    markdown_table,
    ragas_cmd,
    rageval_cmd,
    run_driver,
)
from synthetic_data import write_jsonl


def run_one(tool: str, server: JudgeServer, data: Path, metrics: list[str], samples: int) -> Row:
    server.reset()
    load = load_average()
    with Scratch() as scratch:
        if tool == "ragas":
            cmd = ragas_cmd(server.base_url, str(data), metrics)
        else:
            cmd = rageval_cmd(
                server.base_url, str(data), metrics, scratch / "cache", run_dir=scratch / "run"
            )
        result = run_driver(cmd)
    stats = server.stats()
    scores = result["scores"]
    if tool == "ragas":
        stats["ragas_stderr_lines"] = result["stderr_lines"]
    else:  # NaN or infinity among the values, or anywhere in results.jsonl / summary.json
        stats["non_finite"] = result["non_finite"]
    return Row(
        tool,
        "+".join(metrics) if len(metrics) < 8 else "all eight",
        samples,
        server.latency_ms,
        result["wall_s"],
        result["cpu_s"],
        result["maxrss_mb"],
        stats,
        scores,
        load,
    )


def median_row(rows: list[Row]) -> Row:
    ordered = sorted(rows, key=lambda r: r.wall_s)
    return ordered[len(ordered) // 2]


def table(pairs: list[tuple[str, dict[str, Row]]], latency_ms: float) -> str:
    header = [
        "metrics",
        "tool",
        "samples/s",
        "wall s",
        "req/sample",
        "prompt tok/sample",
        "+schema tok/sample",
        "completion tok/sample",
        "client CPU ms/req",
        "CPU ms/HTTP req",
        "peak RSS MB",
        "no value",
        "measured %",
        "speed vs ragas",
    ]
    if latency_ms:
        header += ["latency limit s", "wall / limit"]
    body = []
    for name, by_tool in pairs:
        base = by_tool.get("ragas")
        for tool in ("rageval", "ragas"):
            r = by_tool.get(tool)
            if r is None:
                continue
            ratio = r.samples_per_s / base.samples_per_s if base is not None else None
            row = [
                name,
                tool,
                fmt(r.samples_per_s),
                fmt(r.wall_s, 2),
                fmt(r.per_sample("chat_requests"), 2),
                fmt(r.per_sample("prompt_tokens"), 0),
                fmt(r.per_sample("schema_tokens"), 0),
                fmt(r.per_sample("completion_tokens"), 0),
                fmt(r.cpu_ms_per_request, 2),
                fmt(r.cpu_ms_per_http_request, 2),
                fmt(r.maxrss_mb, 0),
                str(r.unmeasured),
                f"{100 * r.measured_share:.1f}",
                f"{ratio:.2f}×" if tool == "rageval" and ratio else "",
            ]
            if latency_ms:
                row += [fmt(r.latency_limit_s, 2), fmt(r.wall_s / r.latency_limit_s, 3)]
            body.append(row)
    return markdown_table(header, body)


def render_saved(paths: list[Path]) -> int:
    grouped: dict[tuple[float, str], dict[str, list[Row]]] = {}
    for path in paths:
        saved = json.loads(path.read_text())
        if isinstance(saved, dict) and "real_judge" in saved:
            runs = [RealRun(**run) for run in saved["runs"]]
            print(real_report(saved["real_judge"], runs))
            continue
        for obj in saved:
            row = Row(**obj)
            grouped.setdefault((row.latency_ms, row.metrics), {}).setdefault(row.tool, [])
            grouped[(row.latency_ms, row.metrics)][row.tool].append(row)
    for latency in sorted({k[0] for k in grouped}):
        pairs = [
            (name, {t: median_row(rs) for t, rs in by_tool.items()})
            for (lat, name), by_tool in grouped.items()
            if lat == latency
        ]
        print(f"\n### judge latency {latency:g} ms\n")
        print(table(pairs, latency))
    return 0


# ---- on a real judge: llama-server behind the metering proxy ------------------------------

#: the llama-server this comparison starts and stops, apart from any other (CI's, the user's);
#: ``--server-name`` gives two comparisons running at once a server each
SERVER_NAME = "bench-vs-ragas"
#: seconds per request attempt, both tools: what rageval allows a slow local judge by default
ATTEMPT_TIMEOUT_S = 600
#: ragas' reply cap by default: rageval's smallest reply budget (``Judge(max_tokens=1024)``).
#: Without one (ChatOpenAI's default) llama-server lets a model that does not stop write until
#: its context is full: minutes per request
REPLY_CAP = 1024
RAGEVAL_DEFAULTS = "rageval, defaults"
REASONS_OFF = "rageval, reasons off"
RAGAS = "ragas"
#: the "metric" of a run that scores the eight metrics together, as one evaluation per tool
TOGETHER = "all eight together"


@contextmanager
def llama_server(args: argparse.Namespace) -> Iterator[str]:
    """``judge.py start`` (``--metrics`` on, for the cross-check), the server's root URL, and
    ``judge.py stop`` afterwards."""
    judge = [sys.executable, str(HERE / "real_judge" / "judge.py")]
    start = [*judge, "start", "--name", args.server_name, "--model", args.real_judge]
    if args.server_threads:
        start += [
            "--threads",
            str(args.server_threads),
            "--threads-batch",
            str(args.server_threads),
        ]
    server_args = ["--metrics"]
    if args.cache_ram is not None:
        server_args += ["--cache-ram", str(args.cache_ram)]
    url = subprocess.run(
        [*start, "--", *server_args], check=True, stdout=subprocess.PIPE, text=True
    ).stdout.strip()
    try:
        yield url.removesuffix("/v1")
    finally:
        subprocess.run([*judge, "stop", "--name", args.server_name], check=False)


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def server_seconds_total(root: str) -> float:
    """Prompt plus generation seconds llama-server has spent since it started (/metrics)."""
    with urllib.request.urlopen(f"{root}/metrics", timeout=30) as response:
        text = response.read().decode()
    values = dict(line.split(" ", 1) for line in text.splitlines() if line.startswith("llamacpp:"))
    return float(values["llamacpp:prompt_seconds_total"]) + float(
        values["llamacpp:tokens_predicted_seconds_total"]
    )


def has_reasons_switch(metric: str) -> bool:
    """The metric writes reasons by default and can be told not to (``reasons=False``)."""
    from rageval.metrics import metric_class

    return bool(getattr(metric_class(metric), "reasons_by_default", False))


def scored(metric: str) -> list[str]:
    """The metrics a run of `metric` scores: the eight for :data:`TOGETHER`."""
    return list(EIGHT) if metric == TOGETHER else [metric]


@dataclass
class RealRun:
    """One metric, one tool, all rows, against the real judge."""

    run: str  # RAGEVAL_DEFAULTS, REASONS_OFF or RAGAS
    metric: str
    samples: int
    wall_s: float
    valued: int  # cells with a value
    causes: dict[str, Any]  # rageval: why cells have none; ragas: its stderr lines
    proxy: dict[str, Any]  # metered_proxy.py's counters
    metrics_server_s: float  # the same server seconds from /metrics, as a check
    load: float

    def per_sample(self, key: str) -> float:
        return float(self.proxy[key]) / self.samples

    @property
    def cells(self) -> int:
        return self.samples * len(scored(self.metric))

    @property
    def server_s(self) -> float:
        return (float(self.proxy["prompt_ms"]) + float(self.proxy["predicted_ms"])) / 1000


def tool_command(
    run: str,
    metric: str,
    base_url: str,
    data: Path,
    args: argparse.Namespace,
    slots: int,
    scratch: Path,
) -> list[str]:
    if run == RAGAS:
        run_config = ["--max-workers", str(slots), "--timeout", str(ATTEMPT_TIMEOUT_S)]
        extra = ["--model", args.real_judge, *run_config, "--max-tokens", str(args.reply_cap)]
        return ragas_cmd(base_url, str(data), scored(metric), extra)
    extra = ["--model", args.real_judge, "--embeddings", "local", "--concurrency", "0", "--probe"]
    if run == REASONS_OFF:
        off = {m: {"reasons": False} for m in scored(metric) if has_reasons_switch(m)}
        extra += ["--metric-params", json.dumps(off)]
    # request cache and run directory fresh: every run does the whole work
    return rageval_cmd(
        base_url, str(data), scored(metric), scratch / "cache", run_dir=scratch / "run", extra=extra
    )


def run_real(run: str, metric: str, data: Path, args: argparse.Namespace) -> tuple[RealRun, int]:
    """One run on a llama-server started for it, so that no run finds its prompts in the
    server's cache from an earlier one (llama-server keeps old prompts in RAM:
    ``--cache-ram``); also returns the server's slots."""
    with (
        llama_server(args) as root,
        MeteredProxy(root) as proxy,
        Scratch() as scratch,
    ):
        slots = int(get_json(f"{root}/props")["total_slots"])
        load = load_average()
        seconds0 = server_seconds_total(root)
        result = run_driver(
            tool_command(run, metric, proxy.base_url, data, args, slots, scratch),
            timeout=24 * 3600,
        )
        stats = proxy.stats()
        metrics_server_s = server_seconds_total(root) - seconds0
    scores = result["scores"]
    if run == RAGAS:
        nan = sum(int(column["nan"]) for column in scores.values())
        valued = args.samples * len(scored(metric)) - nan
        causes: dict[str, Any] = {
            "job_exceptions": result["job_exceptions"],
            "stderr_lines": result["stderr_lines"],
            "stderr_tail": result["stderr_tail"],
        }
    else:
        valued = sum(int(scores[m]["measured"]) for m in scored(metric))
        causes = {m: scores[m]["causes"] for m in scored(metric) if scores[m]["causes"]}
        if metric != TOGETHER:
            causes = dict(causes.get(metric) or {})
    real = RealRun(
        run, metric, args.samples, result["wall_s"], valued, causes, stats, metrics_server_s, load
    )
    return real, slots


def real_table(runs: list[RealRun]) -> str:
    header = [
        "metric",
        "run",
        "cells with a value",
        "requests/sample",
        "completions/sample",
        "prompt tok/sample",
        "of them from cache",
        "generated tok/sample",
        "server s/sample",
        "wall s/sample",
        "server s vs ragas",
    ]
    by_metric: dict[str, dict[str, RealRun]] = {}
    for r in runs:
        by_metric.setdefault(r.metric, {})[r.run] = r
    body: list[list[str]] = []
    totals: dict[str, list[RealRun]] = {RAGEVAL_DEFAULTS: [], REASONS_OFF: [], RAGAS: []}
    for metric in [m for m in (*EIGHT, TOGETHER) if m in by_metric]:
        these = by_metric[metric]
        ragas = these.get(RAGAS)
        for r in (these[run] for run in (RAGEVAL_DEFAULTS, REASONS_OFF, RAGAS) if run in these):
            run = r.run
            cells = f"{r.valued}/{r.cells}"
            if run == RAGAS:
                cells += f" ({r.cells - r.valued} NaN)"
            body.append(
                [
                    metric,
                    run,
                    cells,
                    fmt(r.per_sample("chat_requests"), 2),
                    fmt(r.per_sample("completions"), 2),
                    fmt(r.per_sample("prompt_tokens"), 0),
                    fmt(r.per_sample("cached_prompt_tokens"), 0),
                    fmt(r.per_sample("completion_tokens"), 0),
                    fmt(r.server_s / r.samples, 2),
                    fmt(r.wall_s / r.samples, 2),
                    f"{r.server_s / ragas.server_s:.2f}×"
                    if run != RAGAS and ragas is not None and ragas.server_s
                    else "",
                ]
            )
        if metric == TOGETHER or RAGEVAL_DEFAULTS not in these or RAGAS not in these:
            continue  # one evaluation of the eight, or unfinished: not in the each-alone totals
        # reasons off changes only the metrics with the switch; the others count as they ran
        for run in totals:
            chosen = these.get(run) or (these.get(RAGEVAL_DEFAULTS) if run == REASONS_OFF else None)
            if chosen is not None:
                totals[run].append(chosen)
    ragas_total = sum(r.server_s for r in totals[RAGAS])
    for run, rs in totals.items():
        if not rs:
            continue
        samples = rs[0].samples
        server_s = sum(r.server_s for r in rs)

        def total(key: str, rs: list[RealRun] = rs, samples: int = samples) -> float:
            return sum(float(r.proxy[key]) for r in rs) / samples

        valued = sum(r.valued for r in rs)
        cells = f"{valued}/{samples * len(rs)}"
        if run == RAGAS:
            cells += f" ({samples * len(rs) - valued} NaN)"
        body.append(
            [
                f"**all {len(rs)}**",
                run,
                cells,
                fmt(total("chat_requests"), 2),
                fmt(total("completions"), 2),
                fmt(total("prompt_tokens"), 0),
                fmt(total("cached_prompt_tokens"), 0),
                fmt(total("completion_tokens"), 0),
                fmt(server_s / samples, 2),
                fmt(sum(r.wall_s for r in rs) / samples, 2),
                f"{server_s / ragas_total:.2f}×" if run != RAGAS and ragas_total else "",
            ]
        )
    return markdown_table(header, body)


def real_report(meta: dict[str, Any], runs: list[RealRun]) -> str:
    timings = sum(r.server_s for r in runs)
    scraped = sum(r.metrics_server_s for r in runs)
    causes = {f"{r.metric} ({r.run})": r.causes for r in runs if r.run != RAGAS and r.causes}
    ragas_causes = {
        r.metric: r.causes.get("job_exceptions")
        for r in runs
        if r.run == RAGAS and r.valued < r.cells
    }
    lines = [
        f"judge: `{meta['model']}` on llama-server ({meta['slots']} slot(s)), ragas' reply "
        f"cap {meta['ragas_reply_cap']} tokens, "
        f"{meta['samples']} synthetic rows (seed {meta['seed']}), {meta['date']}; "
        f"1-min load average {min(r.load for r in runs):.1f}–{max(r.load for r in runs):.1f} "
        "(2 cores)",
        "",
        real_table(runs),
        "",
        f"Server seconds: {timings:,.1f} s by the replies' `timings`, {scraped:,.1f} s by "
        "/metrics over the same runs.",
    ]
    if causes:
        lines.append(f"rageval's causes of cells without a value: `{json.dumps(causes)}`")
    if ragas_causes:  # from its log: one exception per failed job, retries included
        lines.append(f"ragas' exceptions where cells are NaN: `{json.dumps(ragas_causes)}`")
    return "\n".join(lines)


def real_main(args: argparse.Namespace) -> int:
    ensure_ragas_venv()
    metrics: list[str] = []
    for spec in args.sets or ["each"]:
        if spec == "each":
            metrics += list(EIGHT)
        elif spec == "all":
            metrics.append(TOGETHER)
        elif spec in EIGHT:
            metrics.append(spec)
        else:
            sys.exit(f"--real-judge takes 'each', 'all' or metric names, not {spec!r}")
    data = write_jsonl(
        WORK / f"samples-{args.samples}-seed{args.seed}.jsonl", args.samples, args.seed
    )
    if args.skip:
        rows = data.read_text(encoding="utf-8").splitlines(keepends=True)[args.skip :]
        data = data.with_name(f"samples-{args.samples}-seed{args.seed}-after{args.skip}.jsonl")
        data.write_text("".join(rows), encoding="utf-8")
        args.samples = len(rows)
    runs: list[RealRun] = []
    meta: dict[str, Any] = {
        "model": args.real_judge,
        "samples": args.samples,
        "skipped": args.skip,
        "seed": args.seed,
        "ragas_reply_cap": args.reply_cap,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": " ".join(sys.argv),
    }
    for i, metric in enumerate(metrics):
        order = [RAGEVAL_DEFAULTS, RAGAS]
        if any(has_reasons_switch(m) for m in scored(metric)):
            order.insert(1, REASONS_OFF)
        order = [run for run in order if (RAGAS if run == RAGAS else "rageval") in args.tools]
        for run in order if i % 2 == 0 else reversed(order):
            r, meta["slots"] = run_real(run, metric, data, args)
            runs.append(r)
            print(
                f"{metric:>22} {run:>21}: {r.valued}/{r.cells} cells valued, "
                f"{r.proxy['chat_requests']} requests, server {r.server_s:.1f} s, "
                f"wall {r.wall_s:.1f} s, load {r.load:.1f}",
                file=sys.stderr,
                flush=True,
            )
            if args.json is not None:  # after every run: a long measurement keeps its part
                save_real(args.json, meta, runs)
    report = real_report(meta, runs)
    if args.markdown is not None:
        args.markdown.write_text(f"`{meta['command']}`\n\n{report}\n")
    print(report)
    return 0


def save_real(path: Path, meta: dict[str, Any], runs: list[RealRun]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"real_judge": meta, "runs": [asdict(r) for r in runs]}, indent=1))


# ---- the real-judge runs priced at one set of per-token server times (--price) -------------
#
# The server seconds `--real-judge` measures move with the machine's load (ragas' own seconds
# for the same tokens differed by 1.8x between two sessions); the tokens do not. Priced at the
# same milliseconds per uncached prompt token and per generated token (the mean of the first
# file's runs, from the server's own `timings`), two sessions' files compare on equal terms. A
# file without ragas' runs (`--tools rageval`) is compared with the first file that has them.

_DEFAULTS = "rageval, defaults"
_KINDS = (_DEFAULTS, "rageval, reasons off", "ragas")


def per_token_ms(runs: list[dict[str, Any]]) -> tuple[float, float]:
    """Mean server milliseconds per prompt token read and per token generated over `runs`."""
    read = sum(r["proxy"]["prompt_tokens"] - r["proxy"]["cached_prompt_tokens"] for r in runs)
    generated = sum(r["proxy"]["completion_tokens"] for r in runs)
    prompt_ms = sum(r["proxy"]["prompt_ms"] for r in runs)
    predicted_ms = sum(r["proxy"]["predicted_ms"] for r in runs)
    return prompt_ms / read, predicted_ms / generated


def priced_totals(runs: list[dict[str, Any]], kind: str) -> tuple[int, int, float]:
    """(uncached prompt tokens, generated tokens, server seconds) of `kind` over every metric
    (a metric without a run of `kind`: its defaults' run)."""
    by_run = {(r["metric"], r["run"]): r["proxy"] for r in runs}
    read = generated = 0
    seconds = 0.0
    for metric in sorted({m for m, _ in by_run}):
        proxy = by_run.get((metric, kind)) or by_run[(metric, _DEFAULTS)]
        read += proxy["prompt_tokens"] - proxy["cached_prompt_tokens"]
        generated += proxy["completion_tokens"]
        seconds += (proxy["prompt_ms"] + proxy["predicted_ms"]) / 1000
    return read, generated, seconds


def render_priced(paths: list[Path]) -> int:
    """The real-judge files' tokens priced at the first file's per-token times."""
    loaded = [json.loads(p.read_text())["runs"] for p in paths]
    with_ragas = [runs for runs in loaded if any(r["run"] == "ragas" for r in runs)]
    if not with_ragas:
        raise SystemExit("--price: no file holds ragas' runs to compare with")
    read_ms, generated_ms = per_token_ms(loaded[0])
    print(f"priced at {read_ms:.1f} ms per prompt token read, {generated_ms:.1f} ms per token "
          f"generated (the mean of {paths[0]})\n")  # fmt: skip
    print("| file | run | uncached prompt tokens | generated tokens | server s | priced s |")
    print("|---|---|---|---|---|---|")
    for path, runs in zip(paths, loaded, strict=True):
        own = any(r["run"] == "ragas" for r in runs)
        ragas_read, ragas_generated, ragas_s = priced_totals(
            runs if own else with_ragas[0], "ragas"
        )
        ragas_priced = (ragas_read * read_ms + ragas_generated * generated_ms) / 1000
        for kind in _KINDS if own else _KINDS[:-1]:
            read, generated, seconds = priced_totals(runs, kind)
            priced = (read * read_ms + generated * generated_ms) / 1000
            print(f"| {path} | {kind} | {read:,} | {generated:,} | {seconds:,.1f} "
                  f"({seconds / ragas_s:.2f}×) | {priced:,.1f} ({priced / ragas_priced:.2f}×) |")  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument(
        "--sets",
        nargs="+",
        default=None,
        help="'each' (every metric alone), 'all' (the eight together), or names "
        "(default: each and all; with --real-judge: each)",
    )
    parser.add_argument("--tools", nargs="+", default=["rageval", "ragas"])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--judge", choices=("synthetic", "random", "garbage"), default="synthetic")
    parser.add_argument("--fault-rate", type=float, default=0.0)
    parser.add_argument(
        "--from-json",
        type=Path,
        nargs="+",
        default=None,
        help="only print the tables of rows saved earlier with --json",
    )
    parser.add_argument(
        "--price",
        action="store_true",
        help="with --from-json of --real-judge files: their tokens priced at the first file's "
        "per-token server times (sessions of different load compared)",
    )
    parser.add_argument(
        "--real-judge",
        choices=("smollm2", "qwen1.5b"),
        default=None,
        help="compare on this model on llama-server instead of the fake judge (see above)",
    )
    parser.add_argument(
        "--server-threads",
        type=int,
        default=None,
        help="with --real-judge: llama-server's --threads and --threads-batch "
        "(default: judge.py's, 1)",
    )
    parser.add_argument(
        "--server-name",
        default=SERVER_NAME,
        help="with --real-judge: judge.py's --name for the server (default: %(default)s)",
    )
    parser.add_argument(
        "--cache-ram",
        type=int,
        default=None,
        metavar="MIB",
        help="with --real-judge: llama-server's prompt cache in RAM (default: the server's, "
        "8,192 MiB); two servers at once may need less",
    )
    parser.add_argument(
        "--reply-cap",
        type=int,
        default=REPLY_CAP,
        help="with --real-judge: ragas' max_tokens per reply (default: %(default)s)",
    )
    parser.add_argument("--markdown", type=Path, default=None, help="with --real-judge")
    parser.add_argument(
        "--skip",
        type=int,
        default=0,
        metavar="K",
        help="with --real-judge: score the rows after the first K of --samples (see above)",
    )
    args = parser.parse_args(argv)
    if args.from_json:
        return render_priced(args.from_json) if args.price else render_saved(args.from_json)
    if args.real_judge:
        return real_main(args)

    if "ragas" in args.tools:
        ensure_ragas_venv()
    data = write_jsonl(
        WORK / f"samples-{args.samples}-seed{args.seed}.jsonl", args.samples, args.seed
    )
    sets: list[list[str]] = []
    for spec in args.sets or ["each", "all"]:
        if spec == "each":
            sets += [[m] for m in EIGHT]
        elif spec == "all":
            sets.append(list(EIGHT))
        else:
            sets.append(spec.split("+"))

    pairs: list[tuple[str, dict[str, Row]]] = []
    raw: list[dict[str, Any]] = []
    with JudgeServer(args.latency_ms, judge=args.judge, fault_rate=args.fault_rate) as server:
        for metrics in sets:
            name = "+".join(metrics) if len(metrics) < 8 else "all eight"
            runs: dict[str, list[Row]] = {t: [] for t in args.tools}
            for rep in range(args.repeat):
                order = args.tools if rep % 2 == 0 else list(reversed(args.tools))
                for tool in order:
                    row = run_one(tool, server, data, metrics, args.samples)
                    runs[tool].append(row)
                    raw.append(row.to_json())
                    print(
                        f"{name:>24} {tool:>8}: {row.samples_per_s:8.1f} samples/s, "
                        f"wall {row.wall_s:7.2f} s, {row.requests} requests, "
                        f"cpu {fmt(row.cpu_ms_per_request, 2)} ms/req, load {row.load:.1f}, "
                        f"measured {100 * row.measured_share:.1f}%, "
                        f"non-finite {row.server.get('non_finite', '-')}",
                        file=sys.stderr,
                        flush=True,
                    )
            pairs.append((name, {t: median_row(rs) for t, rs in runs.items() if rs}))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(raw, indent=1))
    print(f"judge: {args.judge}, fault rate {args.fault_rate:g}\n")
    print(table(pairs, args.latency_ms))
    loads = [r["load"] for r in raw]
    print(
        f"\n1-min load average during the runs: median {statistics.median(loads):.1f}, "
        f"max {max(loads):.1f} (2 cores)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
