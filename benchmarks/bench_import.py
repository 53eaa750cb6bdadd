"""Start-up cost: ``import rageval``, ``rageval --help``, and ``import ragas`` for comparison.

Each figure is the median of ``--repeat`` fresh processes:

* in-process: ``time.perf_counter()`` around the import statement alone;
* process: the wall time of the whole command, from spawn to exit, and the same for
  ``python -c pass`` (the interpreter's own start-up, included in every process figure).

    python benchmarks/bench_import.py --repeat 15
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

from _harness import RAGAS_PYTHON, child_env, fmt, markdown_table

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
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


if __name__ == "__main__":
    sys.exit(main())
