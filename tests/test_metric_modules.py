"""A metric's module is a module (its class, prompt, response model, pure scoring function),
and stands for the metric with default settings where ragas users pass it: evaluate() runs
it, and names the module lacks are read from that default metric."""

from __future__ import annotations

import importlib
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from helpers import handle
from rageval import evaluate
from rageval.judge import Judge, llm_factory
from rageval.metrics import (
    AnswerRelevancy,
    Faithfulness,
    RougeL,
    TokenF1,
    module_metric,
    registered_metrics,
)
from rageval.runner import RunConfigError
from rageval.runner._prepare import label_pairs
from rageval.testing import FakeOpenAI

ROWS = [
    {"answer": "The cat sat on the mat.", "ground_truth": "A cat sat on a red mat."},
    {"answer": "Paris is in France.", "ground_truth": "Paris is the capital of France."},
]


def test_import_rageval_metrics_faithfulness_is_the_module() -> None:
    import rageval.metrics.faithfulness

    module = sys.modules["rageval.metrics.faithfulness"]
    assert isinstance(module, types.ModuleType)
    from rageval import metrics

    assert metrics.faithfulness is module
    # what the module holds: its class, prompt, pure scoring function
    assert rageval.metrics.faithfulness.Faithfulness is Faithfulness
    assert callable(rageval.metrics.faithfulness.prompt)
    assert rageval.metrics.faithfulness.faithfulness_score([True, False, True]) == 2 / 3


def test_every_registered_metric_has_a_module_named_like_it() -> None:
    for name, cls in registered_metrics().items():
        if cls.__module__.split(".")[0] != "rageval":
            continue  # registered by another test
        module = importlib.import_module(f"rageval.metrics.{name}")
        assert module_metric(module) is cls
        assert module.name == name


def test_evaluate_takes_a_module_a_class_an_instance_and_a_name_alike() -> None:
    from rageval.metrics import rouge_l, token_f1

    by_object = evaluate(ROWS, metrics=[TokenF1(), RougeL()])
    by_module = evaluate(ROWS, metrics=[token_f1, rouge_l])
    by_class = evaluate(ROWS, metrics=[TokenF1, RougeL])
    by_name = evaluate(ROWS, metrics=["token_f1", "rouge_l"])
    single = evaluate(ROWS, metrics=token_f1)  # type: ignore[arg-type]  # one, not a list
    for result in (by_module, by_class, by_name):
        assert result["token_f1"] == by_object["token_f1"]
        assert result["rouge_l"] == by_object["rouge_l"]
    assert single["token_f1"] == by_object["token_f1"]
    assert by_object["token_f1"][0] == pytest.approx(token_f1.token_f1_score(*ROWS[0].values()))


def test_a_module_forwards_what_it_lacks_to_its_default_metric() -> None:
    from rageval.metrics import answer_relevancy, token_f1

    result = token_f1.score(response="a cat", reference="the cat sat")
    assert result.value == TokenF1().score(response="a cat", reference="the cat sat").value
    assert answer_relevancy.strictness == 3 and answer_relevancy.needs_llm
    assert answer_relevancy.params() == AnswerRelevancy().params()
    # the module's own names win: its prompt function, not an attribute of the metric
    assert answer_relevancy.prompt("It rains.")[1]["role"] == "user"
    with pytest.raises(AttributeError, match="nor has TokenF1"):
        token_f1.not_a_thing  # noqa: B018
    with pytest.raises(AttributeError):  # private names are never forwarded
        token_f1._config  # noqa: B018


@pytest.fixture
def judge() -> Iterator[Judge]:
    with FakeOpenAI(handle) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
        yield llm_factory("test-model", client=client)


def test_a_judge_set_on_the_module_is_the_default_metrics_judge(
    monkeypatch: pytest.MonkeyPatch, judge: Judge
) -> None:
    # ragas users write `faithfulness.llm = ...`; it worked on the instance the package bound
    from rageval.metrics import faithfulness

    row = {
        "question": "Where is the cat?",
        "answer": "The cat is on the mat.",
        "contexts": ["The cat sat on the mat all day."],
    }
    monkeypatch.setattr(faithfulness, "llm", judge, raising=False)
    assert faithfulness.score(**row).measured
    result = evaluate([row], metrics=[faithfulness])  # no llm= for the run: the module's
    assert [c.status if c else None for c in result.cells("faithfulness")] == ["ok"]
    monkeypatch.delattr(faithfulness, "llm")
    assert faithfulness.llm is None


def test_any_other_setting_on_a_module_is_refused_not_ignored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rageval.metrics import semantic_similarity

    monkeypatch.setattr(semantic_similarity, "threshold", 0.8, raising=False)
    with pytest.raises(RunConfigError, match=r"SemanticSimilarity\(threshold=\.\.\.\)"):
        evaluate(ROWS, metrics=[semantic_similarity])
    with pytest.raises(ValueError, match=r"semantic_similarity\.threshold was set on the module"):
        semantic_similarity.score(response="a", reference="b")


def test_what_is_not_a_metric_is_refused_before_any_work() -> None:
    from rageval.metrics import lexical

    with pytest.raises(RunConfigError, match="defines no metric"):
        evaluate(ROWS, metrics=[lexical])
    with pytest.raises(RunConfigError, match="got int"):
        evaluate(ROWS, metrics=[3])  # type: ignore[list-item]
    with pytest.raises(RunConfigError, match="abstract"):
        evaluate(ROWS, metrics=[lexical.LexicalMetric])
    with pytest.raises(RunConfigError, match="unknown metric 'token_f2'"):
        evaluate(ROWS, metrics=["token_f2"])


def test_a_users_own_metric_module_runs_like_a_builtin_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "shouting.py").write_text(
        "from rageval.metrics import Metric, MetricResult\n"
        "class Shouting(Metric):\n"
        "    name = 'shouting'\n"
        "    required_fields = ('response',)\n"
        "    async def measure(self, sample, ctx):\n"
        "        text = sample.text('response')\n"
        "        return MetricResult.ok(sum(c.isupper() for c in text) / len(text))\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    shouting = importlib.import_module("shouting")
    result = evaluate([{"answer": "ABcd"}, {"answer": "abcd"}], metrics=[shouting])
    assert result["shouting"] == [0.5, 0.0]


def test_human_labels_name_a_metric_by_its_module() -> None:
    from rageval.metrics import faithfulness

    pairs = label_pairs({"human": faithfulness})  # type: ignore[dict-item]
    assert pairs == [("human", faithfulness)]  # type: ignore[comparison-overlap]


def test_a_setting_on_a_module_equal_to_the_default_is_harmless(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # what monkeypatch leaves behind: it read the forwarded default (None) and writes it back
    from rageval.metrics import semantic_similarity

    monkeypatch.setattr(semantic_similarity, "threshold", None, raising=False)
    assert "threshold" in vars(semantic_similarity)
    assert semantic_similarity.score(response="a cat", reference="a cat").measured
