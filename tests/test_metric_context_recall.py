"""context_recall: share of the reference's sentences attributable to the retrieved contexts."""

from __future__ import annotations

import pytest

from helpers import attempt, chat_count, judge_for, keyed, prompts_with, route
from rageval.metrics import ContextRecall
from rageval.metrics.authoring import split_sentences
from rageval.metrics.context_recall import context_recall_score
from rageval.metrics.evidence import VerdictEvidence
from rageval.samples import Sample
from rageval.testing import FakeOpenAI, RecordedRequest, Reply

SAMPLE = Sample(
    user_input="Tell me about the Great Wall.",
    retrieved_contexts=[
        "The Great Wall of China is over 21,000 km long.",
        "Construction began in the 7th century BC.",
    ],
    reference="The Great Wall is over 21,000 km long. It was begun in the 7th century BC. "
    "It is visible from low orbit.\nIt is a UNESCO site.",
)
SENTENCES = [
    "The Great Wall is over 21,000 km long.",
    "It was begun in the 7th century BC.",
    "It is visible from low orbit.",
    "It is a UNESCO site.",
]
TAGS = ("contexts", "sentences")


def verdicts(*attributed: bool) -> Reply:
    return keyed("r", "attributed", *attributed)


def test_score_is_attributed_over_total() -> None:
    assert context_recall_score([True, True, False, True]) == 0.75
    assert context_recall_score([]) is None


def test_the_reference_is_split_into_its_sentences() -> None:
    assert split_sentences(SAMPLE.text("reference")) == SENTENCES
    assert split_sentences("Born in 1879 (approx. 3.5 km away), e.g. in Ulm. Next one!") == [
        "Born in 1879 (approx. 3.5 km away), e.g. in Ulm.",
        "Next one!",
    ]
    assert split_sentences("  \n ") == []


async def test_verdicts_without_reasons_when_asked(fake_openai: FakeOpenAI) -> None:
    """`reasons=False`: the schema asks for the verdicts alone; the math is the same."""
    reply = {f"r{i}": {"attributed": i != 3} for i in (1, 2, 3, 4)}
    fake_openai.handler = route((TAGS, Reply.json(reply)))
    metric = ContextRecall(llm=judge_for(fake_openai), reasons=False)
    assert metric.params() == {"reasons": False} and ContextRecall().reasons is True
    result = await metric.single_turn_ascore(SAMPLE)
    assert result.value == pytest.approx(0.75)  # 3 attributed of 4 sentences
    schema = fake_openai.chat_requests[0].schema
    assert schema is not None
    (item,) = schema["$defs"].values()  # each item: the verdict alone, no reason
    assert list(item["properties"]) == ["attributed"]
    assert isinstance(result.evidence, VerdictEvidence)
    assert [v.reason for v in result.evidence.verdicts] == [None] * 4


async def test_one_request_classifies_every_reference_sentence(fake_openai: FakeOpenAI) -> None:
    # the published method: sentences of the reference, one request. (On main: an extraction
    # request for the reference's claims, then a verdict request: 2 per sample.)
    fake_openai.handler = route((TAGS, verdicts(True, True, False, True)))
    result = await ContextRecall(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    # 3 attributed of 4 reference sentences → 3/4 = 0.75
    assert result.value == pytest.approx(0.75)
    assert isinstance(result.evidence, VerdictEvidence)
    assert [s.verdict for s in result.evidence.verdicts] == [True, True, False, True]
    assert [s.text for s in result.evidence.verdicts] == SENTENCES
    assert chat_count(fake_openai) == 1
    (prompt,) = prompts_with(fake_openai, *TAGS)
    assert "[r4] It is a UNESCO site." in prompt
    assert "[c2] Construction began in the 7th century BC." in prompt
    schema = fake_openai.chat_requests[0].schema
    assert schema is not None and schema["required"] == ["r1", "r2", "r3", "r4"]


@pytest.mark.parametrize("reference", ["\n", "   "])
async def test_blank_reference_is_not_measured_without_a_request(
    fake_openai: FakeOpenAI, reference: str
) -> None:
    sample = SAMPLE.model_copy(update={"reference": reference})
    result = await ContextRecall(llm=judge_for(fake_openai)).single_turn_ascore(sample)
    assert result.status == "not_measured" and result.cause_kind == "undefined"
    assert chat_count(fake_openai) == 0


@pytest.mark.parametrize("contexts", [[], ["", " "]])
async def test_no_context_scores_zero_without_a_request(
    fake_openai: FakeOpenAI, contexts: list[str]
) -> None:
    sample = SAMPLE.model_copy(update={"retrieved_contexts": contexts})
    result = await ContextRecall(llm=judge_for(fake_openai)).single_turn_ascore(sample)
    # 0 of 4 sentences can be attributed to nothing
    assert result.value == 0.0
    assert chat_count(fake_openai) == 0


async def test_missing_key_is_re_asked(fake_openai: FakeOpenAI) -> None:
    def reply(req: RecordedRequest) -> Reply:
        if attempt(req) == 1:
            return verdicts(True, True, True)  # r4 missing
        return verdicts(True, False, False, False)

    fake_openai.handler = route((TAGS, reply))
    result = await ContextRecall(llm=judge_for(fake_openai)).single_turn_ascore(SAMPLE)
    assert result.value == pytest.approx(0.25)  # 1 of 4 after the re-ask
    assert len(prompts_with(fake_openai, *TAGS)) == 2
