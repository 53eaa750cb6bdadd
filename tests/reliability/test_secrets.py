"""The API key never reaches a file, a log or the terminal; no request leaves the machine.

A recognisable fake key is used for full runs (CLI in a child process and the Python API, with
a run directory, the request cache on, a report, debug logging), including servers that echo
the key back in their error messages. Every byte written under the test's directory is then
searched for it.
"""

from __future__ import annotations

import gc
import logging
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import handle as synthetic_answer, run_cli_in_child, tagged_rows, tags_of, write_jsonl
from rageval.cli import main
from rageval.judge import FatalJudgeError, Judge
from rageval.runner import evaluate
from rageval.testing import FakeOpenAI, Fault, NetworkBlockedError, RecordedRequest, Reply

KEY = "sk-rageval-SECRET-7f3a9c"
# the key, and a distinctive part of it that a masked echo ("sk-r...SECRET-7f3a9c") would keep
NEEDLES = (KEY.encode(), b"SECRET-7f3a9c")
METRICS = "faithfulness,answer_accuracy,context_relevance"


def leaks(root: Path) -> list[str]:
    """Every file under `root` (any depth, binary or text) that contains the key."""
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and any(n in p.read_bytes() for n in NEEDLES)
    )


def assert_clean(*texts: str) -> None:
    for text in texts:
        assert "SECRET-7f3a9c" not in text, text


def _echo_key_for_t001(req: RecordedRequest) -> Reply | Fault:
    """An upstream that quotes the caller's key in its error message, for one row only."""
    if "T001" in tags_of(req):
        return Fault.status(500, f"upstream rejected credentials {KEY} for this prompt")
    return synthetic_answer(req)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "home"
    home.mkdir()
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "OPENAI_API_KEY": KEY,
        "RAGEVAL_CACHE_DIR": str(tmp_path / "cache"),
        "XDG_CACHE_HOME": str(tmp_path / "xdg"),
    }


def test_a_full_cli_run_writes_the_key_nowhere(tmp_path: Path, env: dict[str, str]) -> None:
    data = tmp_path / "data.jsonl"
    write_jsonl(data, tagged_rows(6))
    with FakeOpenAI(synthetic_answer, api_key=KEY) as srv:
        base: list[str | Path] = ["evaluate", data, "-m", METRICS, "--llm", "judge-model"]
        base += ["--base-url", srv.base_url]
        first = run_cli_in_child(*base, "-o", tmp_path / "run", env=env)
        assert first.returncode == 0, first.stderr
        asked = len(srv.chat_requests)
        assert asked > 0
        assert all(r.headers.get("authorization") == f"Bearer {KEY}" for r in srv.chat_requests)
        again = run_cli_in_child(*base, "-o", tmp_path / "run2", env=env)  # answered from the cache
        assert again.returncode == 0, again.stderr
        assert len(srv.chat_requests) == asked
        report = run_cli_in_child("report", tmp_path / "run", env=env)
        stats = run_cli_in_child("cache", "stats", env=env)
    assert (tmp_path / "run" / "report.html").exists()
    assert any((tmp_path / "cache").iterdir()), "the cache was on"
    for done in (first, again, report, stats):
        assert done.returncode == 0, done.stderr
        assert_clean(done.stdout, done.stderr)
    data.unlink()
    assert leaks(tmp_path) == []
    (tmp_path / "run" / "planted.bin").write_bytes(b"\x00" + KEY.encode() + b"\x00")
    assert leaks(tmp_path) == [os.path.join("run", "planted.bin")]  # the scan can see a leak


def test_a_key_echoed_by_the_server_is_kept_out_of_results_and_logs(
    tmp_path: Path,
    rageval_cache_dir: Path,
    fast_backoff: None,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    log_file = tmp_path / "debug.log"
    handler = logging.FileHandler(log_file, encoding="utf-8")
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)  # every library's debug output, openai's and httpx's too
    try:
        with FakeOpenAI(_echo_key_for_t001, api_key=KEY) as srv:
            judge = Judge("judge-model", base_url=srv.base_url, max_retries=2)
            result = evaluate(
                tagged_rows(3), METRICS.split(","), llm=judge, run_dir=tmp_path / "api-run",
                progress=False,
            )  # fmt: skip
            # the CLI in this process too, where the backoff is fast
            code = main(
                ["evaluate", str(_data(tmp_path)), "-m", METRICS, "--llm", "judge-model",
                 "--base-url", srv.base_url, "-o", str(tmp_path / "cli-run")]
            )  # fmt: skip
            assert srv.handler_errors == []
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
        handler.close()
    assert code == 0
    out, err = capfd.readouterr()
    assert_clean(out, err)
    assert "upstream rejected credentials ***" in out  # the cause is shown, key masked

    cells = result.sample("s-T001").cells
    for name, cell in cells.items():
        assert cell.status == "not_measured", name
        assert "500" in (cell.cause or "") and "***" in (cell.cause or ""), cell.cause
    assert_clean(repr(result), result._repr_html_(), repr(judge), str(judge.describe()))
    assert log_file.stat().st_size > 0
    assert (tmp_path / "api-run" / "report.html").exists()
    assert (tmp_path / "cli-run" / "report.html").exists()
    assert any(rageval_cache_dir.iterdir()), "the request cache was on"
    assert leaks(tmp_path) == [] and leaks(rageval_cache_dir) == []


