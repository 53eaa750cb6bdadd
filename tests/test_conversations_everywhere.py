"""Conversations through the rest of the product (issue 25, item 5): a budget, batch mode,
calibration against human labels and compare work on conversations as on single-turn rows.

The judge answers at random within each schema, seeded by the request, so that the same
request always gets the same reply (the metrics here ask at temperature 0 only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helpers import make_judge
from rageval import calibrate, evaluate
from rageval.errors import BudgetReached
from rageval.judge import BatchSettings
from rageval.results import EvaluationResult, compare, load_run
from rageval.testing import FakeOpenAI, RandomJudge
from synthetic_data import make_conversation

#: conversation metrics asked by the judge at temperature 0 (turn_answer_relevancy's questions
#: are drawn at a temperature above 0: a random judge draws them anew each time)
JUDGED = ["agent_goal_accuracy", "turn_faithfulness", "knowledge_retention", "topic_adherence"]
FAST = BatchSettings(poll_interval=0.02, settle=0.05)
PRICED = "gpt-4o-mini"  # a model of the built-in price table: a budget needs a known cost


def chats(n: int) -> list[dict[str, Any]]:
    return [make_conversation(i, exchanges=3) for i in range(n)]


def cells(result: EvaluationResult) -> dict[str, Any]:
    return {m: (result[m], result.statuses(m)) for m in JUDGED}


def test_batch_mode_gives_conversations_the_online_cells() -> None:
    with FakeOpenAI(RandomJudge(seed=7)) as server:
        online = evaluate(chats(6), JUDGED, llm=make_judge(server), progress=False)
    with FakeOpenAI(RandomJudge(seed=7)) as server:
        batched = evaluate(chats(6), JUDGED, llm=make_judge(server), batch=FAST, progress=False)
        assert server.chat_requests == []  # nothing went online
        assert server.batch_api.batches
    assert cells(batched) == cells(online)
    assert all("ok" in statuses for _, statuses in cells(online).values())
    assert batched.usage.requests == online.usage.requests


def test_a_budget_stops_a_conversation_run_and_the_resume_finishes_it(tmp_path: Path) -> None:
    data = chats(12)
    with FakeOpenAI(RandomJudge(seed=7)) as server:
        whole = evaluate(data, JUDGED, llm=make_judge(server, PRICED), progress=False)
        assert whole.usage.cost_usd is not None
        run = tmp_path / "run"
        with pytest.raises(BudgetReached) as stopped:
            evaluate(data, JUDGED, llm=make_judge(server, PRICED), run_dir=run,
                     max_cost=whole.usage.cost_usd / 3, progress=False)  # fmt: skip
        assert stopped.value.spent_usd <= whole.usage.cost_usd / 3
        partial = stopped.value.result
        assert isinstance(partial, EvaluationResult)
        assert 0 < partial.n_finished < len(data)
        resumed = evaluate(data, JUDGED, llm=make_judge(server, PRICED), run_dir=run, resume=True,
                           max_cost=None, progress=False)  # fmt: skip
    assert resumed.complete
    assert cells(resumed) == cells(whole)


def test_calibrate_measures_a_conversation_metric_against_human_labels(tmp_path: Path) -> None:
    data = chats(10)
    with FakeOpenAI(RandomJudge(seed=7)) as server:
        judged = evaluate(data, ["agent_goal_accuracy"], llm=make_judge(server), progress=False)
        # people who agree with the judge on every conversation but the first
        values = judged["agent_goal_accuracy"]
        assert all(v in (0.0, 1.0) for v in values) and len(set(values)) == 2
        agreed = [1 if v == 1.0 else 0 for v in values]
        labelled = [
            {**row, "human_goal": label if i else 1 - label}
            for i, (row, label) in enumerate(zip(data, agreed, strict=True))
        ]
        report = calibrate(labelled, labels={"human_goal": "agent_goal_accuracy"},
                           llm=make_judge(server), run_dir=tmp_path / "run",
                           progress=False)  # fmt: skip
    (agreement,) = report.agreements
    assert agreement.n_pairs == 10 and agreement.kind == "binary"
    assert agreement.statistics["accuracy"].value == pytest.approx(0.9)


def test_compare_pairs_the_conversations_of_two_runs(tmp_path: Path) -> None:
    data = chats(8)
    with FakeOpenAI(RandomJudge(seed=7)) as server:
        evaluate(data, JUDGED, llm=make_judge(server), run_dir=tmp_path / "a", progress=False)
    with FakeOpenAI(RandomJudge(seed=8)) as server:
        evaluate(data, JUDGED, llm=make_judge(server), run_dir=tmp_path / "b", progress=False)
    same = {c.metric: c for c in compare(load_run(tmp_path / "a"), load_run(tmp_path / "a"))}
    other = {c.metric: c for c in compare(load_run(tmp_path / "a"), load_run(tmp_path / "b"))}
    assert set(same) == set(other) == set(JUDGED)
    for metric in JUDGED:
        assert same[metric].diff.n_pairs == 8 and same[metric].diff.no_difference, metric
        assert same[metric].movers == [], metric
        assert other[metric].diff.n_pairs == 8, metric
    assert not all(other[metric].diff.no_difference for metric in JUDGED)
