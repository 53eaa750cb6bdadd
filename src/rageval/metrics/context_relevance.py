"""context_relevance: do the retrieved contexts bear on the question? Two templates rate 0/1/2.

Both show the contexts, then the question (the contexts first, as every request that shows
them). Template 1 asks how relevant the contexts are; template 2 asks whether a reader holding
only them could answer. Each rating is divided by 2 and the valid ones averaged (one valid →
that one; none → not measured). A rating off the scale is re-asked up to `max_retries` times
per template. A blank question leaves nothing to be relevant to → not measured; no non-blank
context → 0 without a request (blank contexts are left out, as by every metric). Where the
judge scores by probabilities each template counts its expected rating (`value="expected"`,
the default; `"pass_probability"`: docs/judge-probabilities.md).
Judge requests: 2 (more only for re-asks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rageval.metrics.authoring import (
    BlankRule,
    RatingMetric,
    contexts_block,
    nonblank,
    not_measured_if_blank,
    rating_prompts,
    tagged,
    zero_if_blank,
)
from rageval.metrics.base import forward_to_metric, register
from rageval.samples import Sample

SCALE = (0, 1, 2)


def prompts(question: str, contexts: Sequence[str]) -> list[list[dict[str, str]]]:
    return rating_prompts(
        SCALE,
        "How relevant are the retrieved contexts to the question? Rate 2 if together they "
        "contain what is needed to answer it, 1 if they are on topic or cover only part of it, "
        "0 if they do not help answer it.",
        "A search system returned these contexts for the question. Suppose a reader sees only "
        "the contexts: could they answer the question? Rate 2 for fully, 1 for partly or with "
        "related background only, 0 for not at all.",
        data=f"{contexts_block(contexts)}\n{tagged('question', question)}",
    )


@register
class ContextRelevance(RatingMetric):
    name = "context_relevance"
    required_fields: ClassVar[tuple[str, ...]] = ("user_input", "retrieved_contexts")
    scale = SCALE
    summary = (
        "relevance of the retrieved contexts to the question, two judge templates rating 0/1/2"
    )
    blank_rules: ClassVar[tuple[BlankRule, ...]] = (
        not_measured_if_blank(
            "user_input", "the user input is empty: no question to be relevant to"
        ),
        zero_if_blank("retrieved_contexts", "no context was retrieved"),
    )

    def templates(self, sample: Sample) -> list[list[dict[str, str]]]:
        return prompts(sample.text("user_input"), nonblank(sample.retrieved_contexts))


#: names this module lacks are read from its default metric: ``context_relevance.score(...)``
__getattr__ = forward_to_metric(__name__)
