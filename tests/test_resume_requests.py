"""A resumed run pays nothing twice: it keeps the request cache its manifest recorded (from the
command line and from Python, whatever RAGEVAL_CACHE_DIR says now), so an interrupted run and
its resume send, together, exactly the requests of an uninterrupted run.

The server counts the requests it answered. Nothing here waits on the clock: the interrupted
run is killed once the server holds every further request and the cache file holds every
answer, so the count cannot depend on how busy the machine is. Nor does where the run stops:
the server's gate closes itself after a number of answers fixed in advance (an uninterrupted
run's requests, less a few), not when the test sees rows finished, by which time a busy
machine may have let the run send its last requests.

The first Ctrl-C (or SIGTERM) stops a run without paying twice either: no request is sent after
it, the requests in flight are waited for and their answers cached. A second Ctrl-C stops at
once. There too nothing waits on the clock: the signal is sent once the server holds all the
run can send at once, and the gate opens only once the run has said it is stopping.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from helpers import (
    Gate,
    attempt,
    cli_child_command,
    handle,
    lines_in,
    requests_of_a_run,
    resume_env,
    rows,
    run_cli_in_child,
    wait_for_child,
    write_jsonl,
)
from rageval._client._cache import CACHE_FILE_NAME, cache_location, recorded_cache
from rageval.judge import Judge, RequestCache
from rageval.log import MANIFEST_FILE, RESULTS_FILE, SampleLine, read_manifest
from rageval.observers import RunObserver
from rageval.results import load_run
from rageval.runner import evaluate
from rageval.testing import FAKE_API_KEY, FakeOpenAI

METRICS = ["faithfulness", "context_recall"]
N = 24
#: the concurrency of the stopped runs: the requests they have in flight when stopped
STOP_CONCURRENCY = 4
#: the requests of a stopped (or killed) run still to be answered when the gate closes itself.
#: Only a row's faithfulness verdicts wait on another of its requests (its statements), so at
#: least half of them can be sent at once, more than the run's slots: the server comes to hold
#: STOP_CONCURRENCY, and the others are never sent, so a stopped run cannot finish. Every row
#: none of them belongs to finishes.
LEFT_AT_THE_GATE = 3 * STOP_CONCURRENCY


def _gate_mid_run(tmp_path: Path) -> tuple[Gate, int]:
    """A gate that closes itself with :data:`LEFT_AT_THE_GATE` requests of a run of `rows(N)`
    left, and the requests of that run uninterrupted."""
    total = requests_of_a_run(rows(N), METRICS, tmp_path / "ref-cache")
    return Gate(close_after=total - LEFT_AT_THE_GATE), total


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


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_kill_9_mid_run_then_resume_sends_each_request_once(tmp_path: Path) -> None:
    data = rows(N)
    data_path = tmp_path / "data.jsonl"
    write_jsonl(data_path, data)
    run, cache = tmp_path / "run", tmp_path / "cache"
    env = resume_env(cache)
    gate, total = _gate_mid_run(tmp_path)
    with FakeOpenAI(gate) as srv:
        command = cli_child_command(
            "evaluate", data_path, *(a for m in METRICS for a in ("-m", m)),
            "--llm", "test-model", "--base-url", srv.base_url,
            "--concurrency", str(STOP_CONCURRENCY), "-q", "-o", run,
        )  # fmt: skip
        proc = subprocess.Popen(
            command,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:

            def settled() -> bool:
                # the gate closed, every slot of the run holds a request the server keeps
                # (every one that got past the gate answered), and every answer the run
                # received committed to its cache: then kill it
                return (
                    gate.held == STOP_CONCURRENCY == srv.in_flight
                    and _cached_answers(cache) == gate.answered
                )

            wait_for_child(settled, "the server holds the rest and the answers are cached", proc)
            answered = gate.answered
        finally:
            proc.kill()
            proc.communicate()
        finished = lines_in(run / RESULTS_FILE)
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
    assert answered + len(sent_again) == total
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
    env = resume_env(tmp_path / "cache")
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


class _Stderr:
    """The child's stderr, read as it comes (a thread drains the pipe)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        self._fd = proc.stderr.fileno()
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for chunk in iter(lambda: os.read(self._fd, 4096), b""):
            self._chunks.append(chunk)

    @property
    def text(self) -> str:
        return b"".join(self._chunks).decode(errors="replace")

    def rest(self) -> str:
        self._reader.join()
        return self.text


