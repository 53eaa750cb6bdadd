"""People's guidance in a judge metric's prompts, as ``rageval align`` chooses it: guideline
text and labelled examples (:class:`Guidance`) and the metrics that take them, with a decision
threshold (:class:`GuidedMetric`). Its names are imported from
:mod:`rageval.metrics.authoring`, with the other building blocks of a metric."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from pydantic import ValidationError

from rageval.metrics.base import Metric, MetricResult, ScoringContext
from rageval.samples import Sample


@dataclass(frozen=True)
class LabelledExample:
    """A case people judged, shown to the judge in a prompt: the sample, and people's label on
    the metric's scale read from 0 (worst) to 1 (best)."""

    sample: Sample
    label: float


@dataclass(frozen=True)
class Guidance:
    """What people add to a judge metric's prompts so that it judges as they do: guideline
    text (`instructions`) and labelled examples, both fixed by the metric's configuration.

    A request's text is laid out fixed first, sample last, so that a provider's prompt cache
    serves everything before the sample: the metric's task, the guidelines, the examples, then
    the sample's data (:meth:`head`, :meth:`prompt`). Without guidance the text is the task
    and the data alone, as before."""

    instructions: str | None = None
    examples: tuple[LabelledExample, ...] = ()

    def head(
        self, task: str, data: Callable[[Sample], str], verdict: Callable[[float], str]
    ) -> str:
        """The fixed beginning of a request's text: `task`, the guidelines, then each example
        shown as `data` shows a sample (the tags the sample's own data, which follows, uses)
        with what people said of it, `verdict` of its label (:func:`rated_verdict`,
        :func:`item_verdict`). Just `task` when there is no guidance."""
        parts = [task]
        if self.instructions:
            parts.append(f"Guidelines: {self.instructions}")
        if self.examples:
            shown = "\n\n".join(
                f"Example {i}:\n{data(e.sample)}\n{verdict(e.label)}"
                for i, e in enumerate(self.examples, start=1)
            )
            parts.append(
                f"Examples people judged (judge as they did):\n\n{shown}\n\nNow the case to judge:"
            )
        return "\n\n".join(parts)

    def prompt(
        self,
        task: str,
        data: Callable[[Sample], str],
        verdict: Callable[[float], str],
        sample: Sample,
    ) -> str:
        """A request's whole text: :meth:`head`, then `sample`'s data."""
        return f"{self.head(task, data, verdict)}\n\n{data(sample)}"


def rated_verdict(scale: tuple[int, ...], label: float) -> str:
    """How people's `label` (0..1) reads in an example of a metric that rates on `scale`: the
    rating nearest to it with the scale spread over 0..1 (a tie to the lower one), e.g.
    ``People's rating: 4``."""
    low, high = min(scale), max(scale)
    target = low + label * (high - low)
    rating = min(sorted(scale), key=lambda r: abs(r - target))
    return f"People's rating: {rating}"


def item_verdict(verdict: str, label: float) -> str:
    """How people's `label` (0..1) reads in an example of a metric that rules on items, the
    example's response shown as one item: ``People's verdict: supported`` for a label of 0.5
    or more, else ``People's verdict: not supported`` (`verdict` is the ruling's name)."""
    return f"People's verdict: {'' if label >= 0.5 else 'not '}{verdict}"


def _label(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: label must be a number from 0 to 1, got {value!r}")
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"{where}: label must be a number from 0 to 1, got {value!r}")
    return float(value)


