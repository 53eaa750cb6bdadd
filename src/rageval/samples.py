"""Data in: the `Sample` row model, loaders for every supported source, and validation.

Validation is separate from loading so that a run can report every row a metric cannot score
(row number, id and field) before a single judge request is paid for.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from rageval.errors import RagevalError

#: legacy/seed column names accepted everywhere, mapped to the canonical field names
LEGACY_ALIASES: dict[str, str] = {
    "question": "user_input",
    "answer": "response",
    "contexts": "retrieved_contexts",
    "ground_truth": "reference",
    "ground_truths": "reference",
}
TEXT_FIELDS = ("user_input", "response", "reference")
LIST_FIELDS = ("retrieved_contexts", "reference_contexts")
SAMPLE_FIELDS = (*TEXT_FIELDS, *LIST_FIELDS)


class InvalidDataError(RagevalError, ValueError):
    """Input data that cannot be evaluated. `problems` lists every (row, id, field, message)."""

    def __init__(self, problems: Sequence[RowProblem], *, source: str | None = None) -> None:
        self.problems = list(problems)
        head = f"invalid input{f' in {source}' if source else ''}: "
        lines = [str(p) for p in self.problems[:20]]
        more = len(self.problems) - len(lines)
        if more > 0:
            lines.append(f"... and {more} more")
        super().__init__(head + ("\n  " if len(lines) > 1 else "") + "\n  ".join(lines))


@dataclass(frozen=True)
class RowProblem:
    row: int | None  # 0-based row index; None for problems with the whole input
    field: str | None
    message: str
    sample_id: str | None = None
    metric: str | None = None

    def __str__(self) -> str:
        where = []
        if self.row is not None:
            where.append(f"row {self.row}")
        if self.sample_id is not None:
            where.append(f"id {self.sample_id!r}")
        if self.field is not None:
            where.append(f"field {self.field!r}")
        if self.metric is not None:
            where.append(f"metric {self.metric!r}")
        return f"{', '.join(where)}: {self.message}" if where else self.message


def _alias(name: str) -> AliasChoices:
    legacy = [k for k, v in LEGACY_ALIASES.items() if v == name]
    return AliasChoices(name, *legacy)


class Sample(BaseModel):
    """One RAG interaction to score. Legacy names (`question`, `answer`, `contexts`,
    `ground_truth`) are accepted as aliases of the canonical fields."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", frozen=True)

    user_input: str | None = Field(default=None, validation_alias=_alias("user_input"))
    response: str | None = Field(default=None, validation_alias=_alias("response"))
    retrieved_contexts: list[str] | None = Field(
        default=None, validation_alias=_alias("retrieved_contexts")
    )
    reference: str | None = Field(default=None, validation_alias=_alias("reference"))
    reference_contexts: list[str] | None = None
    id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: free-form fields a rubric may reference (anything not in the canonical set)

    @field_validator("id", mode="before")
    @classmethod
    def _id_to_str(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else v

    @field_validator("retrieved_contexts", "reference_contexts", mode="before")
    @classmethod
    def _contexts_list(cls, v: Any) -> Any:
        if isinstance(v, str):
            raise ValueError("must be a list of strings, got a single string")
        if isinstance(v, tuple):
            return list(v)
        if v is not None and not isinstance(v, list) and hasattr(v, "tolist"):
            return v.tolist()  # numpy arrays from pandas/parquet
        return v

    def text(self, field: str) -> str:
        """Value of a text field ('' when absent)."""
        v = getattr(self, field)
        return v if isinstance(v, str) else ""


#: ragas' name for the same thing, so the seed examples run unchanged
SingleTurnSample = Sample


def missing_fields(sample: Sample, fields: Iterable[str]) -> list[str]:
    """The required fields a sample does not have (None; an empty string or list counts as
    present: metrics define their own behaviour for empty input)."""
    return [f for f in fields if getattr(sample, f) is None]


# --------------------------------------------------------------------------- loading


def _apply_column_map(
    row: Mapping[str, Any], column_map: Mapping[str, str] | None
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cmap = column_map or {}
    for key, value in row.items():
        out[cmap.get(key, key)] = value
    return out


def _normalise_row(raw: Mapping[str, Any], column_map: Mapping[str, str] | None) -> dict[str, Any]:
    row = _apply_column_map(raw, column_map)
    known = set(SAMPLE_FIELDS) | set(LEGACY_ALIASES) | {"id", "metadata"}
    extras = {k: v for k, v in row.items() if k not in known}
    row = {k: v for k, v in row.items() if k in known}
    if extras:
        meta = dict(row.get("metadata") or {})
        meta.update(extras)
        row["metadata"] = meta
    for key, value in list(row.items()):
        if _is_missing(value):
            row[key] = None
    return row


def _is_missing(value: Any) -> bool:
    """None, or a pandas/numpy NaN standing for an empty cell."""
    if value is None:
        return True
    return isinstance(value, float) and value != value


@dataclass
class LoadedData:
    """Rows parsed into Samples, plus the rows that could not be parsed at all."""

    samples: list[Sample | None]  # None where the row has problems
    problems: list[RowProblem]
    source: str

    def __len__(self) -> int:
        return len(self.samples)


def _rows_from_object(data: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(data, Mapping):
        columns = {k: list(v) for k, v in data.items()}
        lengths = {len(v) for v in columns.values()}
        if len(lengths) > 1:
            sizes = ", ".join(f"{k}={len(v)}" for k, v in columns.items())
            raise InvalidDataError(
                [RowProblem(None, None, f"columns have different lengths ({sizes})")]
            )
        n = lengths.pop() if lengths else 0
        for i in range(n):
            yield {k: v[i] for k, v in columns.items()}
        return
    if hasattr(data, "to_dict") and hasattr(data, "columns"):  # pandas DataFrame
        yield from data.to_dict(orient="records")
        return
    if hasattr(data, "column_names") and hasattr(data, "to_list"):  # datasets.Dataset
        yield from data.to_list()
        return
    if not isinstance(data, Iterable) or isinstance(data, (str, bytes)):
        raise InvalidDataError(
            [
                RowProblem(
                    None,
                    None,
                    f"cannot read data of type {type(data).__name__}: pass a file path, a list "
                    "of dicts, a dict of lists, a pandas DataFrame or a datasets.Dataset",
                )
            ]
        )
    yield from data


def _read_file_rows(path: Path) -> tuple[list[Mapping[str, Any] | None], list[RowProblem]]:
    suffix = path.suffix.lower()
    problems: list[RowProblem] = []
    if suffix in (".jsonl", ".ndjson"):
        rows: list[Mapping[str, Any] | None] = []
        with path.open("rb") as fh:
            for i, raw in enumerate(line for line in fh if line.strip()):
                try:
                    # utf-8-sig: exports from Windows tools start with a byte-order mark
                    obj = json.loads(raw.decode("utf-8-sig" if i == 0 else "utf-8"))
                except UnicodeDecodeError as e:
                    problems.append(
                        RowProblem(
                            i, None, f"line is not valid UTF-8 ({e.reason} at byte {e.start})"
                        )
                    )
                    rows.append(None)
                    continue
                except json.JSONDecodeError as e:
                    problems.append(
                        RowProblem(i, None, f"line is not valid JSON ({e.msg} at column {e.colno})")
                    )
                    rows.append(None)
                    continue
                if not isinstance(obj, dict):
                    problems.append(
                        RowProblem(
                            i, None, f"line is a JSON {type(obj).__name__}, expected an object"
                        )
                    )
                    rows.append(None)
                    continue
                rows.append(obj)
        return rows, problems
    if suffix == ".json":
        try:
            obj = json.loads(path.read_bytes().decode("utf-8-sig"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise InvalidDataError(
                [RowProblem(None, None, f"not valid UTF-8 JSON: {e}")], source=str(path)
            ) from e
        if isinstance(obj, dict) and isinstance(obj.get("samples"), list):
            obj = obj["samples"]
        if isinstance(obj, dict):
            return list(_rows_from_object(obj)), problems
        if not isinstance(obj, list):
            raise InvalidDataError(
                [
                    RowProblem(
                        None,
                        None,
                        "expected a list of objects, an object of columns, or {'samples': [...]}",
                    )
                ],
                source=str(path),
            )
        out: list[Mapping[str, Any] | None] = []
        for i, item in enumerate(obj):
            if isinstance(item, dict):
                out.append(item)
            else:
                problems.append(
                    RowProblem(i, None, f"item is a JSON {type(item).__name__}, expected an object")
                )
                out.append(None)
        return out, problems
    if suffix in (".csv", ".tsv"):
        try:
            text = path.read_bytes().decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise InvalidDataError(
                [RowProblem(None, None, f"file is not valid UTF-8 ({e.reason} at byte {e.start})")],
                source=str(path),
            ) from e
        reader = csv.DictReader(io.StringIO(text), delimiter="\t" if suffix == ".tsv" else ",")
        csv_rows: list[Mapping[str, Any] | None] = []
        for i, rec in enumerate(reader):
            parsed: dict[str, Any] = {}
            for key, cell in rec.items():
                if key is None:
                    problems.append(RowProblem(i, None, "row has more cells than the header"))
                    continue
                parsed[key] = _parse_csv_cell(key, cell, i, problems)
            csv_rows.append(parsed)
        return csv_rows, problems
    if suffix == ".parquet":
        try:
            import pandas as pd
        except ImportError as e:  # pragma: no cover - depends on the install
            raise ImportError(
                "reading Parquet needs the parquet extra: pip install 'rageval[parquet]'"
            ) from e
        return list(pd.read_parquet(path).to_dict(orient="records")), problems
    raise InvalidDataError(
        [
            RowProblem(
                None,
                None,
                f"unsupported file type {suffix!r} (use .jsonl, .json, .csv, .tsv or .parquet)",
            )
        ],
        source=str(path),
    )


def _parse_csv_cell(key: str, cell: str | None, row: int, problems: list[RowProblem]) -> Any:
    if cell is None or cell == "":
        return None
    canonical = LEGACY_ALIASES.get(key, key)
    if canonical in LIST_FIELDS:
        try:
            value = json.loads(cell)
        except json.JSONDecodeError:
            problems.append(
                RowProblem(
                    row,
                    key,
                    'a context list in a CSV cell must be a JSON list of strings, e.g. ["first", "second"]',
                )
            )
            return None
        return value
    return cell


def load_samples(
    data: Any,
    *,
    column_map: Mapping[str, str] | None = None,
) -> LoadedData:
    """Parse any supported input into Samples, collecting every row's problems.

    `data` may be a path (JSONL/JSON/CSV/TSV/Parquet), a list of dicts, a dict of lists,
    a pandas DataFrame or a Hugging Face `datasets.Dataset`. `column_map` renames the user's
    columns to rageval's (`{"query": "user_input"}`).
    """
    problems: list[RowProblem] = []
    unreadable: set[int] = set()  # file rows already reported by the file reader
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        if not path.exists():
            raise FileNotFoundError(f"data file not found: {path}")
        file_rows, problems = _read_file_rows(path)
        unreadable = {i for i, r in enumerate(file_rows) if r is None}
        raw_rows: list[Any] = file_rows
        source = str(path)
    else:
        raw_rows = list(_rows_from_object(data))
        source = type(data).__name__
    if not raw_rows:
        raise InvalidDataError([RowProblem(None, None, "the input has no rows")], source=source)
    samples: list[Sample | None] = []
    for i, raw in enumerate(raw_rows):
        if i in unreadable:
            samples.append(None)
            continue
        if not isinstance(raw, Mapping):
            problems.append(
                RowProblem(i, None, f"row is a {type(raw).__name__}, expected a mapping of fields")
            )
            samples.append(None)
            continue
        try:
            samples.append(Sample.model_validate(_normalise_row(raw, column_map)))
        except ValidationError as e:
            sid = raw.get("id")
            for err in e.errors():
                loc = ".".join(str(p) for p in err["loc"]) or None
                problems.append(
                    RowProblem(i, loc, _friendly(err), None if sid is None else str(sid))
                )
            samples.append(None)
    _check_duplicate_ids(samples, problems)
    return LoadedData(samples, problems, source)


def _friendly(err: Any) -> str:
    msg = str(err.get("msg", "invalid value"))
    value = err.get("input")
    if err.get("type") == "extra_forbidden":
        return "unknown field (rename it with column_map=, or put it under metadata)"
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{msg.removeprefix('Value error, ')} (got {shown})"


def _check_duplicate_ids(samples: Sequence[Sample | None], problems: list[RowProblem]) -> None:
    seen: dict[str, int] = {}
    for i, s in enumerate(samples):
        if s is None or s.id is None:
            continue
        if s.id in seen:
            problems.append(RowProblem(i, "id", f"duplicate id (also row {seen[s.id]})", s.id))
        else:
            seen[s.id] = i


def sample_ids(samples: Sequence[Sample | None]) -> list[str]:
    """Stable ids: the user's id, else the row number."""
    return [
        s.id if s is not None and s.id is not None else f"row-{i}" for i, s in enumerate(samples)
    ]
