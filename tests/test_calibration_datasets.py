"""Readers of the public human-labelled datasets.

Each reader runs on synthetic files in the upstream layout (always), and on the real files
when this machine has them in PUBLIC_DATA (then their row and label counts must match the
counts in the datasets' SOURCE.md). Nothing of the real data is stored in the repository.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibration_helpers import FOLDERS, PUBLIC_DATA, REAL_COUNTS, write_public_sets
from rageval.calibration.datasets import (
    DATASETS,
    DatasetError,
    LabelledSet,
    evouna,
    load_dataset,
    memerag,
    nq301,
)
from rageval.samples import load_samples


@pytest.fixture(scope="module")
def synthetic_root(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[Path, dict[str, tuple[int, int | None]]]:
    root = tmp_path_factory.mktemp("public-data")
    return root, write_public_sets(root)


def _roots(
    synthetic_root: tuple[Path, dict[str, tuple[int, int | None]]],
) -> list[tuple[Path, dict[str, tuple[int, int | None]]]]:
    roots = [synthetic_root]
    if PUBLIC_DATA.is_dir():
        roots.append((PUBLIC_DATA, REAL_COUNTS))
    return roots


def _check_rows(ds: LabelledSet) -> None:
    """Rows any evaluation accepts, each with a label and the fields its metrics need."""
    loaded = load_samples(ds.rows)
    assert loaded.problems == []
    ids = [r["id"] for r in ds.rows]
    assert len(set(ids)) == len(ids)
    needs = {
        "answer_accuracy": ("user_input", "response", "reference"),
        "faithfulness": ("user_input", "response", "retrieved_contexts"),
        "response_groundedness": ("response", "retrieved_contexts"),
        "semantic_similarity": ("response", "reference"),
    }
    for sample, row in zip(loaded.samples, ds.rows, strict=True):
        assert sample is not None
        assert isinstance(sample.metadata[ds.label_column], (int, float))
        for field in needs[ds.metrics[0]]:
            assert getattr(sample, field) is not None, (ds.name, field)
        if ds.kind == "binary":
            assert row[ds.label_column] in (0, 1)


@pytest.mark.parametrize("name", list(DATASETS))
def test_every_reader_on_synthetic_and_on_real_files(
    name: str, synthetic_root: tuple[Path, dict[str, tuple[int, int | None]]]
) -> None:
    for root, counts in _roots(synthetic_root):
        ds = load_dataset(name, root / FOLDERS[name])
        rows, positives = counts[name]
        assert len(ds.rows) == rows, (root, name)
        if positives is not None:
            assert sum(r[ds.label_column] for r in ds.rows) == positives, (root, name)
        _check_rows(ds)
        assert ds.labels() == [(ds.label_column, ds.metrics[0])]
        # the directory holding every dataset works too
        assert [r["id"] for r in load_dataset(name, root).rows] == [r["id"] for r in ds.rows]


def test_nq301_reads_quotes_inside_fields_unquotes_quoted_gold_answers_and_lists_them(
    synthetic_root: tuple[Path, dict[str, tuple[int, int | None]]],
) -> None:
    root, _ = synthetic_root
    ds = nq301(root / "nq301-openqa-eval" / "NQ301_human.tsv")  # the file itself works too
    first = ds.rows[0]
    assert first["user_input"] == 'where is "the Eiffel Tower" (item 0)'
    assert first["reference"] == ["Paris", "Paris, Europe"]  # acceptable alternatives
    # "Rome | The ""Rome""" in the file: the CSV quoting undone, the doubled quotes single
    assert ds.rows[1]["reference"] == ["Rome", 'The "Rome"']
    assert first["human_correct"] == 0 and first["response"] == "Rome"
    assert ds.left_out == {"question without gold answers": 1}


def test_evouna_leaves_out_improper_and_unjudged_answers_and_keeps_a_judged_empty_one(
    synthetic_root: tuple[Path, dict[str, tuple[int, int | None]]],
) -> None:
    root, _ = synthetic_root
    ds = evouna(root / "evouna", "NQ")
    assert ds.left_out == {"improper question": 1, "answer not judged": 1}
    empty = next(r for r in ds.rows if r["id"] == "evouna-nq-3-fid")
    assert empty["response"] == "" and empty["human_correct"] == 0
    assert {r["answering_system"] for r in ds.rows} == {
        "fid",
        "gpt35",
        "chatgpt",
        "gpt4",
        "newbing",
    }
    with pytest.raises(DatasetError, match="subset"):
        evouna(root / "evouna", "SQuAD")


def test_memerag_majority_reads_annotator_lists_and_leaves_out_undecided_sentences(
    synthetic_root: tuple[Path, dict[str, tuple[int, int | None]]],
) -> None:
    root, _ = synthetic_root
    original = memerag(root / "memerag")
    assert original.left_out == {"factuality 'Challenging to determine'": 1}
    first = original.rows[0]
    assert first["retrieved_contexts"] == [
        "the Eiffel Tower is a landmark in Paris. the Eiffel Tower stands in Paris."
    ]
    assert (
        first["response"] == "the Eiffel Tower stands in Paris." and first["human_supported"] == 1
    )
    majority = memerag(root / "memerag", "majority")
    assert majority.name == "memerag-ext"
    voted = [r for r in majority.rows if r["id"].startswith("memerag-1-")]
    assert [r["human_supported"] for r in voted] == [1, 0]


def test_a_sample_is_reproducible_and_keeps_the_order(
    synthetic_root: tuple[Path, dict[str, tuple[int, int | None]]],
) -> None:
    root, _ = synthetic_root
    ds = load_dataset("stsb", root / "stsbenchmark")
    a, b = ds.sample(10, seed=3), ds.sample(10, seed=3)
    assert [r["id"] for r in a.rows] == [r["id"] for r in b.rows]
    positions = [ds.rows.index(r) for r in a.rows]
    assert positions == sorted(positions) and len(positions) == 10
    assert ds.sample(10_000) is ds
    assert [r["id"] for r in ds.sample(10, seed=4).rows] != [r["id"] for r in a.rows]


def test_written_jsonl_reads_back_as_the_same_rows(
    synthetic_root: tuple[Path, dict[str, tuple[int, int | None]]], tmp_path: Path
) -> None:
    root, _ = synthetic_root
    ds = load_dataset("begin", root / "begin")
    path = ds.write_jsonl(tmp_path / "begin.jsonl")
    back = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert back == ds.rows
    assert ds.labels(["faithfulness", "response_groundedness"]) == [
        ("human_attributable", "faithfulness"),
        ("human_attributable", "response_groundedness"),
    ]


def test_missing_or_malformed_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset("nq301", tmp_path / "nowhere")
    with pytest.raises(DatasetError, match="none of"):
        load_dataset("sick", tmp_path)
    with pytest.raises(DatasetError, match="unknown dataset 'squad'"):
        load_dataset("squad", tmp_path)
    (tmp_path / "NQ301_human.tsv").write_text(
        "id\tQuestion\tModel answer\tAcceptable?\n", encoding="utf-8"
    )
    with pytest.raises(DatasetError, match="gold answers file"):
        load_dataset("nq301", tmp_path)
    bad = tmp_path / "sts-test.csv"
    bad.write_text("a\tb\tc\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"sts-test.csv:1: expected at least 7"):
        load_dataset("stsb", tmp_path)
    bad.write_text("g\tf\ty\ts\tfive\tA\tB\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="'five' is not a number"):
        load_dataset("stsb", tmp_path)
