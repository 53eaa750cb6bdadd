"""EvaluationResult.to_pandas(view="turns") (issue 25, item 4): one row per turn of each
conversation, with the per-turn values of the metrics whose evidence has them, in memory and
read back from the run directory."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from helpers import handle, make_judge
from rageval import evaluate
from rageval.results import load_run
from rageval.testing import FakeOpenAI

TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "Where is the Louvre?"},
    {
        "role": "assistant",
        "content": "The Louvre is in Paris.",
        "retrieved_contexts": ["The Louvre is a museum in Paris."],
    },
    {"role": "user", "content": "And the Prado?"},
    {"role": "assistant", "tool_calls": [{"name": "search", "arguments": {"q": "Prado"}}]},
    {"role": "tool", "name": "search", "content": "Madrid"},
    {"role": "assistant", "content": "The Prado is in Madrid.", "retrieved_contexts": []},
]
ROWS = [
    {"id": "c0", "turns": TURNS, "reference_tool_calls": [{"name": "search"}]},
    {"id": "c1", "turns": TURNS[:2], "reference_tool_calls": []},
]


def test_one_row_per_turn_with_the_per_turn_values(tmp_path: Path) -> None:
    with FakeOpenAI(handle) as server:
        result = evaluate(
            ROWS,
            ["turn_faithfulness", "tool_call_f1", "knowledge_retention"],
            llm=make_judge(server),
            run_dir=tmp_path / "run",
            progress=False,
        )
    faithfulness = result.sample("c0").cells["turn_faithfulness"].evidence
    by_turn = {t["turn"]: t["value"] for t in faithfulness["turns"]}
    assert set(by_turn) == {1, 5}
    for reread in (result, load_run(tmp_path / "run")):
        frame = reread.to_pandas(view="turns")
        # tool_call_f1 has no per-turn values: no column of its own
        assert list(frame.columns) == [
            "id",
            "turn",
            "role",
            "content",
            "turn_faithfulness",
            "turn_faithfulness_reason",
            "knowledge_retention",
            "knowledge_retention_reason",
        ]
        assert list(frame["id"]) == ["c0"] * 6 + ["c1"] * 2
        assert list(frame["turn"]) == [0, 1, 2, 3, 4, 5, 0, 1]
        assert list(frame["role"])[:6] == [t["role"] for t in TURNS]
        assert pd.isna(frame["content"][3]) and frame["content"][5] == "The Prado is in Madrid."
        c0 = frame[frame["id"] == "c0"].set_index("turn")["turn_faithfulness"]
        assert c0[1] == by_turn[1] and c0[5] == by_turn[5]
        assert all(math.isnan(c0[t]) for t in (0, 2, 3, 4))
        # a turn not scored says why
        reasons = frame[frame["id"] == "c0"].set_index("turn")["turn_faithfulness_reason"]
        assert reasons[3].startswith("no response text (the turn only calls tools)")
        assert pd.isna(reasons[0])
        # knowledge_retention judges the assistant turns with text after a stated fact
        retention = frame[frame["id"] == "c0"].set_index("turn")["knowledge_retention"]
        assert [t for t in range(6) if not math.isnan(retention[t])] == [1, 5]


def test_an_unknown_view_is_refused() -> None:
    result = evaluate([{"response": "a", "reference": "a"}], ["token_f1"], progress=False)
    with pytest.raises(ValueError, match="view is 'samples' or 'turns', got 'rows'"):
        result.to_pandas(view="rows")  # type: ignore[arg-type]
    # single-turn samples have no turns
    assert len(result.to_pandas(view="turns")) == 0
