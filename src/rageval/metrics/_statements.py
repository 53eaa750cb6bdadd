"""Atomic statements of the response and of the reference, extracted once per sample.

faithfulness and answer_correctness read the response's statements; answer_correctness and
context_recall read the reference's. When a run needs both lists they come from one request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from rageval.metrics._prompting import messages, tagged
from rageval.samples import Sample

if TYPE_CHECKING:
    from rageval.judge import Judge

Which = Literal["response", "reference"]
#: usage of the shared extraction is booked under this tag, not under whichever metric came first
SHARED_TAG = "shared:statements"

_RULES = (
    "Split the text into its atomic factual claims. Each claim is one short, self-contained "
    "sentence: replace pronouns and vague references with what they stand for (use the "
    "question for context), keep each fact once, and leave out greetings, hedges and "
    "questions. A text with no factual claim gives an empty list."
)


class Statements(BaseModel):
    statements: list[str] = Field(description="atomic claims of the text, in order")


class StatementPair(BaseModel):
    answer: list[str] = Field(description="atomic claims of <answer>")
    reference: list[str] = Field(description="atomic claims of <reference>")


def single_prompt(question: str, text: str) -> list[dict[str, str]]:
    return messages(
        f"{_RULES}\n\n{tagged('question', question)}\n{tagged('answer', text)}\n\n"
        'Reply as {"statements": ["...", "..."]}.'
    )


def pair_prompt(question: str, answer: str, reference: str) -> list[dict[str, str]]:
    return messages(
        f"{_RULES} Do this separately for <answer> and for <reference>.\n\n"
        f"{tagged('question', question)}\n{tagged('answer', answer)}\n"
        f"{tagged('reference', reference)}\n\n"
        'Reply as {"answer": ["..."], "reference": ["..."]}.'
    )


def _clean(items: list[str]) -> list[str]:
    return [s.strip() for s in items if s.strip()]


def _retrieve_exception(task: asyncio.Task[dict[str, list[str]]]) -> None:
    if not task.cancelled():
        task.exception()


class SharedStatements:
    """Per-sample memo of statement lists; concurrent metrics wait on the same request."""

    def __init__(self, sample: Sample, judge: Judge | None, needs: Collection[str]) -> None:
        self._sample = sample
        self._judge = judge
        self._needs = frozenset(needs)
        self._task: dict[str, asyncio.Task[dict[str, list[str]]]] = {}

    async def get(self, which: Which) -> list[str]:
        if not self._sample.text(which).strip():
            return []
        pair = self._pairable()
        key = "pair" if pair else which
        task = self._task.get(key)
        if task is None:
            task = asyncio.ensure_future(self._extract(pair, which))
            # Metrics waiting on the task may be cancelled (e.g. a fatal judge error stops the
            # run) while it still fails later: mark its exception as seen so asyncio does not
            # log it as never retrieved. Waiting metrics still receive it through `await`.
            task.add_done_callback(_retrieve_exception)
            self._task[key] = task
        return (await asyncio.shield(task))[which]

    def _pairable(self) -> bool:
        s = self._sample
        return {"response", "reference"} <= self._needs and bool(
            s.text("response").strip() and s.text("reference").strip()
        )

    async def _extract(self, pair: bool, which: Which) -> dict[str, list[str]]:
        if self._judge is None:
            from rageval.metrics.base import NoJudgeError

            raise NoJudgeError("statement extraction needs an LLM judge")
        s = self._sample
        tags = {"metric": SHARED_TAG, "sample": s.id or "-"}
        if pair:
            reply = await self._judge.ask(
                pair_prompt(s.text("user_input"), s.text("response"), s.text("reference")),
                StatementPair,
                tags=tags,
            )
            return {
                "response": _clean(reply.value.answer),
                "reference": _clean(reply.value.reference),
            }
        single = await self._judge.ask(
            single_prompt(s.text("user_input"), s.text(which)), Statements, tags=tags
        )
        return {which: _clean(single.value.statements)}
