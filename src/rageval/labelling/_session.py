"""A labelling session: which row comes next, what a label, a skip or an undo writes, and what
the labels so far say (the judge-powered mean, the judge's agreement with the people, the
people's agreement with each other).

Which row next (:func:`make_plan`): rows are visited in a fixed order, each chosen for
labelling with a probability recorded in the plan -- ``file`` (file order, every row),
``random`` (a random order, every row) or ``uncertain`` (a random order, each row chosen with a
probability that grows with the judge's uncertainty: :func:`rageval.stats.selection_probabilities`).
The plan is the labels file's first record, so reopening the file continues the same plan.
"""

from __future__ import annotations

import copy
import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from rageval.labelling._file import (
    LabelRecord,
    LabelsFile,
    PlannedRow,
    PlanRecord,
    SkipRecord,
    Standing,
    UndoRecord,
    now,
)
from rageval.labelling._rows import LabellingRows
from rageval.stats import (
    Estimate,
    active_ppi_mean,
    agreement,
    judge_uncertainty,
    selection_probabilities,
)

Order = Literal["file", "random", "uncertain"]
ORDERS: tuple[Order, ...] = get_args(Order)


def make_plan(
    rows: LabellingRows,
    *,
    order: Order,
    column: str,
    metric: str | None,
    budget: int,
    seed: int,
    overlap: float = 0.0,
) -> PlanRecord:
    """The visiting order of `rows` and which are chosen.

    Args:
        rows: the rows to label.
        order: file, random or uncertain (needs `metric`).
        column: the label column.
        metric: the judge metric whose values measure its uncertainty.
        budget: about how many rows ``uncertain`` chooses in a full pass.
        seed: the random order's seed.
        overlap: the share of chosen rows every annotator labels.
    """
    if order == "uncertain" and metric is None:
        raise ValueError("--order uncertain needs a judge metric: label a run directory")
    rng = random.Random(seed)
    positions = list(range(len(rows.rows)))
    if order != "file":
        rng.shuffle(positions)
    if order == "uncertain":
        assert metric is not None
        judged = rows.judge_values(metric)
        uncertainty = [None if v is None else judge_uncertainty(v) for v in judged]
        probabilities = selection_probabilities(uncertainty, budget)
    else:
        probabilities = [1.0] * len(rows.rows)
    planned = []
    for i in positions:
        p = probabilities[i]
        chosen = p >= 1.0 or rng.random() < p
        planned.append(PlannedRow(id=rows.rows[i].id, probability=p, chosen=chosen))
    return PlanRecord(
        order=order, column=column, metric=metric, seed=seed, budget=budget, overlap=overlap,
        rows=planned, time=now(),
    )  # fmt: skip


def shared(row_id: str, overlap: float) -> bool:
    """Whether every annotator labels the row (the same answer in every session).

    Args:
        row_id: the row's id.
        overlap: the share of rows every annotator labels, in [0, 1].
    """
    digest = hashlib.sha256(row_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:4], "big") / 2**32 < overlap


@dataclass(frozen=True)
class Scale:
    """The label values offered, each with its key."""

    values: tuple[float, ...]

    def bindings(self) -> list[tuple[str, float]]:
        """(key, value) pairs: y/n besides 1/0 on a 0/1 scale."""
        pairs = [(f"{v:g}", v) for v in self.values if len(f"{v:g}") == 1]
        if set(self.values) == {0.0, 1.0}:
            pairs += [("y", 1.0), ("n", 0.0)]
        return pairs


