"""How a rating metric's templates become its value (a rating metric's ``value`` argument).

Each template gives a rating on the scale; where the judge scores by probabilities it also
gives its distribution over the scale (the probability of each rating). Two readings:

* ``"expected"``: the mean over the templates of each one's expected rating, divided by the
  scale's top (G-Eval's probability-weighted score: a degree of agreement);
* ``"pass_probability"``: the probability that the value read from sampled ratings (their
  mean divided by the scale's top) would reach :data:`CUT`, the templates drawn independently
  from their distributions: the judge's own probability that the cell passes at the cut.

Where the judge scores by probabilities, a template whose distribution could not be read
counts its written rating (with ``"pass_probability"``, a rating it gives with probability 1,
also when no template's could be read: the reading follows the judge's scoring, never what one
cell happened to read); a template with no valid rating is left out. Under sampled scoring
both readings are the mean of the written ratings divided by the scale's top.
docs/judge-probabilities.md has the math. Here too the asking: :func:`rating_model` (the
reply's schema) and :func:`rate_with_templates` (every template rated, combined).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, BeforeValidator, Field, create_model

from rageval.errors import CauseKind, JudgeCallFailed
from rageval.metrics._prompting import ReplyModel, number_only
from rageval.metrics.base import MetricResult, ScoringContext
from rageval.metrics.evidence import RatingEvidence

#: the readings, the first the default of a rating metric
RatingValue = Literal["expected", "pass_probability"]
RATING_VALUES: tuple[str, ...] = get_args(RatingValue)
#: where a value passes: the middle of the value's range
CUT = 0.5


def as_rating_value(value: object) -> RatingValue:
    """`value` checked to be one of :data:`RATING_VALUES` (ValueError naming them if not)."""
    if value == "expected":
        return "expected"
    if value == "pass_probability":
        return "pass_probability"
    raise ValueError(f"value must be one of {', '.join(RATING_VALUES)}, got {value!r}")


def mean_rating(ratings: Sequence[float | None], scale_max: int) -> float | None:
    """Mean of the valid ratings (or expected ratings), each divided by `scale_max`; None when
    none is valid.

    A missing rating (None: the template gave no valid one) is left out, never counted as 0
    and never allowed to poison the mean."""
    valid = [r / scale_max for r in ratings if r is not None]
    return sum(valid) / len(valid) if valid else None


def pass_probability(distributions: Sequence[Mapping[int, float]], scale_max: int) -> float:
    """P(mean of the ratings / `scale_max` >= :data:`CUT`) with one rating drawn from each
    distribution (rating -> probability), independently: the distribution of the sum of the
    ratings, added up where ``2 * sum >= n * scale_max`` (integers: no rounding at the cut)."""
    sums: dict[int, float] = {0: 1.0}
    for distribution in distributions:
        added: dict[int, float] = {}
        for total, p in sums.items():
            for rating, q in distribution.items():
                added[total + rating] = added.get(total + rating, 0.0) + p * q
        sums = added
    n = len(distributions)
    return sum(p for total, p in sums.items() if 2 * total >= n * scale_max)


def combine_ratings(
    value: RatingValue,
    ratings: Sequence[int | None],
    expected: Sequence[float | None],
    distributions: Sequence[Mapping[int, float] | None],
    scale_max: int,
    *,
    by_probabilities: bool,
) -> float | None:
    """The value of one cell from each template's written rating (None: no valid rating), its
    expected rating and its distribution (None where not read), read as `value`; None when no
    template gave a valid rating. `by_probabilities`: whether the judge scored by
    probabilities (asked for them), which decides the pass probability's reading of a template
    whose distribution is missing: a point mass at its rating (True), or, under sampled
    scoring, the mean of the ratings."""
    if value == "pass_probability" and by_probabilities:
        drawn = [
            d if d is not None else {r: 1.0}
            for r, d in zip(ratings, distributions, strict=True)
            if r is not None
        ]
        return pass_probability(drawn, scale_max) if drawn else None
    counted = [e if e is not None else r for r, e in zip(ratings, expected, strict=True)]
    return mean_rating(counted, scale_max)


@functools.cache
def rating_model(
    scale: tuple[int, ...], name: str = "Rating", reasons: bool = False
) -> type[BaseModel]:
    """``{"rating": one of scale}``: the schema is an enum of exactly the allowed values. With
    `reasons`, ``{"reason": str, "rating": ...}``: the judge writes its reasoning before the
    rating (the order of the schema's keys is the order of generation)."""
    if not scale or len(set(scale)) != len(scale):
        raise ValueError(f"a rating scale needs distinct values, got {scale!r}")
    allowed = Literal.__getitem__(scale)  # Literal[0, 2, 4]
    rating = Annotated[allowed, BeforeValidator(number_only)]  # type: ignore[valid-type]
    fields: dict[str, Any] = {}
    if reasons:
        fields["reason"] = (str, Field(description="your reasoning, in one to three sentences"))
    fields["rating"] = (rating, Field(description="one of " + ", ".join(map(str, scale))))
    return create_model(f"{name}WithReason" if reasons else name, __base__=ReplyModel, **fields)


async def rate_with_templates(
    ctx: ScoringContext,
    prompts: Sequence[list[dict[str, str]]],
    scale: tuple[int, ...],
    max_retries: int,
    *,
    reasons: bool = False,
    value: RatingValue = "expected",
) -> MetricResult:
    """Ask every template (a list of messages each) concurrently for ``{"rating": r}`` with r
    in `scale` (the schema is an enum of exactly those values; a reply off the scale is
    re-asked up to `max_retries` times), and combine the valid ratings by `value`
    (:func:`combine_ratings`, over ``max(scale)``). One template failing leaves the other's rating;
    all failing is a not-measured result with their causes. Evidence: ``ratings`` per
    template (``template_1`` …), ``scale``, and ``failures`` when a template gave none; with
    `reasons` (the judge reasons before it rates: :func:`rating_model`) also ``reasons``.

    Where the judge scores by probabilities (docs/judge-probabilities.md), each template
    counts its expected rating over the scale, from the probabilities of the ratings in its
    reply's token log-probabilities, in place of the rating written (evidence ``expected``,
    and each template's whole distribution over the scale, ``distributions``); a template
    whose probabilities could not be read counts its rating. `value` ``"pass_probability"``:
    P(the sampled value >= 0.5) instead (the module's docstring)."""
    model = rating_model(scale, reasons=reasons)

    async def one(
        msgs: list[dict[str, str]],
    ) -> tuple[int, str | None, float | None, dict[int, float] | None, bool] | JudgeCallFailed:
        try:
            reply = await ctx.ask_scored(msgs, model, max_reasks=max_retries)
        except JudgeCallFailed as e:
            return e
        rating: int = reply.value.rating  # type: ignore[attr-defined]
        expected = reply.scoring.read_expected("rating")
        distribution = reply.scoring.read_distribution("rating")
        asked = reply.scoring.used != "sampled"  # probabilities asked for, read or not
        return rating, getattr(reply.value, "reason", None), expected, distribution, asked

    outcomes = await asyncio.gather(*(one(p) for p in prompts))
    ratings = [o[0] if isinstance(o, tuple) else None for o in outcomes]
    expected = [o[2] if isinstance(o, tuple) else None for o in outcomes]
    distributions = [o[3] if isinstance(o, tuple) else None for o in outcomes]
    failed = {
        f"template_{i}": o for i, o in enumerate(outcomes, start=1) if isinstance(o, Exception)
    }
    evidence = RatingEvidence(
        ratings={f"template_{i}": r for i, r in enumerate(ratings, start=1)},
        scale=list(scale),
        reasons={
            f"template_{i}": o[1] if isinstance(o, tuple) else None
            for i, o in enumerate(outcomes, start=1)
        }
        if reasons
        else None,
        failures={k: e.cause for k, e in failed.items()} or None,
        expected={f"template_{i}": e for i, e in enumerate(expected, start=1)}
        if any(e is not None for e in expected)
        else None,
        distributions={f"template_{i}": d for i, d in enumerate(distributions, start=1)}
        if any(d is not None for d in distributions)
        else None,
    )
    by_probabilities = any(o[4] for o in outcomes if isinstance(o, tuple))
    result = combine_ratings(
        value, ratings, expected, distributions, max(scale), by_probabilities=by_probabilities
    )
    if result is None:
        causes = "; ".join(f"{k}: {e.cause}" for k, e in failed.items())
        # the kind of the first template's failure (both failed; usually for the same reason)
        kind: CauseKind = next(iter(failed.values())).kind
        return MetricResult.not_measured(
            f"no template gave a valid rating ({causes})", cause_kind=kind
        ).with_evidence(evidence)
    valid = [r for r in ratings if r is not None]
    weighted = [f"{e:.3g}" for e in expected if e is not None]
    passing = value == "pass_probability" and weighted
    reason = (
        f"ratings {', '.join(str(r) for r in valid)} on the scale {'/'.join(map(str, scale))}"
        + (f" (expected {', '.join(weighted)})" if weighted else "")
        + (f"; P(value >= {CUT:g}) {result:.3g}" if passing else "")
        + (" (one template gave no valid rating)" if len(valid) < len(ratings) else "")
    )
    return MetricResult.ok(result, reason=reason).with_evidence(evidence)