def labelled_examples(
    examples: Sequence[Mapping[str, Any]], fields: Sequence[str]
) -> tuple[LabelledExample, ...]:
    """`examples` (mappings of `fields` and ``label``) checked and read; ValueError names the
    example (``examples[2]``) and what is wrong with it."""
    if isinstance(examples, (str, bytes, Mapping)) or not isinstance(examples, Sequence):
        raise ValueError(
            f"examples must be a list of mappings of {', '.join(fields)} and label, got a "
            f"{type(examples).__name__}"
        )
    out = []
    for i, example in enumerate(examples):
        where = f"examples[{i}]"
        if not isinstance(example, Mapping):
            raise ValueError(
                f"{where} must be a mapping of {', '.join(fields)} and label, got a "
                f"{type(example).__name__}"
            )
        unknown = sorted(set(example) - {*fields, "label"})
        if unknown:
            raise ValueError(
                f"{where}: unknown field(s) {', '.join(unknown)} (an example has "
                f"{', '.join(fields)} and label)"
            )
        missing = [f for f in (*fields, "label") if example.get(f) is None]
        if missing:
            raise ValueError(f"{where}: missing {', '.join(missing)}")
        label = _label(example["label"], where)
        try:
            sample = Sample.model_validate({f: example[f] for f in fields})
        except ValidationError as e:
            first = e.errors()[0]
            field = ".".join(str(part) for part in first["loc"])
            message = str(first["msg"]).removeprefix("Value error, ")
            raise ValueError(f"{where}: field {field!r}: {message}") from None
        out.append(LabelledExample(sample, label))
    return tuple(out)


def _threshold(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"threshold must be a number in [0, 1] or None, got {value!r}")
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"threshold must be a number in [0, 1] or None, got {value!r}")
    return float(value)


class GuidedMetric(Metric):
    """A judge metric people can align with their own judgement (``rageval align``,
    docs/calibration.md). Four constructor arguments, recorded like any parameter, so that a
    configuration goes into ``-p METRIC.PARAM=VALUE`` and ``[params.METRIC]`` as it is:

    * `instructions`: guideline text that follows the metric's task ("an answer that names
      the right entity less specifically is acceptable");
    * `examples`: labelled cases shown before the sample, each a mapping of the fields in
      :attr:`example_fields` and ``label``: people's judgement on the metric's scale read
      from 0 (worst) to 1 (best);
    * `reasons`: whether the judge writes its reasoning before each verdict or rating (None:
      the metric's own default, :attr:`reasons_by_default`; the manifest records which);
    * `threshold`: a value becomes 1.0 when the score is at or above it, else 0.0 (the score
      stays in the evidence as ``score``); None keeps the score.

    A subclass builds its prompts with :attr:`guidance` (:meth:`Guidance.prompt`, or
    :meth:`Guidance.head` as the task of a :func:`verdict_prompt`) and asks with
    :attr:`reasons`; the threshold is applied here, to every cell the metric scores."""

    needs_llm = True
    #: the fields an example has and shows (None: `required_fields`)
    example_fields: ClassVar[tuple[str, ...] | None] = None
    #: whether the judge reasons before its verdict when `reasons` is not given
    reasons_by_default: ClassVar[bool] = True
    #: guideline texts ``rageval align`` tries besides the metric's own, by name
    guideline_variants: ClassVar[Mapping[str, str]] = {}

    def __init__(
        self,
        *,
        instructions: str | None = None,
        examples: Sequence[Mapping[str, Any]] = (),
        reasons: bool | None = None,
        threshold: float | None = None,
        **kw: Any,
    ) -> None:
        super().__init__(**kw)
        if instructions is not None and not isinstance(instructions, str):
            raise ValueError(f"instructions must be text, got a {type(instructions).__name__}")
        fields = self.example_fields or self.required_fields
        self.guidance = Guidance(
            (instructions or "").strip() or None, labelled_examples(examples, fields)
        )
        if reasons is not None and not isinstance(reasons, bool):
            raise ValueError(f"reasons must be true, false or None, got {reasons!r}")
        self.reasons = self.reasons_by_default if reasons is None else reasons
        self.record_config("reasons", self.reasons)
        self.threshold = _threshold(threshold)

    def decide(self, result: MetricResult) -> MetricResult:
        """`result` with its value turned into the verdict at :attr:`threshold` (1.0 at or
        above it, else 0.0) and the score kept in the evidence as ``score``; `result` as it is
        without a threshold or a value."""
        if self.threshold is None or result.value is None:
            return result
        score = result.value
        value = 1.0 if score >= self.threshold else 0.0
        note = f"{'at or above' if value else 'below'} threshold {self.threshold:g}"
        reason = f"{result.reason}; {note}" if result.reason else f"score {score:.4g}: {note}"
        evidence = result.evidence.noted(score=score)
        return result.model_copy(update={"value": value, "reason": reason, "evidence": evidence})

    async def score_sample(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        return self.decide(await super().score_sample(sample, ctx))
