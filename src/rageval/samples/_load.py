"""Loading rows from every supported source (files, lists and dicts, DataFrames, datasets)
and validating them into samples, every problem named by row, id and field."""

from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import json
import os
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import (
    ValidationError,
)
from pydantic_core import to_jsonable_python

from rageval._extras import require
from rageval.samples._language import language_problem
from rageval.samples._ragas import from_ragas_row
from rageval.samples._rows import (
    CONVERSATION_FIELDS,
    FIELD_ALIASES,
    ID_FIELDS,
    LEGACY_ALIASES,
    LIST_FIELDS,
    ROW_FIELDS,
    Conversation,
    InvalidDataError,
    RowProblem,
    Sample,
    is_conversation_row,
)

_KNOWN_FIELDS = frozenset({*ROW_FIELDS, *FIELD_ALIASES, "id", "metadata"})


def _plain(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") else value


def _normalise_row(
    raw: Mapping[str, Any], column_map: Mapping[str, str] | None
) -> tuple[dict[str, Any], dict[str, str]]:
    """The row under the names Sample reads: the column map applied, one name per field (a
    field given under two names, e.g. `question` and `user_input` in a file converted from
    the old naming, is accepted when both hold the same value), other columns in metadata,
    empty cells as None. Also returns the names whose field was given twice with different
    values, with the message saying so."""
    cmap = column_map or {}
    kept_as: dict[str, str] = {}  # field -> the name the row keeps it under
    given_as: dict[str, list[str]] = {}  # field -> the row's own columns for it
    row: dict[str, Any] = {}
    extras: dict[str, Any] = {}
    conflicts: dict[str, str] = {}
    for key, value in raw.items():
        name = cmap.get(key, key)
        if name not in _KNOWN_FIELDS:
            extras[name] = value
            continue
        value = None if _is_missing(value) else value
        field = FIELD_ALIASES.get(name, name)
        given_as.setdefault(field, []).append(key)
        kept = kept_as.setdefault(field, name)
        if kept == name and len(given_as[field]) == 1:
            row[name] = value
        elif row[kept] is None:
            row[kept] = value
        elif value is not None and _plain(value) != _plain(row[kept]):
            both = " and ".join(repr(_shown(k, cmap)) for k in given_as[field])
            conflicts[kept] = (
                f"{both} both name the field {field!r} and hold different values; keep one of them"
            )
    if extras:
        meta = dict(row.get("metadata") or {})
        meta.update(extras)
        row["metadata"] = meta
    return row, conflicts


def _shown(name: str, column_map: Mapping[str, str]) -> str:
    """A column as the user knows it (with what the column map made of it)."""
    return f"{name} (mapped to {column_map[name]})" if name in column_map else name


def _check_column_map(column_map: Mapping[str, str], columns: Collection[str]) -> list[RowProblem]:
    """A map from a column the data does not have, or to a name that is not a field, is an
    error (a typo would otherwise silently drop the column). ragas' column_map goes the other
    way (field -> column); a map that looks reversed says so."""
    problems = []
    fields = ", ".join(sorted({*ROW_FIELDS, "id", "metadata"}))
    for source, target in column_map.items():
        looks_reversed = source in _KNOWN_FIELDS and target in columns
        hint = (
            f"; it looks reversed: the map goes from your column to rageval's field, "
            f"i.e. {target} -> {source}"
            if looks_reversed
            else ""
        )
        if target not in _KNOWN_FIELDS:
            problems.append(
                RowProblem(
                    None,
                    None,
                    f"column_map: {source} -> {target}: {target!r} is not a rageval field "
                    f"({fields}){hint}",
                )
            )
        elif source not in columns:
            shown = ", ".join(sorted(columns)[:20]) or "none"
            problems.append(
                RowProblem(
                    None,
                    None,
                    f"column_map: {source} -> {target}: the data has no column {source!r} "
                    f"(its columns: {shown}){hint}",
                )
            )
    return problems


def _is_missing(value: Any) -> bool:
    """None, or a pandas/numpy NaN standing for an empty cell."""
    if value is None:
        return True
    return isinstance(value, float) and value != value


@dataclass
class LoadedData:
    """Rows parsed into Samples, plus every problem found in them.

    A row whose only problems are with some of its fields still has a Sample (without those
    fields): the problems stop only the metrics that read them (see RowProblem.blocks).
    """

    samples: list[Sample | None]  # None where the row could not be read at all
    problems: list[RowProblem]
    source: str
    #: 1-based file line where each row starts (line-based files), else None
    lines: list[int] | None = None
    #: the file the rows were read from, if any
    path: Path | None = None
    #: the rows as given, for data given in memory (a list, a DataFrame...; None for a file):
    #: what a run directory keeps a copy of (:func:`rows_json`)
    rows: list[Any] | None = None
    #: the data's own column names, in the order first seen (before the column map)
    columns: list[str] = dataclasses.field(default_factory=list)
    #: the sample fields some row gives a value for, read or not: a field that every row
    #: gives wrongly (two names with different values, a context list that is one string)
    #: is still given, and the metrics that read it report those rows instead of vanishing
    given_fields: frozenset[str] = frozenset()

    def __len__(self) -> int:
        return len(self.samples)

    def line(self, row: int) -> int | None:
        return self.lines[row] if self.lines is not None else None


def _rows_from_object(data: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(data, Mapping):
        if isinstance(data.get("samples"), list):  # rows under "samples", as in a JSON file
            yield from data["samples"]
            return
        _refuse_another_wrapper(data)
        _refuse_columns_that_are_no_lists(data)
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


def _refuse_columns_that_are_no_lists(data: Mapping[Any, Any]) -> None:
    """A dict of columns holds a list per column: a text column would otherwise be read
    character by character (one row per character), a number would not be read at all. Such
    a dict is often one row given without its list: the message says how to pass one."""
    scalars = [
        k
        for k, v in data.items()
        if isinstance(v, (str, bytes, Mapping)) or not isinstance(v, Iterable)
    ]
    if not scalars:
        return
    rows_under = [
        k
        for k, v in data.items()
        if isinstance(v, list) and v and all(isinstance(x, Mapping) for x in v)
    ]
    how = (
        f"the rows seem to be under {rows_under[0]!r}: give that list itself, or name its key "
        "'samples' ({'samples': [...]})"
        if rows_under
        else "one row is passed as a list of one row: [row]"
    )
    names = ", ".join(map(repr, scalars))
    raise InvalidDataError(
        [
            RowProblem(
                None,
                None,
                f"a dict of columns must hold a list per column: {names} hold no list ({how})",
            )
        ]
    )


FileRows = tuple[list[Mapping[str, Any] | None], list[RowProblem], list[int] | None]
SUPPORTED_SUFFIXES = (".jsonl", ".ndjson", ".json", ".csv", ".tsv", ".parquet")


def _read_file_rows(path: Path) -> FileRows:
    """The rows of a file, the problems of rows that could not be read, and (for line-based
    files) the 1-based line where each row starts."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return _read_jsonl(path)
    if suffix == ".json":
        return _read_json(path)
    if suffix in (".csv", ".tsv"):
        return _read_csv(path, delimiter="\t" if suffix == ".tsv" else ",")
    if suffix == ".parquet":
        require("parquet", "reading Parquet")
        import pandas as pd

        return list(pd.read_parquet(path).to_dict(orient="records")), [], None
    kind = f"unsupported file type {suffix!r}" if suffix else "no file suffix to tell the type"
    raise InvalidDataError(
        [RowProblem(None, None, f"{kind} (use {', '.join(SUPPORTED_SUFFIXES)})")],
        source=str(path),
    )


def _refuse_another_wrapper(obj: Mapping[str, Any]) -> None:
    """An object whose one key holds a list of objects (``{"data": [...]}``) is rows under
    another name than ``samples``: read as an object of columns its rows would have every
    field missing."""
    if len(obj) != 1:
        return
    ((key, value),) = obj.items()
    if isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        raise InvalidDataError(
            [
                RowProblem(
                    None,
                    key,
                    f"the only key holds a list of {len(value)} objects, not a column: "
                    "give the list itself, or name its key 'samples' ({'samples': [...]})",
                )
            ]
        )


def _read_jsonl(path: Path) -> FileRows:
    rows: list[Mapping[str, Any] | None] = []
    problems: list[RowProblem] = []
    lines: list[int] = []
    with path.open("rb") as fh:
        for line, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            row = len(rows)
            lines.append(line)
            rows.append(None)
            try:
                # utf-8-sig: exports from Windows tools start with a byte-order mark
                text = raw.decode("utf-8-sig" if line == 1 else "utf-8").rstrip("\r\n")
                obj = json.loads(text)  # without its line end, an error's column is the line's
            except UnicodeDecodeError as e:
                message = f"line is not valid UTF-8 ({e.reason} at byte {e.start})"
            except json.JSONDecodeError as e:
                message = f"line is not valid JSON ({e.msg} at column {e.colno})"
            except RecursionError:
                message = _TOO_DEEP
            else:
                if isinstance(obj, dict):
                    rows[row] = obj
                    continue
                message = f"line is a JSON {type(obj).__name__}, expected an object"
            problems.append(RowProblem(row, None, message, line=line))
    return rows, problems, lines


_TOO_DEEP = "JSON nested too deeply to read (lists or objects within each other, thousands deep)"


def _read_json(path: Path) -> FileRows:
    try:
        obj = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InvalidDataError(
            [RowProblem(None, None, f"not valid UTF-8 JSON: {e}")], source=str(path)
        ) from e
    except RecursionError:
        raise InvalidDataError([RowProblem(None, None, _TOO_DEEP)], source=str(path)) from None
    if isinstance(obj, dict) and isinstance(obj.get("samples"), list):
        obj = obj["samples"]
    if isinstance(obj, dict):
        try:
            return list(_rows_from_object(obj)), [], None
        except InvalidDataError as e:  # columns that are no lists, or of different lengths
            raise InvalidDataError(e.problems, source=str(path)) from None
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
    rows: list[Mapping[str, Any] | None] = []
    problems: list[RowProblem] = []
    for i, item in enumerate(obj):
        if isinstance(item, dict):
            rows.append(item)
        else:
            problems.append(
                RowProblem(i, None, f"item is a JSON {type(item).__name__}, expected an object")
            )
            rows.append(None)
    return rows, problems, None


_LARGEST_CELL = 2**31 - 1  # the most csv.field_size_limit takes everywhere (a C long)


def _read_csv(path: Path, *, delimiter: str) -> FileRows:
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InvalidDataError(
            [RowProblem(None, None, f"file is not valid UTF-8 ({e.reason} at byte {e.start})")],
            source=str(path),
        ) from e
    # a cell may hold a whole document (a context, an answer), as a JSONL line may: Python's
    # csv refuses one over 131,072 characters by default (the process-wide limit is raised
    # here, never lowered)
    csv.field_size_limit(max(csv.field_size_limit(), _LARGEST_CELL))
    # strict: a quoted cell never closed, or text after a closing quote, is an error (else a
    # cell silently swallows the rest of the file, or loses its quotes)
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    header: list[str] | None = None
    rows: list[Mapping[str, Any] | None] = []
    problems: list[RowProblem] = []
    lines: list[int] = []
    while True:
        line = reader.line_num + 1  # where the next record starts
        try:
            cells = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            hint = (
                ": a quoted cell is never closed"
                if "end of data" in str(e)
                else ": a quote opens a cell only at its start and closes it at its end; a "
                'quote within a quoted cell is written twice ("")'
                if "expected after" in str(e)
                else ""
            )
            raise InvalidDataError(
                [RowProblem(None, None, f"line {line}: not valid CSV ({e}{hint})")],
                source=str(path),
            ) from e
        if not cells:  # a blank line
            continue
        if header is None:
            header = cells
            _check_header(header, delimiter, path)
            continue
        row = len(rows)
        lines.append(line)
        if len(cells) > len(header):
            problems.append(
                RowProblem(
                    row,
                    None,
                    f"row has more cells than the header ({len(cells)} > {len(header)})",
                    line=line,
                )
            )
        # fewer cells than the header: the fields of the missing ones are absent
        named = zip(header, cells, strict=False)
        # an unnamed column is the index pandas' to_csv() writes
        rows.append({key: cell or None for key, cell in named if key != ""})
    return rows, problems, lines


def _check_header(header: list[str], delimiter: str, path: Path) -> None:
    """A column named twice (which cell would be its value?), or a header that is one column
    holding another separator (a CSV saved with semicolons, as a spreadsheet in some locales
    saves it): InvalidDataError, rather than every row lacking every field."""
    twice = sorted({name for name in header if name and header.count(name) > 1})
    if twice:
        message = f"the header names column(s) {', '.join(map(repr, twice))} more than once"
    elif len(header) == 1 and (other := next((c for c in ";\t|" if c in header[0]), None)):
        separator = "tabs" if delimiter == "\t" else "commas"
        message = (
            f"the header is one column, {header[0]!r}: this file's cells are separated by "
            f"{other!r}, and a {path.suffix} file's by {separator}"
        )
    else:
        return
    raise InvalidDataError([RowProblem(None, None, f"line 1: {message}")], source=str(path))


_LIST_CELL_HINT = (
    "a context list in a CSV cell must be a JSON list of strings, e.g. "
    '["first", "second"], or a Python list literal as pandas writes it'
)


def _parse_list_cells(row: dict[str, Any]) -> dict[str, str]:
    """Read the list fields of a CSV row in place (a cell is text); the fields that could not
    be read, with why."""
    bad = {}
    for key, cell in row.items():
        field = LEGACY_ALIASES.get(key, key)
        if isinstance(cell, str) and field == "reference":
            row[key] = _reference_cell(cell)
            continue
        if isinstance(cell, str) and field in ("turns", "reference_tool_calls"):
            try:
                row[key] = json_or_literal(cell)
            except ValueError as e:
                bad[key] = f"{field} in a CSV cell must be a JSON list of objects ({e})"
            continue
        if not isinstance(cell, str) or field not in (*LIST_FIELDS, *ID_FIELDS, "reference_topics"):
            continue
        try:
            row[key] = json.loads(cell)
            continue
        except (json.JSONDecodeError, RecursionError):
            pass
        try:
            row[key] = _python_literal(cell)
        except ValueError as e:
            bad[key] = f"{_LIST_CELL_HINT} ({e})"
    return bad


def _reference_cell(cell: str) -> str | list[str]:
    """A reference cell of a CSV: several acceptable answers when it holds a JSON list of
    strings (``["48 Hours", "forty-eight time"]``), else the text as it is."""
    if cell.lstrip().startswith("["):
        try:
            value = json.loads(cell)
        except (json.JSONDecodeError, RecursionError):
            return cell
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return value
    return cell


def json_or_literal(cell: str) -> Any:
    """A CSV cell's JSON, or the Python literal pandas writes for a list or a dict (ragas'
    ``to_csv`` among others); ValueError saying why it is neither."""
    try:
        return json.loads(cell)
    except RecursionError:
        raise ValueError(_TOO_DEEP) from None
    except json.JSONDecodeError as e:
        try:
            return _python_literal(cell)
        except ValueError:
            raise ValueError(f"not JSON ({e.msg}) nor a Python literal") from None


def _python_literal(text: str) -> Any:
    """A Python literal (pandas' `to_csv()` writes a list column as each list's repr), read
    with `ast.literal_eval`: never evaluated as code.

    Refused: string literals side by side, which Python would join into one string (numpy's
    array repr `['a' 'b']` would otherwise read back as `['ab']`)."""
    import ast
    import tokenize

    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, tokenize.TokenError):
        raise ValueError("not a JSON list nor a Python literal") from None
    kinds = [t.type for t in tokens if t.type not in (tokenize.NL, tokenize.NEWLINE)]
    if any(a == b == tokenize.STRING for a, b in itertools.pairwise(kinds)):
        raise ValueError("items not separated by commas, as in a numpy array's repr")
    return list(value) if isinstance(value, tuple) else value


def load_samples(
    data: Any,
    *,
    column_map: Mapping[str, str] | None = None,
    language: str | None = None,
) -> LoadedData:
    """Parse any supported input into Samples, collecting every row's problems.

    `data` may be a path (JSONL/JSON/CSV/TSV/Parquet), a list of dicts, a dict of lists,
    a pandas DataFrame or a Hugging Face `datasets.Dataset`. `column_map` renames the user's
    columns to rageval's (`{"query": "user_input"}`); a name in it that the data or rageval
    does not know is an error. `language` is the language of every row without a
    ``language`` column of its own (kept in its metadata; docs/languages.md).
    """
    if language is not None and not _blank(language) and (wrong := language_problem(language)):
        raise ValueError(f"language: {wrong}")
    if column_map is not None and not isinstance(column_map, Mapping):
        raise ValueError(f"column_map must be a dict, {{'yours': 'field'}}, got {column_map!r}")
    problems: list[RowProblem] = []
    lines: list[int] | None = None
    path: Path | None = None
    if isinstance(data, (str, os.PathLike)):
        path = Path(data)
        if not path.exists():
            raise FileNotFoundError(f"data file not found: {path}")
        if path.is_dir():
            raise InvalidDataError([RowProblem(None, None, _directory_message(path))])
        raw_rows, problems, lines = _read_file_rows(path)
        source = str(path)
    else:
        raw_rows = list(_rows_from_object(data))
        source = type(data).__name__
    if not raw_rows:
        raise InvalidDataError([RowProblem(None, None, "the input has no rows")], source=source)
    columns = list(dict.fromkeys(k for r in raw_rows if isinstance(r, Mapping) for k in r))
    if column_map:
        wrong_map = _check_column_map(column_map, set(columns))
        if wrong_map:
            raise InvalidDataError(wrong_map, source=source)
    unreadable = {p.row for p in problems if p.row is not None}
    cells_are_text = path is not None and path.suffix.lower() in (".csv", ".tsv")
    given: set[str] = set()
    samples: list[Sample | None] = []
    for i, raw in enumerate(raw_rows):
        line = lines[i] if lines is not None else None
        if i in unreadable:
            samples.append(None)
            continue
        if isinstance(raw, Sample):  # Sample and Conversation objects are rows as they are
            raw = raw.model_dump(exclude_none=True, exclude_defaults=True)
        if not isinstance(raw, Mapping):
            problems.append(
                RowProblem(i, None, f"row is a {type(raw).__name__}, expected a mapping of fields")
            )
            samples.append(None)
            continue
        sid = None if raw.get("id") is None else str(raw.get("id"))
        row, bad_cells = _normalise_row(raw, column_map)
        row = from_ragas_row(row, json_or_literal if cells_are_text else None)
        given.update(FIELD_ALIASES.get(k, k) for k, v in row.items() if v is not None)
        if cells_are_text:
            bad_cells.update(_parse_list_cells(row))
        bad_cells.update(_not_unicode(row))
        for field, message in bad_cells.items():
            problems.append(RowProblem(i, field, message, sid, line=line))
        sample = _validated(row, i, line, sid, set(bad_cells), problems)
        stated = None if sample is None else sample.metadata.get("language")
        wrong = None if _blank(stated) else language_problem(stated)
        if wrong:  # before any prompt states it to a judge
            problems.append(RowProblem(i, "language", wrong, sid, line=line))
            sample = None
        samples.append(sample)
    _check_duplicate_ids(samples, lines, problems)
    if language and language.strip():
        samples = [_in_language(s, language.strip()) for s in samples]
    return LoadedData(
        samples,
        problems,
        source,
        lines=lines,
        path=path,
        columns=[str(c) for c in columns],
        given_fields=frozenset(given & set(ROW_FIELDS)),
        rows=raw_rows if path is None else None,
    )


def _blank(language: object) -> bool:
    """No language stated (None or a blank text): the row's own, or detected, applies."""
    return language is None or (isinstance(language, str) and not language.strip())


def _in_language(sample: Sample | None, language: str) -> Sample | None:
    """`sample` with `language` as its language, unless its own column states one."""
    if sample is None or sample.metadata.get("language"):
        return sample
    return sample.model_copy(update={"metadata": {**sample.metadata, "language": language}})


def rows_json(rows: Sequence[Any]) -> str:
    """Rows given in memory as a JSON array (one row a line) that :func:`load_samples` reads
    back as the same samples: an empty cell (None, a pandas NaN) is null, a numpy value its
    list or number, another object what pydantic writes for it in JSON (as the samples' own
    JSON form has it), and a NaN inside a value stays NaN (Python's JSON reads it back)."""

    def jsonable(value: Any) -> Any:
        return to_jsonable_python(value, fallback=_jsonable_fallback)

    def row_json(row: Any) -> str:
        if isinstance(row, Mapping):
            row = {str(k): None if _is_missing(v) else jsonable(v) for k, v in row.items()}
        return json.dumps(jsonable(row), ensure_ascii=False)

    return "[\n" + ",\n".join(map(row_json, rows)) + "\n]\n"


def _jsonable_fallback(value: Any) -> Any:
    return value.tolist() if hasattr(value, "tolist") else str(value)


def _not_unicode(row: Mapping[str, Any]) -> dict[str, str]:
    """The fields holding a text that is no Unicode: a lone surrogate (a JSON ``\\ud800``
    escape, a text decoded with errors="surrogateescape"), which no judge request, run log or
    report can carry (UTF-8 cannot encode it), with why."""
    bad = {}
    for key, value in row.items():
        found = _surrogate(value)
        if found is None:
            continue
        where = ""
        if key == "metadata" and isinstance(value, Mapping):  # the row's other columns
            column = next(k for k, v in value.items() if _surrogate(v) is not None)
            where = f"its column {column!r} "
        bad[key] = (
            f"{where}holds a lone surrogate ({found!r}), which is no Unicode character and "
            "cannot be sent to a judge: fix the text's encoding"
        )
    return bad


def _surrogate(value: Any) -> str | None:
    """The first lone surrogate in `value` (a text, or texts nested in lists and dicts)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            return value[e.start]
        return None
    items = value.values() if isinstance(value, Mapping) else value
    if isinstance(value, (Mapping, list, tuple)):
        return next((c for c in map(_surrogate, [*items]) if c is not None), None)
    return None


def _validated(
    row: dict[str, Any],
    index: int,
    line: int | None,
    sid: str | None,
    bad_cells: set[str],
    problems: list[RowProblem],
) -> Sample | None:
    """The row's Sample (its Conversation, for a row with turns); a field with a problem is
    left out (reported here, or already by the file reader: `bad_cells`), so that it stops
    only the metrics that read it. A problem inside a turn names the turn and its field."""
    bad = set(bad_cells)
    cls = Conversation if is_conversation_row(row) else Sample
    if cls is Conversation and bad & {"turns", "messages"}:
        return None  # no turns: nothing of the conversation can be scored
    try:
        return cls.model_validate({k: v for k, v in row.items() if k not in bad})
    except ValidationError as e:
        for err in e.errors():
            turn, loc = _located(tuple(err["loc"]))
            message = _friendly(err, in_turn=turn is not None)
            problems.append(RowProblem(index, loc, message, sid, line=line, turn=turn))
            bad.add(str(err["loc"][0]) if err["loc"] else "")
    if "" in bad:
        return None
    try:
        return cls.model_validate({k: v for k, v in row.items() if k not in bad})
    except ValidationError:  # a conversation whose turns were all left out
        return None


def _located(loc: tuple[int | str, ...]) -> tuple[int | None, str | None]:
    """Where a validation error is: (the turn, its field) inside a conversation's turns, as
    ``(2, "tool_calls[0].arguments")``; else (None, the row's field: ``contexts.1`` as
    before, ``reference_tool_calls[0].name`` inside a conversation's lists)."""
    if not loc:
        return None, None
    head, rest = str(loc[0]), loc[1:]
    if FIELD_ALIASES.get(head, head) == "turns" and rest and isinstance(rest[0], int):
        return rest[0], _path(rest[1:]) or None
    if head in CONVERSATION_FIELDS:
        return None, head + _path(rest, lead=".")
    return None, ".".join(str(p) for p in loc)


def _path(loc: Sequence[int | str], lead: str = "") -> str:
    """A location inside a value: ``tool_calls[0].arguments``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f"{lead if not out else '.'}{part}"
    return out


def _directory_message(path: Path) -> str:
    hint = ""
    if (path / "testset.jsonl").exists():  # rageval generate's run directory
        hint = (
            f"; it holds a test set from rageval generate: add your system's answers to "
            f"{path / 'testset.jsonl'} and evaluate that file (docs/generate.md)"
        )
    elif (path / "manifest.json").exists():
        hint = f"; it holds a rageval run: continue it with --resume {path}"
    return f"{path} is a directory: DATA must be a file ({', '.join(SUPPORTED_SUFFIXES)}){hint}"


def _friendly(err: Any, *, in_turn: bool = False) -> str:
    msg = str(err.get("msg", "invalid value"))
    value = err.get("input")
    if err.get("type") == "extra_forbidden":
        if in_turn:
            return "unknown field of a turn (put it under the turn's metadata)"
        return "unknown field (rename it with column_map=, or put it under metadata)"
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{msg.removeprefix('Value error, ')} (got {shown})"


def _check_duplicate_ids(
    samples: Sequence[Sample | None], lines: Sequence[int] | None, problems: list[RowProblem]
) -> None:
    seen: dict[str, int] = {}
    for i, s in enumerate(samples):
        if s is None or s.id is None:
            continue
        if s.id in seen:
            first = seen[s.id]
            also = f"line {lines[first]}" if lines is not None else f"row {first}"
            line = lines[i] if lines is not None else None
            problems.append(RowProblem(i, "id", f"duplicate id (also {also})", s.id, line=line))
        else:
            seen[s.id] = i


def sample_ids(samples: Sequence[Sample | None]) -> list[str]:
    """Stable ids: the user's id, else the row number."""
    return [
        s.id if s is not None and s.id is not None else f"row-{i}" for i, s in enumerate(samples)
    ]
