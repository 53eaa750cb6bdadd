"""One writer per run directory (rageval._rundir_lock).

A run whose judge holds some rows at a gate is a writer in the middle of its run, for as long
as the test needs: every wait here is on a condition (lines in the log, requests at the gate),
never on a sleep, so the tests hold under any load. How fast a second writer is refused is
measured by `benchmarks/bench_reliability.py lock`, not here.
"""

from __future__ import annotations

import asyncio
import errno
import io
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from helpers import (
    cli_child_command,
    grader,
    handle,
    judge_for,
    labelled_rows,
    make_judge,
    rows,
    run_cli_in_child,
    sample_id_of,
    write_jsonl,
)
from rageval import _rundir_lock as _lock
from rageval._rundir_lock import LOCK_FILE, hold_run_dir
from rageval.cli import EXIT_IN_USE, main
from rageval.errors import RagevalError
from rageval.judge import FatalJudgeError, Judge
from rageval.runner import (
    RunDirError,
    RunDirInUseError,
    aalign,
    acalibrate,
    aevaluate,
    calibrate,
    evaluate,
)
from rageval.samples import InvalidDataError
from rageval.testing import FAKE_API_KEY, FakeOpenAI, RecordedRequest, Reply

N = 8
#: rows the gated judge answers at once; every other row's first request waits at the gate
FREE = {"s000", "s001", "s002"}
HELD = N - len(FREE)
HOST = socket.gethostname()


def gated(release: threading.Event) -> Callable[[RecordedRequest], Any]:
    """The synthetic judge, except that a request about a row outside FREE is answered only
    once `release` is set."""

    async def answer(req: RecordedRequest) -> Reply:
        if sample_id_of(req) not in FREE:
            while not release.is_set():
                await asyncio.sleep(0.01)
        reply = handle(req)
        assert isinstance(reply, Reply)
        return reply

    return answer


def at_the_gate(server: FakeOpenAI, run: Path) -> bool:
    """The run is in the middle: the free rows are written, each held row waits at the gate."""
    waiting = [
        r for r in server.chat_requests if sample_id_of(r) not in FREE and math.isnan(r.finished)
    ]
    log = run / "results.jsonl"
    return len(waiting) == HELD and log.exists() and log.read_bytes().count(b"\n") == len(FREE)


def wait_for(condition: Callable[[], bool], what: str, child: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 180
    while not condition():
        if child.poll() is not None:
            _, err = child.communicate()
            pytest.fail(f"the run ended before {what}: {child.returncode}\n{err.decode()}")
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.02)


async def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 180
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.01)


def files(run: Path) -> dict[str, bytes]:
    """Every file of the run directory, byte for byte."""
    return {p.name: p.read_bytes() for p in sorted(run.iterdir())}


def logged_ids(run: Path) -> list[str]:
    lines = (run / "results.jsonl").read_text(encoding="utf-8").splitlines()
    return sorted(json.loads(line)["id"] for line in lines)


