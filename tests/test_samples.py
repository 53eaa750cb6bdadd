"""The data layer: every supported source, aliases, column maps and row-level problems."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rageval.samples import InvalidDataError, Sample, SingleTurnSample, load_samples

ROWS = [
    {
        "question": "When was the first super bowl?",
        "answer": "Jan 15, 1967",
        "contexts": ["The first game was played on January 15, 1967."],
        "ground_truth": "January 15, 1967",
    },
    {
        "question": "Who won the most super bowls?",
        "answer": "The Patriots",
        "contexts": ["The Patriots and Steelers have six each.", "Second context"],
        "ground_truth": "Patriots and Steelers",
    },
]


def _check_two(data):  # type: ignore[no-untyped-def]
    loaded = load_samples(data)
    assert loaded.problems == []
    first, second = loaded.samples
    assert first is not None and second is not None
    assert first.user_input == "When was the first super bowl?"
    assert first.response == "Jan 15, 1967"
    assert first.retrieved_contexts == ["The first game was played on January 15, 1967."]
    assert first.reference == "January 15, 1967"
    assert second.retrieved_contexts == [
        "The Patriots and Steelers have six each.",
        "Second context",
    ]


def test_list_of_dicts_with_legacy_names() -> None:
    _check_two(ROWS)


def test_dict_of_lists_like_the_seeds() -> None:
    _check_two({k: [r[k] for r in ROWS] for k in ROWS[0]})


def test_pandas_dataframe() -> None:
    pd = pytest.importorskip("pandas")  # dev extra installs it
    _check_two(pd.DataFrame(ROWS))


def test_hf_dataset() -> None:
    from datasets import Dataset

    _check_two(Dataset.from_dict({k: [r[k] for r in ROWS] for k in ROWS[0]}))


def test_jsonl_json_csv_parquet(tmp_path: Path) -> None:
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in ROWS) + "\n")
    _check_two(jsonl)
    js = tmp_path / "d.json"
    js.write_text(json.dumps(ROWS))
    _check_two(js)
    js_cols = tmp_path / "cols.json"
    js_cols.write_text(json.dumps({k: [r[k] for r in ROWS] for k in ROWS[0]}))
    _check_two(js_cols)

    import pandas as pd

    csv_path = tmp_path / "d.csv"
    frame = pd.DataFrame([{**r, "contexts": json.dumps(r["contexts"])} for r in ROWS])
    frame.to_csv(csv_path, index=False)
    _check_two(csv_path)
    pq = tmp_path / "d.parquet"
    pd.DataFrame(ROWS).to_parquet(pq)
    _check_two(pq)


def test_canonical_names_and_column_map() -> None:
    rows = [{"query": "q?", "generated": "a.", "docs": ["c"], "gold": "g", "id": 7, "team": "x"}]
    loaded = load_samples(
        rows,
        column_map={
            "query": "user_input",
            "generated": "response",
            "docs": "retrieved_contexts",
            "gold": "reference",
        },
    )
    (s,) = loaded.samples
    assert s == Sample(
        user_input="q?",
        response="a.",
        retrieved_contexts=["c"],
        reference="g",
        id="7",
        metadata={"team": "x"},
    )


def test_single_turn_sample_alias_accepts_both_name_sets() -> None:
    a = SingleTurnSample(user_input="q", response="r", retrieved_contexts=["c"], reference="g")
    b = Sample.model_validate(
        {"question": "q", "answer": "r", "contexts": ["c"], "ground_truth": "g"}
    )
    assert a == b


def test_problems_name_row_and_field() -> None:
    rows = [
        {"question": "ok", "answer": "fine", "contexts": ["c"]},
        {"question": 5, "answer": "x"},  # wrong type
        {"question": "q", "contexts": "a single string"},  # contexts not a list
        {"question": "q", "contexts": ["c", None]},  # None inside the list
    ]
    loaded = load_samples(rows)
    assert loaded.samples[0] is not None
    assert loaded.samples[1] is None and loaded.samples[2] is None and loaded.samples[3] is None
    text = [str(p) for p in loaded.problems]
    # problems name the user's own column (here the legacy names), as in their file
    assert any(t.startswith("row 1, field 'question'") for t in text), text
    assert any(t.startswith("row 2, field 'contexts'") and "single string" in t for t in text), text
    assert any(t.startswith("row 3, field 'contexts.1'") for t in text), text


def test_duplicate_ids_are_reported() -> None:
    loaded = load_samples([{"id": "a", "question": "q"}, {"id": "a", "question": "q2"}])
    assert [str(p) for p in loaded.problems] == [
        "row 1, id 'a', field 'id': duplicate id (also row 0)"
    ]


def test_bad_jsonl_lines_and_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"question": "fine"}\n{not json}\n"a string"\n{"question": "caf\xe9"}\n')
    loaded = load_samples(path)
    messages = [str(p) for p in loaded.problems]
    assert messages[0].startswith("row 1: line is not valid JSON")
    assert messages[1].startswith("row 2: line is a JSON str")
    assert messages[2].startswith("row 3: line is not valid UTF-8")
    assert loaded.samples[0] is not None


def test_csv_context_cell_must_be_a_json_list(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text('question,contexts\nq,"not a list"\n')
    loaded = load_samples(path)
    assert "row 0, field 'contexts'" in str(loaded.problems[0])


def test_unsupported_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_samples(tmp_path / "nope.jsonl")
    (tmp_path / "x.xml").write_text("<a/>")
    with pytest.raises(InvalidDataError, match="unsupported file type"):
        load_samples(tmp_path / "x.xml")


def test_dict_of_lists_with_ragged_columns() -> None:
    with pytest.raises(InvalidDataError, match="different lengths"):
        load_samples({"question": ["a", "b"], "answer": ["x"]})


def test_direct_construction_rejects_unknown_fields() -> None:
    with pytest.raises(ValueError, match="Extra inputs"):
        Sample(user_input="q", answr="typo")  # type: ignore[call-arg]
