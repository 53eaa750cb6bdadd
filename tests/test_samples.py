"""The data layer: every supported source, aliases, column maps and row-level problems."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

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


def _check_two(data: Any) -> None:
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
    import pandas as pd

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
    text = [str(p) for p in loaded.problems]
    # problems name the user's own column (here the legacy names), as in their data
    assert any(t.startswith("row 1, field 'question'") for t in text), text
    assert any(t.startswith("row 2, field 'contexts'") and "single string" in t for t in text), text
    assert any(t.startswith("row 3, field 'contexts.1'") for t in text), text
    # a bad field leaves the rest of its row usable by metrics that do not read it
    assert [s is not None for s in loaded.samples] == [True] * 4
    second, third = loaded.samples[1], loaded.samples[2]
    assert second is not None and second.user_input is None and second.response == "x"
    assert third is not None and third.user_input == "q" and third.retrieved_contexts is None
    with pytest.raises(InvalidDataError, match=r"\(rows counted from 0\)"):
        raise InvalidDataError(loaded.problems, source="list")


def test_duplicate_ids_are_reported(tmp_path: Path) -> None:
    loaded = load_samples([{"id": "a", "question": "q"}, {"id": "a", "question": "q2"}])
    assert [str(p) for p in loaded.problems] == [
        "row 1, id 'a', field 'id': duplicate id (also row 0)"
    ]
    path = tmp_path / "d.jsonl"
    path.write_text('{"id": "a", "question": "q"}\n\n{"id": "a", "question": "q2"}\n')
    assert [str(p) for p in load_samples(path).problems] == [
        "line 3, id 'a', field 'id': duplicate id (also line 1)"
    ]


def test_bad_jsonl_lines_are_named_by_their_1_based_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_bytes(
        b'{"question": "fine"}\n\n{not json}\n"a string"\n  \n{"question": "caf\xe9"}\n'
    )
    loaded = load_samples(path)
    messages = [str(p) for p in loaded.problems]
    assert messages[0].startswith("line 3: line is not valid JSON")
    assert messages[1].startswith("line 4: line is a JSON str")
    assert messages[2].startswith("line 6: line is not valid UTF-8")
    assert loaded.samples[0] is not None and len(loaded.samples) == 4
    assert loaded.lines == [1, 3, 4, 6]
    assert "rows counted from 0" not in str(InvalidDataError(loaded.problems))
    # one problem a line under the header, no line ending in a space (it printed "bad.jsonl: ")
    text = str(InvalidDataError(loaded.problems, source="bad.jsonl"))
    assert text.splitlines()[:2] == ["invalid input in bad.jsonl:", f"  {messages[0]}"]
    assert str(InvalidDataError(loaded.problems[:1])) == f"invalid input: {messages[0]}"


def test_csv_problems_name_the_line_a_record_starts_on(tmp_path: Path) -> None:
    path = tmp_path / "d.csv"
    path.write_text(
        'question,contexts\n"a question\nover two lines","[""c""]"\n\nq,"not a list"\n',
        encoding="utf-8",
    )
    loaded = load_samples(path)
    assert loaded.lines == [2, 5]
    (problem,) = loaded.problems
    assert str(problem).startswith("line 5, field 'contexts': a context list in a CSV cell")
    first = loaded.samples[0]
    assert first is not None and first.user_input == "a question\nover two lines"


def test_a_field_under_its_old_and_new_name(tmp_path: Path) -> None:
    same = {"question": "q?", "user_input": "q?", "answer": "a", "response": "a"}
    (sample,) = load_samples([same]).samples
    assert sample is not None and sample.user_input == "q?" and sample.response == "a"
    assert load_samples([same]).problems == []

    loaded = load_samples([{"question": "q?", "user_input": "other?", "answer": "a"}])
    (problem,) = loaded.problems
    assert "'question' and 'user_input' both name the field 'user_input'" in str(problem)
    assert "different values" in str(problem)
    # the rest of the row is still there for metrics that do not read the question
    assert loaded.samples[0] is not None and loaded.samples[0].response == "a"

    # a column map onto a field the data also has is the same situation
    mapped = load_samples(
        [{"query": "x", "user_input": "y"}], column_map={"query": "user_input"}
    ).problems
    assert "'query (mapped to user_input)' and 'user_input'" in str(mapped[0])


def test_column_map_names_must_exist(tmp_path: Path) -> None:
    rows = [{"query": "q?", "response": "a"}]
    with pytest.raises(InvalidDataError, match="the data has no column 'qury'") as err:
        load_samples(rows, column_map={"qury": "user_input"})
    assert "query" in str(err.value)  # the columns it does have
    with pytest.raises(InvalidDataError, match="'question_text' is not a rageval field"):
        load_samples(rows, column_map={"query": "question_text"})
    # ragas writes the map the other way round (field -> column): say so
    with pytest.raises(InvalidDataError, match="looks reversed") as err:
        load_samples(rows, column_map={"user_input": "query"})
    assert "query -> user_input" in str(err.value)
    (sample,) = load_samples(rows, column_map={"query": "user_input"}).samples
    assert sample is not None and sample.user_input == "q?"


def test_pandas_to_csv_with_list_columns_is_read_safely(tmp_path: Path) -> None:
    import pandas as pd

    contexts = [
        ["plain"],
        ["it's got an apostrophe", 'and "double" quotes'],
        ["a, comma", "a\nnewline", "unicode: café ✓"],
        [],
        ["back\\slash"],
    ]
    frame = pd.DataFrame(
        {
            "user_input": [f"q{i}" for i in range(len(contexts))],
            "retrieved_contexts": contexts,
            "reference_contexts": [("a", "tuple")] * len(contexts),
        }
    )
    path = tmp_path / "frame.csv"
    frame.to_csv(path)  # the default: with the index, lists written as their repr
    loaded = load_samples(path)
    assert loaded.problems == []
    assert [s.retrieved_contexts for s in loaded.samples if s is not None] == contexts
    assert all(s is not None and s.reference_contexts == ["a", "tuple"] for s in loaded.samples)
    assert all(s is not None and "" not in s.metadata for s in loaded.samples)


def test_a_python_literal_cell_is_never_evaluated_as_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    path = tmp_path / "d.csv"
    path.write_text(
        "question,contexts\n"
        f"q1,\"__import__('pathlib').Path({str(marker)!r}).touch()\"\n"
        "q2,['numpy' 'array' 'repr']\n",
        encoding="utf-8",
    )
    loaded = load_samples(path)
    assert not marker.exists()
    first, second = (str(p) for p in loaded.problems)
    assert first.startswith("line 2, field 'contexts'") and "not a JSON list" in first
    assert second.startswith("line 3, field 'contexts'") and "numpy array" in second


def test_rows_under_another_key_than_samples_are_refused_not_read_as_one_row(
    tmp_path: Path,
) -> None:
    """{"data": [...]} was read as an object of columns: one row with a 'data' field, and
    every metric's fields reported missing on "row 0"."""
    rows = [{"response": "a", "reference": "a"}, {"response": "b", "reference": "b"}]
    wrapped = tmp_path / "wrapped.json"
    wrapped.write_text(json.dumps({"data": rows}))
    with pytest.raises(InvalidDataError, match="only key holds a list of 2 objects") as e:
        load_samples(wrapped)
    assert "field 'data'" in str(e.value) and "'samples'" in str(e.value)
    wrapped.write_text(json.dumps({"samples": rows}))
    assert len(load_samples(wrapped).samples) == 2
    wrapped.write_text(json.dumps({"response": ["a", "b"]}))  # one column: two rows
    assert len(load_samples(wrapped).samples) == 2
    # the same in memory: {"samples": [...]} was read as rows whose every field was missing
    unwrapped = load_samples({"samples": rows}).samples
    assert [s.response for s in unwrapped if s is not None] == ["a", "b"]
    with pytest.raises(InvalidDataError, match="only key holds a list of 2 objects"):
        load_samples({"data": rows})


def test_a_directory_is_not_data(tmp_path: Path) -> None:
    with pytest.raises(InvalidDataError, match="is a directory: DATA must be a file"):
        load_samples(tmp_path)
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(InvalidDataError, match=f"continue it with --resume {tmp_path}"):
        load_samples(tmp_path)
    # rageval generate's -o DIR is no run to resume: its test set is to be answered
    (tmp_path / "testset.jsonl").write_text("")
    with pytest.raises(InvalidDataError, match="it holds a test set from rageval generate") as e:
        load_samples(tmp_path)
    assert "--resume" not in str(e.value)


def test_dict_of_lists_with_ragged_columns() -> None:
    with pytest.raises(InvalidDataError, match="different lengths"):
        load_samples({"question": ["a", "b"], "answer": ["x"]})


def test_direct_construction_rejects_unknown_fields() -> None:
    with pytest.raises(ValueError, match="Extra inputs"):
        Sample(user_input="q", answr="typo")  # type: ignore[call-arg]
