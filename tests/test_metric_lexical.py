"""token_f1 and rouge_l: offline lexical baselines, checked against hand-counted tokens."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from rageval.metrics import RougeL, TokenF1, create_metric
from rageval.metrics.lexical import tokens
from rageval.metrics.rouge_l import lcs_length, rouge_l_score
from rageval.metrics.token_f1 import token_f1_score
from rageval.samples import SingleTurnSample


def test_tokens_follow_squad_normalisation() -> None:
    assert tokens("The «Cat», a mat!", drop_articles=True) == ["cat", "mat"]
    assert tokens("The «Cat», a mat!", drop_articles=False) == ["the", "cat", "a", "mat"]
    # articles are whole words only; punctuation inside a word is deleted, not split on
    assert tokens("Theatre isn't an anthem", drop_articles=True) == ["theatre", "isnt", "anthem"]


def test_token_f1_by_hand() -> None:
    # response tokens [cat, sat, on, mat] (4), reference [cat, is, on, red, mat] (5)
    # shared: cat, on, mat = 3 → P = 3/4, R = 3/5, F1 = 2·0.75·0.6 / (0.75 + 0.6) = 0.6667
    assert token_f1_score("The cat sat on the mat.", "A cat is on the red mat") == pytest.approx(
        2 * 0.75 * 0.6 / 1.35
    )
    # multiset overlap: "yes" three times vs once → overlap 1; P = 1/3, R = 1/2 → F1 = 0.4
    assert token_f1_score("yes yes yes", "yes no") == pytest.approx(0.4)
    assert token_f1_score("Paris!", "«paris»") == 1.0
    assert token_f1_score("Berlin", "Paris") == 0.0


def test_rouge_l_by_hand_and_order_matters() -> None:
    ref = "police killed the gunman"
    # LCS "police killed" = 2 of 3 and 4 tokens: P = 2/3, R = 1/2 → F = (2/3)/(7/6) = 4/7
    assert rouge_l_score("police killed him", ref) == pytest.approx(4 / 7)
    # same words, other order: LCS 2 of 4 → 0.5, while token F1 (a bag of words) says 1.0
    assert rouge_l_score("the gunman police killed", ref) == pytest.approx(0.5)
    assert token_f1_score("the gunman police killed", ref) == 1.0
    # one word changed: LCS 3 of 4 → 0.75
    assert rouge_l_score("police kill the gunman", ref) == pytest.approx(0.75)


def _lcs_table(a: Sequence[str], b: Sequence[str]) -> int:
    """The textbook O(|a|·|b|) table, as an independent oracle for the bit-parallel version."""
    table = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i, x in enumerate(a, start=1):
        for j, y in enumerate(b, start=1):
            table[i][j] = (
                table[i - 1][j - 1] + 1 if x == y else max(table[i - 1][j], table[i][j - 1])
            )
    return table[-1][-1]


def test_lcs_length() -> None:
    assert lcs_length("ABCBDAB", "BDCABA") == 4  # the textbook example (e.g. "BCBA")
    assert lcs_length("BDCABA", "ABCBDAB") == 4
    assert lcs_length([], ["a"]) == 0
    assert lcs_length(["a"], []) == 0
    rng = random.Random(7)
    for _ in range(500):
        a = rng.choices("abcd", k=rng.randint(0, 12))
        b = rng.choices("abcde", k=rng.randint(0, 70))  # longer than one 64-bit word
        assert lcs_length(a, b) == _lcs_table(a, b), (a, b)


def test_pure_empty_rules() -> None:
    # nothing left on either side: lexically identical → 1.0; one side only → 0.0
    assert token_f1_score("", "") == 1.0
    assert token_f1_score("The.", "a!") == 1.0  # only articles and punctuation
    assert token_f1_score("", "Paris") == 0.0
    assert token_f1_score("Paris", "") == 0.0
    assert rouge_l_score("!!", "...") == 1.0
    assert rouge_l_score("", "Paris") == 0.0


def test_metrics_need_no_judge_and_give_evidence() -> None:
    result = TokenF1().score(
        response="The cat sat on the mat.", reference="A cat is on the red mat"
    )
    assert result.value == pytest.approx(0.9 / 1.35)
    assert result.evidence == {"shared_tokens": 3, "response_tokens": 4, "reference_tokens": 5}
    rouge = RougeL().score(response="police killed him", reference="police killed the gunman")
    assert rouge.value == pytest.approx(4 / 7)
    assert rouge.evidence == {"lcs_tokens": 2, "response_tokens": 3, "reference_tokens": 4}
    for cls in (TokenF1, RougeL):
        assert not cls.needs_llm and not cls.needs_embeddings
        assert cls.required_fields == ("response", "reference")


@pytest.mark.parametrize("metric", [TokenF1(), RougeL()], ids=["token_f1", "rouge_l"])
async def test_metric_empty_inputs(metric: TokenF1 | RougeL) -> None:
    blank_ref = await metric.single_turn_ascore(SingleTurnSample(response="Paris", reference=" "))
    assert blank_ref.status == "not_measured" and "reference is empty" in str(blank_ref.cause)
    both = await metric.ascore(response="", reference="")
    assert both.status == "not_measured"
    blank_resp = await metric.ascore(response="  ", reference="Paris")
    assert blank_resp.status == "ok" and blank_resp.value == 0.0


def test_registered_and_recreated() -> None:
    assert isinstance(create_metric("token_f1"), TokenF1)
    assert isinstance(create_metric("rouge_l", RougeL().params()), RougeL)


def test_the_names_that_lived_in_lexical_still_import_from_it() -> None:
    from rageval.metrics import lexical, rouge_l, token_f1

    assert lexical.TokenF1 is token_f1.TokenF1 and lexical.token_f1_score is token_f1_score
    assert lexical.RougeL is rouge_l.RougeL and lexical.lcs_length is lcs_length
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        lexical.nothing  # noqa: B018
