"""rageval against ragas on the real judge, with the load taken out: each run's tokens priced
at one set of per-token server times.

The server seconds `bench_vs_ragas.py --real-judge` measures move with the machine's load
(ragas' own seconds for the same tokens have differed by 1.8x between two sessions). The
tokens do not: each run of a metric reads some prompt tokens the server's prompt cache did not
hold and generates some tokens. Priced at the same milliseconds per token read and per token
generated (by default the mean of the first file's runs, from the server's own `timings`),
two sessions' JSON files compare on equal terms::

    python benchmarks/price_vs_ragas.py NEW.json OLD.json

A file without ragas' runs (``bench_vs_ragas.py --tools rageval``) is compared with the ragas
runs of the first file that has them (the same rows, server and model).

For each file and each of "rageval, defaults", "rageval, reasons off" (the defaults' run for a
metric without the switch) and "ragas": the uncached prompt tokens and generated tokens over
all metrics, the measured server seconds and the priced ones, each also as a share of ragas'.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

DEFAULTS = "rageval, defaults"
KINDS = (DEFAULTS, "rageval, reasons off", "ragas")


def per_token_ms(runs: list[dict[str, Any]]) -> tuple[float, float]:
    """Mean server milliseconds per prompt token read and per token generated over `runs`."""
    read = sum(r["proxy"]["prompt_tokens"] - r["proxy"]["cached_prompt_tokens"] for r in runs)
    generated = sum(r["proxy"]["completion_tokens"] for r in runs)
    prompt_ms = sum(r["proxy"]["prompt_ms"] for r in runs)
    predicted_ms = sum(r["proxy"]["predicted_ms"] for r in runs)
    return prompt_ms / read, predicted_ms / generated


def totals(runs: list[dict[str, Any]], kind: str) -> tuple[int, int, float]:
    """(uncached prompt tokens, generated tokens, server seconds) of `kind` over every metric."""
    by_run = {(r["metric"], r["run"]): r["proxy"] for r in runs}
    read = generated = 0
    seconds = 0.0
    for metric in sorted({m for m, _ in by_run}):
        proxy = by_run.get((metric, kind)) or by_run[(metric, DEFAULTS)]
        read += proxy["prompt_tokens"] - proxy["cached_prompt_tokens"]
        generated += proxy["completion_tokens"]
        seconds += (proxy["prompt_ms"] + proxy["predicted_ms"]) / 1000
    return read, generated, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="bench_vs_ragas.py --json files")
    args = parser.parse_args()
    loaded = [json.loads(f.read_text())["runs"] for f in args.files]
    read_ms, generated_ms = per_token_ms(loaded[0])
    print(
        f"priced at {read_ms:.1f} ms per prompt token read, {generated_ms:.1f} ms per token "
        f"generated (the mean of {args.files[0]})\n"
    )
    print("| file | run | uncached prompt tokens | generated tokens | server s | priced s |")
    print("|---|---|---|---|---|---|")
    with_ragas = [runs for runs in loaded if any(r["run"] == "ragas" for r in runs)]
    if not with_ragas:
        parser.error("no file holds ragas' runs to compare with")
    for path, runs in zip(args.files, loaded, strict=True):
        own = any(r["run"] == "ragas" for r in runs)
        ragas_read, ragas_generated, ragas_s = totals(runs if own else with_ragas[0], "ragas")
        ragas_priced = (ragas_read * read_ms + ragas_generated * generated_ms) / 1000
        for kind in KINDS if own else KINDS[:-1]:
            read, generated, seconds = totals(runs, kind)
            priced = (read * read_ms + generated * generated_ms) / 1000
            print(
                f"| {path} | {kind} | {read:,} | {generated:,} | {seconds:,.1f} "
                f"({seconds / ragas_s:.2f}×) | {priced:,.1f} ({priced / ragas_priced:.2f}×) |"
            )


if __name__ == "__main__":
    main()
