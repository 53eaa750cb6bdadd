"""The retrieval metrics on ids: every value equal to trec_eval's (pytrec_eval, the dev extra's
reference) to the last bit, on random and adversarial rankings -- duplicates, empty rankings,
grade 0 and negative grades, cutoffs beyond the ranking -- and their names as users type them."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from rageval import evaluate
from rageval.metrics import NDCG, create_metric, metric_class
from rageval.metrics.retrieval import judged
from rageval.samples import InvalidDataError, load_samples

pytrec_eval = pytest.importorskip("pytrec_eval")

CUTOFFS = (1, 2, 3, 5, 10, 20)


def _reference_run(ranking: Sequence[str]) -> dict[str, float]:
    """A ranked list as pytrec_eval's run: the first occurrence of each id (rageval's rule for
    a repeated id), scored so that trec_eval's sort (score descending) gives the same order."""
    first = list(dict.fromkeys(ranking))
    return {doc: float(len(first) - i) for i, doc in enumerate(first)}


def _trec(ranking: Sequence[str], grades: Mapping[str, int], measures: set[str]) -> dict[str, Any]:
    evaluator = pytrec_eval.RelevanceEvaluator({"q": dict(grades)}, measures)
    return dict(evaluator.evaluate({"q": _reference_run(ranking)})["q"])


def _expected(ranking: Sequence[str], grades: Mapping[str, int]) -> dict[str, float]:
    """Every rageval metric's value by trec_eval, under rageval's names."""
    cuts = ",".join(map(str, CUTOFFS))
    measures = {
        "map",
        "recip_rank",
        "Rprec",
        "ndcg",
        "set_P",
        "set_recall",
        "set_F",
        f"P.{cuts}",
        f"recall.{cuts}",
        f"ndcg_cut.{cuts}",
        f"map_cut.{cuts}",
        f"success.{cuts}",
    }
    got = _trec(ranking, grades, measures)
    expected = {
        "map": got["map"],
        "mrr": got["recip_rank"],
        "r_precision": got["Rprec"],
        "ndcg": got["ndcg"],
        "precision": got["set_P"],
        "recall": got["set_recall"],
        "f1": got["set_F"],
        "hit_rate": 1.0 if got["set_recall"] > 0 else 0.0,
    }
    for k in CUTOFFS:
        p, r = got[f"P_{k}"], got[f"recall_{k}"]
        expected |= {
            f"precision_at_{k}": p,
            f"recall_at_{k}": r,
            # F1@k is no trec_eval measure: set_F's formula (β = 1) over P_k and recall_k
            f"f1_at_{k}": 2.0 * p * r / (p + r) if p + r else 0.0,
            f"hit_rate_at_{k}": got[f"success_{k}"],
            f"ndcg_at_{k}": got[f"ndcg_cut_{k}"],
            f"map_at_{k}": got[f"map_cut_{k}"],
            # the reciprocal rank within the first k: trec_eval's of the run cut at k
            f"mrr_at_{k}": _trec(list(dict.fromkeys(ranking))[:k], grades, {"recip_rank"})[
                "recip_rank"
            ],
        }
    return expected


def _ours(ranking: Sequence[str], grades: Mapping[str, int] | list[str]) -> dict[str, float]:
    names = list(_expected(["x"], {"x": 1}))
    sample = {"retrieved_context_ids": list(ranking), "reference_context_ids": grades}
    values = {}
    for name in names:
        result = create_metric(name).single_turn_score(sample)
        assert result.status == "ok", (name, result)
        assert result.value is not None
        values[name] = result.value
    return values


