"""What a generation run asks the judge, and the checks an item passes before it is kept.

One request writes an item (:func:`write_item`); the checks then run cheapest first and stop at
the first that fails, each recorded with its reason (:class:`Check`):

1. ``no_leak`` -- the question does not contain its answer (word for word, case and
   punctuation aside; no request);
2. ``not_duplicate`` -- the question's embedding cosine with every question kept so far and
   every question of an existing test set is below the threshold (no judge request);
3. ``answerable`` -- the judge quotes the sentence of the item's reference contexts that
   answers the question, and the quote is found in them; for an unanswerable item,
   ``unanswerable``: the judge says no sentence of the chunks nearest the question answers it
   (an empty quote). A quote that is not found in the contexts is a failed reading of the
   check, not evidence either way: both checks fail on it. (Asked yes or no,
   Qwen2.5-Coder-1.5B found each of 9 questions the example corpus does not answer
   answerable; asked for the sentence, it quoted none for 4 of 7, and quoted one for each of
   6 answerable ones: docs/generate.md);
4. ``supported`` -- the reference answer's claims are supported by the reference contexts:
   faithfulness's claim checks (``mode="checker"``, each sentence against each context, the
   best kept), the mean probability at least ``min_support``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass

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

__all__ = ["REFUSAL", "Check", "answerable", "leaks", "no_quote", "supported", "write_item"]

#: the reference answer of an unanswerable item
REFUSAL = "The documents do not answer this question."
#: the reply budget of the request that writes an item
WRITE_TOKENS = 400
#: a written item as the run's dry run expects it, in tokens
EXPECTED_WRITE_TOKENS = 90
#: the answerability check's reply (a quoted sentence) as the dry run expects it, in tokens
EXPECTED_QUOTE_TOKENS = 30

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
    "unanswerable": "First name one detail about the passage's subject that the passage does "
    "NOT give (a number, date, name, place or reason it never mentions); then write one "
    "question that asks for exactly that detail.",
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
_QA_REPLY = 'Reply as {"question": "...", "fact": "the answer in a few words", "answer": "..."}.'
_MISSING_REPLY = 'Reply as {"missing_detail": "...", "question": "..."}.'
_FOLLOW_REPLY = (
    'Reply as {"question": "...", "answer": "...", "follow_up": "...", "follow_up_answer": "..."}.'
)
_QUOTE_REPLY = 'Reply as {"quote": "..."}.'
_QUOTE_TASK = (
    "Which sentence of the contexts answers the question? Copy that sentence's words exactly "
    "(its words, not the context's number). If no sentence of the contexts gives the answer, "
    "reply with an empty quote."
)
#: the share of a quote's word pairs that must be found in the contexts for it to count
QUOTE_FOUND = 0.8
#: what a judge may write, instead of an empty quote, for "no sentence answers" (words only)
NO_QUOTE = frozenset({"", "none", "null", "n a", "no answer", "no sentence"})


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


class QuoteReply(ReplyModel):
    """The sentence of the contexts that answers a question ('' when none does)."""

    quote: str


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
    attempt: Attempt, texts: Sequence[str], language: str | None
) -> list[dict[str, str]]:
    """The request that writes the item of `attempt` from its chunks' `texts`."""
    if attempt.type == "unanswerable":
        task, reply = f"{_TASKS[attempt.type]} {_STYLES[attempt.style]} {_RULES}", _MISSING_REPLY
    else:
        task = f"{_TASKS[attempt.type]} {_STYLES[attempt.style]} {_RULES} {_ANSWER_RULE}"
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


def answerable_messages(question: str, contexts: Sequence[str]) -> list[dict[str, str]]:
    """The request that asks for the sentence of `contexts` that answers `question`."""
    data = f"{tagged('contexts', numbered_lines(contexts, 'c'))}\n{tagged('question', question)}"
    return data_first_messages(data, _QUOTE_TASK, _QUOTE_REPLY)


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


def no_quote(quote: str) -> bool:
    """Whether `quote` is the judge saying that no sentence answers: empty, or one of the
    words a model writes for nothing (:data:`NO_QUOTE`), case and punctuation aside."""
    return " ".join(_words(quote)) in NO_QUOTE


async def answerable(
    judge: Judge, question: str, contexts: Sequence[str], *, expect: bool
) -> Check:
    """The ``answerable`` check (`expect` True) or the ``unanswerable`` one (False): the
    question is answerable when the judge quotes a sentence that is found in `contexts`, and
    unanswerable when the judge quotes none (:func:`no_quote`). A quote not found in
    `contexts` fails both: a made-up quote says nothing about what the contexts answer."""
    quote = (await judge.ask(answerable_messages(question, contexts), QuoteReply)).value.quote
    name = "answerable" if expect else "unanswerable"
    where = f"the {len(contexts)} context(s)"
    if no_quote(quote):
        said = f"the judge quotes no sentence of {where} as the answer"
        return Check(name, not expect, said, 0.0)
    share = quote_found(quote, contexts)
    if share >= QUOTE_FOUND:
        said = f"the judge quotes {quote.strip()!r} from {where} as the answer"
        return Check(name, expect, said, share)
    said = (
        f"the judge's quote {quote.strip()!r} is not in {where} ({share:.0%} of it found): "
        "a failed reading, not evidence either way"
    )
    return Check(name, False, said, share)


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
