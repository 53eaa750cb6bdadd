"""What a generation run asks the judge, and the checks an item passes before it is kept.

One request writes an item (:func:`write_item`); the checks then run cheapest first and stop at
the first that fails, each recorded with its reason (:class:`Check`):

1. ``no_leak`` -- the question does not contain its answer (word for word, case and
   punctuation aside; no request);
2. ``not_duplicate`` -- the question's embedding cosine with every question kept so far and
   every question of an existing test set is below the threshold (no judge request);
3. ``answerable`` -- the judge says whether the item's reference contexts answer the
   question ("answered": yes or no, said first, read as P(yes) from the reply's
   log-probabilities where the endpoint gives them), then quotes the sentence that does; the
   contexts answer it when P(yes) is at least :data:`ANSWERED_AT` and the quote is found in
   them. For an unanswerable item, ``unanswerable``: P(yes) below :data:`ANSWERED_AT` for the
   chunks nearest the question. A yes whose quote is not found in the contexts is a failed
   reading, not evidence either way: both checks fail on it. (Asked for the sentence alone,
   Qwen2.5-Coder-1.5B always quoted one -- for 6 of 7 questions the example corpus does not
   answer; with the verdict first, it said no for 5 of the 7 and yes for each of 6 answerable
   ones: docs/generate.md);
4. ``supported`` -- the reference answer's claims are supported by the reference contexts:
   faithfulness's claim checks (``mode="checker"``, each sentence against each context, the
   best kept), the mean probability at least ``min_support``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Literal

from pydantic import Field

from rageval.generation._corpus import Chunk
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

__all__ = ["REFUSAL", "Check", "answerable", "leaks", "read_verdict", "supported", "write_item"]

#: the reference answer of an unanswerable item
REFUSAL = "The documents do not answer this question."
#: the reply budget of the request that writes an item
WRITE_TOKENS = 400
#: a written item as the run's dry run expects it, in tokens
EXPECTED_WRITE_TOKENS = 90
#: the answerability check's reply (a verdict and a quoted sentence) as the dry run expects it,
#: in tokens
EXPECTED_QUOTE_TOKENS = 36

_TASKS: dict[ItemType, str] = {
    "single_hop": "Write one question that the passage answers with a specific fact, and the "
    "answer to it taken from the passage.",
    "multi_hop": "Write one question whose answer needs a fact from each of the two passages "
    "(neither passage alone answers it), and the answer, taken from the passages.",
    "comparison": "Choose one thing the first passage describes and one thing the second "
    "passage describes that can be compared (two numbers, dates, sizes or kinds). Write one "
    "question that compares them, and the answer: one sentence with what the first passage "
    "says, one sentence with what the second passage says, one sentence with the comparison.",
    "summary": "Write one question that asks for a summary of what the passage says about its "
    "subject, and the answer: two or three sentences of what the passage says.",
    # written from the chunk's subject alone (:func:`subject_of`), not its text: shown the
    # text, the writer asked about a fact it could see in 7 of 9 tune chunks (docs/generate.md)
    "unanswerable": "The documents have a section on the subject below; you cannot see its "
    "text. First name one specific detail about this subject that a user could want (a number, "
    "date, name, place or reason) and that such a section would probably not give; then write "
    "one question that asks for exactly that detail.",
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
#: answers are checked sentence by sentence with no question in sight (claim checks), so each
#: sentence must say what it is about
_ANSWER_RULE = (
    "Write every answer as short complete sentences, one fact each, each naming what it is about."
)
#: the words of a chunk's text a subject shows where the chunk has no heading
SUBJECT_WORDS = 12
_QA_REPLY = 'Reply as {"question": "...", "fact": "the answer in a few words", "answer": "..."}.'
_MISSING_REPLY = 'Reply as {"missing_detail": "...", "question": "..."}.'
_FOLLOW_REPLY = (
    'Reply as {"question": "...", "answer": "...", "follow_up": "...", "follow_up_answer": "..."}.'
)
_VERDICT_REPLY = 'Reply as {"answered": "yes", "quote": "..."} or {"answered": "no", "quote": ""}.'
_VERDICT_TASK = (
    'Does a sentence of the contexts give the answer to the question? Answer "yes" only if one '
    "does, and copy that sentence's words exactly as the quote (its words, not the context's "
    'number); if none does, answer "no" with an empty quote.'
)
#: P(answered = yes) at or above which the judge says the contexts answer the question
ANSWERED_AT = 0.5
#: the share of a quote's word pairs that must be found in the contexts for it to count
QUOTE_FOUND = 0.8


class QA(ReplyModel):
    """A written question, its answer in a few words (what the question must not contain) and
    in sentences (the reference answer)."""

    question: str = Field(min_length=1)
    fact: str = ""
    answer: str


class MissingQA(ReplyModel):
    """A question for a detail its passage does not give, the detail named first."""

    missing_detail: str
    question: str = Field(min_length=1)


class FollowUpQA(ReplyModel):
    """A written two-turn conversation."""

    question: str = Field(min_length=1)
    answer: str = Field(min_length=1)
    follow_up: str = Field(min_length=1)
    follow_up_answer: str = Field(min_length=1)


class VerdictReply(ReplyModel):
    """Whether the contexts answer a question, said first, then the sentence that does."""

    answered: Literal["yes", "no"] = Field(
        description="yes if a sentence of the contexts gives the answer, else no"
    )
    quote: str = ""


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
    #: the answer in a few words, where the writer gave it (the no_leak check reads it)
    fact: str = ""


def passages_block(texts: Sequence[str]) -> str:
    """The passages an item is written from, numbered."""
    return tagged("passages", numbered_lines(texts, "p"))


def write_messages(
    attempt: Attempt, chunks: Sequence[Chunk], language: str | None
) -> list[dict[str, str]]:
    """The request that writes the item of `attempt` from its `chunks`: their texts, or for an
    unanswerable item, the first chunk's subject alone (:func:`subject_of`)."""
    if attempt.type == "unanswerable":
        task = f"{_TASKS[attempt.type]} {_STYLES[attempt.style]} {_RULES}"
        data, reply = tagged("subject", subject_of(chunks[0])), _MISSING_REPLY
    else:
        task = f"{_TASKS[attempt.type]} {_STYLES[attempt.style]} {_RULES} {_ANSWER_RULE}"
        data = passages_block([c.text for c in chunks])
        reply = _FOLLOW_REPLY if attempt.type == "follow_up" else _QA_REPLY
    return in_language(data_first_messages(data, task, reply), language)


