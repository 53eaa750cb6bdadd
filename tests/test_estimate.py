"""The dry run (`rageval evaluate --dry-run`, `rageval.estimate`): validates like a run, sends
nothing, and plans every request a run makes -- request for request, token for token when the
judge's statements are the sentences the estimate predicts."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import fields
from pathlib import Path
from typing import Any, ClassVar

import pytest

from helpers import handle, rows, write_jsonl
from rageval import estimate, evaluate
from rageval.cli import main
from rageval.judge import Judge, PriceTable
from rageval.metrics import Metric, MetricResult
from rageval.metrics.base import ScoringContext, registered_metrics, scores_conversations
from rageval.runner import RunConfigError, RunSpec
from rageval.runner._prepare import RunOptions, prepare
from rageval.samples import InvalidDataError, Sample
from rageval.testing import FAKE_API_KEY, FakeOpenAI

JUDGE_METRICS = sorted(
    name
    for name, cls in registered_metrics().items()
    if cls.needs_llm and not scores_conversations(cls)
)
CONVERSATION_JUDGE_METRICS = sorted(
    name
    for name, cls in registered_metrics().items()
    if cls.needs_llm and scores_conversations(cls)
)


def judge(server: FakeOpenAI, model: str = "gpt-4o-mini", **kw: Any) -> Judge:
    return Judge(model, base_url=server.base_url, api_key=FAKE_API_KEY, cache=False, **kw)


def edge_rows() -> list[dict[str, Any]]:
    """Ordinary rows and the edges where a metric sends fewer requests or none: blank
    fields, no context, 120 contexts (two verdict requests of at most 100 items)."""
    # every row answers twice, for pairwise's second answer (response_b)
    base = [{**row, "response_b": f"Answer B to {row['id']}: the sky is green."} for row in rows(3)]
    many = [f"Passage {i} says the sky is blue on day {i}." for i in range(120)]
    return [
        *base,
        {**base[0], "id": "blank-response", "response": "  "},
        {**base[0], "id": "blank-reference", "reference": ""},
        {**base[0], "id": "blank-question", "user_input": " "},
        {**base[0], "id": "no-context", "retrieved_contexts": ["", " "]},
        {**base[0], "id": "many-contexts", "retrieved_contexts": many},
        {
            **base[1],
            "id": "long",
            "response": "The sky is blue. Grass is green. Snow is white. Coal is black.",
            "reference": "The sky is blue. Grass is green. Night is dark.",
        },
    ]


def test_the_plan_is_what_a_run_sends_for_every_judge_metric() -> None:
    data = edge_rows()
    with FakeOpenAI(handle) as server:
        planned = estimate(data, JUDGE_METRICS, llm=judge(server))
        assert server.requests == []  # the dry run sends nothing
        result = evaluate(data, JUDGE_METRICS, llm=judge(server), progress=False)
        sent = len(server.chat_requests)
    actual = result.usage_by_metric
    assert planned.requests.estimate == sent == result.usage.requests
    for name, part in {**planned.metrics, **planned.shared}.items():
        assert part.requests.estimate == actual[name].requests, name
        # the synthetic judge extracts each sentence as a statement, as the plan predicts
        assert part.prompt_tokens.estimate == actual[name].prompt_tokens, name
        assert part.requests.low <= part.requests.estimate <= part.requests.high
        assert part.prompt_tokens.low < part.prompt_tokens.estimate < part.prompt_tokens.high
    # 9 rows; none without a reference or a context; two for the 120 contexts
    assert planned.metrics["context_precision"].requests.estimate == 8
    assert planned.prompt_tokens.estimate == result.usage.prompt_tokens
    assert planned.rows == len(data) and planned.cells_kept == 0


def conversation_rows() -> list[dict[str, Any]]:
    """Conversations of the ordinary rows' turns, and the edges: a turn that only calls a
    tool, a turn without contexts, a blank response, contexts all blank, a blank goal, blank
    topics."""
    turns: list[dict[str, Any]] = []
    for row in rows(3):
        turns.append({"role": "user", "content": row["user_input"]})
        turns.append(
            {
                "role": "assistant",
                "content": row["response"],
                "retrieved_contexts": row["retrieved_contexts"],
                "reference": row["reference"],
            }
        )
    edges: list[dict[str, Any]] = [
        {"role": "user", "content": "And the weather?"},
        {"role": "assistant", "tool_calls": [{"name": "weather", "arguments": {"city": "Oslo"}}]},
        {"role": "tool", "name": "weather", "content": "Snow."},
        {"role": "assistant", "content": "It snows in Oslo."},
        {"role": "user", "content": "Anything else?"},
        {"role": "assistant", "content": " ", "retrieved_contexts": ["The sky is blue."]},
        {"role": "user", "content": "Sure?"},
        {"role": "assistant", "content": "The sky is blue.", "retrieved_contexts": ["", " "]},
    ]
    goal = "The user learns what the sky looks like."
    topics = ["the sky", "weather"]
    return [
        {"id": "conv", "turns": turns, "reference_goal": goal, "reference_topics": topics},
        {
            "id": "edges",
            "turns": [*turns[:2], *edges],
            "reference_goal": " ",
            "reference_topics": [" "],
        },
        {"id": "one", "turns": turns[:2], "reference_goal": goal, "reference_topics": topics},
    ]


def test_the_plan_is_what_a_run_sends_for_every_conversation_judge_metric() -> None:
    data = conversation_rows()
    with FakeOpenAI(handle) as server:
        planned = estimate(data, CONVERSATION_JUDGE_METRICS, llm=judge(server))
        assert server.requests == []
        result = evaluate(data, CONVERSATION_JUDGE_METRICS, llm=judge(server), progress=False)
        sent = len(server.chat_requests)
    assert planned.requests.estimate == sent == result.usage.requests
    actual = result.usage_by_metric
    for name, part in {**planned.metrics, **planned.shared}.items():
        assert part.requests.estimate == actual[name].requests, name
        assert part.prompt_tokens.estimate == actual[name].prompt_tokens, name
    # turn_faithfulness: statements + verdicts for each of conv's 3 turns, edges' first turn
    # and its last (blank contexts: statements only), one's turn: 3 * 2 + 2 + 1 + 2 = 11
    faithfulness = planned.metrics["turn_faithfulness"].requests.estimate
    assert faithfulness + planned.shared["shared:statements"].requests.estimate == 11


def test_dry_run_validates_like_a_run_and_sends_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    write_jsonl(data, rows(4))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    with FakeOpenAI(handle) as server:
        common = ("evaluate", str(data), "--llm", "gpt-4o-mini", "--base-url", server.base_url)
        assert main([*common, "--dry-run", "--json", "-m", "faithfulness,context_recall"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert set(out) >= {"requests", "prompt_tokens", "completion_tokens", "cost_usd"}
        assert set(out["requests"]) == {"estimate", "low", "high"}
        assert out["requests"]["estimate"] == 4 * 3  # statements, verdicts, recall verdicts
        assert set(out["metrics"]) == {"faithfulness", "context_recall"}
        assert set(out["shared"]) == {"shared:statements"}
        assert out["cost_usd"]["low"] <= out["cost_usd"]["estimate"] <= out["cost_usd"]["high"]
        assert main([*common, "--dry-run", "-m", "faithfulness"]) == 0
        table = capsys.readouterr().out
        assert "nothing was sent" in table and "faithfulness" in table and "total" in table
        # a row a metric cannot score is reported as a run reports it, before anything
        write_jsonl(data, [*rows(2), {"id": "bad", "response": "no question"}])
        assert main([*common, "--dry-run", "-m", "faithfulness"]) == 2
        assert "bad" in capsys.readouterr().err
        assert main([*common, "--json"]) == 2  # --json only with --dry-run
        assert server.requests == []
    assert not (tmp_path / "rageval-runs").exists()  # nothing written either
    with pytest.raises(InvalidDataError, match="user_input"):
        estimate(data, ["faithfulness"], llm="gpt-4o-mini")


def test_cost_uses_the_price_table_and_batch_rates(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = rows(5)
    with FakeOpenAI(handle) as server:
        online = estimate(data, ["answer_accuracy"], llm=judge(server))
        batched = estimate(data, ["answer_accuracy"], llm=judge(server), batch=True)
        assert online.cost_usd is not None and batched.cost_usd is not None
        # gpt-4o-mini's batch rates are half its online ones
        assert batched.cost_usd.estimate == pytest.approx(online.cost_usd.estimate / 2)
        p, c = online.prompt_tokens.estimate, online.completion_tokens.estimate
        assert online.cost_usd.estimate == pytest.approx((0.15 * p + 0.60 * c) / 1e6)
        unknown = estimate(data, ["answer_accuracy"], llm=judge(server, "my-llama"))
        assert unknown.cost_usd is None and "--price" in unknown.notes[0]
        priced = judge(server, "my-llama", prices=PriceTable({"my-llama": (1.0, 2.0)}))
        found = estimate(data, ["answer_accuracy"], llm=priced)
        assert found.cost_usd is not None
        assert estimate(data, ["answer_accuracy"], llm=priced, batch=True).cost_usd is None
        # the command line's --price
        path = tmp_path / "d.jsonl"
        write_jsonl(path, data)
        monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
        args = ["evaluate", str(path), "--llm", "my-llama", "--base-url", server.base_url]
        assert main([*args, "-m", "answer_accuracy", "--dry-run", "--json",
                     "--price", "my-llama=1,2"]) == 0  # fmt: skip
        assert json.loads(capsys.readouterr().out)["cost_usd"] == found.cost_usd.model_dump()
        # DATA may follow the prices, as it may follow every NAME=VALUE option
        assert main(["evaluate", "--llm", "my-llama", "--base-url", server.base_url,
                     "-m", "answer_accuracy", "--dry-run", "--json",
                     "--price", "my-llama=1,2", str(path)]) == 0  # fmt: skip
        assert json.loads(capsys.readouterr().out)["cost_usd"] == found.cost_usd.model_dump()
        assert main([*args, "--dry-run", "--price", "my-llama=1"]) == 2
        assert "--price" in capsys.readouterr().err
        assert server.requests == []


def test_cells_kept_from_an_earlier_run_cost_nothing() -> None:
    data = rows(4)
    with FakeOpenAI(handle) as server:
        cached = Judge("gpt-4o-mini", base_url=server.base_url, api_key=FAKE_API_KEY)
        before = estimate(data, ["faithfulness", "answer_accuracy"], llm=cached)
        assert before.requests.estimate == 4 * 4 and before.cells_kept == 0
        evaluate(data, ["faithfulness", "answer_accuracy"], llm=cached, progress=False)
        sent = len(server.chat_requests)
        after = estimate(data, ["faithfulness", "answer_accuracy"], llm=cached)
        assert after.cells_kept == 8 and after.requests.estimate == 0
        assert after.shared == {}  # no cell left to need the statements
        assert len(server.chat_requests) == sent


def test_n_generations_and_an_endpoint_that_ignores_n() -> None:
    data = rows(3)
    with FakeOpenAI(handle) as server:
        honours = estimate(data, ["answer_relevancy"], llm=judge(server))
        part = honours.metrics["answer_relevancy"]
        # one request with n=3 per sample, but up to 3 if the endpoint turns out not to honour n
        assert (part.requests.estimate, part.requests.low) == (3, 3)
        assert part.requests.high == pytest.approx(3 * 3 * 1.1)
    with FakeOpenAI(handle, ignore_n=True) as server:
        evaluate(rows(1), ["answer_relevancy"], llm=judge(server), progress=False)  # learns it
        ignored = estimate(data, ["answer_relevancy"], llm=judge(server))
        assert ignored.metrics["answer_relevancy"].requests.estimate == 9


class Undeclared(Metric):
    name = "undeclared_test_metric"
    required_fields: ClassVar[tuple[str, ...]] = ("response",)
    needs_llm: ClassVar[bool] = True

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        return MetricResult.ok(1.0)


def test_a_metric_that_does_not_declare_its_requests_is_named() -> None:
    with FakeOpenAI(handle) as server:
        found = estimate(rows(2), [Undeclared(), "answer_accuracy"], llm=judge(server))
    part = found.metrics["undeclared_test_metric"]
    assert part.declared is False and part.requests.estimate == 0
    assert "undeclared_test_metric" in found.notes[0]
    [line] = [row for row in found.table().splitlines() if row.startswith("undeclared")]
    assert "?" in line
    # no judge: nothing is planned, as a run skips those cells
    none = estimate(rows(2), ["answer_accuracy", "token_f1"], llm=None)
    assert none.requests.estimate == 0 and none.model is None


def test_repeats_are_planned_as_a_run_scores_them() -> None:
    with FakeOpenAI(handle) as server:
        found = estimate(rows(3), ["faithfulness", "answer_accuracy"], llm=judge(server), repeats=3)
        result = evaluate(
            rows(3), ["faithfulness", "answer_accuracy"], llm=judge(server), repeats=3,
            progress=False,
        )  # fmt: skip
    assert found.requests.estimate == result.usage.requests == 3 * 3 * 4
    assert found.prompt_tokens.estimate == result.usage.prompt_tokens


@pytest.mark.parametrize("with_judge", [True, False], ids=["judge", "no-judge"])
def test_the_dry_run_skips_the_cells_a_run_skips_for_the_same_reasons(
    with_judge: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAGEVAL_LLM", raising=False)
    data: list[Any] = rows(5)
    del data[1]["reference"]  # a missing field: context_recall and token_f1 read it
    data[2]["retrieved_contexts"] = "one context as a string"  # a bad field
    data[3] = "not a row"  # an unreadable row: every cell
    metrics = ["context_recall", "faithfulness", "token_f1"]
    with FakeOpenAI(handle) as server:
        llm = judge(server) if with_judge else None
        spec = RunSpec(data, metrics, llm, on_invalid="skip")
        plan = prepare(spec).plans[0]
        planned = estimate(spec)  # the dry run and the run take the same spec
        result = evaluate(spec, progress=False)
        assert planned == estimate(data, metrics, llm=llm, on_invalid="skip")
    recorded = [
        {n: c for n, c in result.sample(row).cells.items() if c.status == "skipped"}
        for row in range(len(data))
    ]
    # the run skips exactly the cells its plan decided, for the reason the plan gives
    assert recorded == [plan.skipped(row) for row in range(len(data))]
    assert recorded[3].keys() == set(metrics)
    assert recorded[1]["token_f1"].cause_kind == "missing_field"
    assert recorded[2]["faithfulness"].cause_kind == ("invalid_row" if with_judge else "no_judge")
    # and the dry run counts the same cells, by metric and cause kind
    for name in metrics:
        kinds = Counter(str(cells[name].cause_kind) for cells in recorded if name in cells)
        assert planned.metrics[name].skipped == dict(kinds), name
    assert sum(planned.skipped.values()) == sum(len(cells) for cells in recorded)
    assert "cells the run will skip: context_recall" in planned.table()


def test_the_keyword_arguments_of_a_run_are_its_specs_other_fields() -> None:
    # estimate() and aevaluate() take RunOptions as keywords and pass them to a RunSpec: a
    # field the spec gains is an argument of both only once RunOptions declares it
    positional = {"data", "metrics", "llm", "embeddings"}
    assert set(RunOptions.__annotations__) == {f.name for f in fields(RunSpec)} - positional
    with pytest.raises(TypeError, match="column_mapping"):
        estimate(rows(1), ["token_f1"], column_mapping={})  # type: ignore[call-arg]


def test_a_run_spec_is_given_whole_or_as_arguments_not_both() -> None:
    spec = RunSpec(rows(2), ["token_f1"])
    with pytest.raises(RunConfigError, match="metrics, repeats given beside a RunSpec"):
        estimate(spec, ["token_f1"], repeats=2)
    with pytest.raises(RunConfigError, match="on_invalid given beside a RunSpec"):
        evaluate(spec, on_invalid="skip", progress=False)
    assert evaluate(spec, progress=False).statuses("token_f1") == ["ok", "ok"]
