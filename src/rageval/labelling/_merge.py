"""A data file's rows with the labels of a labels file put in as columns, for the commands that
read human labels from the data (``calibrate``, ``align``, ``evaluate --human-labels``:
``--labels-file``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rageval.labelling._file import Standing, read_label_values, read_records
from rageval.labelling._session import annotators_kappa, label_statistics
from rageval.samples import InvalidDataError, load_samples, sample_ids


@dataclass(frozen=True)
class LabelledRows:
    """The rows (dicts, as rageval reads data given in memory) and what was put in them."""

    rows: list[dict[str, Any]]
    #: column -> how many rows got a label
    labelled: dict[str, int]
    #: columns some of whose rows were chosen with a probability below 1 (``--order
    #: uncertain``): a statistic that takes the labelled rows for a uniform sample is biased
    unequal: list[str]
    #: column -> the κ of its two annotators with the most rows in common (columns labelled
    #: by two or more people): what the judge's κ is to be weighed against
    people: dict[str, dict[str, Any]]


def rows_with_labels(
    data: str | os.PathLike[str], labels_file: str | os.PathLike[str]
) -> LabelledRows:
    """The rows of the data file `data`, each label column of `labels_file` added (empty where
    a row has no label; a row labelled by several annotators takes the first one's label).

    Args:
        data: a data file rageval reads.
        labels_file: a labels file written by ``rageval label`` on those rows.
    """
    loaded = load_samples(data)
    unread = [p for p in loaded.problems if p.row is None or loaded.samples[p.row] is None]
    if unread:
        raise InvalidDataError(unread, source=loaded.source)
    values = read_label_values(labels_file)
    ids = sample_ids(loaded.samples)
    known = set(ids)
    for column, by_id in values.items():
        stray = sorted(set(by_id) - known)
        if stray:
            raise ValueError(
                f"{labels_file}: column {column!r} labels rows the data {data} does not have "
                f"({', '.join(stray[:3])}{'...' if len(stray) > 3 else ''})"
            )
    rows = []
    for row_id, sample in zip(ids, loaded.samples, strict=True):
        assert sample is not None  # rows that could not be read were refused above
        row = sample.model_dump(exclude_none=True)
        meta = dict(row.get("metadata") or {})
        for column, by_id in values.items():
            got = by_id.get(row_id)
            meta[column] = None if got is None else got[0]
        row["metadata"] = meta
        row.setdefault("id", row_id)
        rows.append(row)
    standing = Standing(read_records(labels_file))
    people = {column: annotators_kappa(standing.labels(column)) for column in values}
    return LabelledRows(
        rows,
        {column: len(by_id) for column, by_id in values.items()},
        [c for c, by_id in values.items() if any(p < 1.0 for _, p in by_id.values())],
        {column: kappa for column, kappa in people.items() if kappa is not None},
    )


def weighted_statistics(
    labels_file: str | os.PathLike[str],
    column: str,
    judge: Mapping[str, float | None],
    *,
    threshold: float = 0.5,
) -> dict[str, Any] | None:
    """The page's statistics of `column` (:func:`label_statistics`: the PPI mean and the
    judge's κ weighted for the rows' selection probabilities) against a run's judge values;
    None when the labels file's plan is of another column, or chose every row (then the
    run's own statistics are already right).

    Args:
        labels_file: a labels file written by ``rageval label``.
        column: the label column.
        judge: the judge's value of each row by id.
        threshold: a judge score at or above it counts as 1 in the judge's κ.
    """
    standing = Standing(read_records(labels_file))
    plan = standing.plan
    if plan is None or plan.column != column or all(r.probability >= 1.0 for r in plan.rows):
        return None
    return label_statistics(plan, standing, judge, threshold=threshold)


__all__ = ["LabelledRows", "rows_with_labels", "weighted_statistics"]
