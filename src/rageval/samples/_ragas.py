"""ragas' multi-turn rows as rageval's conversation rows, so that a file ragas wrote
(``EvaluationDataset.to_jsonl`` / ``to_csv``, a generated test set) is read with no column map.

A ragas ``MultiTurnSample`` row keeps its messages under ``user_input``: a list of
``{"type": "human" | "ai" | "tool", "content": ..., "tool_calls": [{"name", "args"}],
"metadata": ...}``, written as JSON in JSONL and as a Python literal in a CSV cell. Its
``reference`` is the outcome the conversation should reach (what ragas'
AgentGoalAccuracyWithReference compares with): rageval's ``reference_goal``. Its
``reference_tool_calls`` and ``reference_topics`` are rageval's fields of the same names.
Single-turn rows (``SingleTurnSample``, a test set's rows) already use rageval's field names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from rageval.samples._rows import LEGACY_ALIASES

#: ragas' message types -> rageval's turn roles
RAGAS_ROLES = {"human": "user", "ai": "assistant", "tool": "tool"}


def _messages(value: Any, read_cell: Callable[[str], Any] | None) -> list[Mapping[str, Any]] | None:
    """`value` as ragas' list of messages (a CSV cell's text read by `read_cell`), or None
    when it is no such list."""
    if isinstance(value, str):
        if read_cell is None or not value.lstrip().startswith("[{"):
            return None
        try:
            value = read_cell(value)
        except ValueError:
            return None
    if isinstance(value, tuple) or (not isinstance(value, list) and hasattr(value, "tolist")):
        value = list(value)  # a tuple, or a numpy array from pandas/parquet
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(m, Mapping) and m.get("type") in RAGAS_ROLES for m in value):
        return None
    return value


def _turn(message: Mapping[str, Any]) -> dict[str, Any]:
    """A ragas message as a rageval turn: its type as the role, its other keys as they are
    (content, tool_calls, metadata; anything else is validated as a turn's field)."""
    turn = {k: v for k, v in message.items() if k != "type" and v is not None}
    return {"role": RAGAS_ROLES[message["type"]], **turn}


def from_ragas_row(
    row: dict[str, Any], read_cell: Callable[[str], Any] | None = None
) -> dict[str, Any]:
    """`row` (under rageval's names or their legacy aliases) as a conversation row when it is
    ragas' multi-turn row (its `user_input` a list of ragas messages; in a file of text cells,
    CSV, the text `read_cell` reads as one), else as it is."""
    key = next((k for k in row if LEGACY_ALIASES.get(k, k) == "user_input"), None)
    messages = _messages(row[key], read_cell) if key is not None else None
    if messages is None or row.get("turns") is not None or row.get("messages") is not None:
        return row
    converted = {k: v for k, v in row.items() if k != key}
    converted["turns"] = [_turn(m) for m in messages]
    reference = next((k for k in row if LEGACY_ALIASES.get(k, k) == "reference"), None)
    if reference is not None and converted.get("reference_goal") is None:
        converted["reference_goal"] = converted.pop(reference)
    return converted
