"""Human labels carried by the rows of a dataset: reading them and telling their kind.

A label is a column of the data that is not a sample field (so it travels in the sample's
`metadata`), holding what a person said about the row: a verdict (yes/no, true/false, 1/0), a
grade on a small ordered scale (0/1/2, 1–5), or a number on a continuous scale (a mean rating).
An empty cell means "not labelled". Anything else is an error naming the row and the column,
raised before any judge request.

The kind decides which agreement statistics apply (docs/calibration.md):

* ``binary``: two classes, 0 and 1 (booleans and yes/no/true/false words are read as 1/0);
* ``ordinal``: whole numbers on a scale of at most :data:`MAX_ORDINAL_LEVELS` levels;
* ``continuous``: any other numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from rageval.samples import InvalidDataError, RowProblem, Sample

__all__ = [
    "LABEL_KINDS",
    "MAX_ORDINAL_LEVELS",
    "LabelColumn",
    "LabelKind",
    "infer_kind",
    "parse_label",
    "read_label_column",
]

LabelKind = Literal["binary", "ordinal", "continuous"]
LABEL_KINDS: tuple[LabelKind, ...] = get_args(LabelKind)
#: more distinct whole-number grades than this are read as a continuous scale
MAX_ORDINAL_LEVELS = 10
_TRUE_WORDS = frozenset({"yes", "true", "y", "t"})
_FALSE_WORDS = frozenset({"no", "false", "n", "f"})


def parse_label(value: Any) -> float | None:
    """The number a label cell stands for; None when the cell is empty (not labelled).

    Raises ValueError (with the reason) for a value that is no label."""
    if value is None:
        return None
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        number = float(value)
        if math.isnan(number):  # pandas' empty cell
            return None
        if not math.isfinite(number):
            raise ValueError(f"a label must be a finite number, got {value!r}")
        return number
    if isinstance(value, str):
        text = value.strip().lower()
        if not text:
            return None
        if text in _TRUE_WORDS:
            return 1.0
        if text in _FALSE_WORDS:
            return 0.0
        try:
            number = float(text)
        except ValueError:
            raise ValueError(
                f"a label must be a number, a boolean or yes/no, got {value!r}"
            ) from None
        if not math.isfinite(number):
            raise ValueError(f"a label must be a finite number, got {value!r}")
        return number
    raise ValueError(f"a label must be a number, a boolean or yes/no, got a {type(value).__name__}")


def infer_kind(values: Iterable[float]) -> LabelKind:
    """binary when every value is 0 or 1; ordinal for whole numbers on at most
    MAX_ORDINAL_LEVELS levels; otherwise continuous."""
    distinct = set(values)
    if distinct <= {0.0, 1.0}:
        return "binary"
    if len(distinct) <= MAX_ORDINAL_LEVELS and all(float(v).is_integer() for v in distinct):
        return "ordinal"
    return "continuous"


@dataclass(frozen=True)
class LabelColumn:
    """One label column read from every row: `values[row]` (None where not labelled)."""

    name: str
    values: list[float | None]
    kind: LabelKind

    @property
    def n_labelled(self) -> int:
        return sum(v is not None for v in self.values)

    @property
    def levels(self) -> list[float]:
        """The distinct labels, in order (the scale of a binary or ordinal column)."""
        return sorted({v for v in self.values if v is not None})


def read_label_column(
    samples: Sequence[Sample | None],
    ids: Sequence[str],
    column: str,
    *,
    kind: LabelKind | None = None,
    source: str | None = None,
    line: Callable[[int], int | None] = lambda row: None,
) -> LabelColumn:
    """`column`'s labels from every sample's metadata, validated; InvalidDataError names each
    bad row (by its file line where `line` gives a row's, ``LoadedData.line``, as a line-based
    file's other problems are named) and a column no row has. `kind` None infers it from the
    values."""
    if kind is not None and kind not in LABEL_KINDS:
        raise ValueError(f"a label kind is one of {', '.join(LABEL_KINDS)}, got {kind!r}")
    problems: list[RowProblem] = []
    values: list[float | None] = []
    seen = False
    for row, sample in enumerate(samples):
        meta: Mapping[str, Any] = sample.metadata if sample is not None else {}
        if column in meta:
            seen = True
        try:
            values.append(parse_label(meta.get(column)))
        except ValueError as e:
            problems.append(RowProblem(row, column, str(e), ids[row], line=line(row)))
            values.append(None)
    if not seen:
        known = sorted({k for s in samples if s is not None for k in s.metadata})
        hint = f"; the extra columns are: {', '.join(known)}" if known else ""
        raise InvalidDataError(
            [RowProblem(None, column, f"no row has the label column {column!r}{hint}")],
            source=source,
        )
    labelled = [v for v in values if v is not None]
    if not problems and not labelled:
        problems.append(RowProblem(None, column, "the label column is empty in every row"))
    if problems:
        raise InvalidDataError(problems, source=source)
    found = infer_kind(labelled)
    if kind == "binary" and found != "binary":
        bad = next(i for i, v in enumerate(values) if v is not None and v not in (0.0, 1.0))
        raise InvalidDataError(
            [
                RowProblem(
                    bad,
                    column,
                    f"a binary label is 0 or 1, got {values[bad]:g}",
                    ids[bad],
                    line=line(bad),
                )
            ],
            source=source,
        )
    if kind == "ordinal" and found == "continuous":
        raise InvalidDataError(
            [
                RowProblem(
                    None,
                    column,
                    "an ordinal label is a whole number on at most "
                    f"{MAX_ORDINAL_LEVELS} levels; this column has "
                    f"{len(set(labelled))} distinct values",
                )
            ],
            source=source,
        )
    return LabelColumn(column, values, kind or found)
