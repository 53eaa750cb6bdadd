"""Probability scoring of rubric_score, answer_relevance, answer_correctness,
knowledge_retention and topic_adherence (issue 41, item 1): each verdict counts its P(true) and
each rating its expected value, read from the scripted token log-probabilities of the same
replies; the sampled values where the judge asks for none; the cell's scoring note in the run
log, and the request cache keyed on the scoring. Every expected number is worked out by hand
in the test."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from helpers import judge_for, make_judge, route, user_text
from rageval.judge._probabilities import choice_leaves, forget_logprobs
from rageval.metrics import (
    AnswerCorrectness,
    AnswerRelevance,
    KnowledgeRetention,
    RubricScore,
    TopicAdherence,
)
from rageval.runner import evaluate
from rageval.samples import SingleTurnSample
from rageval.testing import FakeOpenAI, RecordedRequest, Reply
from rageval.testing.records import ScriptedToken

#: a choice's sampled value as its tokens, each with the probabilities of its alternatives
#: (the token's own among them)
Choice = Sequence[tuple[str, Mapping[str, float]]]


@pytest.fixture(autouse=True)
def _no_endpoint_known() -> Iterator[None]:
    forget_logprobs()
    yield
    forget_logprobs()


def tokens_of(obj: Mapping[str, Any], *choices: Choice) -> list[ScriptedToken]:
    """The tokens of ``json.dumps(obj)`` (the test server's content): each choice's value, the
    next one after ``": "`` in the text, in the tokens given; the text between them in tokens
    of probability 1."""
    text, at = json.dumps(obj), 0
    out: list[ScriptedToken] = []
    for choice in choices:
        value = "".join(token for token, _ in choice)
        start = text.index(": " + value, at) + 2
        out.append((text[at:start], 0.0))
        for token, alternatives in choice:
            logprobs = {t: math.log(p) for t, p in alternatives.items()}
            out.append((token, logprobs[token], logprobs))
        at = start + len(value)
    out.append((text[at:], 0.0))
    return out


def one(token: str, **alternatives: float) -> Choice:
    """A value in one token; `alternatives` by their text (``true=.6``), the token's own too."""
    return [(token, alternatives)]


def verdict(sampled: bool, p_true: float) -> Choice:
    """A verdict in one token, true at `p_true` and false at the rest."""
    return one("true" if sampled else "false", true=p_true, false=1 - p_true)


def scripted(obj: Mapping[str, Any], *choices: Choice) -> Reply:
    return Reply.json(obj, logprobs=tokens_of(obj, *choices))


# ------------------------------------------------------------------------------ rubric_score

SAMPLE = SingleTurnSample(user_input="q?", response="a.", reference="b.")


async def test_rubric_score_counts_the_expected_level(fake_openai: FakeOpenAI) -> None:
    # 4 at .5, 5 at .3, 3 at .1 ('x', no level, .05 left out): renormalised over .9,
    # E = (4*.5 + 5*.3 + 3*.1) / .9 = 3.8 / .9; value (E - 1) / 4 = 2.9 / 3.6
    grade = {"feedback": "fits", "score": 4}
    fake_openai.script(scripted(grade, [("4", {"4": 0.5, "5": 0.3, "3": 0.1, "x": 0.05})]))
    result = await RubricScore(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert result.value == pytest.approx(2.9 / 3.6)
    assert result.evidence["raw_score"] == 4
    assert result.evidence["expected"] == pytest.approx(3.8 / 0.9)
    assert result.evidence["scoring"] == "probabilities"
    # a judge scoring by sampled values: the level written, (4 - 1) / 4
    fake_openai.script(Reply.json(grade))
    sampled = RubricScore(llm=judge_for(fake_openai, scoring="sampled"))
    result = await sampled.single_turn_ascore(SAMPLE)
    assert result.value == 0.75
    assert "expected" not in result.evidence
    assert result.evidence["scoring"] == "sampled"


# -------------------------------------------------------------------------- answer_relevance

DIMENSIONS = {"reasoning": "ok", "topical_match": 1.0, "completeness": 0.7, "conciseness": 0.8}


async def test_answer_relevance_averages_each_dimensions_expected_value(
    fake_openai: FakeOpenAI,
) -> None:
    # topical_match 1.0 at .8, 0.9 at .2 -> .98; completeness 0.7 at .6, 0.5 at .3, 0.9 at .1
    # -> .42 + .15 + .09 = .66; conciseness 0.8 at .4, 1.0 at .4 ('x' .2 left out) -> .9.
    # value (.98 + .66 + .9) / 3 (the written values: (1 + .7 + .8) / 3 = .8333)
    fake_openai.script(
        scripted(
            DIMENSIONS,
            one("1.0", **{"1.0": 0.8, "0.9": 0.2}),
            one("0.7", **{"0.7": 0.6, "0.5": 0.3, "0.9": 0.1}),
            one("0.8", **{"0.8": 0.4, "1.0": 0.4, "x": 0.2}),
        )
    )
    result = await AnswerRelevance(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert result.value == pytest.approx(2.54 / 3)
    assert result.evidence["topical_match"] == 1.0  # the values written stay in the fields
    assert result.evidence["expected_scores"] == pytest.approx(
        {"topical_match": 0.98, "completeness": 0.66, "conciseness": 0.9}
    )
    assert result.evidence["scoring"] == "probabilities"
    assert result.reason == (
        "mean of topical_match 1 (expected 0.98), completeness 0.7 (expected 0.66), "
        "conciseness 0.8 (expected 0.9)"
    )
    fake_openai.script(Reply.json(DIMENSIONS))
    sampled = AnswerRelevance(llm=judge_for(fake_openai, scoring="sampled"))
    result = await sampled.single_turn_ascore(SAMPLE)
    assert result.value == pytest.approx(2.5 / 3)
    assert "expected_scores" not in result.evidence
    assert result.evidence["scoring"] == "sampled"


async def test_a_tenth_read_digit_by_digit(fake_openai: FakeOpenAI) -> None:
    # completeness 0.8 as '0' '.' '8': at '0' (.8) the alternative '1' (.2) can only be 1.0;
    # at '8' (.75) '9' (.25): 0.9 = .8 * .25 = .2, 0.8 = .8 * .75 = .6 -> E = .2 + .18 + .48
    # = .86. topical_match 1.0 as '1' '.0': its alternative '0' (.3) begins every tenth
    # below 1, so it says none: left out, E = 1 (the documented limit). conciseness 0.5 -> .5
    fake_openai.script(
        scripted(
            DIMENSIONS | {"completeness": 0.8, "conciseness": 0.5},
            [("1", {"1": 0.7, "0": 0.3}), (".0", {".0": 1.0})],
            [("0", {"0": 0.8, "1": 0.2}), (".", {".": 1.0}), ("8", {"8": 0.75, "9": 0.25})],
            one("0.5", **{"0.5": 1.0}),
        )
    )
    result = await AnswerRelevance(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert result.evidence["expected_scores"] == pytest.approx(
        {"topical_match": 1.0, "completeness": 0.86, "conciseness": 0.5}
    )
    assert result.value == pytest.approx(2.36 / 3)


# ------------------------------------------------------------------------ answer_correctness

CORRECTNESS = SingleTurnSample(user_input="q?", response="A. C.", reference="A. B.")
CLASSIFIED = {
    "reference_statements": [
        {"statement": "A.", "covered": True},
        {"statement": "B.", "covered": False},
    ],
    "s1": {"supported": True},
    "s2": {"supported": False},
}
# in the order of the reply's text: covered f1, f2, then supported s1, s2
CLASSIFIED_TOKENS = (
    verdict(True, 0.9),
    verdict(False, 0.4),
    verdict(True, 0.8),
    verdict(False, 0.3),
)


def correctness_server(server: FakeOpenAI, classified: Reply) -> None:
    server.handler = route(
        (("reference", "answer_statements"), classified),
        (("text",), Reply.json({"statements": ["A.", "C."]})),
    )


async def test_answer_correctness_is_the_f1_of_expected_counts(fake_openai: FakeOpenAI) -> None:
    correctness_server(fake_openai, scripted(CLASSIFIED, *CLASSIFIED_TOKENS))
    # the statement extraction has no log-probabilities: "probabilities", not "auto", which
    # would stop asking this endpoint for them after it
    judge = judge_for(fake_openai, scoring="probabilities")
    metric = AnswerCorrectness(llm=judge, weights=(1.0, 0.0), reasons=False)
    result = await metric.single_turn_ascore(CORRECTNESS)
    # TP = .8 + .3 = 1.1, FP = .2 + .7 = .9, FN = (1 - .9) + (1 - .4) = .7;
    # F1 = 2 * 1.1 / (2 * 1.1 + .9 + .7) = 2.2 / 3.8 (the verdicts written: 2 / 4)
    assert result.value == pytest.approx(2.2 / 3.8)
    evidence = result.evidence
    assert evidence["expected"] == pytest.approx({"tp": 1.1, "fp": 0.9, "fn": 0.7})
    assert (evidence["tp"], evidence["fp"], evidence["fn"]) == (1, 1, 1)
    response = [v.probability for v in evidence["response_statements"].verdicts]
    reference = [v.probability for v in evidence["reference_statements"].verdicts]
    assert response == pytest.approx([0.8, 0.3])
    assert reference == pytest.approx([0.9, 0.4])
    assert evidence["scoring"] == "probabilities"
    assert "expected TP=1.1, FP=0.9, FN=0.7; written TP=1, FP=1, FN=1" in (result.reason or "")


async def test_answer_correctness_sampled(fake_openai: FakeOpenAI) -> None:
    correctness_server(fake_openai, Reply.json(CLASSIFIED))
    judge = judge_for(fake_openai, scoring="sampled")
    metric = AnswerCorrectness(llm=judge, weights=(1.0, 0.0), reasons=False)
    result = await metric.single_turn_ascore(CORRECTNESS)
    assert result.value == pytest.approx(0.5)  # 2 * 1 / (2 * 1 + 1 + 1)
    assert "expected" not in result.evidence
    assert result.evidence["scoring"] == "sampled"


def test_choices_inside_an_array_are_at_each_items_position() -> None:
    from rageval.judge._modes import shape_of

    model = AnswerCorrectness(reasons=False).question(CORRECTNESS).requests(["A."])[0].model
    leaves = choice_leaves(shape_of(model).schema_json)
    assert leaves == {
        ("reference_statements", "*", "covered"): (True, False),
        ("s1", "supported"): (True, False),
    }


# ----------------------------------------------------------------------- knowledge_retention

TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "I'm Ana and I am vegetarian."},
    {"role": "assistant", "content": "Try a beef steak."},
    {"role": "user", "content": "Thanks."},
    {"role": "assistant", "content": "Enjoy, Ana."},
]
FACTS = ["The user is called Ana.", "The user is vegetarian."]
#: per assistant reply: (retained as written, P(retained)) for each fact
RETAINED = {
    "Try a beef steak.": ((True, 0.9), (False, 0.4)),
    "Enjoy, Ana.": ((True, 0.8), (True, 0.5)),
}


def facts_of(req: RecordedRequest) -> Reply:
    stated = "vegetarian" in user_text(req).split("<user_message>")[1]
    return Reply.json({"about_user": stated, "facts": FACTS if stated else []})


def retained(req: RecordedRequest) -> Reply:
    reply = user_text(req).split("<assistant_reply>\n")[1].split("\n</assistant_reply>")[0]
    verdicts = RETAINED[reply]
    obj = {f"f{i}": {"reason": "r", "retained": v} for i, (v, _) in enumerate(verdicts, start=1)}
    return scripted(obj, *(verdict(v, p) for v, p in verdicts))


async def test_knowledge_retention_is_the_mean_probability_of_keeping_every_fact(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.handler = route(
        (("facts", "assistant_reply"), retained), (("conversation", "user_message"), facts_of)
    )
    # the facts' replies have no log-probabilities: "probabilities" keeps asking for them
    judge = judge_for(fake_openai, scoring="probabilities")
    result = await KnowledgeRetention(llm=judge).single_turn_ascore({"id": "c", "turns": TURNS})
    # turn 1 keeps both facts with .9 * .4 = .36, turn 3 with .8 * .5 = .4: (.36 + .4) / 2
    # (written: turn 1 loses one, turn 3 keeps both: 1 / 2)
    assert result.value == pytest.approx(0.38)
    turns = result.evidence["turns"]
    assert [t.value for t in turns] == pytest.approx([0.36, 0.4])
    assert [v.probability for v in turns[0].facts.verdicts] == pytest.approx([0.9, 0.4])
    assert result.reason == "1 of 2 judged assistant turn(s) keep every earlier fact"
    # the extraction's about_user decisions (read as written; here a fallback, as their
    # replies have no log-probabilities) are not the cell's note: the verdicts' are
    assert result.evidence["scoring"] == "probabilities"
    sampled = KnowledgeRetention(llm=judge_for(fake_openai, scoring="sampled"))
    result = await sampled.single_turn_ascore({"id": "c", "turns": TURNS})
    assert result.value == 0.5
    assert [t.value for t in result.evidence["turns"]] == [0.0, 1.0]
    assert result.evidence["scoring"] == "sampled"


# -------------------------------------------------------------------------- topic_adherence

TOPIC_TURNS = [
    {"role": "user", "content": "What is your refund policy?"},
    {"role": "assistant", "content": "Thirty days."},
    {"role": "user", "content": "Who won the match?"},
    {"role": "assistant", "content": "The home team."},
]
TOPIC_ROW = {"id": "c", "turns": TOPIC_TURNS, "reference_topics": ["refunds"]}
ON_TOPIC = {"q1": {"reason": "r", "on_topic": True}, "q2": {"reason": "r", "on_topic": False}}
REFUSED = {"q1": {"reason": "r", "refused": False}, "q2": {"reason": "r", "refused": False}}


def topic_server(server: FakeOpenAI, on_topic: Reply, refused: Reply) -> None:
    server.handler = route(
        (("reference_topics", "user_messages"), on_topic), (("exchanges",), refused)
    )


def topic_replies() -> tuple[Reply, Reply]:
    # P(on topic) = (.9, .2); P(refused) = (.3, .5), so P(answered) = (.7, .5)
    return (
        scripted(ON_TOPIC, verdict(True, 0.9), verdict(False, 0.2)),
        scripted(REFUSED, verdict(False, 0.3), verdict(False, 0.5)),
    )


async def test_topic_adherence_from_expected_counts(fake_openai: FakeOpenAI) -> None:
    topic_server(fake_openai, *topic_replies())
    result = await TopicAdherence(llm=judge_for(fake_openai)).single_turn_ascore(TOPIC_ROW)
    # TP = .9*.7 + .2*.5 = .73, FP = .1*.7 + .8*.5 = .47, FN = .9*.3 + .2*.5 = .37;
    # TN = .1*.3 + .8*.5 = .43; precision .73 / 1.2, recall .73 / 1.1,
    # F1 = 2 * .73 / (2 * .73 + .47 + .37) = 1.46 / 2.3
    # (written: on topic T F, answered T T: precision 1/2, recall 1, F1 2/3)
    assert result.value == pytest.approx(1.46 / 2.3)
    evidence = result.evidence
    assert (evidence["precision"], evidence["recall"]) == pytest.approx((0.73 / 1.2, 0.73 / 1.1))
    assert [v.probability for v in evidence["on_topic"].verdicts] == pytest.approx([0.9, 0.2])
    assert [v.probability for v in evidence["answered"].verdicts] == pytest.approx([0.7, 0.5])
    assert evidence["scoring"] == "probabilities"
    assert result.reason == (
        "0.73 on-topic question(s) answered, 0.47 off-topic answered, 0.37 on-topic refused, "
        "0.43 off-topic refused (expected counts)"
    )
    topic_server(fake_openai, Reply.json(ON_TOPIC), Reply.json(REFUSED))
    sampled = TopicAdherence(llm=judge_for(fake_openai, scoring="sampled"))
    result = await sampled.single_turn_ascore(TOPIC_ROW)
    assert result.value == pytest.approx(2 / 3)
    assert result.evidence["scoring"] == "sampled"
    assert result.reason == (
        "1 on-topic question(s) answered, 1 off-topic answered, 0 on-topic refused, "
        "0 off-topic refused"
    )


# --------------------------------------------------------- the run log and the request cache


def test_the_run_log_notes_each_cells_scoring_and_the_cache_keys_on_it(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    topic_server(fake_openai, *topic_replies())
    cache = str(tmp_path / "cache")

    def run(name: str, **judge: Any) -> dict[str, Any]:
        evaluate(
            [TOPIC_ROW],
            ["topic_adherence"],
            llm=make_judge(fake_openai, cache=cache, **judge),
            run_dir=str(tmp_path / name),
            progress=False,
        )
        line = (tmp_path / name / "results.jsonl").read_text().splitlines()[0]
        cell: dict[str, Any] = json.loads(line)["metrics"]["topic_adherence"]
        return cell

    first = run("a")
    assert first["value"] == pytest.approx(1.46 / 2.3)
    assert first["evidence"]["scoring"] == "probabilities"
    assert len(fake_openai.chat_requests) == 2
    # the same judge again: both replies from the cache, with their probabilities
    again = run("b")
    assert len(fake_openai.chat_requests) == 2
    assert again["value"] == pytest.approx(1.46 / 2.3)
    assert again["evidence"]["scoring"] == "probabilities"
    # a judge scoring by sampled values does not read those entries: it asks again
    topic_server(fake_openai, Reply.json(ON_TOPIC), Reply.json(REFUSED))
    sampled = run("c", scoring="sampled")
    assert len(fake_openai.chat_requests) == 4
    assert sampled["value"] == pytest.approx(2 / 3)
    assert sampled["evidence"]["scoring"] == "sampled"
