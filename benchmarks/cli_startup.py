"""Start-up time of `rageval --help` / `--version` (target: <= 0.3 s), against bare Python.

python benchmarks/cli_startup.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

RUNS = 15


def median_seconds(args: list[str]) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run([sys.executable, *args], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    bare = median_seconds(["-c", "pass"])
    print(f"python -c pass      {bare:.3f} s")
    worst = 0.0
    for flag in ("--help", "--version"):
        took = median_seconds(["-m", "rageval", flag])
        worst = max(worst, took)
        print(f"rageval {flag:<10}  {took:.3f} s  ({took - bare:+.3f} s over bare Python)")
    return 0 if worst <= 0.3 else 1


if __name__ == "__main__":
    sys.exit(main())
