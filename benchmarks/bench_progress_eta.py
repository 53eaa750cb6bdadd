"""The progress line's ETA against the time really left (issue 22): every draw of the line in a
run against the test server, the ETA it showed next to what was left when it was drawn.

    python benchmarks/bench_progress_eta.py --samples 200 --latency-ms 300

The run scores seven judge metrics and token_f1 on synthetic samples in this
process (the synthetic judge behind a FakeOpenAI with the given latency per request, no
cache), with the progress line forced on and its writes timestamped.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any

from _harness import load_average
from rageval import evaluate
from rageval.judge import Judge
from rageval.testing import FAKE_API_KEY, FakeOpenAI
from synthetic_data import iter_samples
from synthetic_judge import handle

METRICS = [
    "faithfulness",
    "answer_correctness",
    "context_precision",
    "context_recall",
    "answer_accuracy",
    "context_relevance",
    "response_groundedness",
    "token_f1",
]
_ETA = re.compile(r"ETA (?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


class _Stamped:
    """stderr as a terminal whose every drawn line is kept with the time it was drawn."""

    def __init__(self) -> None:
        self.draws: list[tuple[float, str]] = []

    def write(self, text: str) -> int:
        self.draws += [(time.monotonic(), p) for p in text.split("\r") if p.strip()]
        return len(text)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return True


def _seconds(line: str) -> int | None:
    found = _ETA.search(line)
    if found is None:
        return None
    h, m, s = (int(x or 0) for x in found.groups())
    return 3600 * h + 60 * m + s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, default=300.0)
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = list(iter_samples(args.samples))
    stamped, real = _Stamped(), sys.stderr
    load = load_average()
    with FakeOpenAI(handle, latency=args.latency_ms / 1000) as server:
        judge = Judge("m", base_url=server.base_url, api_key=FAKE_API_KEY, cache=False)
        sys.stderr = stamped  # type: ignore[assignment]
        try:
            start = time.monotonic()
            evaluate(rows, METRICS, llm=judge, progress=True)
            end = time.monotonic()
        finally:
            sys.stderr = real
    shown = [
        (t - start, eta, end - t) for t, d in stamped.draws if (eta := _seconds(d)) is not None
    ]
    print(f"{args.samples} samples, {args.latency_ms:g} ms per request, load {load:.1f}")
    print(f"run {end - start:.1f} s; first ETA at {shown[0][0]:.1f} s" if shown else "no ETA")
    print("at s   ETA shown   time left   shown / left")
    for at, eta, left in shown[:: max(1, len(shown) // 10)]:
        print(f"{at:5.1f}   {eta:8d}   {left:9.1f}   {eta / left:6.2f}")
    worst = max(shown, key=lambda s: abs(s[1] - s[2]), default=None)
    if worst is not None:
        print(f"largest error: {worst[1]} s shown with {worst[2]:.1f} s left, at {worst[0]:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