class Session:
    """One annotator labelling one column of `rows` into `file` along `plan`.

    Args:
        rows: the rows the plan visits.
        file: the labels file, held for writing.
        plan: the plan (the file's first record).
        annotator: who labels.
        scale: the label values offered.
        threshold: a judge score at or above it counts as 1 in the judge's κ.
    """

    def __init__(
        self,
        rows: LabellingRows,
        file: LabelsFile,
        plan: PlanRecord,
        *,
        annotator: str,
        scale: Scale,
        threshold: float = 0.5,
    ) -> None:
        self.rows = {r.id: r for r in rows.rows}
        self.order = [r.id for r in rows.rows]
        self.file, self.plan = file, plan
        self.annotator, self.scale, self.threshold = annotator, scale, threshold
        self.judge = (
            dict(zip(self.order, rows.judge_values(plan.metric), strict=True))
            if plan.metric
            else {}
        )
        self._probability = {r.id: r.probability for r in plan.rows}
        unknown = [r.id for r in plan.rows if r.id not in self.rows]
        if unknown:
            raise ValueError(
                f"the labels file's plan has rows these data do not ({', '.join(unknown[:3])}"
                f"{'...' if len(unknown) > 3 else ''}): is it the labels file of other data?"
            )

    def as_annotator(self, annotator: str) -> Session:
        """The same session for another annotator (the same file, plan and rows).

        Args:
            annotator: who labels.
        """
        other = copy.copy(self)
        other.annotator = annotator
        return other

    def standing(self) -> Standing:
        return Standing(self.file.records())

    def next_row(self, standing: Standing) -> str | None:
        """The id of the next row this annotator should label (None: the plan is done).

        Args:
            standing: the labels file's records, undos applied.
        """
        mine = {r.id for r in standing.done if r.annotator == self.annotator}
        anyone = {r.id for r in standing.done}
        for planned in self.plan.rows:
            if not planned.chosen or planned.id in mine:
                continue
            if planned.id in anyone and not shared(planned.id, self.plan.overlap):
                continue
            return planned.id
        return None

    def label(self, row_id: str, value: float, note: str | None) -> None:
        """Record the annotator's label of row `row_id` (ValueError: unknown row or value).

        Args:
            row_id: the row's id.
            value: a value of the scale.
            note: the annotator's note, if any.
        """
        self._check(row_id)
        if value not in self.scale.values:
            raise ValueError(f"{value:g} is not on the scale {self.scale.values}")
        self.file.append(
            LabelRecord(
                id=row_id, column=self.plan.column, value=value, annotator=self.annotator,
                time=now(), probability=self._probability[row_id], note=note or None,
            )
        )  # fmt: skip

    def skip(self, row_id: str) -> None:
        """Pass over row `row_id` without a label.

        Args:
            row_id: the row's id.
        """
        self._check(row_id)
        self.file.append(
            SkipRecord(id=row_id, column=self.plan.column, annotator=self.annotator, time=now())
        )

    def undo(self) -> None:
        """Take back this annotator's last label or skip."""
        self.file.append(UndoRecord(annotator=self.annotator, time=now()))

    def _check(self, row_id: str) -> None:
        if row_id not in self._probability:
            raise ValueError(f"no row {row_id!r} in the plan")

    def state(self) -> dict[str, Any]:
        """What the page shows: the next row, the progress and the statistics."""
        standing = self.standing()
        next_id = self.next_row(standing)
        mine = [r for r in standing.done if r.annotator == self.annotator]
        last = mine[-1] if mine else None
        return {
            "annotator": self.annotator,
            "column": self.plan.column,
            "order": self.plan.order,
            "metric": self.plan.metric,
            "keys": [[k, v] for k, v in self.scale.bindings()],
            "row": None if next_id is None else self.rows[next_id].payload(),
            "probability": None if next_id is None else self._probability[next_id],
            "done": len(mine),
            "chosen": sum(r.chosen for r in self.plan.rows),
            "total": len(self.plan.rows),
            "last": None if last is None else {
                "id": last.id,
                "value": last.value if isinstance(last, LabelRecord) else None,
            },
            "statistics": self.statistics(standing),
        }  # fmt: skip

    def statistics(self, standing: Standing) -> dict[str, Any]:
        """:func:`label_statistics` of the labels so far.

        Args:
            standing: the labels file's records, undos applied.
        """
        return label_statistics(self.plan, standing, self.judge, threshold=self.threshold)


