"""Human labels in the data: reading a cell, telling the kind, naming each bad row."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from rageval.calibration import judge_levels
from rageval.labels import infer_kind, parse_label, read_label_column
from rageval.samples import InvalidDataError, Sample, load_samples, sample_ids


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        (True, 1.0),
        (False, 0.0),
        (1, 1.0),
        (0, 0.0),
        (3, 3.0),
        (0.25, 0.25),
        ("Yes", 1.0),
        (" no ", 0.0),
        ("TRUE", 1.0),
        ("false", 0.0),
        ("2", 2.0),
        ("4.5", 4.5),
        (None, None),
        ("", None),
        ("  ", None),
        (math.nan, None),
    ],
)
def test_a_label_cell_reads_as_a_number_or_as_not_labelled(cell: object, expected: float) -> None:
    assert parse_label(cell) == expected


@pytest.mark.parametrize("cell", ["maybe", "inf", math.inf, [1], {"a": 1}])
def test_a_cell_that_is_no_label_is_refused_with_the_reason(cell: object) -> None:
    with pytest.raises(ValueError, match="label"):
        parse_label(cell)


def test_kinds() -> None:
    assert infer_kind([0.0, 1.0, 1.0]) == "binary"
    assert infer_kind([1.0]) == "binary"
    assert infer_kind([0.0, 1.0, 2.0]) == "ordinal"
    assert infer_kind([1.0, 2.0, 3.0, 4.0, 5.0]) == "ordinal"
    assert infer_kind([float(i) for i in range(11)]) == "continuous"  # too many grades
    assert infer_kind([0.0, 0.5, 1.0]) == "continuous"


def _loaded(rows: list[dict[str, object]]) -> tuple[list[Sample | None], list[str]]:
    loaded = load_samples(rows)
    return loaded.samples, sample_ids(loaded.samples)


def test_a_label_column_is_read_from_the_extra_columns() -> None:
    samples, ids = _loaded(
        [
            {"response": "a", "human": "yes"},
            {"response": "b", "human": None},
            {"response": "c", "human": 0},
            {"response": "d"},
        ]
    )
    column = read_label_column(samples, ids, "human")
    assert column.values == [1.0, None, 0.0, None]
    assert column.kind == "binary" and column.n_labelled == 2 and column.levels == [0.0, 1.0]


def test_every_bad_label_is_named_by_row_and_column_at_once() -> None:
    samples, ids = _loaded(
        [
            {"id": "a", "response": "x", "human": "yes"},
            {"id": "b", "response": "x", "human": "perhaps"},
            {"id": "c", "response": "x", "human": "very"},
        ]
    )
    with pytest.raises(InvalidDataError) as err:
        read_label_column(samples, ids, "human")
    text = str(err.value)
    assert "row 1, id 'b', field 'human'" in text and "'perhaps'" in text
    assert "row 2, id 'c', field 'human'" in text


def test_a_missing_or_empty_label_column_is_an_error_that_lists_the_columns() -> None:
    samples, ids = _loaded([{"response": "x", "human_ok": 1, "grade": 2}])
    with pytest.raises(InvalidDataError, match=r"no row has the label column 'human'.*grade"):
        read_label_column(samples, ids, "human")
    samples, ids = _loaded([{"response": "x", "human": ""}])
    with pytest.raises(InvalidDataError, match="empty in every row"):
        read_label_column(samples, ids, "human")


def test_a_declared_kind_must_fit_the_values() -> None:
    samples, ids = _loaded([{"response": "x", "h": v} for v in (0, 1, 2)])
    with pytest.raises(InvalidDataError, match=r"row 2.*binary label is 0 or 1, got 2"):
        read_label_column(samples, ids, "h", kind="binary")
    assert read_label_column(samples, ids, "h", kind="continuous").kind == "continuous"
    samples, ids = _loaded([{"response": "x", "h": v} for v in (0.5, 1.5)])
    with pytest.raises(InvalidDataError, match="ordinal label is a whole number"):
        read_label_column(samples, ids, "h", kind="ordinal")
    with pytest.raises(ValueError, match="label kind"):
        read_label_column(samples, ids, "h", kind="nominal")  # type: ignore[arg-type]


# ---- a judge score as a level of an ordinal scale (the confusion matrix, weighted κ) -------


def _scales() -> list[list[float]]:
    """Every scale of 2 to 10 levels, as 1..k and 0..k-1, and some unevenly spaced ones."""
    even = [[float(v) for v in range(first, first + k)] for k in range(2, 11) for first in (0, 1)]
    return [*even, [0.0, 1.0, 2.0, 5.0], [1.0, 3.0, 4.0], [0.0, 0.5, 1.0, 7.0, 10.0]]


@pytest.mark.parametrize("levels", _scales(), ids=lambda s: ",".join(f"{v:g}" for v in s))
def test_a_score_half_way_between_two_levels_goes_to_the_lower_one(levels: list[float]) -> None:
    low, span = Fraction(levels[0]), Fraction(levels[-1]) - Fraction(levels[0])
    positions = [(Fraction(v) - low) / span for v in levels]
    for i in range(len(levels) - 1):
        # the exact midpoint, as the float a computation of it gives (5/6 is not a float)
        midpoint = float((positions[i] + positions[i + 1]) / 2)
        above = math.nextafter(midpoint, 2.0)
        below = math.nextafter(midpoint, -1.0)
        assert judge_levels([below, midpoint, above], levels) == [
            levels[i],
            levels[i],
            levels[i + 1],
        ], (levels, i, midpoint)


def test_the_scores_at_the_levels_and_outside_0_1() -> None:
    assert judge_levels([0.5], [1.0, 2.0, 3.0, 4.0]) == [2.0]  # the reported case (was 3)
    assert judge_levels([-0.3, 0.0, 1 / 3, 2 / 3, 1.0, 1.7], [1, 2, 3, 4]) == [1, 1, 2, 3, 4, 4]
    assert judge_levels([0.2, 0.9], [3.0]) == [3.0, 3.0]  # a one-level scale
