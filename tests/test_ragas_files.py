"""Files written by ragas 0.4.3 itself (tests/data/make_ragas_files.py): EvaluationDataset
JSONL and CSV, single- and multi-turn, and a generated test set, read as they are -- no
column map -- and evaluated by `rageval evaluate FILE` with no flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from rageval.cli import main
from rageval.results import load_run
from rageval.samples import Conversation, Sample, load_samples

RAGAS = Path(__file__).parent / "data" / "ragas_files"


@pytest.mark.parametrize("name", ["single_turn.jsonl", "single_turn.csv"])
def test_a_single_turn_dataset_reads_with_every_field(name: str) -> None:
    loaded = load_samples(RAGAS / name)
    assert loaded.problems == []
    first, second, third = loaded.samples
    assert isinstance(first, Sample) and not isinstance(first, Conversation)
    assert first.user_input == "Which river runs through Lyon?"
    assert first.retrieved_contexts == [
        "Lyon lies where the Rhône meets the Saône.",
        "Lyon is in France.",
    ]
    assert first.retrieved_context_ids == ["doc-7", "doc-2"]
    assert first.reference_context_ids == ["doc-7"]
    assert first.metadata["rubrics"]  # a field rageval has no use for is kept, not refused
    assert second is not None and second.reference_context_ids == ["doc-1", "doc-4"]
    assert third is not None and third.retrieved_context_ids == ["9", "3"]  # integer ids
    assert third.reference == "約1400万人"


@pytest.mark.parametrize("name", ["multi_turn.jsonl", "multi_turn.csv"])
def test_a_multi_turn_dataset_reads_as_conversations(name: str) -> None:
    loaded = load_samples(RAGAS / name)
    assert loaded.problems == []
    booking, weather = loaded.samples
    assert isinstance(booking, Conversation) and isinstance(weather, Conversation)
    assert [t.role for t in booking.turns] == ["user", "assistant", "tool", "assistant"]
    assert booking.turns[1].tool_calls is not None
    assert booking.turns[1].tool_calls[0].arguments == {"people": 2, "time": "20:00"}
    assert booking.turns[2].content == "Booked: table 12."
    # ragas' reference of a conversation is the outcome it should reach
    assert booking.reference_goal == "A table for two is booked at 8pm."
    assert booking.reference_tool_calls == booking.tool_calls
    assert weather.reference_topics == ["restaurant bookings"]
    assert weather.reference_tool_calls == []


def test_a_generated_test_set_reads_with_its_generation_details_as_metadata() -> None:
    loaded = load_samples(RAGAS / "testset.jsonl")
    assert loaded.problems == []
    (sample,) = loaded.samples
    assert sample is not None and sample.reference_contexts is not None
    assert sample.metadata["synthesizer_name"] == "single_hop_specific_query_synthesizer"
    assert sample.metadata["persona_name"] == "Geography student"


@pytest.mark.parametrize(
    ("name", "measured"),
    [
        ("single_turn.jsonl", {"token_f1", "rouge_l", "precision", "recall", "mrr"}),
        ("single_turn.csv", {"token_f1", "rouge_l", "precision", "map"}),
        ("multi_turn.jsonl", {"tool_call_f1", "tool_call_accuracy"}),
    ],
)
def test_rageval_evaluate_takes_the_file_with_no_flags(
    name: str,
    measured: set[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("RAGEVAL_LLM", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["evaluate", str(RAGAS / name), "-o", "run"]) == 0, capsys.readouterr()
    result = load_run(tmp_path / "run")
    for metric in measured:
        assert any(v is not None for v in result[metric]), metric
    if name.startswith("single"):
        # the ids measured from the file: doc-7 of one, doc-1 of two, 3 (an integer) of one
        assert result["recall"] == [1.0, 0.5, 1.0]
        assert result["mrr"] == [1.0, 1.0, 0.5]
