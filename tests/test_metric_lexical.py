"""token_f1 and rouge_l: offline lexical baselines, checked against hand-counted tokens and,
on generated pairs, against their reference implementations: Google's rouge-score package and
the official SQuAD v2 script's F1 (tests/squad_reference.py, written from its definition)."""

from __future__ import annotations

import json
import random
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from rouge_score import rouge_scorer, tokenize

from rageval.metrics import RougeL, TokenF1, create_metric
from rageval.metrics.evidence import OverlapEvidence
from rageval.metrics.lexical import (
    UNSPACED_SCRIPTS,
    rouge_score_tokens,
    squad_tokens,
    unicode_rouge_tokens,
    unicode_squad_tokens,
)
from rageval.metrics.rouge_l import lcs_length, rouge_l_score
from rageval.metrics.token_f1 import token_f1_score
from rageval.samples import SingleTurnSample
from squad_reference import squad_f1

#: tests/data/make_lexical_pairs.py's 2,500 generated pairs (punctuation, numbers, hyphens, case,
#: many scripts, odd whitespace)
PAIRS = [
    json.loads(line)
    for line in (Path(__file__).parent / "data" / "lexical_pairs.jsonl").read_text().splitlines()
]


async def test_rouge_l_equals_rouge_score_on_generated_pairs() -> None:
    scorer = rouge_scorer.RougeScorer(["rougeL"])  # its defaults: no stemmer
    metric = RougeL(tokenizer="rouge_score")
    measured = 0
    for pair in PAIRS:
        response, reference = pair["response"], pair["reference"]
        for text in (response, reference):
            assert rouge_score_tokens(text) == tokenize.tokenize(text, None), text
        theirs = scorer.score(reference, response)["rougeL"].fmeasure
        ours = await metric.ascore(response=response, reference=reference)
        if ours.status == "ok":
            assert ours.value == theirs, pair  # to the last bit
            measured += 1
        else:  # a reference without a token (or blank): rouge-score's 0 is no comparison
            assert not tokenize.tokenize(reference, None) and theirs == 0.0, pair
    assert measured > 0.9 * len(PAIRS)


async def test_token_f1_equals_the_official_squad_f1_on_generated_pairs() -> None:
    metric = TokenF1(tokenizer="squad")
    measured = 0
    for pair in PAIRS:
        response, reference = pair["response"], pair["reference"]
        ours = await metric.ascore(response=response, reference=reference)
        if ours.status == "ok":
            assert ours.value == squad_f1(response, reference), pair
            assert token_f1_score(response, reference, tokenizer="squad") == ours.value
            measured += 1
        else:
            assert not reference.strip(), pair  # only a blank reference goes unmeasured
    assert measured > 0.9 * len(PAIRS)


def test_the_cases_where_rageval_differed_from_the_references() -> None:
    # punctuation separates words, as in rouge-score (they were deleted and the pieces joined)
    assert rouge_l_score("36", "36.0") == pytest.approx(2 / 3)
    assert rouge_l_score("state-of-the-art model", "state of the art model") == 1.0
    # SQuAD deletes ASCII punctuation only: ’ – “ ” stay part of a word (yet a dash is no word
    # character, so an article beside it is still removed)
    assert squad_tokens("It’s “state–of–the–art”, isn't it?") == [
        "it’s", "“state–of–", "–art”", "isnt", "it"
    ]  # fmt: skip
    assert token_f1_score("it’s", "it's") == 0.0
    assert token_f1_score("it’s", "it's", tokenizer="unicode") == 1.0


