"""The labels file: one JSON object a line, appended and flushed to disk one record at a time.

A record is a label (its row id, column, value, annotator, time, the row's selection
probability and an optional note), a skip, an undo, or the plan (the order in which rows are
visited and which were chosen: written once, first). Nothing is ever rewritten: an undo is a
record of its own, so a process killed at any moment (``kill -9`` included) leaves every record
written before it, and at worst half a last line, which the reader leaves out (as the run log's
reader does).

One writer at a time: :meth:`LabelsFile.open` holds the run-directory lock
(:mod:`rageval._rundir_lock`) on a directory beside the file, ``<file>.writer``; a second
writer is refused at once with the holder's pid, and a killed writer's lock goes with it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from rageval._rundir_lock import hold_run_dir
from rageval.errors import RagevalError, RunDirInUseError


class LabelsFileError(RagevalError, ValueError):
    """A labels file that cannot be read (a broken line before the last one)."""


class LabelsFileInUseError(RagevalError):
    """Another process writes the labels file."""


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PlannedRow(_Record):
    """One row of the plan, in visiting order."""

    id: str
    #: the probability the row had of being chosen when visited
    probability: float = Field(gt=0.0, le=1.0)
    chosen: bool


class PlanRecord(_Record):
    """How rows are visited (written once, before any label): ``order`` is file, random or
    uncertain; ``rows`` in visiting order; ``column`` the label column; ``metric`` the judge
    metric whose uncertainty chose them (None: none)."""

    kind: Literal["plan"] = "plan"
    order: Literal["file", "random", "uncertain"]
    column: str
    metric: str | None = None
    seed: int
    budget: int
    overlap: float = 0.0
    rows: list[PlannedRow]
    time: str


class LabelRecord(_Record):
    """A person's label of one row's column."""

    kind: Literal["label"] = "label"
    id: str
    column: str
    value: float
    annotator: str
    time: str
    #: the row's selection probability (1 when every row is shown)
    probability: float = Field(gt=0.0, le=1.0)
    note: str | None = None


class SkipRecord(_Record):
    """A row an annotator passed over without a label."""

    kind: Literal["skip"] = "skip"
    id: str
    column: str
    annotator: str
    time: str


class UndoRecord(_Record):
    """Takes back the annotator's last label or skip still standing."""

    kind: Literal["undo"] = "undo"
    annotator: str
    time: str


Record = Annotated[PlanRecord | LabelRecord | SkipRecord | UndoRecord, Field(discriminator="kind")]
_RECORD: TypeAdapter[Record] = TypeAdapter(Record)


def now() -> str:
    """The time a record is written, in UTC, to the second."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def read_records(path: str | os.PathLike[str]) -> list[Record]:
    """Every record of the labels file at `path` in file order ([] when it does not exist); a
    last line cut short by a killed writer is left out, any other bad line raises
    :class:`LabelsFileError` naming its line.

    Args:
        path: a labels file.
    """
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    records: list[Record] = []
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            records.append(_RECORD.validate_json(raw))
        except ValidationError as e:
            if number == len(lines):  # no newline after it: the write was cut short
                break
            first = e.errors()[0]
            raise LabelsFileError(f"{path}, line {number}: {first['msg']}") from None
    return records


class Standing:
    """The labels and skips still standing after the undos, in the order they were made.

    Args:
        records: a labels file's records, in file order.
    """

    def __init__(self, records: list[Record]) -> None:
        self.plan: PlanRecord | None = None
        self.done: list[LabelRecord | SkipRecord] = []
        for record in records:
            if isinstance(record, PlanRecord):
                self.plan = self.plan or record
            elif isinstance(record, UndoRecord):
                last = next(
                    (i for i in reversed(range(len(self.done)))
                     if self.done[i].annotator == record.annotator),
                    None,
                )  # fmt: skip
                if last is not None:
                    del self.done[last]
            else:
                self.done.append(record)

    def labels(self, column: str | None = None) -> list[LabelRecord]:
        """The labels standing (of `column`), the last one of each (row, annotator) only, in
        the order each (row, annotator) was first labelled.

        Args:
            column: the label column (None: every column).
        """
        last: dict[tuple[str, str, str], LabelRecord] = {}
        for record in self.done:
            if isinstance(record, LabelRecord) and column in (None, record.column):
                last[(record.id, record.column, record.annotator)] = record
        return list(last.values())


class LabelsFile:
    """A labels file held for writing: :meth:`append` writes and syncs one record.

    Args:
        path: the labels file (made by :meth:`open`, which holds it).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._write = threading.Lock()
        # the holder is the file's only writer: what it read at the start and what it has
        # written since is the file, so no request reads the file again
        self._records = read_records(path)

    @classmethod
    @contextlib.contextmanager
    def open(cls, path: str | os.PathLike[str]) -> Iterator[LabelsFile]:
        """Hold the labels file at `path` for writing and read its records
        (:class:`LabelsFileError` for a broken one); :class:`LabelsFileInUseError` at once
        when another process holds it.

        Args:
            path: the labels file (created on the first record).
        """
        path = Path(path)
        try:
            with hold_run_dir(path.with_name(path.name + ".writer")):
                _drop_cut_line(path)
                yield cls(path)
        except RunDirInUseError as e:
            raise LabelsFileInUseError(
                f"{path} is being written by another `rageval label` (pid {e.pid}"
                f"{f' on host {e.host}' if e.host else ''}); stop it first (a stopped or "
                "killed one gives the file up), or label into another file"
            ) from None

    def records(self) -> list[Record]:
        """Every record written so far."""
        with self._write:
            return list(self._records)

    def append(self, record: Record) -> None:
        """Write `record` as the file's last line and sync it to disk before returning.

        Args:
            record: the plan, a label, a skip or an undo.
        """
        text = _RECORD.dump_json(record, exclude_none=True) + b"\n"
        with self._write:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, text)
                os.fsync(fd)
            finally:
                os.close(fd)
            self._records.append(record)


def _drop_cut_line(path: Path) -> None:
    """Cut off a last line a killed writer left unfinished (the reader leaves it out), so the
    next record starts a line of its own; only the lock's holder may."""
    if not path.exists():
        return
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        os.truncate(path, data.rfind(b"\n") + 1)


def read_label_values(
    path: str | os.PathLike[str],
) -> dict[str, dict[str, tuple[float, float]]]:
    """The labels of the file at `path` as ``{column: {row id: (value, probability)}}``.

    A row labelled by several annotators (the overlap) takes the label of the one who labelled
    it first: a mean of 0 and 1 would be no binary label; how far the annotators agree is
    measured apart (:func:`~rageval.labelling._session.annotators_kappa`).

    Args:
        path: a labels file.
    """
    values: dict[str, dict[str, tuple[float, float]]] = {}
    for label in Standing(read_records(path)).labels():
        values.setdefault(label.column, {}).setdefault(label.id, (label.value, label.probability))
    return values


__all__ = [
    "LabelRecord",
    "LabelsFile",
    "LabelsFileError",
    "LabelsFileInUseError",
    "PlanRecord",
    "PlannedRow",
    "Record",
    "SkipRecord",
    "Standing",
    "UndoRecord",
    "now",
    "read_label_values",
    "read_records",
]
