"""Usage accounting, prices, and the judge package's import cost."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from pydantic import BaseModel

import rageval
from rageval.judge import Judge, JudgeCallFailed, ModelPrice, PriceTable, Usage, UsageLedger
from rageval.testing import FakeOpenAI, Fault, Reply

SRC = str(Path(rageval.__file__).resolve().parents[1])


class Verdict(BaseModel):
    verdict: int


def question(i: object) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"question {i}"}]


async def test_usage_rolls_up_by_tag_with_cost(fake_openai: FakeOpenAI) -> None:
    prices = PriceTable({"m": (1.0, 2.0)}, include_defaults=False)
    judge = Judge(
        "m", base_url=fake_openai.base_url, api_key="k", prices=prices, mode="json_schema"
    )
    fake_openai.script(
        Reply.json({"verdict": 1}, prompt_tokens=100, completion_tokens=10),
        Reply.json({"verdict": 1}, prompt_tokens=200, completion_tokens=20),
        Fault.status(500),
        Reply.json({"verdict": 1}, prompt_tokens=300, completion_tokens=30),
    )
    await judge.ask(question(1), Verdict, tags={"metric": "faith", "sample": "s1"})
    await judge.ask(question(2), Verdict, tags={"metric": "faith", "sample": "s2"})
    await judge.ask(question(3), Verdict, tags={"metric": "recall", "sample": "s1"})
    await judge.ask(question(3), Verdict, tags={"metric": "recall", "sample": "s1"})  # hit

    by_metric = judge.usage.by_tag("metric")
    faith, recall = by_metric["faith"], by_metric["recall"]
    assert replace(faith, cost_usd=None) == Usage(300, 30, requests=2, cost_usd=None)
    assert replace(recall, cost_usd=None) == Usage(
        300, 30, requests=2, retries=1, cache_hits=1, cost_usd=None
    )
    assert faith.cost_usd == recall.cost_usd == pytest.approx((300 * 1.0 + 30 * 2.0) / 1e6)
    assert judge.usage.by_tag("sample")["s1"].prompt_tokens == 400
    total = judge.usage.total
    assert (total.prompt_tokens, total.completion_tokens, total.requests) == (600, 60, 4)
    assert total.cost_usd == pytest.approx((600 * 1.0 + 60 * 2.0) / 1e6)
    assert total.total_tokens == 660
    assert judge.usage.tag_names() == ["metric", "sample"]


async def test_failed_calls_still_count(fake_openai: FakeOpenAI) -> None:
    judge = Judge("m", base_url=fake_openai.base_url, api_key="k", max_reasks=1)
    fake_openai.script(Reply.text("nope", prompt_tokens=10, completion_tokens=1))
    fake_openai.script(Reply.text("nope", prompt_tokens=12, completion_tokens=1))
    with pytest.raises(JudgeCallFailed):
        await judge.ask(question(1), Verdict, tags={"metric": "x"})
    usage = judge.usage.by_tag("metric")["x"]
    assert (usage.prompt_tokens, usage.requests, usage.reasks) == (22, 2, 1)


async def test_unknown_model_cost_is_unknown_not_zero(fake_openai: FakeOpenAI) -> None:
    judge = Judge("my-local-llama", base_url=fake_openai.base_url, api_key="k")
    reply = await judge.ask(question(1), Verdict)
    assert reply.usage.prompt_tokens > 0
    assert reply.usage.cost_usd is None
    assert judge.usage.total.cost_usd is None


def test_price_table_defaults_snapshots_and_overrides() -> None:
    table = PriceTable()
    assert table.cost("gpt-4o-mini", 1_000_000, 1_000_000) == pytest.approx(0.75)
    found = table.price("gpt-4o-mini-2024-07-18")
    assert found is not None and (found.input, found.output) == (0.15, 0.60)
    assert table.price("gpt-4o") != table.price("gpt-4o-mini")
    assert table.cost("unknown-model", 10, 10) is None
    mine = PriceTable({"gpt-4o-mini": (1.0, 1.0), "local": (0.0, 0.0)})
    assert mine.cost("gpt-4o-mini", 500_000, 500_000) == pytest.approx(1.0)
    assert mine.cost("local", 10**6, 10**6) == 0.0
    assert PriceTable({"x": (1, 1)}, include_defaults=False).price("gpt-4o") is None
    with pytest.raises(ValueError):
        PriceTable({"x": (-1, 0)})
    with pytest.raises(ValueError, match="'x'"):
        PriceTable({"x": (1.0,)})


def test_cached_and_batch_rates() -> None:
    # gpt-4o-mini: input 0.15, cached input 0.075, output 0.60; batch at half of each
    table = PriceTable()
    million = 1_000_000
    # 600k of 1M prompt tokens cached: 0.4 * 0.15 + 0.6 * 0.075 = 0.105, plus 0.6 output
    assert table.cost("gpt-4o-mini", million, million, cached_tokens=600_000) == pytest.approx(
        0.705
    )
    assert table.cost("gpt-4o-mini", million, million, batch=True) == pytest.approx(0.375)
    assert table.cost(
        "gpt-4o-mini", million, million, cached_tokens=million, batch=True
    ) == pytest.approx(0.0375 + 0.30)
    # a model without a cached rate bills cached tokens as input; cached never exceeds the prompt
    assert table.cost("gpt-4-turbo", million, 0, cached_tokens=2 * million) == pytest.approx(10.0)
    # a price given without batch rates: a batched request's cost is unknown, never guessed
    mine = PriceTable({"local": (1.0, 2.0, 0.5)}, include_defaults=False)
    assert mine.cost("local", million, 0, cached_tokens=million) == pytest.approx(0.5)
    assert mine.cost("local", 10, 10, batch=True) is None
    full = PriceTable(
        {"m": ModelPrice(1.0, 2.0, batch_input=0.4, batch_output=0.8)}, include_defaults=False
    )
    assert full.cost("m", million, million, cached_tokens=million, batch=True) == pytest.approx(1.2)
    as_mapping = PriceTable({"m": {"input": 1.0, "output": 2.0, "batch_input": 0.5,
                                   "batch_output": 1.0}})  # fmt: skip
    assert as_mapping.cost("m", million, million, batch=True) == pytest.approx(1.5)


async def test_cached_prompt_tokens_are_counted_and_priced(fake_openai: FakeOpenAI) -> None:
    judge = Judge("gpt-4o-mini", base_url=fake_openai.base_url, api_key="k", cache=False)
    fake_openai.script(
        Reply.json({"verdict": 1}, prompt_tokens=2000, completion_tokens=10, cached_tokens=1536)
    )
    reply = await judge.ask(question(1), Verdict)
    assert (reply.usage.prompt_tokens, reply.usage.cached_tokens) == (2000, 1536)
    expected = (464 * 0.15 + 1536 * 0.075 + 10 * 0.60) / 1_000_000
    assert reply.usage.cost_usd == pytest.approx(expected)
    assert judge.usage.total.cached_tokens == 1536


def test_usage_addition_and_ledger_threads() -> None:
    assert (Usage(cost_usd=1.0) + Usage(cost_usd=None)).cost_usd is None
    assert (Usage(1, 2, cost_usd=0.5) + Usage(3, 4, cost_usd=0.25)) == Usage(4, 6, cost_usd=0.75)
    ledger = UsageLedger()

    async def record_many() -> None:
        await asyncio.gather(
            *(
                asyncio.to_thread(ledger.record, Usage(1, requests=1), {"k": str(i % 3)})
                for i in range(300)
            )
        )

    asyncio.run(record_many())
    assert ledger.total.requests == 300
    assert sum(u.prompt_tokens for u in ledger.by_tag("k").values()) == 300
    assert ledger.by_tag("missing") == {}


def test_import_and_construction_do_not_import_openai() -> None:
    code = (
        "import sys\n"
        "import rageval.judge as j\n"
        "j.Judge('m', base_url='http://127.0.0.1:9/v1', api_key='k')\n"
        "j.llm_factory('m')\n"
        "assert 'openai' not in sys.modules, 'openai imported'\n"
        "assert 'httpx2' not in sys.modules and 'httpx' not in sys.modules\n"
    )
    env = {**os.environ, "PYTHONPATH": SRC}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