ADVERSARIAL: list[tuple[list[str], dict[str, int]]] = [
    ([], {"a": 1, "b": 2}),  # an empty ranking
    (["a", "b"], {"a": 0, "b": 0}),  # nothing relevant: grade 0 only
    (["a", "b", "c"], {"a": -1, "b": 0, "c": 2}),  # a negative grade is not relevant
    (["a", "a", "b", "a", "c"], {"a": 1, "c": 3}),  # duplicates counted at the first rank
    (["z", "y", "x"], {"a": 3, "b": 2}),  # nothing retrieved is judged
    (["a"], {"a": 1}),
    (["c", "b", "a"], {"a": 3, "b": 2, "c": 1}),  # graded, in the worst order
    ([f"d{i}" for i in range(30)], {"d29": 2, "d0": 0, "d5": 1, "d12": 4}),  # beyond k = 20
    (["a", "b", "c", "d"], {"b": 1, "d": 1, "e": 1, "f": 2}),  # relevant ids not retrieved
]


@pytest.mark.parametrize(("ranking", "grades"), ADVERSARIAL)
def test_adversarial_rankings_equal_trec_eval_to_the_bit(
    ranking: list[str], grades: dict[str, int]
) -> None:
    assert _ours(ranking, grades) == _expected(ranking, grades)


def test_random_rankings_equal_trec_eval_to_the_bit() -> None:
    rng = random.Random(20261207)
    for _ in range(300):
        pool = [f"doc{i}" for i in range(rng.randint(1, 25))]
        judged_ids = rng.sample(pool, rng.randint(1, len(pool)))
        grades = {d: rng.choice((-1, 0, 0, 1, 1, 2, 3)) for d in judged_ids}
        # trec_eval never returns on judgements without a grade of 0 or more (it looks for
        # the highest grade below an empty list of levels); rageval scores those 0
        grades[judged_ids[0]] = max(grades[judged_ids[0]], 0)
        ranking = [rng.choice(pool) for _ in range(rng.randint(0, 30))]
        assert _ours(ranking, grades) == _expected(ranking, grades), (ranking, grades)


def test_a_list_of_relevant_ids_is_every_id_at_grade_one() -> None:
    ranking = ["a", "x", "b", "a"]
    assert _ours(ranking, ["b", "a", "c"]) == _expected(ranking, {"a": 1, "b": 1, "c": 1})


def test_hand_computed_values() -> None:
    # ranking c, d, a (d unjudged); a has grade 2, c grade 1, b grade 0: R = 2
    sample = {
        "retrieved_context_ids": ["c", "d", "a"],
        "reference_context_ids": {"a": 2, "b": 0, "c": 1},
    }
    values = {
        n: create_metric(n).single_turn_score(sample).value
        for n in ("precision_at_2", "recall_at_2", "map", "mrr", "r_precision", "ndcg_at_3", "f1")
    }
    assert values["precision_at_2"] == 1 / 2
    assert values["recall_at_2"] == 1 / 2
    assert values["map"] == (1 / 1 + 2 / 3) / 2
    assert values["mrr"] == 1.0
    assert values["r_precision"] == 1 / 2
    # DCG: 1/log2(2) + 2/log2(4) = 2; ideal: 2/log2(2) + 1/log2(3)
    assert values["ndcg_at_3"] == pytest.approx(2 / (2 + 1 / 1.584962500721156))
    assert values["f1"] == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1))


def test_judgements_without_a_relevant_id_score_zero() -> None:
    # as trec_eval scores a query whose judgements have no grade of 1 or more (it never
    # returns when no grade is 0 or more, so these are checked by hand)
    cases: list[dict[str, int] | list[str]] = [{"a": -1}, {}, []]
    for grades in cases:
        sample = {"retrieved_context_ids": ["a", "b"], "reference_context_ids": grades}
        assert _ours(["a", "b"], grades) == dict.fromkeys(_ours(["a"], {"a": 0}), 0.0)
        assert create_metric("ndcg").single_turn_score(sample).value == 0.0


