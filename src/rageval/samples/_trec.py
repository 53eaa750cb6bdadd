"""TREC's files as rows for the retrieval metrics: a qrels file (the judgements) and a run file
(a retriever's ranked results), read as trec_eval reads them (docs/retrieval.md).

* qrels: ``QUERY ITERATION DOCUMENT GRADE`` per line (the iteration is ignored), the grade an
  integer.
* run: ``QUERY Q0 DOCUMENT RANK SCORE TAG`` per line. The ranking is by score, highest first,
  ties broken by document id in reverse order (as trec_eval sorts; the RANK column is
  ignored, as trec_eval ignores it).

Each query of the qrels is a row (in the order the qrels first name it): its id, the run's
ranking for it (empty when the run has none, as ``trec_eval -c`` counts it) and its grades.
A query only the run names has no judgements: it is left out, as trec_eval leaves it out.
A document given twice for one query, in either file, is an error, as in trec_eval.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rageval.samples._rows import InvalidDataError, RowProblem

_Value = TypeVar("_Value", int, float)


@dataclass(frozen=True)
class TrecRows:
    """The rows of a qrels and a run file, and the queries of the run without judgements."""

    rows: list[dict[str, Any]]
    unjudged_queries: list[str]


def _fields(path: Path, count: int, what: str) -> list[tuple[int, list[str]]]:
    """Each non-blank line of `path` (its 1-based number) split on whitespace into `count`
    fields; InvalidDataError naming every line that has another number of fields."""
    if not path.is_file():
        found = "is a directory, not a file" if path.is_dir() else "not found"
        raise FileNotFoundError(f"{what} file {found}: {path}")
    lines, problems = [], []
    with path.open("rb") as fh:
        for number, raw in enumerate(fh, 1):
            try:
                line = raw.decode("utf-8-sig" if number == 1 else "utf-8")
            except UnicodeDecodeError as e:
                problems.append(
                    RowProblem(None, None, f"line {number}: not valid UTF-8 ({e.reason})")
                )
                continue
            parts = line.split()
            if not parts:
                continue
            if len(parts) != count:
                problems.append(
                    RowProblem(
                        None,
                        None,
                        f"line {number}: a {what} line has {count} fields, this one {len(parts)}",
                    )
                )
            lines.append((number, parts))
    if problems:
        raise InvalidDataError(problems, source=str(path))
    if not lines:
        raise InvalidDataError(
            [RowProblem(None, None, f"the {what} file is empty")], source=str(path)
        )
    return lines


def _twice(number: int, query: str, doc: str) -> RowProblem:
    return RowProblem(
        None, None, f"line {number}: document {doc!r} is given twice for query {query!r}"
    )


def _number(text: str) -> float:
    """`text` as a float; ValueError for NaN too (it has no place in a ranking)."""
    value = float(text)
    if value != value:
        raise ValueError(text)
    return value


def _per_query(
    path: str | os.PathLike[str],
    what: str,
    count: int,
    column: int,
    name: str,
    parse: Callable[[str], _Value],
    kind: str,
) -> dict[str, dict[str, _Value]]:
    """Each query's documents and their value, the `column` field (the `name`) read by `parse`,
    from a `what` file of `count` fields a line (query first, document third): InvalidDataError
    naming every line whose value `parse` refuses ("... is not `kind`") or whose document is
    given twice for its query."""
    values: dict[str, dict[str, _Value]] = {}
    problems = []
    for number, fields in _fields(Path(path), count, what):
        query, doc, text = fields[0], fields[2], fields[column]
        try:
            value = parse(text)
        except ValueError:
            problems.append(
                RowProblem(None, None, f"line {number}: the {name} {text!r} is not {kind}")
            )
            continue
        docs = values.setdefault(query, {})
        if doc in docs:
            problems.append(_twice(number, query, doc))
        docs[doc] = value
    if problems:
        raise InvalidDataError(problems, source=str(path))
    return values


def read_qrels(path: str | os.PathLike[str]) -> dict[str, dict[str, int]]:
    """Each query's judgements, ``{query: {document: grade}}``, from a TREC qrels file."""
    return _per_query(path, "qrels", 4, 3, "grade", int, "an integer")


def read_run(path: str | os.PathLike[str]) -> dict[str, list[str]]:
    """Each query's ranking, ``{query: [document, ...]}`` best first, from a TREC run file:
    by score, highest first, ties by document id in reverse order (trec_eval's sort)."""
    scored = _per_query(path, "run", 6, 4, "score", _number, "a number")
    # Python orders texts by code point, which is the byte order of their UTF-8 (C's strcmp)
    return {
        query: sorted(docs, key=lambda d: (docs[d], d), reverse=True)
        for query, docs in scored.items()
    }


def trec_rows(qrels: str | os.PathLike[str], run: str | os.PathLike[str]) -> TrecRows:
    """The rows the retrieval metrics score from a qrels file and a run file: one per query
    of the qrels, with ``id``, ``retrieved_context_ids`` and ``reference_context_ids``."""
    judgements, rankings = read_qrels(qrels), read_run(run)
    rows = [
        {
            "id": query,
            "retrieved_context_ids": rankings.get(query, []),
            "reference_context_ids": grades,
        }
        for query, grades in judgements.items()
    ]
    return TrecRows(rows, [q for q in rankings if q not in judgements])
