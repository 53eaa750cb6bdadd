"""answer_accuracy: agreement of the response with the reference, rated 0/2/4 by two templates.

Template 1 judges the response against the reference; template 2 swaps their roles. Both
rate 4 when the two give the same answer, also in other words, with more detail on one side
that the other does not contradict, or as one of several accepted answers the reference lists;
2 when they agree only in part; 0 when it is wrong. Each rating is divided by 4 and the valid
ones averaged (one valid → that one; none → not measured): the value with sampled scoring.
Where the judge scores by probabilities the value is by default (``value="pass_probability"``)
the judge's probability that this mean reaches 0.5, the two templates' ratings drawn
independently from their distributions over 0/2/4; ``value="expected"`` averages each
template's expected rating instead (the default before; every other rating metric's).
Chosen on tuning rows: on 101 EVOUNA rows with Qwen2.5-Coder-1.5B, κ with people at the 0.5
cut 0.689 against 0.575, AUROC 0.931 against 0.926, balanced accuracy 0.822 against 0.853
(more answers pass); docs/judge-probabilities.md has the math.
A rating off the scale is re-asked up to `max_retries` times per template.
A blank reference leaves nothing to compare with → not measured; a blank response says nothing
the reference says → 0 without a request (the rules every metric follows, docs/metrics.md).
People's guidance (`instructions`, `examples`, `reasons`, `threshold`: :class:`GuidedMetric`)
goes into both templates, each example shown in the template's own tags.
Judge requests: 2 (more only for re-asks).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import ClassVar

from rageval.metrics.authoring import (
    NO_REFERENCE,
    Guidance,
    GuidedMetric,
    RatingMetric,
    rated_verdict,
    rating_prompts,
    reference_text,
    tagged,
    zero_if_blank,
)
from rageval.metrics.base import forward_to_metric, register
from rageval.samples import Sample

SCALE = (0, 2, 4)
#: what each rating means; "the same answer" is spelled out so that a small judge does not
#: take a longer answer, other words, or one of several accepted answers for a partial match
#: (Qwen2.5-Coder-1.5B rated most right EVOUNA answers 2 with the shorter "says the same as")
_SCALE_TEXT = (
    "Rate 4 if both give the same answer to the question: also in other words, when one of "
    "them says more than the other without contradicting it, or when one lists several "
    "accepted answers and the other gives one of them. Rate 2 if they agree only in part, "
    "0 if it is wrong, contradicts the {ref} or answers a different question."
)
#: template 1's task: the response judged against the reference
TASK = "Compare the candidate answer with the reference answer to the question. " + (
    _SCALE_TEXT.format(ref="reference")
)
#: template 2's task: the roles swapped
SWAPPED_TASK = "Judge how well the proposed answer matches the gold answer for the question. " + (
    _SCALE_TEXT.format(ref="gold answer")
)


def _data(sample: Sample) -> str:
    return (
        f"{tagged('question', sample.text('user_input'))}\n"
        f"{tagged('reference', sample.text('reference'))}\n"
        f"{tagged('candidate', sample.text('response'))}"
    )


def _swapped_data(sample: Sample) -> str:
    # roles swapped: the reference is judged against the response
    return (
        f"{tagged('question', sample.text('user_input'))}\n"
        f"{tagged('gold', sample.text('response'))}\n"
        f"{tagged('proposed', sample.text('reference'))}"
    )


def prompts(
    question: str,
    response: str,
    reference: str,
    *,
    guidance: Guidance | None = None,
    reasons: bool = False,
) -> list[list[dict[str, str]]]:
    """Both templates' messages; `guidance` (guidelines, labelled examples) after each task."""
    sample = Sample(user_input=question, response=response, reference=reference)
    shown = guidance or Guidance()
    verdict = functools.partial(rated_verdict, SCALE)
    return rating_prompts(
        SCALE,
        shown.prompt(TASK, _data, verdict, sample),
        shown.prompt(SWAPPED_TASK, _swapped_data, verdict, sample),
        reasons=reasons,
    )


@register
class AnswerAccuracy(GuidedMetric, RatingMetric):
    name = "answer_accuracy"
    required_fields = ("user_input", "response", "reference")
    scale = SCALE
    summary = "agreement of response and reference, two judge templates rating 0/2/4"
    blank_rules = (
        NO_REFERENCE,
        zero_if_blank("response", "the response is empty: it says nothing"),
    )
    reasons_by_default = False
    #: the judge's probability of passing at 0.5 (see the module docstring)
    default_value = "pass_probability"
    guideline_variants: ClassVar[Mapping[str, str]] = {
        "lenient": (
            "Judge whether the answer would satisfy the person who asked. An answer that names "
            "the right entity, date or number in other words or less specifically than the "
            "reference (a surname for a full name, a year for a full date), or that adds detail "
            "the reference does not contradict, says the same as the reference."
        ),
        "strict": (
            "Only an answer as specific as the reference says the same as it: an answer vaguer "
            "than the reference, or one that adds a claim the reference does not make, agrees "
            "only in part."
        ),
    }

    def templates(self, sample: Sample) -> list[list[dict[str, str]]]:
        return prompts(
            sample.text("user_input"),
            sample.text("response"),
            reference_text(sample),
            guidance=self.guidance,
            reasons=self.reasons,
        )


#: names this module lacks are read from its default metric: ``answer_accuracy.score(...)``
__getattr__ = forward_to_metric(__name__)
