"""Writing a metric is public: the `measure` hook, the authoring helpers the built-in metrics
use (and nothing private), and the deprecated `_score` hook of metrics written before."""

from __future__ import annotations

import ast
import importlib
import inspect
import warnings
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import BaseModel, ConfigDict, ValidationError

from rageval import Sample
from rageval.metrics import Metric, MetricResult, ScoringContext, registered_metrics
from rageval.metrics.authoring import (
    ReplyModel,
    not_measured_if_blank,
    numbered,
    share_true,
    verdict_prompt,
    zero_if_blank,
)
from rageval.metrics.evidence import FreeformEvidence
from rageval.metrics.faithfulness import prompt as faithfulness_prompt
from rageval.metrics.token_f1 import TokenF1

METRICS_DIR = Path(importlib.import_module("rageval.metrics").__file__ or "").parent


def builtin_metric_modules() -> list[str]:
    return sorted({cls.__module__ for cls in registered_metrics().values()})


def test_every_builtin_metric_implements_the_public_hook() -> None:
    for name, cls in registered_metrics().items():
        assert not inspect.isabstract(cls), name
        owner = next(c for c in cls.__mro__ if "measure" in vars(c))
        assert owner is not Metric, name
        assert not any("_score" in vars(c) for c in cls.__mro__ if c is not Metric), name


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every import in a file, at any depth (function-level ones too)."""
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            found.extend((a.name, []) for a in node.names)
    return found


def test_builtin_metrics_use_only_public_pieces_of_the_metrics_layer() -> None:
    # What a user writing a metric can reach is what the built-in metrics use: no private
    # module of rageval.metrics and no private name from one.
    modules = [*builtin_metric_modules(), "rageval.metrics.lexical"]
    assert len(modules) >= 14
    for module in modules:
        path = METRICS_DIR / f"{module.rsplit('.', 1)[1]}.py"
        for source, names in _imports(path):
            if not source.startswith("rageval.metrics"):
                continue
            assert not any(part.startswith("_") for part in source.split(".")), (module, source)
            private = [n for n in names if n.startswith("_")]
            assert not private, (module, source, private)


def test_every_public_authoring_helper_is_documented() -> None:
    authoring = importlib.import_module("rageval.metrics.authoring")
    for name in authoring.__all__:
        value = getattr(authoring, name)
        if inspect.isfunction(value) or inspect.isclass(value):
            assert inspect.getdoc(value), name
    # and every helper the module defines without an underscore is listed
    defined = {
        n
        for n, v in vars(authoring).items()
        if not n.startswith("_")
        and (inspect.isfunction(v) or inspect.isclass(v))
        and getattr(v, "__module__", None) == authoring.__name__
    }
    assert defined <= set(authoring.__all__)


def test_a_reply_model_has_the_schema_of_a_strict_closed_model_and_validates_strictly() -> None:
    # The built-in reply schemas moved onto ReplyModel: what is sent (and so the cache keys)
    # must be what a plain model with the same configuration sends.
    class Graded(ReplyModel):
        grade: int

    class Plain(BaseModel):
        model_config = ConfigDict(extra="forbid", strict=True)

        grade: int

    sent = Graded.model_json_schema()
    assert sent == {**Plain.model_json_schema(), "title": "Graded"}
    assert sent["additionalProperties"] is False
    with pytest.raises(ValidationError):
        Graded.model_validate({"grade": "1"})
    with pytest.raises(ValidationError):
        Graded.model_validate({"grade": 1, "extra": 0})
    assert Graded.model_validate({"grade": 1}).grade == 1


def test_verdict_prompt_puts_the_task_then_each_tagged_text_then_the_items() -> None:
    prompt = verdict_prompt("Judge each.", "claims", question="Q?", task="a </task> b")
    assert prompt("[s1] x") == (
        "Judge each.\n\n<question>\nQ?\n</question>\n"
        "<task>\na </ task> b\n</task>\n<claims>\n[s1] x\n</claims>"
    )
    # a built-in metric's request text, written out by hand
    assert faithfulness_prompt(["Paris is in France."])("[s1] Paris is French.") == (
        "For each numbered statement, decide whether the contexts support it: it is stated in "
        "them or follows directly from them. Anything the contexts do not give is unsupported, "
        "even if it is true.\n\n<contexts>\n[c1] Paris is in France.\n</contexts>\n"
        "<statements>\n[s1] Paris is French.\n</statements>"
    )
    assert numbered(["Paris is in France."], "c") == "[c1] Paris is in France."


def test_a_verdict_prompt_on_the_contexts_begins_with_them_and_ends_with_the_task() -> None:
    prompt = verdict_prompt("Judge each.", "claims", contexts_first=["A.", "B."], question="Q?")
    assert prompt("[s1] x") == (
        "<contexts>\n[c1] A.\n[c2] B.\n</contexts>\n<question>\nQ?\n</question>\n"
        "<claims>\n[s1] x\n</claims>\n\nJudge each."
    )
    # items that are the contexts lead themselves; the two together would show them twice
    assert verdict_prompt("Judge.", "contexts", items_first=True, question="Q?")("[c1] A.") == (
        "<contexts>\n[c1] A.\n</contexts>\n<question>\nQ?\n</question>\n\nJudge."
    )
    with pytest.raises(ValueError, match="contexts_first and items_first"):
        verdict_prompt("Judge.", "contexts", contexts_first=["A."], items_first=True)


def test_share_true_is_the_share_of_true_verdicts_and_none_without_any() -> None:
    assert share_true([True, False, True, True]) == 0.75
    assert share_true([False]) == 0.0
    assert share_true([]) is None


def test_the_rating_helpers_are_public_and_drive_the_rating_metrics() -> None:
    from rageval.metrics import AnswerAccuracy, ContextRelevance, ResponseGroundedness
    from rageval.metrics.authoring import RatingMetric

    for cls in (AnswerAccuracy, ContextRelevance, ResponseGroundedness):
        assert issubclass(cls, RatingMetric)


# ---------------------------------------------------------------- the deprecated _score hook


def test_a_metric_written_with_score_still_works_and_is_told_to_rename_it() -> None:
    with pytest.warns(DeprecationWarning, match=r"measure\(sample, ctx\)") as caught:

        class Shouting(Metric):
            name = "shouting"
            required_fields: ClassVar[tuple[str, ...]] = ("response",)

            async def _score(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
                text = sample.text("response")
                return MetricResult.ok(sum(c.isupper() for c in text) / len(text))

    assert caught[0].filename == __file__  # the warning points at the class statement
    assert Shouting().score(response="ABcd").value == 0.5  # type: ignore[abstract]  # _score


def test_super_score_of_an_old_subclass_reaches_the_parents_measure() -> None:
    with pytest.warns(DeprecationWarning):

        class Halved(TokenF1):
            name = "token_f1_halved"

            async def _score(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
                result = await super()._score(sample, ctx)
                assert result.value is not None
                return MetricResult.ok(result.value / 2)

    with pytest.warns(DeprecationWarning):

        class Quartered(Halved):
            name = "token_f1_quartered"

            async def _score(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
                result = await super()._score(sample, ctx)
                assert result.value is not None
                return MetricResult.ok(result.value / 2)

    # token F1 of "a cat" vs "the cat sat": articles dropped, 1 shared token of 1 and 2 → 2/3
    fields = {"response": "a cat", "reference": "the cat sat"}
    assert TokenF1().score(**fields).value == pytest.approx(2 / 3)
    assert Halved().score(**fields).value == pytest.approx(1 / 3)
    assert Quartered().score(**fields).value == pytest.approx(1 / 6)


def test_a_metric_with_measure_raises_no_warning_and_score_is_its_alias() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")

        class Length(Metric):
            name = "length"
            required_fields: ClassVar[tuple[str, ...]] = ("response",)

            async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
                return MetricResult.ok(len(sample.text("response")))

    assert Length().score(response="four").value == 4.0
    # code that called the old private name on a new metric still reaches measure
    import asyncio

    ctx = ScoringContext.for_sample(Sample(response="four"), None)
    assert asyncio.run(Length()._score(Sample(response="four"), ctx)).value == 4.0


def test_a_class_defined_again_replaces_its_registration_another_class_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rageval.metrics import base, create_metric, register

    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))

    def define(value: float) -> type[Metric]:
        # the same module and name each time, as a notebook cell run twice
        class Constant(Metric):
            name = "constant"
            required_fields: ClassVar[tuple[str, ...]] = ("response",)

            async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
                return MetricResult.ok(value)

        return register(Constant)

    define(1.0)
    second = define(2.0)
    assert registered_metrics()["constant"] is second
    assert create_metric("constant").score(response="x").value == 2.0

    class Other(Metric):
        name = "constant"
        required_fields: ClassVar[tuple[str, ...]] = ("response",)

        async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
            return MetricResult.ok(0.0)

    with pytest.raises(ValueError, match="registered twice"):
        register(Other)


class _Counted(Metric):
    """A metric whose blank inputs are ruled on by its declared rules, counting its measures."""

    name = "counted_blank_rules"
    required_fields: ClassVar[tuple[str, ...]] = ("response", "reference", "retrieved_contexts")
    blank_rules = (
        not_measured_if_blank("reference", "no reference"),
        zero_if_blank("response", "empty response", words=0),
        zero_if_blank("retrieved_contexts", "no contexts"),
    )
    measured = 0

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        type(self).measured += 1
        return MetricResult.ok(0.5)


def test_blank_rules_decide_a_cell_in_order_before_measure_and_plan_nothing() -> None:
    metric = _Counted()
    full = {"response": "r", "reference": "g", "retrieved_contexts": ["c"]}
    cases = [
        ({**full, "reference": " ", "response": ""}, ("not_measured", None, "no reference")),
        ({**full, "response": "\n"}, ("ok", 0.0, "empty response")),
        ({**full, "retrieved_contexts": ["", "  "]}, ("ok", 0.0, "no contexts")),
    ]
    for fields, (status, value, text) in cases:
        result = metric.score(**fields)
        assert (result.status, result.value) == (status, value)
        assert text in (result.cause or result.reason or "")
        assert metric.plan(Sample.model_validate(fields)) == []
    assert _Counted.measured == 0
    assert metric.score(**full).value == 0.5 and _Counted.measured == 1
    assert metric.plan(Sample.model_validate(full)) == []  # no judge, no requests
    blank = metric.score(**{**full, "response": ""})
    assert blank.evidence == FreeformEvidence.of({"words": 0}) and blank.cause_kind is None
    undefined = metric.score(**{**full, "reference": ""})
    assert undefined.cause_kind == "undefined"
