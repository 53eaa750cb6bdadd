"""Several acceptable references (QA sets list aliases): a sample's `reference` may be a list.
The first is the canonical text; semantic_similarity takes the closest; the judges of
answer_accuracy and context_precision see every one as an alternative; the run log keeps the
list; CSV reads a JSON list cell."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import handle
from rageval import evaluate
from rageval.judge import Judge
from rageval.log import read_lines
from rageval.metrics import answer_accuracy, context_precision, semantic_similarity
from rageval.metrics.authoring import reference_text
from rageval.samples import InvalidDataError, Sample, load_samples
from rageval.testing import FAKE_API_KEY, FakeOpenAI

ALIASES = ["48 time", "48 Hours", "forty-eight time"]


def test_a_list_of_references_is_kept_and_the_first_is_the_canonical_text() -> None:
    sample = Sample.model_validate(
        {"question": "q?", "answer": "48 Hours", "ground_truths": ALIASES}
    )
    assert sample.reference == ALIASES and sample.references == ALIASES
    assert sample.text("reference") == "48 time"
    # one alternative is just the reference; blank ones hold no answer
    assert Sample(reference=["Paris"]).reference == "Paris"
    assert Sample(reference=["Paris", "  "]).reference == "Paris"
    assert Sample.model_validate({"reference": ("a", "b")}).references == ["a", "b"]
    assert Sample(reference="Paris").references == ["Paris"]
    assert Sample().references == []
    with pytest.raises(ValueError, match="empty list of references"):
        Sample(reference=[])


def test_the_judge_is_shown_every_alternative() -> None:
    text = reference_text(Sample(reference=ALIASES))
    assert text.splitlines() == [
        "Any one of these answers is correct (they are alternatives):",
        "- 48 time",
        "- 48 Hours",
        "- forty-eight time",
    ]
    assert reference_text(Sample(reference="Paris")) == "Paris"
    sample = Sample(user_input="q?", response="a", retrieved_contexts=["c"], reference=ALIASES)
    for metric in (answer_accuracy, context_precision):
        sent = [m["content"] for r in metric.planned_requests(sample) for m in r.messages]
        assert any("- forty-eight time" in content for content in sent), metric


def test_semantic_similarity_takes_the_closest_reference() -> None:
    row = {"answer": "It lasted forty-eight hours.", "reference": ["a red bicycle", "two days"]}
    several = evaluate([row], [semantic_similarity], progress=False)
    each = [
        evaluate([{**row, "reference": r}], [semantic_similarity], progress=False)
        for r in row["reference"]
    ]
    best = max(e["semantic_similarity"][0] or -1.0 for e in each)
    assert several["semantic_similarity"] == [best]
    cell = several.cells("semantic_similarity")[0]
    assert cell is not None
    evidence = cell.evidence
    assert evidence["best_reference"] == 1
    assert evidence["reference_cosines"] == [e["semantic_similarity"][0] for e in each]


def test_the_run_log_and_a_csv_keep_the_list(tmp_path: Path) -> None:
    csv = tmp_path / "rows.csv"
    csv.write_text('question,answer,reference\nq?,48 Hours,"[""48 time"", ""48 Hours""]"\n'
                   'q2?,x,[not json\n', encoding="utf-8")  # fmt: skip
    samples = load_samples(csv).samples
    assert samples[0] is not None and samples[0].references == ["48 time", "48 Hours"]
    assert samples[1] is not None and samples[1].reference == "[not json"
    with FakeOpenAI(handle) as server:
        judge = Judge("gpt-4o-mini", base_url=server.base_url, api_key=FAKE_API_KEY, cache=False)
        run = tmp_path / "run"
        evaluate(csv, [answer_accuracy], llm=judge, run_dir=run, progress=False)
        resumed = evaluate(None, run_dir=run, resume=True, llm=judge, progress=False)
    # rows are written as they finish, in any order
    by_row = {entry.line.row: entry.line for entry in read_lines(run / "results.jsonl")}
    assert by_row[0].inputs.reference == ["48 time", "48 Hours"]
    assert by_row[1].inputs.reference == "[not json"
    assert resumed.complete


def test_a_reference_list_of_non_text_names_the_row_and_field() -> None:
    for bad in ([1, 2], 5):
        with pytest.raises(InvalidDataError) as raised:
            evaluate([{"answer": "a", "reference": bad}], [semantic_similarity], progress=False)
        [problem] = raised.value.problems
        assert (problem.row, problem.field) == (0, "reference")
        assert "a text or a list of texts" in problem.message


def test_the_lexical_metrics_take_the_best_reference_as_squad_does() -> None:
    from rageval.metrics import rouge_l, token_f1

    row = {"answer": "forty-eight hours", "reference": ["two days", "48 Hours", "forty-eight time"]}
    several = evaluate([row], [token_f1, rouge_l], progress=False)
    for name in ("token_f1", "rouge_l"):
        alone = [
            evaluate([{**row, "reference": r}], [name], progress=False)[name][0] or 0.0
            for r in row["reference"]
        ]
        # by hand: "forty-eight time" shares "forty-eight" (token_f1: 1 of 2 tokens each way,
        # F1 0.5; rouge_l splits on "-": 2 of 3 tokens each way, F 0.667); "48 Hours" shares
        # "hours" (token_f1 0.5, tied, so the first best stays; rouge_l 1 of 3 / 1 of 2, 0.4)
        assert several[name] == [max(alone)]
        cell = several.cells(name)[0]
        assert cell is not None
        assert cell.evidence["reference_values"] == alone
        assert cell.evidence["best_reference"] == alone.index(max(alone))
    assert several["token_f1"] == [0.5] and several["rouge_l"] == [pytest.approx(2 / 3)]
