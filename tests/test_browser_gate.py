"""Tests that need something outside Python, without it: skipped with the reason on a
developer's machine, a failure under CI, which sets the variable that requires it (.ci/run).

- the report's browser tests without chromium (RAGEVAL_REQUIRE_BROWSER=1);
- the real judge's tests without a llama-server (RAGEVAL_REQUIRE_REAL_JUDGE=1).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Gate:
    tests: str
    required_by: str
    #: the environment that makes the dependency missing ("{tmp}" is the test's tmp_path)
    missing_env: dict[str, str | None]
    reason: tuple[str, ...]


GATES = {
    "browser": Gate(
        "tests/test_report_browser.py",
        "RAGEVAL_REQUIRE_BROWSER",
        {"RAGEVAL_CHROMIUM": "{tmp}/no-chromium-here"},
        ("no-chromium-here is missing", ".ci/install-browser.sh"),
    ),
    "real_judge": Gate(
        "tests/test_real_judge.py",
        "RAGEVAL_REQUIRE_REAL_JUDGE",
        {"RAGEVAL_REAL_JUDGE_URL": None},
        ("RAGEVAL_REAL_JUDGE_URL is not set", "benchmarks/real_judge/judge.py start"),
    ),
}


def _run_tests(gate: Gate, tmp_path: Path, *, required: bool) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != gate.required_by}
    for name, value in gate.missing_env.items():
        environ.pop(name, None)
        if value is not None:
            environ[name] = value.format(tmp=tmp_path)
    if required:
        environ[gate.required_by] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", gate.tests],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("gate", list(GATES))
@pytest.mark.parametrize("required", [False, True])
def test_a_missing_dependency_is_a_visible_skip_unless_ci_requires_it(
    tmp_path: Path, gate: str, required: bool
) -> None:
    out = _run_tests(GATES[gate], tmp_path, required=required)
    text = out.stdout + out.stderr
    assert all(part in text for part in GATES[gate].reason), text
    totals = out.stdout.strip().splitlines()[-1]  # e.g. "15 errors in 1.80s"
    if required:
        assert out.returncode == 1, text
        assert " error" in totals and "skipped" not in totals and "passed" not in totals
    else:
        assert out.returncode == 0, text
        assert "skipped" in totals and "error" not in totals and "passed" not in totals
