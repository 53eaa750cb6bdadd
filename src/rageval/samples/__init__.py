"""Data in: the row models (`Sample`, `Conversation`), loaders for every supported source, and
validation.

Validation is separate from loading so that a run can report every row a metric cannot score
(row number, id and field) before a single judge request is paid for. The models and their
fields are in :mod:`._rows`, the loaders in :mod:`._load`.
"""

from __future__ import annotations

from rageval.samples._language import (
    LANGUAGE_NAMES,
    detect_language,
    language_name,
    language_problem,
    sample_language,
)
from rageval.samples._load import (
    SUPPORTED_SUFFIXES,
    FileRows,
    LoadedData,
    load_samples,
    rows_json,
    sample_ids,
)
from rageval.samples._rows import (
    CONVERSATION_ALIASES,
    CONVERSATION_FIELDS,
    FIELD_ALIASES,
    ID_FIELDS,
    LEGACY_ALIASES,
    LIST_FIELDS,
    ROW_FIELDS,
    SAMPLE_FIELDS,
    TEXT_FIELDS,
    Conversation,
    InvalidDataError,
    Role,
    RowProblem,
    Sample,
    SingleTurnSample,
    ToolCall,
    Turn,
    is_conversation_row,
    json_problem,
    missing_fields,
    sample_of,
    transcript,
)
from rageval.samples._trec import TrecRows, read_qrels, read_run, trec_rows

__all__ = [
    "CONVERSATION_ALIASES",
    "CONVERSATION_FIELDS",
    "FIELD_ALIASES",
    "ID_FIELDS",
    "LANGUAGE_NAMES",
    "LEGACY_ALIASES",
    "LIST_FIELDS",
    "ROW_FIELDS",
    "SAMPLE_FIELDS",
    "SUPPORTED_SUFFIXES",
    "TEXT_FIELDS",
    "Conversation",
    "FileRows",
    "InvalidDataError",
    "LoadedData",
    "Role",
    "RowProblem",
    "Sample",
    "SingleTurnSample",
    "ToolCall",
    "TrecRows",
    "Turn",
    "detect_language",
    "is_conversation_row",
    "json_problem",
    "language_name",
    "language_problem",
    "load_samples",
    "missing_fields",
    "read_qrels",
    "read_run",
    "rows_json",
    "sample_ids",
    "sample_language",
    "sample_of",
    "transcript",
    "trec_rows",
]