def open_lock_files() -> list[str]:
    """What this process's open descriptors point to that is a lock file (Linux's /proc)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the descriptor listdir itself used, closed by now
            continue
        if LOCK_FILE in target:
            found.append(target)
    return found


def child_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "OPENAI_API_KEY": FAKE_API_KEY,
        "RAGEVAL_CACHE_DIR": str(tmp_path / "cache"),
    }


@contextmanager
def cli_run_at_the_gate(
    tmp_path: Path, server: FakeOpenAI
) -> Iterator[tuple[subprocess.Popen[bytes], Path]]:
    """`rageval evaluate` in a child, started on N rows and waiting at the gate: yields the
    child and its run directory; the child is killed if the test leaves it running."""
    data = tmp_path / "data.jsonl"
    write_jsonl(data, rows(N))
    config = tmp_path / "rageval.toml"
    # the held requests must not time out and be sent again while the test looks
    config.write_text("[judge]\ntimeout = 3600\n", encoding="utf-8")
    run = tmp_path / "run"
    command = cli_child_command(
        "evaluate", data, "-m", "faithfulness", "--llm", "test-model",
        "--base-url", server.base_url, "--no-cache", "-q", "-o", run, "--config", config,
    )  # fmt: skip
    child = subprocess.Popen(
        command, env=child_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        wait_for(lambda: at_the_gate(server, run), "the run waits at the gate", child)
        yield child, run
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()


def test_a_second_cli_writer_is_refused_at_once_naming_the_holder_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release = threading.Event()
    with (
        FakeOpenAI(gated(release)) as server,
        cli_run_at_the_gate(tmp_path, server) as (holder, run),
    ):
        before = files(run)
        assert json.loads(before[LOCK_FILE])["pid"] == holder.pid
        sent = len(server.requests)

        second = run_cli_in_child("evaluate", "--resume", run, "-q", env=child_env(tmp_path))
        assert second.returncode == EXIT_IN_USE, second.stderr
        assert f"{run} is in use" in second.stderr
        assert f"pid {holder.pid} on host {HOST}, since 20" in second.stderr
        assert "Traceback" not in second.stderr

        # data on stdin replacing the run: the copy of the data would be a write too
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"a": 1}\n')))
        replacing = ["evaluate", "-", "-m", "token_f1", "-o", str(run), "--overwrite"]
        assert main(replacing) == EXIT_IN_USE

        assert files(run) == before  # the log, the manifest, the lock file: untouched
        assert len(server.requests) == sent  # no probe, no judge request

        release.set()
        _, err = holder.communicate(timeout=180)
        assert holder.returncode == 0, err.decode()
    assert logged_ids(run) == sorted(r["id"] for r in rows(N))  # each row once
    assert not (run / LOCK_FILE).exists()


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL")
def test_a_holder_killed_with_sigkill_leaves_a_lock_file_that_blocks_nothing(
    tmp_path: Path,
) -> None:
    release = threading.Event()
    with FakeOpenAI(gated(release)) as server:
        with cli_run_at_the_gate(tmp_path, server) as (holder, run):
            holder.send_signal(signal.SIGKILL)
            holder.communicate()
        left = json.loads((run / LOCK_FILE).read_text(encoding="utf-8"))
        assert left["pid"] == holder.pid  # the dead holder's name is still there

        release.set()
        resumed = run_cli_in_child("evaluate", "--resume", run, "-q", env=child_env(tmp_path))
        assert resumed.returncode == 0, resumed.stderr
    assert logged_ids(run) == sorted(r["id"] for r in rows(N))
    assert (
        json.loads((run / "summary.json").read_text())["metrics"]["faithfulness"]["n_measured"] == N
    )
    assert not (run / LOCK_FILE).exists()


async def test_a_second_evaluation_in_the_same_process_raises_while_the_first_runs(
    tmp_path: Path,
) -> None:
    release = threading.Event()
    data = rows(N)
    run = tmp_path / "run"
    with FakeOpenAI(gated(release)) as server:
        judge = make_judge(server, cache=False)
        first = asyncio.create_task(
            aevaluate(data, ["faithfulness"], llm=judge, run_dir=run, progress=False)
        )
        await until(lambda: at_the_gate(server, run), "the run waits at the gate")
        before = files(run)
        sent = len(server.requests)

        ways: list[dict[str, Any]] = [{}, {"resume": True}, {"overwrite": True}]
        for how in ways:
            with pytest.raises(RunDirInUseError) as refused:
                await aevaluate(
                    data, ["faithfulness"], llm=judge, run_dir=run, progress=False, **how
                )
            assert (refused.value.pid, refused.value.host) == (os.getpid(), HOST)
            assert refused.value.started_at is not None
            assert f"pid {os.getpid()} on host {HOST} (this process), since" in str(refused.value)
        # from another thread, and a calibration into the same directory
        with pytest.raises(RunDirInUseError):
            await asyncio.to_thread(evaluate, data, ["token_f1"], run_dir=run, progress=False)
        with pytest.raises(RunDirInUseError):
            await acalibrate(data, {"human": "faithfulness"}, judge, run_dir=run)
        with pytest.raises(RunDirInUseError):  # an alignment writes align.json there
            await aalign(data, {"human": "faithfulness"}, judge, run_dir=run)
        # the error is a RunDirError: existing handlers still catch it
        assert issubclass(RunDirInUseError, RunDirError) and issubclass(RunDirError, RagevalError)

        assert files(run) == before
        assert len(server.requests) == sent
        release.set()
        result = await first
    assert result.n_finished == N
    assert logged_ids(run) == sorted(r["id"] for r in data)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="reads /proc/self/fd")
def test_the_lock_goes_when_a_run_ends_and_when_it_raises(
    tmp_path: Path, server: FakeOpenAI
) -> None:
    ended = tmp_path / "ended"
    evaluate(rows(3), ["faithfulness"], llm=make_judge(server), run_dir=ended, progress=False)
    assert not (ended / LOCK_FILE).exists() and open_lock_files() == []

    # a judge that refuses the key: the run has started (its manifest is written), then stops
    stopped = tmp_path / "stopped"
    with FakeOpenAI(handle, api_key=FAKE_API_KEY) as strict:
        refused = Judge("test-model", base_url=strict.base_url, api_key="sk-wrong", cache=False)
        with pytest.raises(FatalJudgeError):
            evaluate(
                rows(3), ["faithfulness"], llm=refused, run_dir=stopped, progress=False, probe=False
            )
    assert (stopped / "manifest.json").exists() and (stopped / "summary.json").exists()
    assert not (stopped / LOCK_FILE).exists() and open_lock_files() == []
    resumed = evaluate(
        rows(3), ["faithfulness"], make_judge(server), run_dir=stopped, resume=True, progress=False
    )
    assert resumed.n_finished == 3

    # bad data: nothing started, so nothing is left, not even the directory the lock made
    invalid = tmp_path / "invalid"
    with pytest.raises(InvalidDataError):
        evaluate([{"user_input": "q"}], ["faithfulness"], run_dir=invalid, progress=False)
    assert not invalid.exists() and open_lock_files() == []
    # the same in a directory that was there before: it stays, empty
    invalid.mkdir()
    with pytest.raises(InvalidDataError):
        evaluate([{"user_input": "q"}], ["faithfulness"], run_dir=invalid, progress=False)
    assert list(invalid.iterdir()) == []


def test_the_last_writes_are_made_holding_the_lock(
    tmp_path: Path, server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report (evaluate's last write) and calibration.json (calibrate's) are written while
    the lock file still names this process."""
    from rageval.log import write_atomic
    from rageval.runner import _rundir

    holders: dict[str, int] = {}

    def spy(name: str, write: Callable[..., Any]) -> Callable[..., Any]:
        def spied(*args: Any, **kwargs: Any) -> Any:
            run = args[0].path if name == "report" else args[0].parent
            holders[name] = json.loads((run / LOCK_FILE).read_text())["pid"]
            return write(*args, **kwargs)

        return spied

    monkeypatch.setattr(_rundir.RunDir, "write_report", spy("report", _rundir.RunDir.write_report))
    monkeypatch.setattr("rageval.runner._calibrate.write_atomic", spy("calibration", write_atomic))
    with FakeOpenAI(grader) as graded:
        calibrate(
            labelled_rows([4, 0, 4], ["yes", "no", "yes"]),
            {"human": "answer_accuracy"},
            judge_for(graded),
            run_dir=tmp_path / "run",
            progress=False,
        )
    assert holders == {"report": os.getpid(), "calibration": os.getpid()}
    assert not (tmp_path / "run" / LOCK_FILE).exists()


