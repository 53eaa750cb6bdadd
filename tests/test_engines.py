"""The engine seam without Ray: options, several judge endpoints, what is shipped to workers,
the limiter's shared-rate hook, request cache shards, and the rate keeper's pacing.

The Ray engine itself is tested in test_engine_ray.py (marked ray, run in the CI's ray job).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from helpers import assert_ray_not_imported, handle, make_judge, rows, sample_id_of
from rageval._client._cache import RequestCache, merge_shards
from rageval._client._limiter import RateBudget
from rageval.embeddings import Embeddings, LocalEmbeddings
from rageval.judge import Judge, PriceTable, endpoint_limiter
from rageval.metrics import ContextPrecision, Faithfulness
from rageval.results import load_run
from rageval.runner import RunConfigError, evaluate
from rageval.runner._schedule import spread
from rageval.runner.engines import RAY_INSTALL_HINT
from rageval.runner.engines._ray_worker import (
    ALLOWANCE_S,
    MAX_LATENESS_S,
    RateKeeper,
    SharedRates,
)
from rageval.runner.engines._ship import ShippedJudge, WorkerJob, build
from rageval.testing import FAKE_API_KEY, FakeOpenAI, Fault, Reply

METRICS = ["faithfulness", "context_recall", "context_precision"]
SRC = str(Path(__file__).resolve().parents[1] / "src")


# ---------------------------------------------------------------------- import cost


def test_import_rageval_and_the_cli_do_not_import_ray() -> None:
    assert_ray_not_imported()


# ---------------------------------------------------------------------- options


def test_engine_options_are_checked_before_any_work(fake_openai: FakeOpenAI) -> None:
    judge = make_judge(fake_openai)
    for kw, words in (
        ({"engine": "spark"}, "engine must be one of local, ray"),
        ({"ray_address": "127.0.0.1:6379"}, "need engine='ray'"),
        ({"ray_actors": 2}, "need engine='ray'"),
        ({"engine": "ray", "ray_actors": 0}, "at least 1"),
    ):
        with pytest.raises(RunConfigError, match=words):
            evaluate(rows(2), METRICS, llm=judge, progress=False, **kw)
    assert fake_openai.requests == []


def test_engine_ray_without_ray_names_the_extra(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from rageval.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "ray", None)  # not installed (even where it is)
    with pytest.raises(MissingExtraError) as caught:
        evaluate(rows(2), METRICS, llm=make_judge(fake_openai), engine="ray", progress=False)
    assert (
        str(caught.value) == f"engine='ray' needs ray, which is not installed: {RAY_INSTALL_HINT}"
    )
    assert fake_openai.requests == []

    from rageval.cli import main

    assert main(["evaluate", "data.jsonl", "--engine", "ray"]) == 2


@pytest.mark.ray  # the shipping check runs where the extra is installed
def test_what_cannot_be_shipped_is_refused_before_any_work(fake_openai: FakeOpenAI) -> None:
    import openai

    given = Judge("test-model", client=openai.AsyncOpenAI(base_url=fake_openai.base_url,
                                                          api_key=FAKE_API_KEY))  # fmt: skip
    with pytest.raises(RunConfigError, match="client object"):
        evaluate(rows(2), METRICS, llm=given, engine="ray", progress=False)

    class OwnEmbeddings(Embeddings):
        name = "own"

        def _embed_batch(self, texts: list[str]) -> Any:
            raise AssertionError("never called")

    with pytest.raises(RunConfigError, match="cannot be sent to Ray workers"):
        evaluate(rows(2), ["answer_relevancy"], llm=make_judge(fake_openai),
                 embeddings=OwnEmbeddings(), engine="ray", progress=False)  # fmt: skip
    assert fake_openai.requests == []


# ---------------------------------------------------------------------- several endpoints


def test_rows_spread_over_judge_endpoints(tmp_path: Path) -> None:
    data = rows(30)
    with FakeOpenAI(handle) as one, FakeOpenAI(handle) as two, FakeOpenAI(handle) as alone:
        spread_out = evaluate(data, METRICS, llm=[make_judge(one), make_judge(two)],
                              run_dir=tmp_path / "spread", progress=False)  # fmt: skip
        single = evaluate(data, METRICS, llm=make_judge(alone), progress=False)
        asked = {
            0: {sample_id_of(r) for r in one.chat_requests},
            1: {sample_id_of(r) for r in two.chat_requests},
        }
        assert len(one.chat_requests) + len(two.chat_requests) == len(alone.chat_requests)
        urls = [one.base_url, two.base_url]
    for endpoint, ids in asked.items():
        assert ids == {r["id"] for r in data if spread(r["id"], 2) == endpoint}
    assert asked[0] and asked[1]
    for metric in METRICS:
        assert spread_out[metric] == single[metric]
    manifest = json.loads((tmp_path / "spread" / "manifest.json").read_text())
    assert manifest["judge"]["base_urls"] == urls
    assert manifest["engine"] == "local"
    assert load_run(tmp_path / "spread")[METRICS[0]] == single[METRICS[0]]


def test_a_list_of_judges_must_be_one_model_on_distinct_endpoints(
    fake_openai: FakeOpenAI,
) -> None:
    judge = make_judge(fake_openai)
    other = Judge("other-model", base_url=fake_openai.base_url, api_key=FAKE_API_KEY)
    with pytest.raises(RunConfigError, match="endpoints of one model"):
        evaluate(rows(2), METRICS, llm=[judge, other], progress=False)
    with pytest.raises(RunConfigError, match="more than once"):
        evaluate(rows(2), METRICS, llm=[judge, make_judge(fake_openai)], progress=False)
    with pytest.raises(RunConfigError, match="non-empty list"):
        evaluate(rows(2), METRICS, llm=[], progress=False)


def test_spread_is_stable_and_balanced() -> None:
    ids = [f"row-{i}" for i in range(3000)]
    picks = [spread(i, 3) for i in ids]
    assert picks == [spread(i, 3) for i in ids]
    assert all(900 < picks.count(k) < 1100 for k in range(3))
    assert {spread(i, 1) for i in ids} == {0}


# ---------------------------------------------------------------------- shipping


def test_a_judge_is_rebuilt_with_its_settings_and_key(tmp_path: Path) -> None:
    judge = Judge("m", base_url="http://127.0.0.1:9/v1", api_key="sk-secret-value",
                  temperature=0.3, max_tokens=77, timeout=9.0, max_retries=2, seed=5,
                  max_concurrency=12, requests_per_minute=600, mode="tools", max_reasks=1,
                  max_prompt_tokens=5000, prices=PriceTable({"m": (1.0, 2.0)}),
                  cache=tmp_path)  # fmt: skip
    shipped = ShippedJudge.of(judge)
    assert "sk-secret-value" not in repr(shipped)
    copy = pickle.loads(pickle.dumps(shipped))
    rebuilt = copy.build(max_concurrency=3, cache=None)
    # every setting travels (max_prompt_tokens was once left behind); the limits are the
    # endpoint's, shared in this process with the judge shipped (ShippedJudge.build's share)
    limits = {"max_concurrency": None, "requests_per_minute": None, "tokens_per_minute": None}
    assert rebuilt.spec.model_copy(update=limits) == judge.spec.model_copy(update=limits)
    assert rebuilt.max_prompt_tokens == 5000
    assert rebuilt.describe()["api_key_from"] == judge.describe()["api_key_from"]
    assert rebuilt._endpoint.target.secret == "sk-secret-value"
    price = rebuilt.prices.price("m")
    assert price is not None and (price.input, price.output) == (1.0, 2.0)
    assert shipped.endpoint.requests_per_minute == 600
    assert rebuilt.cache is None


def test_worker_job_shares_objects_splits_concurrency_and_shards_caches(tmp_path: Path) -> None:
    run = Judge("m", base_url="http://127.0.0.1:9/v1", api_key="k", max_concurrency=16,
                cache=tmp_path)  # fmt: skip
    own = Judge("m2", base_url="http://127.0.0.1:8/v1", api_key="k", max_concurrency=4,
                cache=False)  # fmt: skip
    metrics = [Faithfulness(llm=own), ContextPrecision(llm=own), ContextPrecision()]
    metrics[2].name = "context_precision_2"
    job = WorkerJob.of(metrics, [run], LocalEmbeddings(), label="job-1", workers=3,
                       rates_actor=None)  # fmt: skip
    assert len(job.judges) == 2 and len(job.embeddings) == 1
    assert [m.judge for m in job.metrics] == [1, 1, None]
    assert all(m.metric.llm is None for m in job.metrics)
    assert job.runs_local_model and job.cache_dirs() == [str(tmp_path)]
    assert [job.concurrency_share(j.endpoint) for j in job.judges] == [5, 1]
    built = build(pickle.loads(pickle.dumps(job)), embed_threads=1)
    assert built.metrics[0].llm is built.metrics[1].llm is built.judges[1]
    assert built.run_judges == [built.judges[0]]
    shard = built.judges[0].cache
    assert shard is not None and shard.path.parent == tmp_path / "shards"
    assert shard.path.name.startswith(f"job-1.{os.getpid()}.")


def test_an_actor_with_another_rageval_version_refuses_the_job() -> None:
    import dataclasses

    from rageval.runner.engines._ray_worker import ScoreBatch

    job = WorkerJob.of([Faithfulness()], [], None, label="j", workers=1, rates_actor=None)
    with pytest.raises(RuntimeError, match="install the same version on every node"):
        ScoreBatch(dataclasses.replace(job, rageval_version="0.0.0-elsewhere"))


# ---------------------------------------------------------------------- the limiter's hook


class Verdict(BaseModel):
    verdict: int


class RecordingRates(RateBudget):
    def __init__(self) -> None:
        self.turns: list[int] = []
        self.settled: list[int] = []

    @property
    def requests_per_minute(self) -> float | None:
        return 42.0

    @property
    def tokens_per_minute(self) -> float | None:
        return None

    async def wait_turn(self, estimated_tokens: int) -> None:
        self.turns.append(estimated_tokens)

    def settle(self, delta_tokens: int) -> None:
        self.settled.append(delta_tokens)


async def test_a_shared_budget_paces_every_request_retries_included() -> None:
    with FakeOpenAI() as server:
        judge = make_judge(server, requests_per_minute=1)  # alone, this would wait a minute
        rates = RecordingRates()
        limiter = endpoint_limiter(judge.base_url)
        limiter.share_rates(rates)
        assert limiter.requests_per_minute == 42.0
        server.script(Fault.status(500), Reply.json({"verdict": 1}), Reply.json({"verdict": 0}))
        started = time.monotonic()
        await judge.ask([{"role": "user", "content": "a"}], Verdict)
        await judge.ask([{"role": "user", "content": "b"}], Verdict)
        assert time.monotonic() - started < 30  # not the minute its own pace would take
        assert len(rates.turns) == len(server.chat_requests) == 3
        assert rates.settled, "the server's token counts correct the estimates"
        limiter.share_rates(None)
        assert limiter.requests_per_minute == 1


# ---------------------------------------------------------------------- the rate keeper


def test_rate_keeper_paces_each_endpoint_with_room_for_late_sends() -> None:
    keeper = RateKeeper({"a": (600, None), "b": (None, 6000)})
    now = time.time()
    slots = [keeper.reserve("a", 1, now) for _ in range(601)]
    step = 60 * (60 + ALLOWANCE_S) / 60 / 600
    assert all(b - a == pytest.approx(step) for a, b in itertools.pairwise(slots))
    # any 600 consecutive requests span more than a minute plus the allowance
    assert slots[600] - slots[0] == pytest.approx(60 + ALLOWANCE_S)
    tokens = [keeper.reserve("b", 100, now) for _ in range(3)]  # 100 of 6000 a minute
    assert tokens[1] - tokens[0] == pytest.approx(1.0 * (60 + ALLOWANCE_S) / 60)
    keeper.settle("b", -100)  # the second used nothing after all
    assert keeper.reserve("b", 100, now) - tokens[2] == pytest.approx(0.0, abs=1e-6)
    later = now + 100
    assert keeper.reserve("a", 1, later) == pytest.approx(later)


class _Remote:
    """``.remote(...)`` of an actor method: the answer is computed at once, then it travels
    (``transit`` seconds) and, the first time, the caller's loop is blocked for ``block``."""

    def __init__(self, fn: Any, block: float = 0.0) -> None:
        self.fn, self.block = fn, block
        self.answers: list[Any] = []

    def remote(self, *args: Any) -> Any:
        answer = self.fn(*args)
        self.answers.append(answer)

        async def travel() -> Any:
            await asyncio.sleep(0)
            if self.block:
                time.sleep(self.block)  # the worker's event loop is busy meanwhile
                self.block = 0.0
            return answer

        return travel()