def test_tokens_follow_the_reference_tokenisers() -> None:
    assert squad_tokens("The «Cat», a mat!") == ["«cat»", "mat"]
    assert unicode_squad_tokens("The «Cat», a mat!") == ["cat", "mat"]
    # articles are whole words only; punctuation inside a word is deleted, not split on
    assert squad_tokens("Theatre isn't an anthem") == ["theatre", "isnt", "anthem"]
    assert rouge_score_tokens("The «Cat», a mat!") == ["the", "cat", "a", "mat"]
    assert rouge_score_tokens("Zürich café, 1,000") == ["z", "rich", "caf", "1", "000"]
    assert unicode_rouge_tokens("Zürich café, 1,000") == ["zürich", "café", "1", "000"]
    # combining marks are part of a word (Devanagari vowel signs, a decomposed é)
    assert unicode_rouge_tokens("नमस्ते, cafe\u0301!") == ["नमस्ते", "cafe\u0301"]


def test_scripts_without_spaces_are_read_character_by_character() -> None:
    assert unicode_rouge_tokens("GPT4は日本語を話す。") == [
        "gpt4",
        "は",
        "日",
        "本",
        "語",
        "を",
        "話",
        "す",
    ]
    assert unicode_squad_tokens("the日本") == ["日", "本"]
    assert unicode_rouge_tokens("서울에 갔다") == ["서", "울", "에", "갔", "다"]
    # a combining mark stays with its character: Thai vowel signs, the kana voicing mark
    assert unicode_rouge_tokens("กรุงเทพ") == ["ก", "รุ", "ง", "เ", "ท", "พ"]
    assert unicode_squad_tokens("か\u3099き") == ["か\u3099", "き"]
    # near-matches that whitespace tokens score 0 (or leave unmeasured)
    assert token_f1_score("東京都", "東京", tokenizer="squad") == 0.0
    assert token_f1_score("東京都", "東京") == pytest.approx(0.8)  # the default reads them
    assert token_f1_score("東京都", "東京", tokenizer="unicode") == pytest.approx(0.8)
    assert rouge_l_score("서울에", "서울", tokenizer="unicode") == pytest.approx(0.8)
    assert token_f1_score("ภาษาไทย", "ภาษา", tokenizer="unicode") == pytest.approx(2 * 4 / 11)


@pytest.mark.parametrize("script", sorted(UNSPACED_SCRIPTS))
def test_every_letter_of_the_documented_scripts_is_a_token(script: str) -> None:
    letters = [
        chr(c)
        for first, last in UNSPACED_SCRIPTS[script]
        for c in range(first, last + 1)
        if unicodedata.category(chr(c)).startswith("L")
    ]
    assert letters
    for letter in letters:
        assert unicode_rouge_tokens(f"{letter}{letter}x") == [letter, letter, "x"], hex(ord(letter))
        assert unicode_squad_tokens(f"{letter}{letter}") == [letter, letter], hex(ord(letter))
    # a script with spaces between its words keeps its words whole
    assert unicode_rouge_tokens("Москва слезам") == ["москва", "слезам"]


def test_a_reference_without_tokens_is_not_measured_by_rouge_l() -> None:
    result = RougeL(tokenizer="rouge_score").score(response="東京", reference="東京")  # its 0.0
    assert result.status == "not_measured" and result.cause_kind == "undefined"
    assert "tokenizer='unicode'" in str(result.cause)
    assert RougeL(tokenizer="unicode").score(response="東京", reference="東京").value == 1.0
    # by default a text of a script written without spaces is read, character by character
    assert RougeL().score(response="東京", reference="東京").value == 1.0
    assert RougeL().score(response="東京", reference="Tokyo").value == 0.0
    # a spaced script outside a-z still has no rouge-score token: said, not scored 0
    russian = RougeL().score(response="Москва", reference="Москва")
    assert russian.status == "not_measured" and "tokenizer='unicode'" in str(russian.cause)
    with pytest.raises(ValueError, match="no token"):
        rouge_l_score("!!", "...")


def test_the_tokenizer_is_a_recorded_parameter() -> None:
    assert TokenF1().params() == {"tokenizer": "auto"}
    assert RougeL().params() == {"tokenizer": "auto"}
    unicode = create_metric("rouge_l", {"tokenizer": "unicode"})
    assert isinstance(unicode, RougeL) and unicode.params() == {"tokenizer": "unicode"}
    with pytest.raises(
        ValueError, match="tokenizer is one of 'auto', 'squad', 'unicode', got 'rouge_score'"
    ):
        TokenF1(tokenizer="rouge_score")  # type: ignore[arg-type]


