"""What a generation run asks the judge, and the checks an item passes before it is kept.

One request writes an item (:func:`write_item`); the checks then run cheapest first and stop at
the first that fails, each recorded with its reason (:class:`Check`):

1. ``no_leak`` -- the question does not contain its answer (word for word, case and
   punctuation aside; no request);
2. ``not_duplicate`` -- the question's embedding cosine with every question kept so far and
   every question of an existing test set is below the threshold (no judge request);
3. ``answerable`` -- the judge finds the question answerable from the item's reference
   contexts; for an unanswerable item, ``unanswerable``: answerable from none of the chunks
   nearest the question;
4. ``supported`` -- the reference answer's claims are supported by the reference contexts:
   faithfulness's claim checks (``mode="checker"``, all contexts in one request, so that a
   multi-hop answer may draw on both), the mean probability at least ``min_support``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

from pydantic import Field

from rageval.generation._plan import Attempt, ItemType, Style
from rageval.judge import Judge
from rageval.metrics._prompting import (
    ReplyModel,
    data_first_messages,
    in_language,
    numbered as numbered_lines,
    tagged,
)
from rageval.metrics.faithfulness import Faithfulness
from rageval.samples import Sample

__all__ = ["REFUSAL", "Check", "answerable", "leaks", "supported", "write_item"]

#: the reference answer of an unanswerable item
REFUSAL = "The documents do not answer this question."
#: the reply budget of the request that writes an item
WRITE_TOKENS = 400
#: a written item as the run's dry run expects it, in tokens
EXPECTED_WRITE_TOKENS = 90

_TASKS: dict[ItemType, str] = {
    "single_hop": "Write one question that the passage answers with a specific fact, and the "
    "answer to it taken from the passage.",
    "multi_hop": "Write one question whose answer needs a fact from each of the two passages "
    "(neither passage alone answers it), and the answer, taken from the passages.",
    "comparison": "Write one question that compares something the first passage describes "
    "with something the second passage describes, and the answer, taken from the passages.",
    "summary": "Write one question that asks for a summary of what the passage says about its "
    "subject, and the answer: two or three sentences of what the passage says.",
    "unanswerable": "Write one question on the passage's subject that the passage does NOT "
    "answer: a plausible detail it never gives. Give an empty answer.",
    "follow_up": "Write a short conversation: a first question the passage answers and its "
    "answer, then a follow-up question that refers back to the first (with words such as "
    "'it' or 'that') and the follow-up's answer, all taken from the passage.",
}
_STYLES: dict[Style, str] = {
    "plain": "Phrase the question as a typical user would.",
    "terse": "Phrase the question tersely, as the few keywords a hurried user types.",
    "misspelled": "Phrase the question as a user who types fast, with two or three spelling "
    "mistakes.",
    "expert": "Phrase the question as a specialist would, with precise terms.",
    "non_native": "Phrase the question as a non-native speaker would: simple words, slightly "
    "unusual grammar.",
}
_RULES = (
    "The question must not contain its answer, and must not mention 'the passage': the person "
    "who asks has not read it."
)
_QA_REPLY = 'Reply as {"question": "...", "answer": "..."}.'
_FOLLOW_REPLY = (
    'Reply as {"question": "...", "answer": "...", "follow_up": "...", "follow_up_answer": "..."}.'
)
_ANSWERABLE_REPLY = 'Reply as {"answerable": "yes"} or {"answerable": "no"}.'
_ANSWERABLE_TASK = (
    "Can the question be answered completely from the contexts alone, without any other "
    'knowledge? Answer "yes" or "no".'
)


class QA(ReplyModel):
    """A written question and its answer."""

    question: str = Field(min_length=1)
    answer: str


class FollowUpQA(ReplyModel):
    """A written two-turn conversation."""

    question: str = Field(min_length=1)
    answer: str = Field(min_length=1)
    follow_up: str = Field(min_length=1)
    follow_up_answer: str = Field(min_length=1)


class AnswerableReply(ReplyModel):
    """Whether a question can be answered from the contexts shown."""

    answerable: Literal["yes", "no"]


@dataclass(frozen=True)
class Check:
    """One check of an item: its name, whether it passed, why, and the number it read (a
    cosine, a support score) where there is one."""

    name: str
    passed: bool
    reason: str
    value: float | None = None

    def record(self) -> dict[str, object]:
        """The check as the output records it."""
        return asdict(self)


@dataclass(frozen=True)
class Written:
    """What the judge wrote for an attempt: the question asked (the follow-up, for a
    conversation), its answer, and the turns before it (a follow-up's first question and
    answer)."""

    question: str
    answer: str
    history: tuple[tuple[str, str], ...] = ()


def passages_block(texts: Sequence[str]) -> str:
    """The passages an item is written from, numbered."""
    return tagged("passages", numbered_lines(texts, "p"))


def write_messages(
    attempt: Attempt, texts: Sequence[str], language: str | None
) -> list[dict[str, str]]:
    """The request that writes the item of `attempt` from its chunks' `texts`."""
    task = f"{_TASKS[attempt.type]} {_STYLES[attempt.style]} {_RULES}"
    reply = _FOLLOW_REPLY if attempt.type == "follow_up" else _QA_REPLY
    return in_language(data_first_messages(passages_block(texts), task, reply), language)


