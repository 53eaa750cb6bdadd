"""How a rating metric's templates become its value (a rating metric's ``value`` argument).

Each template gives a rating on the scale; where the judge scores by probabilities it also
gives its distribution over the scale (the probability of each rating). Two readings:

* ``"expected"``: the mean over the templates of each one's expected rating, divided by the
  scale's top (G-Eval's probability-weighted score: a degree of agreement);
* ``"pass_probability"``: the probability that the value read from sampled ratings (their
  mean divided by the scale's top) would reach :data:`CUT`, the templates drawn independently
  from their distributions: the judge's own probability that the cell passes at the cut.

A template whose distribution could not be read counts its written rating (with
``"pass_probability"``, a rating it gives with probability 1); a template with no valid
rating is left out. With no distribution at all (sampled scoring) both readings are the mean
of the written ratings divided by the scale's top. docs/judge-probabilities.md has the math.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, get_args

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
) -> float | None:
    """The value of one cell from each template's written rating (None: no valid rating), its
    expected rating and its distribution (None where not read), read as `value`; None when no
    template gave a valid rating."""
    if value == "pass_probability" and any(d is not None for d in distributions):
        drawn = [
            d if d is not None else {r: 1.0}
            for r, d in zip(ratings, distributions, strict=True)
            if r is not None
        ]
        return pass_probability(drawn, scale_max) if drawn else None
    counted = [e if e is not None else r for r, e in zip(ratings, expected, strict=True)]
    return mean_rating(counted, scale_max)
