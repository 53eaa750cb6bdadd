"""tool_call_f1: precision, recall and F1 of the assistant's tool calls against the reference
calls (no judge, no embeddings), by argument (the default) or by whole call.

Each call counts as units: at ``level="argument"`` its name and each of its top-level
arguments, u(c) = 1 + |args(c)|; at ``level="call"`` the whole call, u(c) = 1. Two calls share

* at ``level="argument"``: a(p, r) = 0 for calls of different tools, else 1 (the name) plus
  the number of arguments both give with equal values;
* at ``level="call"``: a(p, r) = 1 when they are the same call (name and arguments), else 0;

values compared after JSON normalisation (:mod:`rageval.metrics.tool_calls`). The made calls
P and the reference calls R are paired one to one so that the pairs share the most, S =
max Σ a(p, r) over the pairings: any pairing (``ordered=False``, the default), or one that keeps
the order of both (``ordered=True``). Then precision = S / Σ_P u, recall = S / Σ_R u,
F1 = 2·precision·recall / (precision + recall) (0 when S = 0). No call made where the reference
has none is 1.0; calls made where it has none, or none made where it has some, 0.0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rageval.metrics.base import MetricResult, ScoringContext, forward_to_metric, register
from rageval.metrics.evidence import ToolCallEvidence, ToolCallPair
from rageval.metrics.lexical import f_measure
from rageval.metrics.tool_calls import (
    ToolCallMetric,
    argument_agreement,
    argument_units,
    best_matching,
    call_agreement,
    call_text,
)
from rageval.samples import Sample, ToolCall

ToolCallLevel = Literal["argument", "call"]
LEVELS: tuple[ToolCallLevel, ...] = ("argument", "call")


@dataclass(frozen=True)
class ToolCallScores:
    """The counts and scores of :func:`tool_call_f1_score`."""

    #: S: the units the paired calls share
    shared: int
    #: Σ u over the calls made, and over the reference calls
    made_units: int
    reference_units: int
    #: (made call's index, reference call's index, units shared) for each pair sharing any
    pairs: list[tuple[int, int, int]]
    f1: float

    @property
    def precision(self) -> float | None:
        """S / Σ_P u; None when no call was made."""
        return self.shared / self.made_units if self.made_units else None

    @property
    def recall(self) -> float | None:
        """S / Σ_R u; None when the reference has no call."""
        return self.shared / self.reference_units if self.reference_units else None


def tool_call_f1_score(
    predicted: Sequence[ToolCall],
    reference: Sequence[ToolCall],
    *,
    ordered: bool = False,
    level: ToolCallLevel = "argument",
) -> ToolCallScores:
    """Precision, recall and F1 of `predicted` against `reference` (see the module's doc)."""
    if level == "argument":
        agreement, units = argument_agreement, argument_units
    else:
        agreement, units = call_agreement, (lambda call: 1)
    pairs = best_matching(predicted, reference, agreement, ordered=ordered)
    shared = sum(a for _, _, a in pairs)
    made, wanted = sum(map(units, predicted)), sum(map(units, reference))
    return ToolCallScores(shared, made, wanted, pairs, f_measure(shared, made, wanted))


@register
class ToolCallF1(ToolCallMetric):
    """F1 of a conversation's tool calls against its reference calls, by argument (name and
    each argument; the default) or by whole call, in any order (the default) or in order."""

    name = "tool_call_f1"
    summary = "precision/recall/F1 of the assistant's tool calls vs the reference (no LLM)"

    def __init__(
        self, *, ordered: bool = False, level: ToolCallLevel = "argument", **kw: Any
    ) -> None:
        super().__init__(ordered=ordered, **kw)
        if level not in LEVELS:
            raise ValueError(f"level is one of {', '.join(map(repr, LEVELS))}, got {level!r}")
        self.level = level

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        predicted, reference = self.calls(sample)
        scores = tool_call_f1_score(predicted, reference, ordered=self.ordered, level=self.level)
        unit = "argument unit" if self.level == "argument" else "call"
        return MetricResult.ok(
            scores.f1,
            reason=(
                f"{scores.shared} {unit}(s) shared; the calls made have {scores.made_units}, "
                f"the reference calls {scores.reference_units}"
            ),
        ).with_evidence(
            ToolCallEvidence(
                precision=scores.precision,
                recall=scores.recall,
                ordered=self.ordered,
                level=self.level,
                calls=[call_text(c) for c in predicted],
                reference_calls=[call_text(c) for c in reference],
                pairs=[
                    ToolCallPair(
                        call=call_text(predicted[i]), reference=call_text(reference[j]), shared=a
                    )
                    for i, j, a in scores.pairs
                ],
            )
        )


#: names this module lacks are read from its default metric: ``tool_call_f1.score(...)``
__getattr__ = forward_to_metric(__name__)