def label_statistics(
    plan: PlanRecord,
    standing: Standing,
    judge: Mapping[str, float | None],
    *,
    threshold: float = 0.5,
) -> dict[str, Any]:
    """The judge-powered mean of the plan column's labels, the judge's κ against them (both
    weighted by 1/π for the rows' selection probabilities) and the annotators' κ with each
    other, each with its interval (None where undefined).

    Args:
        plan: the labels file's plan.
        standing: the labels file's records, undos applied.
        judge: the judge's value of each row by id (empty: no judge; None: not measured).
        threshold: a judge score at or above it counts as 1 in the judge's κ.
    """
    labels = standing.labels(plan.column)
    by_row: dict[str, list[float]] = {}
    for label in labels:
        by_row.setdefault(label.id, []).append(label.value)
    # every row up to the furthest one anybody has labelled or skipped was visited
    done_ids = {r.id for r in standing.done if r.column == plan.column}
    reached = max((i for i, r in enumerate(plan.rows) if r.id in done_ids), default=-1)
    visited = {r.id: r.probability for r in plan.rows[: reached + 1]}
    out: dict[str, Any] = {"labelled_rows": len(by_row)}
    if judge:
        order = [r.id for r in plan.rows]
        estimate = active_ppi_mean(
            [_mean(by_row.get(i)) for i in order],
            [judge.get(i) for i in order],
            [visited.get(i) for i in order],
        )
        out["ppi"] = {"mean": estimate.mean, "low": estimate.low, "high": estimate.high,
                      "lam": estimate.lam, "method": estimate.method}  # fmt: skip
        probability = {r.id: r.probability for r in plan.rows}
        kappa = _judge_kappa(by_row, judge, probability, threshold)
        if kappa is not None:
            out["judge_kappa"] = kappa
    out["annotators"] = annotators_kappa(labels)
    return out


def _judge_kappa(
    by_row: dict[str, list[float]],
    judge: Mapping[str, float | None],
    probability: Mapping[str, float],
    threshold: float,
) -> dict[str, Any] | None:
    """The judge's κ (score >= threshold as 1) against 0/1 labels the annotators agree on,
    each row weighted by 1/π: the κ of all the rows, not of the uncertain ones chosen."""
    if not all(set(v) <= {0.0, 1.0} for v in by_row.values()):
        return None
    human: list[float] = []
    judged: list[float] = []
    weights: list[float] = []
    for row_id, values in by_row.items():
        score = judge.get(row_id)
        if score is None or len(set(values)) != 1:
            continue
        human.append(values[0])
        judged.append(float(score >= threshold))
        weights.append(1.0 / probability[row_id])
    if not human:
        return None
    return _estimate(
        agreement(
            "cohen_kappa", human, judged, row_weights=weights, levels=[0.0, 1.0],
            n_resamples=1000,
        )
    )  # fmt: skip


def annotators_kappa(labels: Sequence[LabelRecord]) -> dict[str, Any] | None:
    """The κ (with its bootstrap interval) of the two annotators with the most rows labelled by
    both; None with fewer than two annotators.

    Args:
        labels: the labels standing (:meth:`Standing.labels`) of one column.
    """
    names = sorted({label.annotator for label in labels})
    if len(names) < 2:
        return None
    value: dict[tuple[str, str], float] = {(lb.annotator, lb.id): lb.value for lb in labels}
    rows = list(dict.fromkeys(lb.id for lb in labels))

    def both(pair: tuple[str, str]) -> list[str]:
        return [i for i in rows if (pair[0], i) in value and (pair[1], i) in value]

    best = max(((a, b) for i, a in enumerate(names) for b in names[i + 1 :]),
               key=lambda pair: len(both(pair)))  # fmt: skip
    shared_rows = both(best)
    people = agreement(
        "cohen_kappa",
        [value[(best[0], i)] for i in shared_rows],
        [value[(best[1], i)] for i in shared_rows],
        n_resamples=1000,
    )
    return {"pair": list(best), "rows": len(shared_rows), "kappa": _estimate(people)}


def _mean(values: Sequence[float] | None) -> float | None:
    return None if not values else sum(values) / len(values)


def _estimate(e: Estimate) -> dict[str, Any]:
    return {"value": e.value, "low": e.low, "high": e.high, "n": e.n, "note": e.note}


__all__ = [
    "ORDERS",
    "Order",
    "Scale",
    "Session",
    "annotators_kappa",
    "label_statistics",
    "make_plan",
    "shared",
]