def _data(tmp_path: Path) -> Path:
    path = tmp_path / "data.jsonl"
    write_jsonl(path, tagged_rows(3))
    return path


def test_a_rejected_key_stops_the_run_without_printing_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    collect_garbage: None,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    refuse = Fault.status(401, f"Incorrect API key provided: {KEY}. Find yours at ...")
    with FakeOpenAI(lambda req: refuse) as srv:
        code = main(
            ["evaluate", str(_data(tmp_path)), "-m", METRICS, "--llm", "judge-model",
             "--base-url", srv.base_url, "-o", str(tmp_path / "run")]
        )  # fmt: skip
        with pytest.raises(FatalJudgeError) as info:
            evaluate(tagged_rows(2), ["faithfulness"], llm=Judge("judge-model", base_url=srv.base_url),
                     progress=False)  # fmt: skip
    out, err = capfd.readouterr()
    assert code == 3
    assert "401" in err and "OPENAI_API_KEY" in err
    assert_clean(out, err, str(info.value), info.value.detail, repr(info.value))
    assert leaks(tmp_path) == []


# ---------------------------------------------------------------------- network
class _Connects:
    """Wraps the guarded socket.connect: records each non-loopback attempt and its outcome."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.attempts: list[tuple[Any, type[BaseException] | None]] = []
        guarded = socket.socket.connect

        def connect(sock: socket.socket, address: Any) -> None:
            host = address[0] if isinstance(address, tuple) else None
            if host is None or host.startswith("127.") or host in ("::1", "localhost"):
                return guarded(sock, address)
            try:
                guarded(sock, address)
            except BaseException as e:
                self.attempts.append((address, type(e)))
                raise
            self.attempts.append((address, None))

        monkeypatch.setattr(socket.socket, "connect", connect)


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> Iterator[_Connects]:
    yield _Connects(monkeypatch)


REMOTE = "http://10.255.255.1/v1"


def test_a_non_loopback_endpoint_is_blocked_before_sending_and_not_retried(
    connects: _Connects, collect_garbage: None
) -> None:
    """With the judge's real backoff: a retry loop on the blocked connection would take
    15-30 s and show as more attempts than the asks of the first wave (3 extractions)."""
    judge = Judge("judge-model", base_url=REMOTE, api_key=KEY, cache=False)
    try:  # no endpoint check first: the judge's own requests are what is tested
        result = evaluate(tagged_rows(3), ["faithfulness"], llm=judge, progress=False, probe=False)
    except FatalJudgeError as e:  # the intended outcome (see the next test)
        assert "network guard" in str(e)
    else:
        assert result.statuses("faithfulness") == ["not_measured"] * 3
    assert connects.attempts, "the judge never tried to connect"
    assert all(kind is NetworkBlockedError for _, kind in connects.attempts), connects.attempts
    assert 1 <= len(connects.attempts) <= 3


def test_a_non_loopback_endpoint_stops_the_run_with_the_guards_error(
    connects: _Connects, tmp_path: Path, capsys: pytest.CaptureFixture[str], collect_garbage: None
) -> None:
    judge = Judge("judge-model", base_url=REMOTE, api_key=KEY, cache=False)
    with pytest.raises(FatalJudgeError, match="network guard"):
        evaluate(tagged_rows(3), ["faithfulness"], llm=judge, progress=False)
    code = main(
        ["evaluate", str(_data(tmp_path)), "-m", "faithfulness", "--llm", "judge-model",
         "--base-url", REMOTE, "-o", str(tmp_path / "run"), "--no-cache", "-q"]
    )  # fmt: skip
    assert code == 3 and "network guard" in capsys.readouterr().err


def test_a_run_stopped_by_a_fatal_error_leaves_no_unretrieved_task_error(
    caplog: pytest.LogCaptureFixture, collect_garbage: None
) -> None:
    def stopped_run() -> str:
        with FakeOpenAI(lambda req: Fault.status(401, "Incorrect API key provided.")) as srv:
            judge = Judge("judge-model", base_url=srv.base_url, api_key=KEY, cache=False)
            try:
                evaluate(
                    tagged_rows(5), ["faithfulness", "answer_accuracy"], llm=judge, progress=False
                )
            except FatalJudgeError as e:
                return str(e)  # and the traceback, holding the run's frames, goes
        return "the run was not stopped"

    assert "401" in stopped_run()
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        gc.collect()
    reports = [r.getMessage() for r in caplog.records if "never retrieved" in r.getMessage()]
    assert reports == []


def test_the_suites_child_processes_run_under_the_guard_too(
    tmp_path: Path, env: dict[str, str]
) -> None:
    done = run_cli_in_child(
        "evaluate", _data(tmp_path), "-m", "faithfulness", "--llm", "judge-model",
        "--base-url", REMOTE, "-o", tmp_path / "run", "--no-cache", "-q", env=env,
    )  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "network guard" in done.stderr and "Traceback" not in done.stderr
    assert_clean(done.stdout, done.stderr)
