"""Atomic statements of a sample's text, extracted once per sample and shared by the metrics.

faithfulness and answer_correctness both read the response's statements. The extraction
request depends only on the text and the question — never on which other metrics run — so a
metric's value is the same alone or in any combination; metrics that need the same list wait
on the same request.

A conversation's assistant turns have statements of their own, each read as its single-turn
sample (:meth:`rageval.samples.Conversation.turn_sample`): kept under the turn's key
(``turns[3].response``), extracted once per turn whichever per-turn metrics read them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from rageval.errors import NoJudgeError
from rageval.metrics._prompting import (
    STATEMENT_RULES as RULES,
    PlannedRequest,
    ReplyModel,
    in_language,
    messages,
    predicted_statements,
    reply_budget,
    tagged,
    text_tokens,
)
from rageval.samples import Conversation, Sample, sample_language

if TYPE_CHECKING:
    from rageval.judge import Judge

Which = Literal["response", "reference"]
#: usage of the shared extraction is booked under this tag, not under whichever metric came first
SHARED_TAG = "shared:statements"


class Statements(ReplyModel):
    statements: list[str] = Field(description="atomic claims of the text, in order")


def prompt(question: str, text: str) -> list[dict[str, str]]:
    return messages(
        f"{RULES}\n\n{tagged('question', question)}\n{tagged('text', text)}",
        'Reply as {"statements": ["...", "..."]}.',
    )


def key(which: Which, turn: int | None = None) -> str:
    """What a statement list is kept and booked under: `which` for a sample's own text,
    ``turns[{turn}].{which}`` for the text of a conversation's turn."""
    return which if turn is None else f"turns[{turn}].{which}"


def read_by(needs: Collection[str], extracted: Collection[str]) -> list[str]:
    """The statement lists among `extracted` (keys) that a metric with `needs` reads: its
    sample's own, or (a per-turn metric) its turns'."""
    return sorted(k for k in extracted if k.rsplit(".", 1)[-1] in needs)


def planned(sample: Sample, which: Which) -> list[PlannedRequest]:
    """The extraction request for `which` text of `sample` (none for a blank text), shared by
    the metrics of the sample that read it; its reply restates the text's sentences."""
    text = sample.text(which)
    if not text.strip():
        return []
    expected = 6 + text_tokens(text) + 3 * len(predicted_statements(text))
    return [
        PlannedRequest(
            prompt(sample.text("user_input"), text),
            Statements,
            reply_tokens=expected,
            max_tokens=reply_budget(text=text),
            shared=f"statements:{which}",
        )
    ]


def clean(items: list[str]) -> list[str]:
    """The non-blank items, stripped."""
    return [s.strip() for s in items if s.strip()]


def _retrieve_exception(task: asyncio.Task[list[str]]) -> None:
    if not task.cancelled():
        task.exception()


class SharedStatements:
    """Per-sample memo of statement lists; concurrent metrics wait on the same request.
    :meth:`for_turn` is the view of one turn of a conversation, kept in the same memo."""

    def __init__(self, sample: Sample, judge: Judge | None) -> None:
        self._sample = sample
        self._judge = judge
        #: the language the sample is judged in (its own, or detected; None: not said)
        self.language = sample_language(sample)
        self._turn: int | None = None
        self._task: dict[str, asyncio.Task[list[str]]] = {}

    def for_turn(self, turn: int) -> SharedStatements:
        """The statements of assistant turn `turn` of this sample (a conversation), read from
        its turn_sample and kept here under the turn's keys."""
        if not isinstance(self._sample, Conversation):
            raise TypeError("only a conversation has turns")
        view = SharedStatements(self._sample.turn_sample(turn), self._judge)
        view._turn = turn
        view._task = self._task
        view.language = self.language  # the conversation's, not one turn's guess
        return view

    @property
    def asked(self) -> frozenset[str]:
        """The texts whose statements were asked for (one judge call each), by :func:`key`."""
        return frozenset(self._task)

    async def get(self, which: Which) -> list[str]:
        if not self._sample.text(which).strip():
            return []
        task = self._task.get(key(which, self._turn))
        if task is None:
            task = asyncio.ensure_future(self._extract(which))
            # Metrics waiting on the task may be cancelled (e.g. a fatal judge error stops the
            # run) while it still fails later: mark its exception as seen so asyncio does not
            # log it as never retrieved. Waiting metrics still receive it through `await`.
            task.add_done_callback(_retrieve_exception)
            self._task[key(which, self._turn)] = task
        return await asyncio.shield(task)

    async def _extract(self, which: Which) -> list[str]:
        if self._judge is None:
            raise NoJudgeError("statement extraction needs an LLM judge")
        s = self._sample
        text = s.text(which)
        reply = await self._judge.ask(
            in_language(prompt(s.text("user_input"), text), self.language),
            Statements,
            tags={"metric": SHARED_TAG, "sample": s.id or "-"},
            max_tokens=reply_budget(text=text),
        )
        return clean(reply.value.statements)