async def write_item(
    judge: Judge, attempt: Attempt, chunks: Sequence[Chunk], language: str | None
) -> Written:
    """Ask `judge` to write the item of `attempt` from its `chunks` (:func:`write_messages`)."""
    chat = write_messages(attempt, chunks, language)
    tags = {"generate": f"slot{attempt.slot}"}
    if attempt.type == "follow_up":
        conv = (await judge.ask(chat, FollowUpQA, tags=tags, max_tokens=WRITE_TOKENS)).value
        return Written(conv.follow_up, conv.follow_up_answer, ((conv.question, conv.answer),))
    if attempt.type == "unanswerable":
        missing = (await judge.ask(chat, MissingQA, tags=tags, max_tokens=WRITE_TOKENS)).value
        return Written(missing.question, REFUSAL)
    qa = (await judge.ask(chat, QA, tags=tags, max_tokens=WRITE_TOKENS)).value
    return Written(qa.question, qa.answer, fact=qa.fact)


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


def _grams(words: Sequence[str], size: int) -> list[tuple[str, ...]]:
    return [tuple(words[i : i + size]) for i in range(len(words) - size + 1)]


def quote_found(quote: str, contexts: Sequence[str]) -> float:
    """The share of `quote`'s word pairs (its word, when it has one) found in one of
    `contexts`, the best context's; 0.0 for an empty quote. The numbering the judge may copy
    (``[c1]``, ``<c1>``) and the case are left aside."""
    words = _words(re.sub(r"[<\[]/?c\d+[>\]]", " ", quote))
    if not words:
        return 0.0
    size = min(2, len(words))
    wanted = _grams(words, size)
    best = 0.0
    for context in contexts:
        have = set(_grams(_words(context), size))
        best = max(best, sum(p in have for p in wanted) / len(wanted))
    return best


