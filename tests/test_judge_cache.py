"""Judge request cache: hits send nothing, survive a restart, never mix models, never hold
errors or the API key. Real openai SDK against FakeOpenAI on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import rageval
from rageval._client import _cache
from rageval.judge import Judge, JudgeCallFailed, RequestCache
from rageval.testing import FakeOpenAI, Fault, Reply

KEY = "sk-test-SECRET-1234567890"
SRC = str(Path(rageval.__file__).resolve().parents[1])


class Verdict(BaseModel):
    verdict: int


def question(i: object) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"question {i}"}]


def make_judge(server: FakeOpenAI, model: str = "m", **kw: Any) -> Judge:
    return Judge(model, base_url=server.base_url, api_key=KEY, **kw)


async def test_hit_sends_no_request(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.json({"verdict": 4}, prompt_tokens=30, completion_tokens=5))
    judge = make_judge(fake_openai)
    first = await judge.ask(question(1), Verdict, tags={"metric": "a"})
    second = await make_judge(fake_openai).ask(question(1), Verdict, tags={"metric": "a"})
    assert len(fake_openai.chat_requests) == 1
    assert second.value == first.value == Verdict(verdict=4)
    assert (first.cached, second.cached) == (False, True)
    assert (second.usage.cache_hits, second.usage.requests, second.usage.cost_usd) == (1, 0, 0.0)
    assert judge.cache is not None and judge.cache.hits == 1


async def test_models_params_and_schemas_never_share_entries(fake_openai: FakeOpenAI) -> None:
    class Other(BaseModel):
        verdict: int
        why: str = ""

    variants = [
        make_judge(fake_openai, "model-a"),
        make_judge(fake_openai, "model-b"),
        make_judge(fake_openai, "model-a", temperature=0.5),
        make_judge(fake_openai, "model-a", seed=1),
        make_judge(fake_openai, "model-a", max_tokens=99),
    ]
    for judge in variants:
        assert not (await judge.ask(question(1), Verdict)).cached
    assert not (await variants[0].ask(question(1), Other)).cached
    assert not (await variants[0].ask(question(2), Verdict)).cached
    assert len(fake_openai.chat_requests) == 7
    for judge in variants:  # each one's own entry is there
        assert (await judge.ask(question(1), Verdict)).cached
    assert len(fake_openai.chat_requests) == 7


async def test_failures_are_not_cached(fake_openai: FakeOpenAI) -> None:
    judge = make_judge(fake_openai, max_retries=0, max_reasks=0)
    fake_openai.script(Fault.status(503), Reply.text("not json"))
    for _ in range(2):
        with pytest.raises(JudgeCallFailed):
            await judge.ask(question(1), Verdict)
    reply = await judge.ask(question(1), Verdict)
    assert not reply.cached
    assert len(fake_openai.chat_requests) == 3
    assert judge.cache is not None
    assert judge.cache.stats()["entries"]["completions"] == 1


async def test_cached_value_failing_a_new_check_is_asked_again(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.json({"verdict": 7}), Reply.json({"verdict": 1}))
    judge = make_judge(fake_openai)
    await judge.ask(question(1), Verdict)

    def binary(v: Verdict) -> None:
        if v.verdict not in (0, 1):
            raise ValueError("verdict must be 0 or 1")

    reply = await judge.ask(question(1), Verdict, check=binary)
    assert (reply.cached, reply.value.verdict) == (False, 1)
    assert (await judge.ask(question(1), Verdict, check=binary)).cached


async def test_cache_off_writes_nothing(fake_openai: FakeOpenAI, rageval_cache_dir: Path) -> None:
    judge = make_judge(fake_openai, cache=False)
    await judge.ask(question(1), Verdict)
    await judge.ask(question(1), Verdict)
    assert len(fake_openai.chat_requests) == 2
    assert not rageval_cache_dir.exists()
    assert judge.describe()["cache"] is None


async def test_cache_in_a_chosen_directory(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    judge = make_judge(fake_openai, cache=tmp_path / "mine")
    await judge.ask(question(1), Verdict)
    assert (tmp_path / "mine" / "requests.sqlite3").exists()
    # a run's manifest records the directory, which cache= takes back
    assert judge.describe()["cache"] == str((tmp_path / "mine").resolve())


async def test_stats_and_clear(fake_openai: FakeOpenAI, rageval_cache_dir: Path) -> None:
    cache = RequestCache()
    assert cache.stats()["entries"]["completions"] == 0
    assert not rageval_cache_dir.exists()  # stats() creates nothing
    judge = make_judge(fake_openai, cache=cache)
    await asyncio.gather(*(judge.ask(question(i), Verdict) for i in range(5)))
    await judge.ask(question(0), Verdict)
    stats = cache.stats()
    assert stats["path"] == str(rageval_cache_dir / "requests.sqlite3")
    assert stats["entries"] == {"completions": 5, "embeddings": 0, "records": 0, "modes": 1}
    assert (stats["hits"], stats["misses"]) == (1, 5)
    assert stats["size_bytes"] > 0
    assert cache.clear() == {"completions": 5, "embeddings": 0, "records": 0, "modes": 1}
    assert RequestCache().stats()["entries"]["completions"] == 0
    assert not (await judge.ask(question(0), Verdict)).cached


def test_clear_also_forgets_the_kept_cells_of_earlier_versions(rageval_cache_dir: Path) -> None:
    cache = RequestCache()
    cache.put_record("cell:1", "{}")
    cache.flush()
    # an earlier rageval kept the runner's cells in a table of their own
    with sqlite3.connect(cache.path) as conn:
        conn.execute("CREATE TABLE cells (key TEXT PRIMARY KEY, value TEXT, created REAL)")
        conn.execute("INSERT INTO cells VALUES ('k', '{}', 0)")
    assert cache.clear()["records"] == 1
    with sqlite3.connect(cache.path) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "cells" not in tables and "records" in tables


_CHILD = textwrap.dedent(
    """
    import asyncio, json, sys
    from pydantic import BaseModel
    from rageval.judge import Judge

    class Verdict(BaseModel):
        verdict: int

    async def main(base_url, model, questions):
        judge = Judge(model, base_url=base_url)
        replies = await asyncio.gather(
            *(judge.ask([{"role": "user", "content": q}], Verdict) for q in questions)
        )
        print(json.dumps({"cached": [r.cached for r in replies],
                          "requests": judge.usage.total.requests,
                          "mode": judge.describe()["structured_output"]}))

    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
    """
)


def run_child(base_url: str, model: str, *questions: str) -> dict[str, object]:
    env = {**os.environ, "OPENAI_API_KEY": KEY, "PYTHONPATH": SRC}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, base_url, model, *questions],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_hits_and_probed_mode_survive_a_restart(rageval_cache_dir: Path) -> None:
    with FakeOpenAI(supports=("tools",)) as server:
        first = run_child(server.base_url, "m", "q1")
        assert first == {"cached": [False], "requests": 2, "mode": "tools"}  # probe + answer
        again = run_child(server.base_url, "m", "q1")
        assert again == {"cached": [True], "requests": 0, "mode": None}
        assert len(server.chat_requests) == 2
        fresh = run_child(server.base_url, "m", "q2")  # mode read from the cache directory
        assert fresh == {"cached": [False], "requests": 1, "mode": "tools"}
        assert [r.mode for r in server.chat_requests] == ["json_schema", "tools", "tools"]
    assert_no_key_in(rageval_cache_dir)


def test_two_processes_share_the_cache_file(rageval_cache_dir: Path) -> None:
    questions = [f"q{i}" for i in range(40)]
    with FakeOpenAI(latency=0.01) as server:
        env = {**os.environ, "OPENAI_API_KEY": KEY, "PYTHONPATH": SRC}
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _CHILD, server.base_url, "m", *questions[i::2]],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(2)
        ]
        for proc in procs:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
        stats = RequestCache().stats()
        assert stats["entries"]["completions"] == 40
        assert run_child(server.base_url, "m", *questions)["cached"] == [True] * 40


class _LockedAtFirst:
    """A sqlite connection whose first attempts at some statements fail as sqlite fails when
    two processes lock each other out: SQLITE_BUSY at once, the busy timeout not consulted."""

    def __init__(self, conn: sqlite3.Connection, failures: dict[str, int]) -> None:
        self._conn, self._failures = conn, failures

    def execute(self, sql: str, *params: Any) -> sqlite3.Cursor:
        if self._failures.get(sql, 0) > 0:
            self._failures[sql] -= 1
            raise sqlite3.OperationalError("database is locked")
        return self._conn.execute(sql, *params)

    def close(self) -> None:
        self._conn.close()


def test_a_lock_met_at_once_is_waited_out_not_a_lost_write(
    rageval_cache_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    failures = {"PRAGMA journal_mode=WAL": 2, "BEGIN IMMEDIATE": 3, _cache._GET_COMPLETION: 1}
    connect = sqlite3.connect
    with monkeypatch.context() as patch:
        patch.setattr(
            sqlite3, "connect", lambda *a, **kw: _LockedAtFirst(connect(*a, **kw), failures)
        )
        cache = RequestCache()
        assert cache.get("k0") is None  # the open is retried; the locked lookup is a miss
        for i in range(3):
            cache.put(f"k{i}", "m", json.dumps({"verdict": i}), {"requests": 1})
            cache.flush()  # each commit meets a lock first
        assert not any(failures.values())
    assert RequestCache().stats()["entries"]["completions"] == 3
    assert "disabled" not in caplog.text


_FORKED_CACHE: RequestCache | None = None


def _use_cache_in_forked_child(key: str) -> list[bool]:
    assert _FORKED_CACHE is not None
    _FORKED_CACHE.put(key, "m", "{}", {})
    _FORKED_CACHE.flush()  # the parent's writer thread does not exist here
    return [_FORKED_CACHE.get(k) is not None for k in (key, "parent")]


def test_a_forked_child_can_use_the_cache(
    rageval_cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import multiprocessing

    cache = RequestCache()
    cache.put("parent", "m", "{}", {})
    cache.flush()
    cache.put("queued at the fork", "m", "{}", {})  # the writer thread is alive when we fork
    monkeypatch.setitem(globals(), "_FORKED_CACHE", cache)
    with multiprocessing.get_context("fork").Pool(1) as pool:
        found = pool.apply_async(_use_cache_in_forked_child, ("child",)).get(timeout=60)
    assert found == [True, True]
    cache.flush()
    assert RequestCache().stats()["entries"]["completions"] == 3


async def test_the_key_is_in_no_file_the_library_writes(rageval_cache_dir: Path) -> None:
    with FakeOpenAI(supports=("tools",)) as server:
        server.script(Fault.status(500), Reply.text("bad"), Fault.rate_limit(0.05))
        judge = make_judge(server)
        await asyncio.gather(*(judge.ask(question(i), Verdict) for i in range(5)))
        await judge.ask(question(1), Verdict)
    assert_no_key_in(rageval_cache_dir)


def assert_no_key_in(directory: Path) -> None:
    files = [p for p in directory.rglob("*") if p.is_file()]
    assert files, "expected the cache to have written something"
    for path in files:
        data = path.read_bytes()
        assert KEY.encode() not in data, path
        assert KEY.encode("utf-16-le") not in data, path
