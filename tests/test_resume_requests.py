"""A resumed run pays nothing twice: it keeps the request cache its manifest recorded (from the
command line and from Python, whatever RAGEVAL_CACHE_DIR says now), so an interrupted run and
its resume send, together, exactly the requests of an uninterrupted run.

The server counts the requests it answered. Nothing here waits on the clock: the interrupted
run is killed once the server holds every further request and the cache file holds every
answer, so the count cannot depend on how busy the machine is.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers import (
    attempt,
    cli_child_command,
    handle,
    make_judge,
    rows,
    run_cli_in_child,
    write_jsonl,
)
from rageval._client._cache import CACHE_FILE_NAME, cache_location, recorded_cache
from rageval.judge import Judge, RequestCache
from rageval.log import MANIFEST_FILE, RESULTS_FILE, read_manifest
from rageval.results import load_run
from rageval.runner import evaluate
from rageval.testing import FAKE_API_KEY, FakeOpenAI, RecordedRequest, Reply

METRICS = ["faithfulness", "context_recall"]
N = 24
DEADLINE_S = 300


class Gate:
    """A handler answering as the synthetic judge while open; closed, it holds every request
    that arrives, unanswered, until it opens again. It counts the requests it answered and
    holds (the server leaves a request in flight until its handler returns: once
    ``in_flight == held``, ``answered`` counts every answer given and can only grow again when
    the gate opens)."""

    def __init__(self) -> None:
        self.closed = False
        self.held = 0
        self.answered = 0

    async def __call__(self, req: RecordedRequest) -> Reply:
        if self.closed:
            self.held += 1
            while self.closed:
                await asyncio.sleep(0.01)
        else:
            self.answered += 1
        return handle(req)


def _wait_for(condition: Callable[[], bool], what: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert proc.poll() is None, f"the run ended before {what}: {proc.communicate()}"
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.02)


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _cached_answers(cache_dir: Path) -> int:
    """Chat replies committed to the request cache file (read as another process would)."""
    path = cache_dir / CACHE_FILE_NAME
    if not path.exists():
        return 0
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=30)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM completions").fetchone()[0])
    except sqlite3.OperationalError:  # the writer has not made the table yet
        return 0
    finally:
        conn.close()


def _uninterrupted_requests(data: list[dict[str, Any]], cache: Path) -> int:
    with FakeOpenAI(handle) as srv:
        evaluate(data, METRICS, llm=make_judge(srv, cache=cache), progress=False)
        return len(srv.chat_requests)


def _env(cache: Path) -> dict[str, str]:
    return {**os.environ, "OPENAI_API_KEY": FAKE_API_KEY, "RAGEVAL_CACHE_DIR": str(cache)}


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_kill_9_mid_run_then_resume_sends_each_request_once(tmp_path: Path) -> None:
    data = rows(N)
    data_path = tmp_path / "data.jsonl"
    write_jsonl(data_path, data)
    run, cache = tmp_path / "run", tmp_path / "cache"
    env = _env(cache)
    gate = Gate()
    with FakeOpenAI(gate) as srv:
        command = cli_child_command(
            "evaluate", data_path, *(a for m in METRICS for a in ("-m", m)),
            "--llm", "test-model", "--base-url", srv.base_url, "--concurrency", "4",
            "-q", "-o", run,
        )  # fmt: skip
        proc = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            _wait_for(lambda: _lines(run / RESULTS_FILE) >= 6, "6 rows finished", proc)
            gate.closed = True

            def settled() -> bool:
                # every request that got past the gate answered, every later one held, and
                # every answer the run received committed to its cache: then kill it
                return srv.in_flight == gate.held and _cached_answers(cache) == gate.answered

            _wait_for(settled, "the server holds the rest and the answers are cached", proc)
            answered = gate.answered
        finally:
            proc.kill()
            proc.communicate()
        finished = _lines(run / RESULTS_FILE)
        assert 6 <= finished < N, "the kill must land mid-run"
        assert gate.held > 0, "requests were in flight when the run was killed"
        # the held requests were never answered: forget them, then let the resume through
        srv.reset()
        gate.closed = False

        resumed = run_cli_in_child("evaluate", "--resume", run, "-q", env=env, timeout=300)
        assert resumed.returncode == 0, resumed.stderr
        assert "disabled" not in resumed.stderr, resumed.stderr
        sent_again = srv.chat_requests

    assert all(attempt(r) == 1 for r in sent_again), "no re-ask: one cached answer per request"
    assert answered + len(sent_again) == _uninterrupted_requests(data, tmp_path / "ref-cache")
    result = load_run(run)
    assert result.complete and result.statuses("faithfulness") == ["ok"] * N


def _finished_cached_run(tmp_path: Path, srv: FakeOpenAI, env: dict[str, str]) -> Path:
    data_path = tmp_path / "data.jsonl"
    write_jsonl(data_path, rows(8))
    run = tmp_path / "run"
    done = run_cli_in_child(
        "evaluate", data_path, *(a for m in METRICS for a in ("-m", m)),
        "--llm", "test-model", "--base-url", srv.base_url, "-q", "-o", run, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return run


def _cut_results(run: Path, keep: int) -> None:
    """The run as a kill would have left it: `keep` rows finished, no summary."""
    log = run / RESULTS_FILE
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:keep]))
    (run / "summary.json").unlink()


def test_resume_from_the_command_line_sends_what_the_cache_holds_never(
    tmp_path: Path, rageval_cache_dir: Path
) -> None:
    env = _env(tmp_path / "cache")
    with FakeOpenAI(handle) as srv:
        run = _finished_cached_run(tmp_path, srv, env)
        sent = len(srv.chat_requests)
        # a finished run: nothing to do
        again = run_cli_in_child("evaluate", "--resume", run, "-q", env=env)
        assert again.returncode == 0, again.stderr
        assert len(srv.chat_requests) == sent
        # a run stopped after 3 rows whose every request is in the cache: nothing is sent,
        # even with RAGEVAL_CACHE_DIR now elsewhere (the run keeps the cache it recorded)
        _cut_results(run, 3)
        elsewhere = {**env, "RAGEVAL_CACHE_DIR": str(tmp_path / "other-cache")}
        resumed = run_cli_in_child("evaluate", "--resume", run, "-q", env=elsewhere)
        assert resumed.returncode == 0, resumed.stderr
        assert "disabled" not in resumed.stderr, resumed.stderr
        assert len(srv.chat_requests) == sent
    assert load_run(run).complete
    assert not (tmp_path / "other-cache").exists()


def test_resume_from_python_keeps_the_recorded_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    cache = tmp_path / "cache"
    monkeypatch.setenv("RAGEVAL_CACHE_DIR", str(cache))
    data_path = tmp_path / "data.jsonl"
    write_jsonl(data_path, rows(8))
    run = tmp_path / "run"
    with FakeOpenAI(handle) as srv:
        judge = Judge("test-model", base_url=srv.base_url)
        evaluate(data_path, METRICS, llm=judge, run_dir=run, progress=False)
        sent = len(srv.chat_requests)
        recorded = read_manifest(run).judge
        assert recorded is not None and recorded.model_dump()["cache"] == str(cache.resolve())
        _cut_results(run, 3)
        monkeypatch.setenv("RAGEVAL_CACHE_DIR", str(tmp_path / "other-cache"))
        result = evaluate(None, run_dir=run, resume=True, progress=False)
        assert len(srv.chat_requests) == sent
    assert result.complete
    assert not (tmp_path / "other-cache").exists()


def test_a_manifest_that_recorded_the_cache_file_resumes_with_that_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run directories written before this fix recorded DIR/requests.sqlite3."""
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    data_path = tmp_path / "data.jsonl"
    write_jsonl(data_path, rows(6))
    run = tmp_path / "run"
    with FakeOpenAI(handle) as srv:
        evaluate(data_path, METRICS, llm=Judge("test-model", base_url=srv.base_url), run_dir=run,
                 progress=False)  # fmt: skip
        sent = len(srv.chat_requests)
        manifest = json.loads((run / MANIFEST_FILE).read_text())
        cache_dir = Path(manifest["judge"]["cache"])
        manifest["judge"]["cache"] = str(cache_dir / CACHE_FILE_NAME)
        (run / MANIFEST_FILE).write_text(json.dumps(manifest))
        _cut_results(run, 2)
        evaluate(None, run_dir=run, resume=True, progress=False)
        assert len(srv.chat_requests) == sent


def test_where_the_cache_is_reads_back_as_the_same_cache(tmp_path: Path) -> None:
    cache = RequestCache(tmp_path / "c")
    location = cache_location(cache)
    assert location == str((tmp_path / "c").resolve())
    assert recorded_cache(location) == location
    assert recorded_cache(None) is False
    # the file an earlier manifest recorded names its directory...
    assert recorded_cache(str(tmp_path / "c" / CACHE_FILE_NAME)) == str(tmp_path / "c")
    # ...unless a directory of that name is the cache
    (tmp_path / "d" / CACHE_FILE_NAME).mkdir(parents=True)
    odd = str(tmp_path / "d" / CACHE_FILE_NAME)
    assert recorded_cache(odd) == odd
