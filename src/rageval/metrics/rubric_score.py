"""rubric_score ("Rubric Score"): the judge grades the sample 1..5 against a five-level rubric.

The user's rubric describes each level (`score1_description` … `score5_description`, or `score1`
… `score5`); without one a general answer-quality rubric is used. The judge sees the response
and whichever of user_input, reference, retrieved_contexts and reference_contexts the sample
has (blank ones are left out), and returns an integer `score` in 1..5 and `feedback`; a score
off the scale is re-asked (the schema sent is an enum of 1..5). value = (score − 1) / 4, so
1 → 0.0, 3 → 0.5, 5 → 1.0; the raw level is kept in the evidence as `raw_score` (and in
`to_pandas()` as the column `rubric_score_raw`), with the feedback. An empty response is still judged: the rubric,
not this module, decides what it deserves.
Where the judge scores by probabilities (docs/judge-probabilities.md), the level counted is the
expected level over 1..5, E = Σ_n n·P(n), from the probabilities of the levels at the score in
the same reply: value = (E − 1) / 4 (evidence ``expected``; `raw_score` stays the level
written); a reply whose probabilities could not be read counts its level.
Judge requests: 1 (more only for re-asks).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from rageval.metrics.authoring import (
    PlannedRequest,
    ReplyModel,
    messages,
    nonblank,
    number_only,
    numbered,
    reference_text,
    tagged,
)
from rageval.metrics.base import Metric, MetricResult, ScoringContext, forward_to_metric, register
from rageval.metrics.evidence import RubricEvidence
from rageval.samples import Sample

LEVELS = range(1, 6)

DEFAULT_RUBRIC: dict[str, str] = {
    "score1_description": "Empty, off-topic, or wrong on the main point of the question.",
    "score2_description": "Touches the question but is mostly wrong, unsupported or unusable.",
    "score3_description": "Partly right: the main point is there but with errors or large gaps.",
    "score4_description": "Right and useful, with only minor omissions or imprecision.",
    "score5_description": "Fully right, complete and to the point; agrees with the reference "
    "and the contexts when they are given.",
}

_KEY = re.compile(r"score([1-5])(?:_description)?")
#: sample fields shown to the judge when present, in this order, with their tag names
_SHOWN = (
    ("user_input", "question"),
    ("retrieved_contexts", "contexts"),
    ("reference_contexts", "reference_contexts"),
    ("reference", "reference"),
    ("response", "response"),
)


def parse_rubric(rubrics: Mapping[str, str]) -> dict[int, str]:
    """Level → description, from keys `scoreN_description` or `scoreN` (N = 1..5, each once)."""
    levels: dict[int, str] = {}
    for key, text in rubrics.items():
        match = _KEY.fullmatch(str(key).strip().lower())
        if match is None:
            raise ValueError(
                f"unknown rubric key {key!r}: use score1_description … score5_description "
                "(or score1 … score5)"
            )
        level = int(match.group(1))
        if level in levels:
            raise ValueError(f"rubric level {level} is given twice")
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"rubric level {level} needs a non-empty description")
        levels[level] = text.strip()
    missing = [n for n in LEVELS if n not in levels]
    if missing:
        raise ValueError(f"the rubric must describe all five levels; missing {missing}")
    return dict(sorted(levels.items()))


class RubricGrade(ReplyModel):
    feedback: str = Field(description="why this level fits, in one to three sentences")
    score: Annotated[Literal[1, 2, 3, 4, 5], BeforeValidator(number_only)] = Field(
        description="the rubric level"
    )


def prompt(sample: Sample, rubric: Mapping[int, str]) -> list[dict[str, str]]:
    blocks = []
    for field, tag in _SHOWN:
        value = getattr(sample, field)
        if field == "reference" and isinstance(value, list):
            blocks.append(tagged(tag, reference_text(sample)))  # acceptable alternatives
        elif isinstance(value, list) and nonblank(value):
            blocks.append(tagged(tag, numbered(nonblank(value))))
        elif isinstance(value, str) and (value.strip() or field == "response"):
            blocks.append(tagged(tag, value))
    # the rubric is the user's own instruction, so it is not tagged as material
    levels = "\n".join(f"{n}: {' '.join(text.split())}" for n, text in rubric.items())
    return messages(
        "Grade the response with this rubric: choose the level whose description fits best.\n"
        f"{levels}\n\n" + "\n".join(blocks),
        'Reply as {"feedback": "...", "score": 1|2|3|4|5}.',
    )


def rubric_value(score: int) -> float:
    """A rubric level 1..5 mapped linearly onto 0..1: (score − 1) / 4."""
    if score not in LEVELS:
        raise ValueError(f"rubric score must be 1..5, got {score}")
    return (score - 1) / 4


@register
class RubricScore(Metric):
    name = "rubric_score"
    required_fields = ("response",)
    needs_llm = True
    value_range = (0.0, 1.0)
    summary = "judge grades the sample 1..5 against a rubric; (score-1)/4"
    in_default_run = False  # opt-in: a rubric is the user's own criteria

    def __init__(self, *, rubrics: Mapping[str, str] | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.rubric = parse_rubric(DEFAULT_RUBRIC if rubrics is None else rubrics)

    def planned_requests(self, sample: Sample) -> list[PlannedRequest]:
        # the feedback: one to three sentences
        return [PlannedRequest(prompt(sample, self.rubric), RubricGrade, reply_tokens=50)]

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        scored = await ctx.ask_scored(prompt(sample, self.rubric), RubricGrade)
        reply, expected = scored.value, scored.scoring.read_expected("score")
        value = rubric_value(reply.score) if expected is None else (expected - 1) / 4
        return MetricResult.ok(value, reason=reply.feedback).with_evidence(
            RubricEvidence(
                raw_score=reply.score,
                expected=expected,
                feedback=reply.feedback,
                level_description=self.rubric[reply.score],
            )
        )


#: names this module lacks are read from its default metric: ``rubric_score.score(...)``
__getattr__ = forward_to_metric(__name__)
