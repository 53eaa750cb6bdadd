"""turn_faithfulness (issue 25, item 3): each assistant turn with contexts scored as the
single-turn faithfulness of its sample, the conversation's value the mean over scored turns;
hand-computed with scripted replies, and through evaluate()."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from helpers import chat_count, judge_for, keyed, make_judge, prompts_with, user_text
from rageval.metrics import Faithfulness, TurnFaithfulness
from rageval.metrics._statements import SharedStatements
from rageval.metrics.evidence import (
    ClaimsEvidence,
    PerTurnEvidence,
    TurnNotScored,
    VerdictEvidence,
)
from rageval.metrics.per_turn import turn_mean
from rageval.results import load_run
from rageval.runner import evaluate
from rageval.samples import Conversation, InvalidDataError, Sample, transcript
from rageval.testing import FakeOpenAI, RecordedRequest, Reply
from test_metric_claim_checks import on_a_checker_of_its_own

TURNS: list[dict[str, Any]] = [
    {"role": "user", "content": "Who wrote Dune?"},
    {
        "role": "assistant",
        "content": "Frank Herbert wrote Dune. He was Canadian.",
        "retrieved_contexts": ["Dune is a novel by Frank Herbert."],
    },
    {"role": "user", "content": "When was it published?"},
    {"role": "assistant", "tool_calls": [{"name": "search", "arguments": {"q": "Dune 1965"}}]},
    {"role": "tool", "name": "search", "content": "1965"},
    {
        "role": "assistant",
        "content": "It came out in 1965. It won a Hugo. It sold 20 million copies.",
        "retrieved_contexts": ["Dune was published in 1965.", "Dune won the Hugo Award."],
    },
    {"role": "user", "content": "Thanks!"},
    {"role": "assistant", "content": "You're welcome."},
]
FIRST = ["Frank Herbert wrote Dune.", "Frank Herbert was Canadian."]
SECOND = ["Dune came out in 1965.", "Dune won a Hugo Award.", "Dune sold 20 million copies."]


def conversation(cid: str = "c0", turns: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"id": cid, "turns": TURNS if turns is None else turns}


def scripted(req: RecordedRequest) -> Reply:
    """Turn 1: 1 of its 2 statements supported; turn 5: 2 of its 3."""
    text = user_text(req)
    if "<text>" in text:  # the question (the conversation so far) may hold turn 1's text
        said = text.split("<text>", 1)[1]
        return Reply.json({"statements": FIRST if "Canadian" in said else SECOND})
    if "[s3]" in text:
        return keyed("s", "supported", True, True, False)
    return keyed("s", "supported", True, False)


def test_the_value_is_the_mean_over_scored_turns() -> None:
    assert turn_mean([0.5, 2 / 3]) == pytest.approx(7 / 12)
    assert turn_mean([1.0]) == 1.0
    assert turn_mean([]) is None


async def test_each_turn_with_contexts_is_scored_and_the_turns_averaged(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.handler = scripted
    metric = TurnFaithfulness(llm=judge_for(fake_openai))
    result = await metric.single_turn_ascore(conversation())
    # turn 1: 1/2 = 0.5; turn 5: 2/3; mean (0.5 + 2/3) / 2 = 7/12 ≈ 0.5833
    # (the statements pooled would give 3/5 = 0.6: each turn weighs the same instead)
    assert result.status == "ok", result.cause
    assert result.value == pytest.approx(7 / 12)
    assert isinstance(result.evidence, PerTurnEvidence)
    first, second = result.evidence.turns
    assert isinstance(first.evidence, VerdictEvidence)
    assert isinstance(second.evidence, VerdictEvidence)
    assert (first.turn, first.value) == (1, 0.5)
    assert [s.text for s in first.evidence.verdicts] == FIRST
    assert [s.verdict for s in first.evidence.verdicts] == [True, False]
    assert second.turn == 5 and second.value == pytest.approx(2 / 3)
    assert [s.verdict for s in second.evidence.verdicts] == [True, True, False]
    assert result.evidence.not_scored == [
        TurnNotScored(
            turn=3,
            why="no response text (the turn only calls tools); no retrieved_contexts "
            "(the turn retrieved nothing)",
        ),
        TurnNotScored(turn=7, why="no retrieved_contexts (the turn retrieved nothing)"),
    ]
    assert chat_count(fake_openai) == 4  # per scored turn: its statements + its verdicts
    # each turn is judged against its own contexts, with the conversation so far as question
    first_verdicts, second_verdicts = sorted(
        prompts_with(fake_openai, "contexts", "statements"), key=lambda t: "[s3]" in t
    )
    assert "Dune is a novel by Frank Herbert." in first_verdicts
    assert "published in 1965" not in first_verdicts
    assert "[c2] Dune won the Hugo Award." in second_verdicts
    extraction = next(t for t in prompts_with(fake_openai, "text") if "1965." in t)
    history = transcript(Conversation.model_validate(conversation()).turns[:5])
    assert history in extraction
    assert '[calls search({"q": "Dune 1965"})]' in history and "tool search: 1965" in history


async def test_a_one_exchange_conversation_is_its_single_turn_sample(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.handler = scripted
    judge = make_judge(fake_openai)  # no request cache: the second metric asks again
    turns = TURNS[:2]
    per_turn = await TurnFaithfulness(llm=judge).single_turn_ascore(conversation(turns=turns))
    turn_prompts = [r.messages for r in fake_openai.chat_requests]
    single = await Faithfulness(llm=judge).single_turn_ascore(
        Sample(
            user_input=turns[0]["content"],
            response=turns[1]["content"],
            retrieved_contexts=turns[1]["retrieved_contexts"],
            id="c0",
        )
    )
    assert per_turn.value == single.value == 0.5
    # which scoring the cell's replies used is noted once, on the conversation's cell
    notes = {"scoring", "scoring_why"}
    turn_evidence = per_turn.evidence["turns"][0].evidence
    assert turn_evidence.model_dump() == single.evidence.model_dump(exclude=notes)
    assert per_turn.evidence.model_dump(include=notes) == single.evidence.model_dump(include=notes)
    assert single.evidence.model_dump(include=notes)["scoring"] == "sampled"
    assert [r.messages for r in fake_openai.chat_requests[len(turn_prompts) :]] == turn_prompts


async def test_a_turn_s_statements_are_extracted_once_and_kept_under_the_turn(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.handler = scripted
    shared = SharedStatements(Conversation.model_validate(conversation()), judge_for(fake_openai))
    first, again, second = await asyncio.gather(
        shared.for_turn(1).get("response"),
        shared.for_turn(1).get("response"),
        shared.for_turn(5).get("response"),
    )
    assert (first, again, second) == (FIRST, FIRST, SECOND)
    assert chat_count(fake_openai) == 2
    assert shared.asked == {"turns[1].response", "turns[5].response"}
    assert await shared.get("response") == []  # the conversation itself has no response text


def test_the_plan_has_each_scored_turn_s_own_shared_extraction() -> None:
    plan = TurnFaithfulness().planned_requests(Conversation.model_validate(conversation()))
    shared = [r.shared for r in plan if r.shared is not None]
    assert shared == ["statements:turns[1].response", "statements:turns[5].response"]
    assert len(plan) == 4


async def test_no_scored_turn_is_not_measured_with_why(fake_openai: FakeOpenAI) -> None:
    turns = [TURNS[0], TURNS[3], TURNS[4], TURNS[7]]
    result = await TurnFaithfulness(llm=judge_for(fake_openai)).single_turn_ascore(
        conversation(turns=turns)
    )
    assert result.status == "not_measured"
    assert result.cause == (
        "no assistant turn could be scored (turn 1: no response text (the turn only calls "
        "tools); no retrieved_contexts (the turn retrieved nothing); turn 3: no "
        "retrieved_contexts (the turn retrieved nothing))"
    )
    assert chat_count(fake_openai) == 0


def test_a_silent_assistant_turn_is_refused_before_any_request(fake_openai: FakeOpenAI) -> None:
    silent = [*TURNS, {"role": "user", "content": "Hello?"}, {"role": "assistant"}]
    data = [conversation("c0"), conversation("c1", silent)]
    fake_openai.handler = scripted
    with pytest.raises(InvalidDataError) as caught:
        evaluate(data, ["turn_faithfulness"], llm=make_judge(fake_openai), progress=False)
    assert fake_openai.chat_requests == []
    assert (
        "row 1, id 'c1', turn 9, field 'content', metric 'turn_faithfulness': an assistant "
        "turn with neither content nor tool_calls"
    ) in str(caught.value)
    assert "row 0" not in str(caught.value)


def test_a_single_turn_row_is_refused() -> None:
    data = [{"id": "s0", "user_input": "q", "response": "a", "retrieved_contexts": ["c"]}]
    with pytest.raises(InvalidDataError, match=r"row 0, id 's0', field 'turns', metric "):
        evaluate(data, ["turn_faithfulness"], progress=False)


def test_a_run_keeps_the_cells_and_reuses_them(fake_openai: FakeOpenAI, tmp_path: Any) -> None:
    fake_openai.handler = scripted
    data = [conversation("c0"), conversation("c1", TURNS[:2])]
    judge = make_judge(fake_openai, cache=tmp_path / "cache")
    result = evaluate(data, ["turn_faithfulness"], llm=judge, progress=False)
    assert result["turn_faithfulness"] == [pytest.approx(7 / 12), 0.5]
    sent = chat_count(fake_openai)
    again = evaluate(
        data,
        ["turn_faithfulness"],
        llm=make_judge(fake_openai, cache=tmp_path / "cache"),
        progress=False,
    )
    assert again["turn_faithfulness"] == result["turn_faithfulness"]
    assert chat_count(fake_openai) == sent  # every cell kept
    shared = again.sample(0).shared_usage
    assert shared is not None and shared.cache_hits == 2  # the two turns' extractions saved


#: the sentences of TURNS that the turn's own contexts support, for the claim checks
CHECKED_YES = {"Frank Herbert wrote Dune.", "It came out in 1965.", "It won a Hugo."}


def check_turn_claim(req: RecordedRequest) -> Reply:
    claim = user_text(req).split("<claim>\n", 1)[1].split("\n</claim>", 1)[0]
    return Reply.json({"supported": "yes" if claim in CHECKED_YES else "no"})


def test_the_checker_mode_checks_each_turn_s_sentences_on_a_checker_of_its_own(
    fake_openai: FakeOpenAI, tmp_path: Any
) -> None:
    """-p turn_faithfulness.mode=checker -p turn_faithfulness.checker...: each scored turn's
    own sentences, unchanged, checked against the turn's contexts on the checker (the run's
    judge gets nothing); the run log keeps each claim with its probability under its turn."""
    metric, result, checks = on_a_checker_of_its_own(
        "turn_faithfulness", [conversation()], check_turn_claim, fake_openai, tmp_path / "run"
    )
    assert len(metric.planned_requests(Conversation.model_validate(conversation())) or ()) == 5
    # turn 1: 1 of 2 sentences supported; turn 5: 2 of 3; mean (1/2 + 2/3) / 2 = 7/12
    assert result["turn_faithfulness"] == [pytest.approx(7 / 12)]
    assert len(checks) == 5  # one per sentence, no statement extraction
    (cell,) = load_run(tmp_path / "run").cells("turn_faithfulness")
    assert cell is not None and isinstance(cell.evidence, PerTurnEvidence)
    claims = {}
    for turn in cell.evidence.turns:
        assert isinstance(turn.evidence, ClaimsEvidence) and turn.evidence.checker == "minicheck"
        claims[turn.turn] = [(c.text, c.probability) for c in turn.evidence.claims]
    assert claims == {
        1: [("Frank Herbert wrote Dune.", 1.0), ("He was Canadian.", 0.0)],
        5: [("It came out in 1965.", 1.0), ("It won a Hugo.", 1.0),
            ("It sold 20 million copies.", 0.0)],
    }  # fmt: skip