class FakeKeeper:
    """The RateKeeper's methods behind an actor-like handle (``.reserve.remote(...)``)."""

    def __init__(self, keeper: RateKeeper, block: float = 0.0) -> None:
        self.reserve = _Remote(keeper.reserve, block)
        self.settle = _Remote(keeper.settle)


async def test_shared_rates_send_at_their_slot() -> None:
    handle_ = FakeKeeper(RateKeeper({"a": (1200, None)}))
    rates = SharedRates(handle_, "a", 1200, None)
    sent = []
    for _ in range(6):
        await rates.wait_turn(10)
        sent.append(time.time())
    slots = handle_.reserve.answers
    assert len(slots) == 6
    for slot, at in zip(slots, sent, strict=True):
        assert slot - 0.002 <= at <= slot + MAX_LATENESS_S
    assert slots[5] - slots[0] == pytest.approx(5 * (60 + ALLOWANCE_S) / 1200)


async def test_a_slot_missed_by_a_busy_worker_is_not_used() -> None:
    handle_ = FakeKeeper(RateKeeper({"a": (60, None)}))
    rates = SharedRates(handle_, "a", 60, None)
    await rates.wait_turn(1)  # the first slot is now
    handle_.reserve.block = 1.0 + 0.4  # the next slot is a second later: this worker misses it
    started = time.time()
    await rates.wait_turn(1)
    _, missed, taken = handle_.reserve.answers
    assert time.time() - taken <= MAX_LATENESS_S
    assert taken - missed >= (60 + ALLOWANCE_S) / 60 - 1e-6  # a later slot, not the missed one
    assert time.time() - started >= 2.0


