"""A run killed with SIGKILL mid-way, then resumed, ends as if it had never been interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import handle, make_judge, rows, sample_id_of, write_jsonl
from rageval.log import read_lines
from rageval.results import load_run
from rageval.runner import evaluate
from rageval.testing import FAKE_API_KEY, FakeOpenAI

METRICS = ["faithfulness", "context_recall"]
N = 40


def _finished_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _interrupted_then_resumed_alone(
    tmp_path: Path, sig: signal.Signals, *, ignore_sigint: bool = False
) -> tuple[Path, str]:
    """Start a run, stop it with `sig` once some rows are done, then resume it with
    `--resume DIR` alone; checks that no finished row is asked again. The run directory and
    the interrupted run's stderr."""
    data = rows(N)
    data_path = tmp_path / "data.jsonl"
    write_jsonl(data_path, data)
    run = tmp_path / "run"
    log = run / "results.jsonl"
    env = {
        **os.environ,
        "OPENAI_API_KEY": FAKE_API_KEY,
        "RAGEVAL_CACHE_DIR": str(tmp_path / "cache"),
    }
    with FakeOpenAI(handle, latency=0.1) as srv:
        cmd = [
            sys.executable, "-m", "rageval", "evaluate", str(data_path),
            *(a for m in METRICS for a in ("-m", m)),
            "--llm", "test-model", "--base-url", srv.base_url,
            "--concurrency", "4", "--no-cache", "-q", "-o", str(run),
        ]  # fmt: skip
        proc = subprocess.Popen(
            cmd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            # as for a background job started by a non-interactive shell
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
            if ignore_sigint
            else None,
        )
        deadline = time.monotonic() + 120
        while _finished_lines(log) < 6:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the run made no progress"
            time.sleep(0.02)
        proc.send_signal(sig)
        _, err = proc.communicate()
        stopped_with = proc.returncode

        finished = {entry.line.id for entry in read_lines(log)}
        assert 6 <= len(finished) < N, "the stop must land mid-run"
        assert not (run / "summary.json").exists()
        asked_before = len(srv.chat_requests)

        # nothing but the run directory: data, metrics, judge and settings are the run's own
        resumed = subprocess.run(
            [sys.executable, "-m", "rageval", "evaluate", "--resume", str(run), "-q"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert resumed.returncode == 0, resumed.stderr
        after = srv.chat_requests[asked_before:]

    asked_again = {sample_id_of(r) for r in after}
    assert None not in asked_again
    assert asked_again.isdisjoint(finished), "a finished row was requested again"
    assert asked_again == {r["id"] for r in data} - finished

    # the log is whole: one parsable line per row
    lines = log.read_text(encoding="utf-8").splitlines()
    assert sorted(json.loads(line)["id"] for line in lines) == sorted(r["id"] for r in data)

    with FakeOpenAI(handle) as srv:
        reference = evaluate(data, METRICS, llm=make_judge(srv), progress=False)
    result = load_run(run)
    assert result.complete
    for metric in METRICS:
        assert result[metric] == reference[metric]
        assert result.statuses(metric) == reference.statuses(metric)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["metrics"]["faithfulness"]["n_measured"] == N
    return run, f"{stopped_with}\n{err.decode()}"


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_kill_9_then_resume_alone_redoes_no_finished_row(tmp_path: Path) -> None:
    _, stopped = _interrupted_then_resumed_alone(tmp_path, signal.SIGKILL)
    assert stopped.startswith(f"{-signal.SIGKILL}\n")


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM")
@pytest.mark.parametrize("ignore_sigint", [False, True])
def test_sigterm_stops_like_ctrl_c_with_the_resume_hint(
    tmp_path: Path, ignore_sigint: bool
) -> None:
    run, stopped = _interrupted_then_resumed_alone(
        tmp_path, signal.SIGTERM, ignore_sigint=ignore_sigint
    )
    code, _, err = stopped.partition("\n")
    assert code == "143", stopped
    assert "terminated (SIGTERM)" in err and f"continue with --resume {run}" in err
    assert "Traceback" not in err