def support_sample(written: Written, contexts: Sequence[str]) -> Sample:
    """The sample faithfulness checks: the reference answer as the response to the question,
    the reference contexts as the retrieved ones."""
    return Sample(
        user_input=question_text(written),
        response=written.answer,
        retrieved_contexts=list(contexts),
    )


def support_metric(judge: Judge | None) -> Faithfulness:
    """Faithfulness's claim checks, each sentence against each context on its own (the best
    kept): the writer is asked for one fact per sentence, so a multi-hop answer's sentences
    each draw on one chunk. (Qwen2.5-Coder-1.5B gave the two sentences of a right comparison
    0.42 with both chunks in one request, 0.55 checked chunk by chunk: docs/generate.md.)"""
    return Faithfulness(llm=judge, mode="checker", per_context=True)


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


def answerable_messages(question: str, contexts: Sequence[str]) -> list[dict[str, str]]:
    """The request that asks whether `contexts` answer `question`, then for the sentence."""
    data = f"{tagged('contexts', numbered_lines(contexts, 'c'))}\n{tagged('question', question)}"
    return data_first_messages(data, _VERDICT_TASK, _VERDICT_REPLY)


def read_verdict(p_yes: float, quote: str, contexts: Sequence[str], *, expect: bool) -> Check:
    """The ``answerable`` (`expect` True) or ``unanswerable`` check from the judge's verdict:
    not answered when P(yes) is below :data:`ANSWERED_AT`; answered when it is not and the
    quote is found in `contexts` (the quote is the evidence for a yes); a yes whose quote is
    not found is a failed reading, and fails both checks."""
    name = "answerable" if expect else "unanswerable"
    where = f"the {len(contexts)} context(s)"
    if p_yes < ANSWERED_AT:
        said = f"the judge says no sentence of {where} answers it (P(yes) {p_yes:.2f})"
        return Check(name, not expect, said, p_yes)
    share = quote_found(quote, contexts)
    if share >= QUOTE_FOUND:
        said = f"the judge says {where} answer it (P(yes) {p_yes:.2f}), quoting {quote.strip()!r}"
        return Check(name, expect, said, p_yes)
    said = (
        f"the judge says {where} answer it (P(yes) {p_yes:.2f}) but its quote "
        f"{quote.strip()!r} is not in them ({share:.0%} found): a failed reading, not evidence "
        "either way"
    )
    return Check(name, False, said, p_yes)


async def answerable(
    judge: Judge, question: str, contexts: Sequence[str], *, expect: bool
) -> Check:
    """The ``answerable`` check (`expect` True) or the ``unanswerable`` one (False): the judge
    says whether `contexts` answer `question`, read as P(yes) from the reply's log-probabilities
    where the judge scores by probability (else 1.0 for a yes, 0.0 for a no), then quotes the
    answering sentence (:func:`read_verdict`)."""
    reply = await judge.ask(answerable_messages(question, contexts), VerdictReply)
    p_yes = reply.scoring.probability("answered", option="yes")
    return read_verdict(p_yes, reply.value.quote, contexts, expect=expect)


def subject_of(chunk: Chunk) -> str:
    """What a chunk is about, without its facts: its document and heading path; its first
    :data:`SUBJECT_WORDS` words where it has no heading (a plain text file, a JSONL chunk)."""
    if chunk.heading:
        return f"{chunk.source} > {chunk.heading}"
    words = chunk.text.split()
    more = " ..." if len(words) > SUBJECT_WORDS else ""
    return f"{chunk.source}: {' '.join(words[:SUBJECT_WORDS])}{more}"