# ---------------------------------------------------------------------- cache shards


def test_a_shard_writes_its_own_file_and_reads_the_main_one(tmp_path: Path) -> None:
    main = RequestCache(tmp_path)
    main.put("k-main", "m", '{"v": 1}', {"requests": 1})
    main.put_record("c-main", "cell")
    main.set_mode("http://e", "m", "tools")
    main.flush()
    shard = RequestCache.shard(tmp_path, "job-7")
    assert shard.path.parent == tmp_path / "shards"
    assert shard.get("k-main") == ('{"v": 1}', {"requests": 1})
    assert shard.get_records(["c-main", "nope"]) == {"c-main": "cell"}
    assert shard.get_mode("http://e", "m") == "tools"
    shard.put("k-shard", "m", '{"v": 2}', {})
    shard.put_vectors("m", {"v-shard": b"\x00\x01"})
    shard.flush()
    assert shard.get("k-shard") is not None
    assert RequestCache(tmp_path).get("k-shard") is None, "a shard never writes the main file"
    with pytest.raises(ValueError, match="shard label"):
        RequestCache.shard(tmp_path, "a.b")


def _write_shard_in_child(directory: Path, label: str, key: str) -> None:
    code = (
        "import sys\n"
        "from rageval._client._cache import RequestCache\n"
        "c = RequestCache.shard(sys.argv[1], sys.argv[2])\n"
        "c.put(sys.argv[3], 'm', '{}', {})\n"
        "c.put_vectors('m', {sys.argv[3] + '-v': b'xy'})\n"
        "c.put_record(sys.argv[3] + '-c', 'cell')\n"
        "c.set_mode('http://e', sys.argv[3], 'json')\n"
        "c.flush()\n"
    )
    subprocess.run([sys.executable, "-c", code, str(directory), label, key],
                   check=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=120)  # fmt: skip