async def write_item(
    judge: Judge, attempt: Attempt, texts: Sequence[str], language: str | None
) -> Written:
    """Ask `judge` to write the item of `attempt` from its chunks' `texts`."""
    chat = write_messages(attempt, texts, language)
    tags = {"generate": f"slot{attempt.slot}"}
    if attempt.type == "follow_up":
        conv = (await judge.ask(chat, FollowUpQA, tags=tags, max_tokens=WRITE_TOKENS)).value
        return Written(conv.follow_up, conv.follow_up_answer, ((conv.question, conv.answer),))
    qa = (await judge.ask(chat, QA, tags=tags, max_tokens=WRITE_TOKENS)).value
    answer = REFUSAL if attempt.type == "unanswerable" else qa.answer
    return Written(qa.question, answer)


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def leaks(question: str, answer: str) -> Check:
    """The ``no_leak`` check: fails when the answer's words appear in the question in order
    (a summary's or a refusal's answer is not checked: the caller leaves it out)."""
    q, a = " ".join(_words(question)), " ".join(_words(answer))
    if a and re.search(rf"\b{re.escape(a)}\b", q):
        return Check("no_leak", False, f"the question contains its answer {answer!r}")
    return Check("no_leak", True, "the question does not contain its answer")


def question_text(written: Written) -> str:
    """The question as the answerability check reads it: a follow-up with the turns before."""
    before = "".join(f"User: {q}\nAssistant: {a}\n" for q, a in written.history)
    return f"{before}User: {written.question}" if before else written.question


def answerable_messages(question: str, contexts: Sequence[str]) -> list[dict[str, str]]:
    """The request that asks whether `question` is answerable from `contexts`."""
    data = f"{tagged('contexts', numbered_lines(contexts, 'c'))}\n{tagged('question', question)}"
    return data_first_messages(data, _ANSWERABLE_TASK, _ANSWERABLE_REPLY)


async def answerable(
    judge: Judge, question: str, contexts: Sequence[str], *, expect: bool
) -> Check:
    """The ``answerable`` check (`expect` True) or the ``unanswerable`` one (False)."""
    reply = await judge.ask(answerable_messages(question, contexts), AnswerableReply)
    found = reply.value.answerable == "yes"
    name = "answerable" if expect else "unanswerable"
    where = f"the {len(contexts)} context(s)"
    said = "answerable" if found else "not answerable"
    return Check(name, found == expect, f"the judge finds the question {said} from {where}")


def support_sample(written: Written, contexts: Sequence[str]) -> Sample:
    """The sample faithfulness checks: the reference answer as the response to the question,
    the reference contexts as the retrieved ones."""
    return Sample(
        user_input=question_text(written),
        response=written.answer,
        retrieved_contexts=list(contexts),
    )


def support_metric(judge: Judge | None) -> Faithfulness:
    """Faithfulness's claim checks, every context in one request (a multi-hop answer draws on
    two chunks)."""
    return Faithfulness(llm=judge, mode="checker", per_context=False)


async def supported(
    judge: Judge, written: Written, contexts: Sequence[str], min_support: float
) -> Check:
    """The ``supported`` check: faithfulness of the reference answer to its contexts."""
    result = await support_metric(judge).single_turn_ascore(support_sample(written, contexts))
    if result.value is None:
        return Check("supported", False, f"not measured: {result.cause}")
    value = float(result.value)
    verdict = "at least" if value >= min_support else "below"
    return Check(
        "supported",
        value >= min_support,
        f"faithfulness {value:.2f} to the reference contexts, {verdict} {min_support:g}",
        value,
    )
