"""The report's browser tests without a browser: skipped with the reason on a developer's
machine, a failure under CI (RAGEVAL_REQUIRE_BROWSER=1, which .ci/run sets)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run_browser_tests(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k != "RAGEVAL_REQUIRE_BROWSER"}
    environ["RAGEVAL_CHROMIUM"] = str(tmp_path / "no-chromium-here")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/test_report_browser.py"],
        cwd=ROOT,
        env={**environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize("required", [False, True])
def test_a_missing_browser_is_a_visible_skip_unless_ci_requires_it(
    tmp_path: Path, required: bool
) -> None:
    out = _run_browser_tests(tmp_path, **({"RAGEVAL_REQUIRE_BROWSER": "1"} if required else {}))
    text = out.stdout + out.stderr
    assert "no-chromium-here is missing" in text and ".ci/install-browser.sh" in text
    totals = out.stdout.strip().splitlines()[-1]  # e.g. "15 errors in 1.80s"
    if required:
        assert out.returncode == 1, text
        assert " error" in totals and "skipped" not in totals and "passed" not in totals
    else:
        assert out.returncode == 0, text
        assert "skipped" in totals and "error" not in totals and "passed" not in totals