def test_merge_takes_the_shards_of_ended_writers_only(tmp_path: Path) -> None:
    _write_shard_in_child(tmp_path, "done-job", "k1")
    _write_shard_in_child(tmp_path, "done-job", "k2")
    live = RequestCache.shard(tmp_path, "live-job")
    live.put("k-live", "m", "{}", {})
    live.flush()
    elsewhere = tmp_path / "shards" / f"other-job.1.not-{os.uname().nodename}.sqlite3"
    elsewhere.write_bytes(b"")

    assert merge_shards(tmp_path) == 2
    main = RequestCache(tmp_path)
    for key in ("k1", "k2"):
        assert main.get(key) is not None
        assert main.get_vectors([key + "-v"]) == {key + "-v": b"xy"}
        assert main.get_records([key + "-c"]) == {key + "-c": "cell"}
        assert main.get_mode("http://e", key) == "json"
    assert main.get("k-live") is None
    left = sorted(p.name for p in (tmp_path / "shards").glob("*.sqlite3"))
    assert left == sorted([live.path.name, elsewhere.name])

    assert merge_shards(tmp_path) == 0  # nothing more to merge

    # a finished job whose writer has not ended yet: waited for, then copied but kept
    started = time.monotonic()
    assert merge_shards(tmp_path, wait_for="live-job", timeout=0.3) == 1
    assert time.monotonic() - started >= 0.3
    assert RequestCache(tmp_path).get("k-live") is not None
    assert live.path.exists()
    live.put("k-live-2", "m", "{}", {})  # the writer goes on; its file is still its own
    live.flush()
    assert live.get("k-live-2") is not None
