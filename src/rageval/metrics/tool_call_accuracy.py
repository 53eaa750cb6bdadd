"""tool_call_accuracy: whether the assistant made exactly the reference's tool calls (no
judge, no embeddings; ragas' ToolCallAccuracy gives partial credit instead, which
tool_call_f1 measures here).

1.0 when the calls the assistant made, in the order of its turns, are the reference calls --
the same calls in the same order (``ordered=True``, the default), or the same calls in any
order, each as many times (``ordered=False``: equal as multisets) -- else 0.0. Two calls are
the same call when their names are equal and their arguments are equal after JSON
normalisation (:mod:`rageval.metrics.tool_calls`). No call made where the reference has none
is 1.0. Averaged over conversations: the share of conversations whose calls were exactly right.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from rageval.metrics.base import MetricResult, ScoringContext, forward_to_metric, register
from rageval.metrics.evidence import ToolCallEvidence
from rageval.metrics.tool_calls import ToolCallMetric, call_text, canonical_call
from rageval.samples import Sample, ToolCall


def tool_call_accuracy_score(
    predicted: Sequence[ToolCall], reference: Sequence[ToolCall], *, ordered: bool = True
) -> float:
    """1.0 when `predicted` are the `reference` calls (in the same order when `ordered`, else
    as multisets), else 0.0."""
    made, wanted = list(map(canonical_call, predicted)), list(map(canonical_call, reference))
    same = made == wanted if ordered else Counter(made) == Counter(wanted)
    return float(same)


@register
class ToolCallAccuracy(ToolCallMetric):
    """Whether a conversation's tool calls are exactly its reference calls (name and
    normalised arguments), in order (``ordered=True``, the default) or in any order."""

    name = "tool_call_accuracy"
    summary = "exact match of the assistant's tool calls with the reference calls (no LLM)"

    def __init__(self, *, ordered: bool = True, **kw: Any) -> None:
        super().__init__(ordered=ordered, **kw)

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        predicted, reference = self.calls(sample)
        value = tool_call_accuracy_score(predicted, reference, ordered=self.ordered)
        made, wanted = (
            Counter(map(canonical_call, predicted)),
            Counter(map(canonical_call, reference)),
        )
        text = {canonical_call(c): call_text(c) for c in (*reference, *predicted)}
        missing = [text[c] for c in (wanted - made).elements()]
        unexpected = [text[c] for c in (made - wanted).elements()]
        if value:
            reason = f"the {len(reference)} reference call(s) made exactly" + (
                ", in order" if self.ordered else ""
            )
        elif not missing and not unexpected:
            reason = "the reference calls, made in another order"
        else:
            reason = "; ".join(
                part
                for part in (
                    f"{len(missing)} reference call(s) not made" if missing else "",
                    f"{len(unexpected)} call(s) the reference does not make" if unexpected else "",
                )
                if part
            )
        return MetricResult.ok(value, reason=reason).with_evidence(
            ToolCallEvidence(
                ordered=self.ordered,
                calls=[call_text(c) for c in predicted],
                reference_calls=[call_text(c) for c in reference],
                missing=missing,
                unexpected=unexpected,
            )
        )


#: names this module lacks are read from its default metric: ``tool_call_accuracy.score(...)``
__getattr__ = forward_to_metric(__name__)