async def test_the_default_is_the_reference_unless_a_text_has_an_unspaced_script() -> None:
    # "auto": the reference's tokens on every generated pair without a character of a script
    # written without spaces, "unicode" on the others (both texts of a pair alike)
    by_reference = {TokenF1: "squad", RougeL: "rouge_score"}
    unspaced = 0
    for pair in PAIRS:
        response, reference = pair["response"], pair["reference"]
        has_unspaced = any(_unspaced_char(c) for c in response + reference)
        unspaced += has_unspaced
        for cls, own in by_reference.items():
            chosen: dict[str, Any] = {"tokenizer": "unicode" if has_unspaced else own}
            expected = await cls(**chosen).ascore(response=response, reference=reference)
            got = await cls().ascore(response=response, reference=reference)
            assert (got.status, got.value) == (expected.status, expected.value), pair
    assert 0 < unspaced < len(PAIRS)


def _unspaced_char(char: str) -> bool:
    return any(a <= ord(char) <= b for blocks in UNSPACED_SCRIPTS.values() for a, b in blocks)


@pytest.mark.parametrize(
    ("same", "other"),
    [
        ("东京是日本的首都。", "北京是中国的首都。"),
        ("日本語を話します", "日本語を読みます"),
        ("서울은 한국의 수도입니다", "부산은 한국의 도시입니다"),
        ("กรุงเทพเป็นเมืองหลวง", "เชียงใหม่เป็นเมือง"),
    ],
)
def test_identical_unspaced_texts_score_one_and_different_ones_less(same: str, other: str) -> None:
    for score in (token_f1_score, rouge_l_score):
        assert score(same, same) == 1.0
        assert 0.0 < score(other, same) < 1.0


def test_token_f1_by_hand() -> None:
    # response tokens [cat, sat, on, mat] (4), reference [cat, is, on, red, mat] (5)
    # shared: cat, on, mat = 3 → P = 3/4, R = 3/5, F1 = 2·0.75·0.6 / (0.75 + 0.6) = 0.6667
    assert token_f1_score("The cat sat on the mat.", "A cat is on the red mat") == pytest.approx(
        2 * 0.75 * 0.6 / 1.35
    )
    # multiset overlap: "yes" three times vs once → overlap 1; P = 1/3, R = 1/2 → F1 = 0.4
    assert token_f1_score("yes yes yes", "yes no") == pytest.approx(0.4)
    assert token_f1_score("Paris!", "paris") == 1.0
    assert token_f1_score("Paris!", "«paris»") == 0.0  # « » are no ASCII punctuation
    assert token_f1_score("Paris!", "«paris»", tokenizer="unicode") == 1.0
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
    # SQuAD's rule: nothing left on either side → 1.0; one side only → 0.0
    assert token_f1_score("", "") == 1.0
    assert token_f1_score("The.", "a!") == 1.0  # only articles and punctuation
    assert token_f1_score("", "Paris") == 0.0
    assert token_f1_score("Paris", "") == 0.0
    assert rouge_l_score("", "Paris") == 0.0


def test_metrics_need_no_judge_and_give_evidence() -> None:
    result = TokenF1().score(
        response="The cat sat on the mat.", reference="A cat is on the red mat"
    )
    assert result.value == pytest.approx(0.9 / 1.35)
    assert result.evidence == OverlapEvidence(
        overlap=3, counted="shared_tokens", response_tokens=4, reference_tokens=5
    )
    rouge = RougeL().score(response="police killed him", reference="police killed the gunman")
    assert rouge.value == pytest.approx(4 / 7)
    assert rouge.evidence == OverlapEvidence(
        overlap=2, counted="lcs_tokens", response_tokens=3, reference_tokens=4
    )
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
