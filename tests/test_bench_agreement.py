"""benchmarks/bench_agreement.py (rageval beside ragas on labelled data) and bench_prompts.py's
comparison with a saved run: the split, the rows each tool is given, the lexical floor, the
statistics and the run-log check, on hand-computed examples (no judge, no server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench_agreement import (
    claims_with_probability,
    difference,
    half_of,
    pick,
    ragas_row,
    run_language,
    setups,
    statistics,
    unigram_coverage,
)
from bench_prompts import changes


def test_the_split_keeps_a_questions_rows_together_and_leaves_out_excluded_ids() -> None:
    rows = [
        {"id": f"r{i}-{k}", "user_input": f"question {i}", "response": str(k)}
        for i in range(40)
        for k in range(3)
    ]
    tune = pick(rows, "tune", 1000, set())
    heldout = pick(rows, "heldout", 1000, {"r0-0", "r1-0"})
    assert tune and heldout
    assert {r["user_input"] for r in tune}.isdisjoint({r["user_input"] for r in heldout})
    assert len(tune) + len(heldout) == len(rows) - sum(
        half_of(f"question {i}") == "heldout" for i in (0, 1)
    )
    assert not {"r0-0", "r1-0"} & {r["id"] for r in heldout}
    # a seeded sample, in the file's order, the same every time
    sample = pick(rows, "heldout", 5, set())
    assert sample == pick(rows, "heldout", 5, set())
    assert [rows.index(r) for r in sample] == sorted(rows.index(r) for r in sample)


def test_ragas_is_given_its_own_fields_and_several_gold_answers_as_one_text() -> None:
    row = {"id": "x", "user_input": "q", "response": "a", "reference": ["Paris", "City of Light"],
           "human_correct": 1}  # fmt: skip
    assert ragas_row(row) == {"user_input": "q", "response": "a",
                              "reference": "Paris / City of Light"}  # fmt: skip
    grounded = {"user_input": "q", "response": "a", "retrieved_contexts": ["c"], "human": 0}
    assert ragas_row(grounded) == {"user_input": "q", "response": "a", "retrieved_contexts": ["c"]}


def test_the_language_setups_state_the_datasets_language_or_none() -> None:
    grounding = setups("grounding")
    with_line, without = grounding["rageval-language"], grounding["rageval-no-language"]
    assert with_line.metrics == without.metrics == ("faithfulness",)
    assert run_language("memerag-es", with_line) == "es"
    assert run_language("memerag-de", with_line) == "de"
    assert run_language("memerag", with_line) == "en"  # English: no line either way
    assert run_language("memerag-es", without) == "en"  # English: prompts without the line
    assert run_language("memerag-es", grounding["rageval"]) is None  # each row's detected


def test_unigram_coverage_is_the_share_of_the_responses_words_in_the_contexts() -> None:
    # SQuAD normalisation: case and punctuation go, articles are dropped
    assert unigram_coverage("The cat sat.", ["a CAT", "sat down"]) == 1.0
    assert unigram_coverage("Dogs bark loudly", ["dogs sleep", "quietly"]) == pytest.approx(1 / 3)
    assert unigram_coverage("the a an", ["anything"]) is None


def test_statistics_cut_the_score_at_one_half_and_rank_it_for_auroc() -> None:
    labels = [1, 1, 0, 0, 1]
    values = [0.9, 0.4, 0.6, 0.1, None]  # the last row not measured
    s = statistics(labels, values)
    assert (s["n"], s["of"]) == (4, 5)
    # cut at 0.5: judge 1, 0, 1, 0 against people 1, 1, 0, 0: agreement 2/4, chance 1/2
    assert s["cohen_kappa"]["value"] == pytest.approx(0.0)
    assert s["balanced_accuracy"]["value"] == pytest.approx(0.5)
    # positive/negative pairs ranked right: (0.9, 0.6), (0.9, 0.1), (0.4, 0.1) of 4
    assert s["auroc"]["value"] == pytest.approx(0.75)


def test_a_paired_difference_uses_the_rows_both_setups_measured() -> None:
    labels = [1, 1, 0, 0, 1]
    before = [0.9, 0.4, 0.6, 0.1, 0.2]
    after = [0.9, 0.8, 0.3, 0.1, None]
    # on rows 0-3: after ranks every pair right (AUROC 1), before 3 of 4
    d = difference("auroc", labels, before, after)
    assert d["value"] == pytest.approx(1.0 - 0.75)
    assert d["n"] == 4
    # κ at the cut: after agrees on all four (κ 1), before on two of four (κ 0)
    assert difference("cohen_kappa", labels, before, after)["value"] == pytest.approx(1.0)


def test_the_run_log_check_counts_cells_whose_every_claim_has_a_probability(
    tmp_path: Path,
) -> None:
    cells = [
        {"value": 0.85, "evidence": {"claims": [
            {"id": "s1", "supported": True, "probability": 0.7},
            {"id": "s2", "supported": True, "probability": 1.0},
        ]}},
        {"value": 1.0, "evidence": {"verdicts": [{"id": "s1", "verdict": True}]}},
        {"value": None, "evidence": {}},
    ]  # fmt: skip
    lines = [json.dumps({"row": i, "metrics": {"faithfulness": c}}) for i, c in enumerate(cells)]
    (tmp_path / "results.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert claims_with_probability(tmp_path) == {
        "measured": 2,
        "with_claims": 2,
        "every_claim_has_probability": 1,
        "claims": 3,
        "claims_strictly_between_0_and_1": 1,
    }


def test_the_prompt_set_lists_readings_that_changed_right_to_wrong_first() -> None:
    old = {"facts / C": {"readings": [["a", True, True], ["b", False, True], ["c", True, True]]}}
    new = {"facts / C": {"readings": [["a", True, False], ["b", False, False], ["c", True, True]]}}
    assert changes(new, old) == [
        "right → wrong:",
        "  facts / C: 'a': True → False (label True)",
        "wrong → right:",
        "  facts / C: 'b': True → False (label False)",
    ]
    assert changes(old, old) == []
