"""kill -9 at random moments, then resume: the run ends exactly as an uninterrupted one.

tests/test_resume_kill.py kills once, after a fixed number of finished rows. Here each seed
kills the CLI twice at random points (during start-up, mid-request, between writes, during a
resume that is itself cutting a torn line...), then lets a last resume finish. The server runs
in this process and records every request; each row's requests are known by its tag.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from helpers import cli_child_command, handle as synthetic_answer, tagged_rows, tags_of, write_jsonl
from rageval.judge import Judge
from rageval.log import read_lines
from rageval.results import EvaluationResult, load_run
from rageval.runner import evaluate
from rageval.testing import FAKE_API_KEY, FakeOpenAI

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")

METRICS = ("faithfulness", "context_relevance")
N = 40  # more rows than the runner's window of samples in flight: rows finish one by one
REQUESTS_PER_ROW = 4  # statements, faithfulness verdicts, 2 ratings
KILLS = 2


@pytest.fixture(scope="module")
def uninterrupted() -> EvaluationResult:
    with FakeOpenAI(synthetic_answer) as srv:
        judge = Judge("judge-model", base_url=srv.base_url, api_key=FAKE_API_KEY, cache=False)
        result = evaluate(tagged_rows(N), list(METRICS), llm=judge, progress=False)
        assert len(srv.chat_requests) == N * REQUESTS_PER_ROW
    return result


def _finished(log: Path) -> set[str]:
    """Tags of the rows whose record is complete in the results log."""
    if not log.exists():
        return set()
    return {entry.line.id.removeprefix("s-") for entry in read_lines(log)}


def _lines(log: Path) -> int:
    return log.read_bytes().count(b"\n") if log.exists() else 0


def _kill_at_random(proc: subprocess.Popen[bytes], log: Path, rng: random.Random) -> bool:
    """SIGKILL `proc` at a random moment of its work; False if it finished first."""
    goal = rng.randrange(_lines(log), N + 1)
    if goal == _lines(log):  # somewhere in start-up, loading, validation or the first requests
        deadline = time.monotonic() + rng.uniform(0.0, 2.0)
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.005)
    else:  # once a random number of rows are done, plus a random sliver (maybe mid-write)
        deadline = time.monotonic() + 60
        while _lines(log) < goal and proc.poll() is None:
            assert time.monotonic() < deadline, "the run made no progress"
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.03))
    if proc.poll() is not None:
        return False
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return True


@pytest.mark.parametrize("seed", [11, 22, 33])
def test_random_kills_then_resume_give_the_uninterrupted_results(
    seed: int, tmp_path: Path, uninterrupted: EvaluationResult
) -> None:
    rng = random.Random(seed)
    data = tmp_path / "data.jsonl"
    write_jsonl(data, tagged_rows(N))
    run = tmp_path / "run"
    log = run / "results.jsonl"
    env = {**os.environ, "OPENAI_API_KEY": FAKE_API_KEY, "RAGEVAL_CACHE_DIR": str(tmp_path / "c")}
    with FakeOpenAI(synthetic_answer, latency=0.05) as srv:
        base = cli_child_command(
            "evaluate", data, *(a for m in METRICS for a in ("-m", m)),
            "--llm", "judge-model", "--base-url", srv.base_url,
            "--concurrency", "8", "--no-cache", "-q", "-o", run,
        )  # fmt: skip
        kills = resumes = resumes_through = 0
        for attempt in range(KILLS + 1):
            # after a kill before the manifest was written there is no run to resume yet
            resuming = (run / "manifest.json").exists()
            resumes += resuming
            # a resume is `--resume DIR` alone: the run's manifest holds everything else
            command = cli_child_command("evaluate", "--resume", run, "-q") if resuming else base
            done_before = _finished(log)
            seen_before = len(srv.chat_requests)
            proc = subprocess.Popen(
                command,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            last = attempt == KILLS
            if last or not _kill_at_random(proc, log, rng):
                _, err = proc.communicate(timeout=120)
                assert proc.returncode == 0, err.decode()
                resumes_through += resuming
                break
            # a resume that added rows got past recording itself in the manifest; one killed
            # while still starting up (imports, loading, the endpoint probe) may not have
            resumes_through += resuming and _finished(log) != done_before
            # a kill that lands after the summary was written (the run was only exiting)
            # interrupted nothing: the resume below must then send nothing, but it is no kill
            kills += not (run / "summary.json").exists()
            time.sleep(0.05)  # let the server record whatever the dead process had sent
            asked = {t for r in srv.chat_requests[seen_before:] for t in tags_of(r)}
            assert asked.isdisjoint(done_before), (
                f"finished rows asked again: {asked & done_before}"
            )
        finished_last = _finished(log)
        asked_last = {t for r in srv.chat_requests[seen_before:] for t in tags_of(r)}
        assert asked_last.isdisjoint(done_before), "the final resume asked about finished rows"
        assert srv.handler_errors == []
    assert kills >= 1, "no kill landed mid-run: the test proved nothing"

    # one record per row, none torn, and the results are those of a run never interrupted
    lines = [entry.line for entry in read_lines(log)]
    assert Counter(line.row for line in lines) == Counter(range(N))
    assert log.read_bytes().endswith(b"\n")
    assert len(finished_last) == N
    result = load_run(run)
    assert result.complete
    for m in METRICS:
        assert result[m] == uninterrupted[m], m
        assert result.statuses(m) == uninterrupted.statuses(m), m
        got, want = result.cells(m), uninterrupted.cells(m)
        for row, (a, b) in enumerate(zip(got, want, strict=True)):
            assert a is not None and b is not None
            assert (a.cause, a.reason) == (b.cause, b.reason), (m, row)
            assert a.evidence.model_dump(mode="json") == b.evidence.model_dump(mode="json"), (
                m,
                row,
            )
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    for m in METRICS:
        assert summary["metrics"][m]["n_measured"] == uninterrupted.summary()[m].n_measured
        assert summary["metrics"][m]["mean"] == pytest.approx(uninterrupted.summary()[m].mean)
    manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
    assert resumes_through <= len(manifest.get("resumed_at", [])) <= resumes
