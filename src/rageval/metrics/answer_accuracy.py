"""answer_accuracy: agreement of the response with the reference, rated 0/2/4 by two templates.

Template 1 judges the response against the reference; template 2 swaps their roles. Each
rating is divided by 4 and the valid ones averaged (one valid → that one; none → not measured).
A rating off the scale is re-asked up to `max_retries` times per template.
A blank reference leaves nothing to compare with → not measured; a blank response says nothing
the reference says → 0 without a request (the rules every metric follows, docs/metrics.md).
Judge requests: 2 (more only for re-asks).
"""

from __future__ import annotations

from rageval.metrics.authoring import (
    NO_REFERENCE,
    RatingMetric,
    rating_prompts,
    reference_text,
    tagged,
    zero_if_blank,
)
from rageval.metrics.base import forward_to_metric, register
from rageval.samples import Sample

SCALE = (0, 2, 4)
_SCALE_TEXT = (
    "Rate 4 if it says the same as the {ref}, 2 if it agrees only in part, 0 if it is wrong, "
    "contradicts the {ref} or answers a different question."
)


def prompts(question: str, response: str, reference: str) -> list[list[dict[str, str]]]:
    return rating_prompts(
        SCALE,
        "Compare the candidate answer with the reference answer to the question. "
        + _SCALE_TEXT.format(ref="reference")
        + f"\n\n{tagged('question', question)}\n{tagged('reference', reference)}\n"
        f"{tagged('candidate', response)}",
        # roles swapped: the reference is judged against the response
        "Judge how well the proposed answer matches the gold answer for the question. "
        + _SCALE_TEXT.format(ref="gold answer")
        + f"\n\n{tagged('question', question)}\n{tagged('gold', response)}\n"
        f"{tagged('proposed', reference)}",
    )


@register
class AnswerAccuracy(RatingMetric):
    name = "answer_accuracy"
    required_fields = ("user_input", "response", "reference")
    scale = SCALE
    summary = "agreement of response and reference, two judge templates rating 0/2/4"
    blank_rules = (
        NO_REFERENCE,
        zero_if_blank("response", "the response is empty: it says nothing"),
    )

    def templates(self, sample: Sample) -> list[list[dict[str, str]]]:
        return prompts(sample.text("user_input"), sample.text("response"), reference_text(sample))


#: names this module lacks are read from its default metric: ``answer_accuracy.score(...)``
__getattr__ = forward_to_metric(__name__)
