"""The budget (`evaluate(max_cost=)`, `--max-cost`): the spending never passes it and stops
less than one request's worst case below it; the run ends resumable (exit 5), and a resume
finishes it with the results of an uninterrupted run."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest

from helpers import handle, rows, write_jsonl
from rageval import evaluate
from rageval._client._budget import SpendingLimit
from rageval._progress import ProgressLine
from rageval.cli import EXIT_BUDGET, main
from rageval.errors import BudgetReached
from rageval.judge import Judge, PriceTable
from rageval.results import EvaluationResult, load_run
from rageval.runner import RunConfigError
from rageval.testing import FAKE_API_KEY, FakeOpenAI, RecordedRequest

METRICS = ["faithfulness", "answer_accuracy", "context_precision"]
# gpt-4o-mini's list prices, USD per token
INPUT, OUTPUT = 0.15 / 1e6, 0.60 / 1e6


def judge(server: FakeOpenAI, **kw: Any) -> Judge:
    kw.setdefault("cache", False)
    return Judge("gpt-4o-mini", base_url=server.base_url, api_key=FAKE_API_KEY, **kw)


def worst_case(request: RecordedRequest) -> float:
    """The most a request could cost: its prompt and its whole reply budget (an upper bound
    of its prompt: the characters of everything sent, at 4 per token, plus 4 per message)."""
    sent = request.prompt_chars + len(request.schema_text)
    prompt = math.ceil(sent / 4) + 4 * len(request.messages)
    return prompt * INPUT + int(request.body["max_tokens"]) * OUTPUT


def values(result: EvaluationResult) -> dict[str, list[float | None]]:
    return {m: result[m] for m in METRICS}


def test_spending_limit_waits_for_requests_in_flight_then_stops() -> None:
    async def scenario() -> list[str]:
        limit = SpendingLimit(1.0)
        events = []
        await limit.reserve(0.6)
        await limit.reserve(0.3)

        async def third() -> None:
            await limit.reserve(0.3)  # 0.9 reserved: waits for the others to settle
            events.append("third sent")
            limit.settle(0.3, 0.25)

        waiting = asyncio.ensure_future(third())
        await asyncio.sleep(0.01)
        events.append("first settles")
        limit.settle(0.6, 0.5)  # spent 0.5, reserved 0.3: 0.3 more fits
        await asyncio.sleep(0.01)
        limit.settle(0.3, 0.2)
        await waiting
        assert math.isclose(limit.spent_usd, 0.95) and limit.reserved_usd == 0.0
        with pytest.raises(BudgetReached, match=r"\$1\.0000 is reached") as raised:
            await limit.reserve(0.1)  # nothing in flight: it can never fit
        assert raised.value.spent_usd == pytest.approx(0.95)
        await limit.reserve(0.05)  # a smaller one still fits
        return events

    assert asyncio.run(scenario()) == ["first settles", "third sent"]
    with pytest.raises(ValueError):
        SpendingLimit(0)


def test_the_budget_stops_within_one_request_and_a_resume_finishes(tmp_path: Path) -> None:
    data = rows(30)
    with FakeOpenAI(handle) as server:
        whole = evaluate(data, METRICS, llm=judge(server), progress=False)
        cost = whole.usage.cost_usd
        assert cost is not None
        budget = cost / 3
        server.reset()
        run = tmp_path / "run"
        with pytest.raises(BudgetReached) as stopped:
            evaluate(data, METRICS, llm=judge(server), run_dir=run, max_cost=budget,
                     progress=False)  # fmt: skip
        spent = stopped.value.spent_usd
        largest = max(worst_case(r) for r in server.chat_requests)
        assert budget - largest < spent <= budget
        partial = stopped.value.result
        assert isinstance(partial, EvaluationResult)
        assert 0 < partial.n_finished < len(data)
        # rows start only while they fit beside those in flight, with room for a request's
        # worst case: the budget went to finished rows, not to many rows half done when it
        # ran out (up to the room kept and a row or two at the edge)
        assert partial.usage.cost_usd is not None
        assert partial.usage.cost_usd >= budget - largest - 2 * cost / len(data)
        assert (run / "summary.json").exists()  # a stopped run still says how far it got
        # max_cost=None: no budget now (not given, the run's own would apply again)
        resumed = evaluate(data, METRICS, llm=judge(server), run_dir=run, resume=True,
                           max_cost=None, progress=False)  # fmt: skip
    assert resumed.complete
    assert values(resumed) == values(whole)


def test_with_the_request_cache_a_resume_pays_nothing_twice(tmp_path: Path) -> None:
    data = rows(20)
    with FakeOpenAI(handle) as server:
        whole = evaluate(data, METRICS, llm=judge(server), progress=False)
        sent = len(server.chat_requests)
        assert whole.usage.cost_usd is not None
        server.reset()
        run = tmp_path / "run"
        with pytest.raises(BudgetReached):
            evaluate(data, METRICS, llm=judge(server, cache=True), run_dir=run,
                     max_cost=whole.usage.cost_usd / 2, progress=False)  # fmt: skip
        # rows in flight when the budget stopped the run are not in the log, but what they
        # were told is in the request cache: the resume asks only for the rest
        resumed = evaluate(data, METRICS, llm=judge(server, cache=True), run_dir=run,
                           resume=True, max_cost=None, progress=False)  # fmt: skip
        assert len(server.chat_requests) == sent
    assert values(resumed) == values(whole)


def test_after_a_budget_stop_and_resume_the_cost_prices_every_request_the_server_answered(
    tmp_path: Path,
) -> None:
    # (issue 42: the rows in flight at the stop were answered and paid, and their answers
    # cached, but no line held their usage: the resume got them free, and the run's cost left
    # them out: 508 of 520 requests priced)
    data = rows(20)
    with FakeOpenAI(handle) as server:
        whole = evaluate(data, METRICS, llm=judge(server), progress=False)
        assert whole.usage.cost_usd is not None
        server.reset()
        run = tmp_path / "run"
        with pytest.raises(BudgetReached) as stopped:
            evaluate(data, METRICS, llm=judge(server, cache=True), run_dir=run,
                     max_cost=whole.usage.cost_usd / 2, progress=False)  # fmt: skip
        partial = stopped.value.result
        assert isinstance(partial, EvaluationResult)
        answered_at_stop = len(server.chat_requests)
        assert partial.usage.requests == answered_at_stop  # the unfinished rows' too
        resumed = evaluate(data, METRICS, llm=judge(server, cache=True), run_dir=run,
                           resume=True, max_cost=None, progress=False)  # fmt: skip
        answered = len(server.chat_requests)
    assert resumed.usage.requests == answered == whole.usage.requests
    assert resumed.usage.cost_usd == pytest.approx(whole.usage.cost_usd)
    assert load_run(run).usage == resumed.usage  # as summary.json holds it


def test_a_budget_needs_a_known_price_and_the_cli_exits_5(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeOpenAI(handle) as server:
        unknown = Judge("my-llama", base_url=server.base_url, api_key=FAKE_API_KEY)
        with pytest.raises(RunConfigError, match=r"price of the judge model my-llama.*--price"):
            evaluate(rows(2), METRICS, llm=unknown, max_cost=1.0, progress=False)
        priced = Judge("my-llama", base_url=server.base_url, api_key=FAKE_API_KEY,
                       prices=PriceTable({"my-llama": (1.0, 1.0)}))  # fmt: skip
        evaluate(rows(1), ["answer_accuracy"], llm=priced, max_cost=1.0, progress=False)
        with pytest.raises(RunConfigError, match="positive"):
            evaluate(rows(1), METRICS, llm=priced, max_cost=0, progress=False)
        assert len(server.chat_requests) == 2

        data = tmp_path / "data.jsonl"
        write_jsonl(data, rows(12))
        monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
        run = tmp_path / "run"
        base = ["evaluate", str(data), "-m", ",".join(METRICS), "--base-url", server.base_url,
                "--no-cache", "-q"]  # fmt: skip
        code = main([*base, "--llm", "my-llama", "-o", str(tmp_path / "x"), "--max-cost", "1"])
        assert code == 2 and "--price" in capsys.readouterr().err
        code = main([*base, "--llm", "gpt-4o-mini", "-o", str(run), "--max-cost", "0.0002"])
        err = capsys.readouterr().err
        assert code == EXIT_BUDGET == 5
        assert "stopped at the budget" in err and f"--resume {run}" in err
        # --max-cost none: no budget now (without it, the run's own applies again)
        resume = ["--llm", "gpt-4o-mini", "--resume", str(run), "--max-cost", "none"]
        assert main([*base, *resume]) == 0


def test_the_progress_line_shows_spent_and_budget() -> None:
    line = ProgressLine(10)
    line.counters.requests, line.counters.cost_usd, line.counters.budget_usd = 3, 0.0123, 0.05
    assert "cost $0.0123 / $0.0500" in line.text()


def test_concurrent_runs_on_one_judge_each_keep_their_own_budget() -> None:
    """The budget belongs to the run, not to the judge: two runs at once on one Judge stop
    each at its own budget, a run after them has none, and the judge is as it was built."""
    data = rows(12)
    with FakeOpenAI(handle) as server:
        shared = judge(server)
        whole = evaluate(data, METRICS, llm=shared, progress=False)
        # (after a first run: describe() also says which structured-output mode was probed)
        built = shared.describe()
        cost = whole.usage.cost_usd
        assert cost is not None
        small, large = cost / 4, cost / 2

        async def both() -> tuple[EvaluationResult | BaseException, ...]:
            from rageval import aevaluate

            return await asyncio.gather(
                aevaluate(data, METRICS, llm=shared, max_cost=small, progress=False),
                aevaluate(data, METRICS, llm=shared, max_cost=large, progress=False),
                return_exceptions=True,
            )

        first, second = asyncio.run(both())
        assert isinstance(first, BudgetReached) and isinstance(second, BudgetReached)
        assert (first.max_cost_usd, second.max_cost_usd) == (small, large)
        assert first.spent_usd <= small < second.spent_usd <= large
        assert shared.describe() == built
        # a third run, without a budget, is charged against none: it finishes
        third = evaluate(data, METRICS, llm=shared, progress=False)
        assert third.complete and values(third) == values(whole)
        assert shared.describe() == built
