"""context_precision: average precision of judge verdicts in rank order, one request per sample."""

from __future__ import annotations

import pytest

from helpers import attempt, chat_count, judge_for, keyed, prompts_with, route
from rageval.metrics import ContextPrecision
from rageval.metrics.context_precision import average_precision
from rageval.metrics.evidence import VerdictEvidence
from rageval.samples import Sample
from rageval.testing import FakeOpenAI, RecordedRequest, Reply

SAMPLE = Sample(
    user_input="Where is the Eiffel Tower?",
    retrieved_contexts=[
        "The Eiffel Tower stands on the Champ de Mars in Paris.",
        "Gustave Eiffel's company built many bridges.",
        "Paris is the capital of France.",
    ],
    reference="The Eiffel Tower is in Paris, France.",
)
TAGS = ("question", "reference", "contexts")


def verdicts(*useful: bool) -> Reply:
    return keyed("c", "useful", *useful)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([1, 0, 0], 1.0),  # precision@1 = 1
        ([0, 0, 1], 1 / 3),  # precision@3 = 1/3
        ([1, 0, 1], (1 + 2 / 3) / 2),  # (p@1 + p@3)/2 = (1 + 0.6667)/2 = 0.8333
        ([0, 1, 1], (1 / 2 + 2 / 3) / 2),  # (0.5 + 0.6667)/2 = 0.5833
        ([1, 1, 1], 1.0),
        ([0, 0, 0], 0.0),  # no useful context → 0
        ([], 0.0),
    ],
)
def test_average_precision_is_rank_sensitive(flags: list[int], expected: float) -> None:
    assert average_precision([bool(f) for f in flags]) == pytest.approx(expected)


async def test_one_request_for_all_contexts(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = route((TAGS, verdicts(True, False, True)))
    result = await ContextPrecision(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    # useful at ranks 1 and 3: (1/1 + 2/3) / 2 = 0.8333
    assert result.value == pytest.approx(0.8333, abs=1e-4)
    assert isinstance(result.evidence, VerdictEvidence) and result.evidence.items == "contexts"
    assert [c.verdict for c in result.evidence.verdicts] == [True, False, True]
    assert [c.rank for c in result.evidence.verdicts] == [1, 2, 3]
    assert chat_count(fake_openai) == 1  # ragas: one request per context
    (prompt,) = prompts_with(fake_openai, *TAGS)
    for rank, text in enumerate(SAMPLE.retrieved_contexts or [], start=1):
        assert f"[c{rank}] {text}" in prompt
    schema = fake_openai.chat_requests[0].schema
    assert schema is not None and schema["required"] == ["c1", "c2", "c3"]


async def test_verdicts_without_reasons_when_asked(fake_openai: FakeOpenAI) -> None:
    """`reasons=False`: the schema asks for the verdicts alone; the math is the same."""
    reply = {f"c{i}": {"useful": i != 2} for i in (1, 2, 3)}
    fake_openai.handler = route((TAGS, Reply.json(reply)))
    metric = ContextPrecision(llm=judge_for(fake_openai), reasons=False)
    assert metric.params() == {"reasons": False} and ContextPrecision().reasons is True
    result = await metric.single_turn_ascore(SAMPLE)
    assert result.value == pytest.approx((1 + 2 / 3) / 2)  # useful at ranks 1 and 3
    schema = fake_openai.chat_requests[0].schema
    assert schema is not None
    (item,) = schema["$defs"].values()  # each item: the verdict alone, no reason
    assert list(item["properties"]) == ["useful"]
    assert isinstance(result.evidence, VerdictEvidence)
    assert [c.reason for c in result.evidence.verdicts] == [None, None, None]


async def test_same_verdicts_in_another_order_by_key(fake_openai: FakeOpenAI) -> None:
    reply = {f"c{i}": {"reason": "r", "useful": i == 3} for i in (3, 1, 2)}
    fake_openai.handler = route((TAGS, Reply.json(reply)))
    result = await ContextPrecision(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert result.value == pytest.approx(1 / 3)  # only rank 3 useful: p@3 = 1/3


async def test_a_blank_context_takes_no_rank(fake_openai: FakeOpenAI) -> None:
    # One rule for blank contexts, in every metric: they are left out. (On main a blank context
    # took rank 1 here and ["", useful] scored 0.5; faithfulness dropped it.)
    fake_openai.handler = route((TAGS, verdicts(True)))
    sample = SAMPLE.model_copy(update={"retrieved_contexts": ["  ", "Paris is in France."]})
    result = await ContextPrecision(llm=judge_for(fake_openai)).single_turn_ascore(sample)
    assert result.value == 1.0
    (prompt,) = prompts_with(fake_openai, *TAGS)
    assert "[c1] Paris is in France." in prompt and "[c2]" not in prompt


@pytest.mark.parametrize("contexts", [[], ["", "  \n"]])
async def test_no_context_scores_zero_without_a_request(
    fake_openai: FakeOpenAI, contexts: list[str]
) -> None:
    sample = SAMPLE.model_copy(update={"retrieved_contexts": contexts})
    result = await ContextPrecision(llm=judge_for(fake_openai)).single_turn_ascore(sample)
    assert result.status == "ok"
    assert result.value == 0.0
    assert chat_count(fake_openai) == 0


async def test_blank_reference_is_not_measured(fake_openai: FakeOpenAI) -> None:
    sample = SAMPLE.model_copy(update={"reference": "  "})
    result = await ContextPrecision(llm=judge_for(fake_openai)).single_turn_ascore(sample)
    assert result.status == "not_measured" and result.cause_kind == "undefined"
    assert chat_count(fake_openai) == 0


async def test_missing_context_id_is_re_asked(fake_openai: FakeOpenAI) -> None:
    def reply(req: RecordedRequest) -> Reply:
        if attempt(req) == 1:
            return verdicts(True, True)  # context 3 left out (a judge ignoring the schema)
        return verdicts(False, True, False)

    fake_openai.handler = route((TAGS, reply))
    result = await ContextPrecision(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert result.value == pytest.approx(0.5)  # only rank 2 useful: p@2 = 1/2
    assert chat_count(fake_openai) == 2


async def test_required_fields_are_checked_before_any_call(fake_openai: FakeOpenAI) -> None:
    sample = Sample(user_input="q", retrieved_contexts=["c"])
    with pytest.raises(ValueError, match="reference"):
        await ContextPrecision(llm=judge_for(fake_openai)).single_turn_ascore(sample)
    assert chat_count(fake_openai) == 0
