"""A cell's value is a pure function of the sample, the metric's configuration and the judge
(issue 12): the same whatever other metrics run, never a kept value from another
configuration, and never kept when the configuration cannot be recorded. And hopeless
requests are not paid for (issue 11.3)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from helpers import EIGHT, handle as scripted, rows
from rageval.judge import Judge
from rageval.metrics import AnswerCorrectness, ContextRecall, Faithfulness, create_metric
from rageval.metrics.base import MetricResult, ScoringContext
from rageval.runner import RunDirError, evaluate
from rageval.samples import Sample
from rageval.testing import FakeOpenAI, RandomJudge


def judge(server: FakeOpenAI, model: str = "m", **kw: Any) -> Judge:
    return Judge(model, base_url=server.base_url, api_key="sk-test", **kw)


@pytest.mark.parametrize("name", ["scripted", "random"])
def test_faithfulness_is_the_same_alone_or_with_other_metrics(name: str) -> None:
    # The response's statements come from the same request either way. (On main, with
    # answer_correctness selected, they came from a "pair" request that also showed the
    # reference, so the random judge gave other statements and other values.)
    data = rows(20)
    for row in data[::2]:  # both sentences supported here, one of two elsewhere
        row["response"] = f"{row['retrieved_contexts'][0]} Water boils at one hundred degrees."
    values = []
    for metrics in (
        [Faithfulness()],
        [Faithfulness(), AnswerCorrectness(weights=(1.0, 0.0)), ContextRecall()],
    ):
        handler = scripted if name == "scripted" else RandomJudge(seed=5)
        with FakeOpenAI(handler) as server:
            result = evaluate(data, metrics, llm=judge(server, cache=False), progress=False)
        assert result.statuses("faithfulness") == ["ok"] * 20
        values.append(result["faithfulness"])
    alone, together = values
    assert alone == together
    assert len(set(alone)) > 1  # the data gives varied values: the check is not vacuous


class CutoffFaithfulness(Faithfulness):
    """A user's metric: faithfulness turned into pass/fail at `cutoff` (no params() of its own)."""

    name = "faithfulness_cutoff"

    def __init__(self, *, cutoff: float = 0.5, **kw: Any) -> None:
        super().__init__(**kw)
        self.cutoff = cutoff

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        result = await super().measure(sample, ctx)
        assert result.value is not None
        return MetricResult.ok(float(result.value >= self.cutoff), reason=f"cutoff {self.cutoff}")


def test_a_custom_constructor_argument_is_part_of_the_kept_cell() -> None:
    # rows: one of the two response sentences is supported, so faithfulness is 0.5.
    # (On main params() was {} for this metric: the second run got the first run's kept
    # cells, all 1.0.)
    with FakeOpenAI(scripted) as server:
        first = evaluate(rows(4), [CutoffFaithfulness(cutoff=0.5)], llm=judge(server))
        second = evaluate(rows(4), [CutoffFaithfulness(cutoff=0.9)], llm=judge(server))
        again = evaluate(rows(4), [CutoffFaithfulness(cutoff=0.5)], llm=judge(server))
    assert first["faithfulness_cutoff"] == [1.0] * 4
    assert second["faithfulness_cutoff"] == [0.0] * 4
    assert again["faithfulness_cutoff"] == [1.0] * 4
    # kept cells: each stands for its verdict request and its row's statements
    assert again.usage.requests == 0 and again.usage.cache_hits == first.usage.requests == 8
    assert CutoffFaithfulness(cutoff=0.9).params()["cutoff"] == 0.9


class PredicateFaithfulness(Faithfulness):
    name = "faithfulness_predicate"

    def __init__(self, *, passes: Any = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.passes = passes

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        result = await super().measure(sample, ctx)
        assert result.value is not None
        return MetricResult.ok(float(self.passes(result.value)))


def test_a_configuration_that_cannot_be_recorded_is_never_kept_nor_resumed(
    tmp_path: Path,
) -> None:
    strict = PredicateFaithfulness(passes=lambda v: v >= 0.9)
    assert set(strict.uncaptured) == {"passes"}
    assert strict.config_identity() is None
    with FakeOpenAI(scripted) as server:
        first = evaluate(rows(3), [strict], llm=judge(server), run_dir=tmp_path / "run")
        lenient = PredicateFaithfulness(passes=lambda v: v >= 0.1)
        second = evaluate(rows(3), [lenient], llm=judge(server))
        cache = judge(server).cache
        assert cache is not None
        kept = cache.stats()["entries"]["records"]
        with pytest.raises(RunDirError, match="cannot be recorded"):
            evaluate(rows(3), [strict], llm=judge(server), run_dir=tmp_path / "run", resume=True)
    assert first["faithfulness_predicate"] == [0.0] * 3
    assert second["faithfulness_predicate"] == [1.0] * 3  # computed, not a kept 0.0
    assert kept == 0
    assert second.usage.cache_hits > 0  # the request cache answered: the requests are the same


def test_params_recreate_every_builtin_metric() -> None:
    for name in [*EIGHT, "rubric_score", "semantic_similarity", "answer_relevance"]:
        metric = create_metric(name)
        again = create_metric(name, metric.params())
        assert again.params() == metric.params(), name
        assert metric.config_identity() is not None, name


def test_a_1mb_answer_is_not_sent_to_a_known_model() -> None:
    # gpt-4o-mini reads 128k tokens; a 1 MB answer is ~250k. Every request that would carry it
    # is refused before it is sent: the cells are not measured (input_too_long) at no cost.
    huge = "The harbour is large and busy. " * 33_000
    data = [{**rows(1)[0], "response": huge}]
    with FakeOpenAI(scripted) as server:
        result = evaluate(
            data, EIGHT, llm=judge(server, "gpt-4o-mini", cache=False), embeddings="local"
        )
        sent = server.chat_requests
    assert not any("harbour" in str(r.body) for r in sent)
    for metric in ("answer_relevancy", "faithfulness", "answer_correctness", "answer_accuracy",
                   "response_groundedness"):  # fmt: skip
        cell = result.sample(0).cells[metric]
        assert (cell.status, cell.cause_kind) == ("not_measured", "input_too_long"), metric
        assert cell.usage.requests == 0
    # the metrics whose prompts do not hold the response are measured as usual
    for metric in ("context_precision", "context_recall", "context_relevance"):
        assert result.sample(0).cells[metric].status == "ok", metric
    assert len(sent) == 1 + 1 + 2


def test_a_1mb_answer_costs_a_request_per_call_on_an_unknown_model() -> None:
    # no known window: the server's own 400 "context length" is input_too_long, not retried,
    # not re-asked, not fatal
    huge = "The harbour is large and busy. " * 33_000
    data = [{**rows(1)[0], "response": huge}]
    with FakeOpenAI(scripted, context_window=32_000) as server:
        result = evaluate(
            data, EIGHT, llm=judge(server, "local-model", cache=False), embeddings="local"
        )
        with_answer = [r for r in server.chat_requests if "harbour" in str(r.body)]
    kinds = {m: result.sample(0).cells[m].cause_kind for m in EIGHT}
    assert kinds["faithfulness"] == kinds["answer_relevancy"] == "input_too_long"
    # extraction 1 (shared), answer_relevancy 1, answer_accuracy 2, response_groundedness 2
    assert len(with_answer) == 6