def test_a_lock_file_left_by_another_process_blocks_nothing(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    stale = {"pid": 4_000_000, "host": "elsewhere", "started_at": "2020-01-01T00:00:00+00:00"}
    (run / LOCK_FILE).write_text(json.dumps(stale), encoding="utf-8")
    data = [{"id": "a", "response": "x y", "reference": "x z"}]
    result = evaluate(data, ["token_f1"], run_dir=run, progress=False)
    assert result.n_finished == 1 and not (run / LOCK_FILE).exists()


def test_a_lock_file_replaced_between_open_and_lock_is_opened_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A holder that deletes its lock file on the way out while the next writer has opened it
    but not yet locked it: the next writer must hold the file at the path, not the old one."""
    run = tmp_path / "run"
    run.mkdir()
    (run / LOCK_FILE).write_text("", encoding="utf-8")
    real = _lock._lock
    calls: list[int] = []

    def holder_leaves_first(fd: int, path: Path) -> bool:
        if not calls:  # the old holder deletes the file; a third writer creates a new one
            path.unlink()
            path.write_text("", encoding="utf-8")
        calls.append(fd)
        return real(fd, path)

    monkeypatch.setattr(_lock, "_lock", holder_leaves_first)
    with hold_run_dir(run):
        assert len(calls) == 2  # the first file was let go, the new one locked
        assert json.loads((run / LOCK_FILE).read_text())["pid"] == os.getpid()
        # the file at the path is the locked one: another process cannot lock it
        probe = (
            "import fcntl, sys\n"
            "with open(sys.argv[1], 'rb') as fh:\n"
            "    try:\n"
            "        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
            "    except BlockingIOError:\n"
            "        print('held')\n"
        )
        other = subprocess.run(
            [sys.executable, "-c", probe, str(run / LOCK_FILE)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert other.stdout.strip() == "held", other.stderr


def test_a_filesystem_without_locks_warns_and_still_excludes_writers_in_this_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    import fcntl

    monkeypatch.setattr(fcntl, "flock", no_locks)
    run = tmp_path / "run"
    data = [{"response": "a", "reference": "a"}]
    with hold_run_dir(run), ThreadPoolExecutor(1) as other_thread:
        assert "cannot lock" in caplog.text and "gives no locks" in caplog.text
        second = other_thread.submit(evaluate, data, ["token_f1"], run_dir=run, progress=False)
        with pytest.raises(RunDirInUseError):
            second.result()


def test_a_run_directory_that_cannot_be_one_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    write_jsonl(data, [{"response": "a b", "reference": "a c"}])
    taken = tmp_path / "a-file"
    taken.write_text("not a directory", encoding="utf-8")
    assert main(["evaluate", str(data), "-m", "token_f1", "-o", str(taken)]) == 2
    assert f"rageval: {taken} is not a directory" in capsys.readouterr().err
    with pytest.raises(RunDirError, match="is not a directory"):
        evaluate(str(data), ["token_f1"], run_dir=taken, progress=False)
    assert taken.read_text(encoding="utf-8") == "not a directory"