def test_names_as_users_type_them() -> None:
    assert create_metric("ndcg_at_10").name == "ndcg_at_10"
    assert create_metric("ndcg_at_10").params() == {"k": 10}
    assert create_metric("precision_at_5").params() == {"k": 5}
    assert create_metric("map").name == "map"
    assert create_metric("mrr_at_3").name == "mrr_at_3"
    # ragas' names for the set measures
    assert type(create_metric("id_based_context_precision")) is metric_class("precision")
    assert create_metric("id_based_context_recall").name == "recall"
    assert create_metric("ndcg_at_10", {"k": 10}).name == "ndcg_at_10"  # as a manifest recreates it
    with pytest.raises(ValueError, match="k=10"):
        create_metric("ndcg_at_10", {"k": 5})
    with pytest.raises(KeyError, match="r_precision"):
        metric_class("r_precision_at_5")  # R-precision has no cutoff
    with pytest.raises(KeyError, match="ndcg_at_K"):
        metric_class("ndgc_at_10")
    # a cutoff written as other tools write it: the name to type instead
    for typed, meant in (("ndcg@10", "ndcg_at_10"), ("NDCG@10", "ndcg_at_10"),
                         ("ndcg_cut_10", "ndcg_at_10"), ("recall@5", "recall_at_5"),
                         ("precision_at_0", "precision_at_K with K from 1 up"),
                         ("TOKEN_F1", "token_f1"), ("rouge-l", "rouge_l")):  # fmt: skip
        with pytest.raises(KeyError, match=f"did you mean {meant}\\?"):
            metric_class(typed)
    with pytest.raises(ValueError, match="positive integer"):
        NDCG(k=0)


def test_several_cutoffs_in_one_run_with_means_and_cis() -> None:
    rows = [
        {"id": "q1", "retrieved_context_ids": ["a", "b", "c"], "reference_context_ids": ["a"]},
        {"id": "q2", "retrieved_context_ids": ["b", "a"], "reference_context_ids": {"a": 2}},
        {"id": "q3", "retrieved_context_ids": [], "reference_context_ids": {"a": 1}},
    ]
    result = evaluate(rows, metrics=["precision_at_1", "precision_at_2", "mrr", "ndcg_at_2"])
    assert result["precision_at_1"] == [1.0, 0.0, 0.0]
    assert result["precision_at_2"] == [0.5, 0.5, 0.0]
    assert result["mrr"] == [1.0, 0.5, 0.0]
    summary = result.summary()
    assert summary["mrr"].mean == pytest.approx(0.5)
    assert summary["mrr"].ci_low is not None


def test_the_default_run_of_id_rows_is_the_retrieval_metrics_without_a_judge() -> None:
    rows = [{"retrieved_context_ids": ["a", "b"], "reference_context_ids": ["b"]}] * 2
    result = evaluate(rows)
    assert set(result.metrics) == {"precision", "recall", "ndcg", "map", "mrr", "r_precision"}
    assert result["mrr"] == [0.5, 0.5]


@pytest.mark.parametrize(
    ("row", "field", "message"),
    [
        ({"retrieved_context_ids": "a"}, "retrieved_context_ids", "single string"),
        ({"retrieved_context_ids": ["a", " "]}, "retrieved_context_ids", "non-blank"),
        ({"reference_context_ids": {"a": "high"}}, "reference_context_ids", "grade of id 'a'"),
        ({"reference_context_ids": {"a": 1.5}}, "reference_context_ids", "integer"),
        ({"reference_context_ids": {"a": True}}, "reference_context_ids", "integer"),
    ],
)
def test_bad_ids_and_grades_are_named_by_row_and_field(
    row: dict[str, Any], field: str, message: str
) -> None:
    rows = [{"retrieved_context_ids": ["a"], "reference_context_ids": ["a"]}, row]
    with pytest.raises(InvalidDataError) as e:
        evaluate(rows, metrics=["map"])
    assert any(p.row == 1 and p.field == field and message in p.message for p in e.value.problems)


def test_integer_ids_and_whole_float_grades_are_read() -> None:
    loaded = load_samples([{"retrieved_context_ids": [3, 1], "reference_context_ids": {1: 2.0}}])
    sample = loaded.samples[0]
    assert sample is not None
    assert sample.retrieved_context_ids == ["3", "1"]
    assert sample.context_grades == {"1": 2}
    assert judged(sample.retrieved_context_ids, sample.context_grades).grades == (0, 2)