def _stopping_run(
    tmp_path: Path, srv: FakeOpenAI, gate: Gate, first: signal.Signals, *, ignore_sigint: bool
) -> tuple[subprocess.Popen[bytes], _Stderr, int, Path]:
    """A run stopped with `first` while the server holds all the requests it has in flight
    (`gate` closes itself: :func:`_gate_mid_run`), once it said so on stderr; the process, its
    stderr, the requests answered before and the run directory."""
    data_path = tmp_path / "data.jsonl"
    write_jsonl(data_path, rows(N))
    run = tmp_path / "run"
    command = cli_child_command(
        "evaluate", data_path, *(a for m in METRICS for a in ("-m", m)),
        "--llm", "test-model", "--base-url", srv.base_url, "--concurrency", str(STOP_CONCURRENCY),
        "-q", "-o", run,
    )  # fmt: skip
    proc = subprocess.Popen(
        command,
        env=resume_env(tmp_path / "cache"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # SIG_IGN as for a background job started by a non-interactive shell; else SIGINT as
        # in a terminal, whatever this process inherited (CI may run the suite in background)
        preexec_fn=lambda: signal.signal(
            signal.SIGINT, signal.SIG_IGN if ignore_sigint else signal.SIG_DFL
        ),
    )
    stderr = _Stderr(proc)
    # the gate closed, and every slot of the run holds a request the server keeps: nothing
    # else can be sent now
    wait_for_child(
        lambda: gate.held == STOP_CONCURRENCY and srv.in_flight == STOP_CONCURRENCY,
        "all held",
        proc,
    )
    answered = gate.answered
    proc.send_signal(first)
    wait_for_child(lambda: "stopping:" in stderr.text, "the run says it is stopping", proc)
    return proc, stderr, answered, run


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize(
    ("first", "code", "ignore_sigint"),
    [
        (signal.SIGINT, 130, False),
        (signal.SIGTERM, 143, False),
        (signal.SIGTERM, 143, True),  # SIGINT ignored: the SIGTERM handler stops it the same
    ],
)
def test_first_signal_waits_for_the_requests_in_flight_and_the_resume_pays_nothing_twice(
    tmp_path: Path, first: signal.Signals, code: int, ignore_sigint: bool
) -> None:
    gate, total = _gate_mid_run(tmp_path)
    with FakeOpenAI(gate) as srv:
        proc, stderr, answered, run = _stopping_run(
            tmp_path, srv, gate, first, ignore_sigint=ignore_sigint
        )
        assert f"waiting for {STOP_CONCURRENCY} requests in flight" in stderr.text
        assert "Ctrl-C again to stop now" in stderr.text
        gate.closed = False  # the held requests are answered now: the run takes them, then ends
        assert proc.wait(timeout=300) == code
        said = stderr.rest()
        assert f"continue with --resume {run}" in said, said
        # the stop sent nothing: the server saw what it answered before and what it held
        assert len(srv.chat_requests) == answered + STOP_CONCURRENCY
        # mid-run: not every row finished, but each that none of the requests left at the
        # gate belongs to did
        assert N - LEFT_AT_THE_GATE <= lines_in(run / RESULTS_FILE) < N
        assert not (run / "summary.json").exists()
        before = len(srv.chat_requests)

        srv.reset()
        resumed = run_cli_in_child(
            "evaluate", "--resume", run, "-q", env=resume_env(tmp_path / "cache"), timeout=300
        )
        assert resumed.returncode == 0, resumed.stderr
        sent_again = len(srv.chat_requests)

    assert before + sent_again == total
    assert load_run(run).complete


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_second_ctrl_c_stops_at_once(tmp_path: Path) -> None:
    gate, _ = _gate_mid_run(tmp_path)
    with FakeOpenAI(gate) as srv:
        proc, stderr, _, run = _stopping_run(tmp_path, srv, gate, signal.SIGINT,
                                             ignore_sigint=False)  # fmt: skip
        # the gate stays closed: a run that waited for its requests would never end
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=300) == 130
        said = stderr.rest()
        gate.closed = False
    assert f"interrupted; finished rows are kept in {run}" in said, said
    assert 4 <= lines_in(run / RESULTS_FILE) < N
    assert not (run / "summary.json").exists()


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.usefixtures("sigint_as_in_a_terminal")
def test_ctrl_c_in_python_ends_as_interrupted_even_when_no_request_is_in_flight(
    tmp_path: Path,
) -> None:
    """`evaluate()` on the main thread stops as the command line does; a run whose started
    rows all finish during the stop still ends interrupted (rows were never started), not as a
    finished run with rows missing."""

    class CtrlCAfterThreeRows(RunObserver):
        def __init__(self) -> None:
            self.rows = 0

        def on_sample(self, line: SampleLine) -> None:
            self.rows += 1
            if self.rows == 3:
                signal.raise_signal(signal.SIGINT)

    run = tmp_path / "run"
    n = 400  # far more rows than the scheduler starts at once (its window)
    with pytest.raises(KeyboardInterrupt):
        evaluate(rows(n), ["token_f1"], run_dir=run, progress=False,
                 observers=[CtrlCAfterThreeRows()])  # fmt: skip
    assert 3 <= lines_in(run / RESULTS_FILE) < n
    assert not (run / "summary.json").exists()
