"""knowledge_retention: whether the assistant keeps to what the user told it earlier in the
conversation (judge; DeepEval's KnowledgeRetentionMetric, with the turns that have nothing to
retain left out).

1. The facts: for each user message, the judge first decides whether it tells anything about
   the user (who they are, their situation, plans, wishes or constraints), then lists what it
   tells, reading the conversation before it for context; one request per user message, made
   once per conversation. A message it decides tells nothing about the user states no fact,
   whatever the list holds: a small judge asked for a message's facts answered a plain
   question with facts of its own about what the question mentions ("What is the main
   industry of Brukrukpor?" gave "Brukrukpor is a town in Norway"), and the deciding step
   first removes that (benchmarks/RESULTS.md, "knowledge_retention's facts").
2. The verdicts: each assistant turn with text that comes after at least one stated fact is
   judged against every fact stated before it -- retained, or lost: the turn contradicts the
   fact, asks for it again, or ignores it where it applies. The turn keeps the knowledge when
   it loses none.

score = turns that keep the knowledge / turns judged. DeepEval counts every assistant turn;
here a turn before the user has stated any fact is not judged (there is nothing it could
forget, and counting it as a success would reward short conversations), and a conversation in
which no turn is judged is not measured. Evidence: the facts with the turn that stated them,
and per judged turn its value (1 or 0) and each fact's verdict and reason.

Where the judge scores by probabilities (docs/judge-probabilities.md), a judged turn's value is
the probability that it keeps every fact, the product of its facts' P(retained) (the verdicts
taken as independent), and the score is their mean: the expected share of judged turns that
keep the knowledge (the same number as before for verdicts of 0 and 1). The fact extraction's
``about_user`` decision is read as written: like the statement extraction, it decides which
facts there are to judge, and the cell's ``scoring`` note is the retention verdicts'.
Judge requests: 1 per user message + 1 per judged assistant turn.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import replace

from pydantic import Field, StrictBool

from rageval.metrics.authoring import (
    PlannedRequest,
    ReplyModel,
    Verdict,
    VerdictQuestion,
    judged_items,
    messages,
    predicted_statements,
    reply_budget,
    share_true,
    tagged,
    text_tokens,
    verdict_prompt,
)
from rageval.metrics.base import MetricResult, ScoringContext, forward_to_metric, register
from rageval.metrics.conversation_judges import ConversationJudgeMetric, Exchange, exchanges
from rageval.metrics.evidence import RetentionEvidence, RetentionTurn, StatedFact, VerdictTable
from rageval.samples import Conversation, Sample, transcript

RETAINED = (
    "false if the reply contradicts the fact, asks for it again, or ignores it where it "
    "applies; true otherwise (a reply the fact does not bear on keeps it)"
)


class UserFacts(ReplyModel):
    # decided before the list is written (the order of the schema's keys is the order of
    # generation): a small judge decides this far better than it leaves a list empty
    about_user: StrictBool = Field(
        description="true only if the message says something about the user"
    )
    facts: list[str] = Field(description="what the message says about the user, one sentence each")

    def stated(self) -> list[str]:
        """The facts the message states: none when it tells nothing about the user."""
        return [f for f in self.facts if f.strip()] if self.about_user else []


def facts_prompt(before: str, message: str) -> list[dict[str, str]]:
    """The request for the facts a user's `message` states (`before`: the conversation so far)."""
    return messages(
        "Below is a message a user sent to an AI assistant, after the conversation shown. "
        "Does the message say anything about the user: who they are, their situation, plans, "
        'wishes or constraints ("I am...", "my...", "we...")? A message that only asks '
        "about something, with nothing about the user, says nothing about the user "
        "(about_user false, no facts). If it does (about_user true), list what it says about "
        "the user, one short sentence each, in the user's own terms; add nothing of your own."
        f"\n\n{tagged('conversation', before)}\n{tagged('user_message', message)}",
        'Reply as {"about_user": true or false, "facts": ["The user ...", "..."]}.',
    )


def retention_question(asked: str, reply: str) -> VerdictQuestion:
    """Does the assistant's `reply` (to the user's message `asked`) keep each fact?"""
    task = (
        "Earlier in a conversation the user told an AI assistant the numbered facts below. "
        "Then the user sent the message shown and the assistant replied. For each fact, "
        "decide whether the reply keeps it (retained true) or loses it: contradicts it, asks "
        "for it again, or ignores it where it applies (false)."
    )
    prompt = verdict_prompt(task, "facts", user_message=asked, assistant_reply=reply)
    return VerdictQuestion(prompt, prefix="f", verdict="retained", meaning=RETAINED)


def knowledge_retention_score(kept: list[float]) -> float | None:
    """The share of judged assistant turns that lose no fact (each turn 1 or 0, or its
    probability of losing none); None when no turn was judged."""
    return share_true(kept)


def kept_every_fact(verdicts: Sequence[Verdict]) -> float:
    """A turn's value: 1 if it keeps every fact, else 0; where the verdicts are probabilities,
    the probability that it keeps every one (their product: the verdicts taken as
    independent)."""
    return math.prod(v.weight for v in verdicts)


def _judged_turns(
    conversation: Conversation, asked: list[Exchange], facts: list[list[str]]
) -> list[tuple[int, str, list[str]]]:
    """(turn, the user message it replies to, the facts stated before it) for each assistant
    turn with text after at least one stated fact."""
    out = []
    for exchange in asked:
        known = [
            f for e, fs in zip(asked, facts, strict=True) if e.index <= exchange.index for f in fs
        ]
        if not known:
            continue
        for offset, turn in enumerate(exchange.replies, start=exchange.index + 1):
            if turn.role == "assistant" and (turn.content or "").strip():
                out.append((offset, exchange.asked, known))
    return out


@register
class KnowledgeRetention(ConversationJudgeMetric):
    """The share of assistant turns that keep every fact the user stated before them."""

    name = "knowledge_retention"
    required_fields = ("turns",)
    summary = (
        "share of the assistant's turns that keep the facts the user stated earlier "
        "(no contradiction, no asking again), judged"
    )
    # opt-in: a conversation in which the user states no fact has nothing to measure
    in_default_run = False

    @staticmethod
    def fact_requests(conversation: Conversation) -> list[tuple[Exchange, list[dict[str, str]]]]:
        """Each user message with the request for its facts."""
        return [
            (e, facts_prompt(transcript(conversation.turns[: e.index]), e.asked))
            for e in exchanges(conversation)
        ]

    def planned_requests(self, sample: Sample) -> list[PlannedRequest]:
        conversation = self.conversation(sample)
        asks = self.fact_requests(conversation)
        predicted = [predicted_statements(e.asked) for e, _ in asks]
        plan = [
            PlannedRequest(
                m,
                UserFacts,
                reply_tokens=14 + text_tokens(e.asked),
                max_tokens=reply_budget(text=e.asked),
            )
            for e, m in asks
        ]
        for turn, asked, known in _judged_turns(conversation, [e for e, _ in asks], predicted):
            reply = conversation.turns[turn].content or ""
            plan += retention_question(asked, reply).plan(known, predicted=True)
        return plan

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        conversation = self.conversation(sample)
        asks = self.fact_requests(conversation)
        # the extraction's about_user decisions are not the cell's scored verdicts: asked
        # beside the cell's scoring notes
        extraction = replace(ctx, scorings=[])
        replies = await asyncio.gather(
            *(extraction.ask(m, UserFacts, max_tokens=reply_budget(text=e.asked)) for e, m in asks)
        )
        facts = [r.stated() for r in replies]
        judged = _judged_turns(conversation, [e for e, _ in asks], facts)
        if not judged:
            return MetricResult.not_measured(
                "the user stated no fact before an assistant reply: nothing to retain"
            )
        rulings = await asyncio.gather(
            *(
                retention_question(asked, conversation.turns[turn].content or "").ask(ctx, known)
                for turn, asked, known in judged
            )
        )
        turns: list[RetentionTurn] = []
        for (turn, _, _), (verdicts, _) in zip(judged, rulings, strict=True):
            lost = sum(not v.verdict for v in verdicts)
            table = VerdictTable(
                items="facts stated before", means="kept", verdicts=judged_items(verdicts)
            )
            reason = f"loses {lost} fact(s)" if lost else "keeps every fact"
            turns.append(
                RetentionTurn(
                    turn=turn, value=kept_every_fact(verdicts), reason=reason, facts=table
                )
            )
        value = knowledge_retention_score([t.value for t in turns])
        assert value is not None  # judged is not empty
        kept = sum(all(v.verdict for v in verdicts) for verdicts, _ in rulings)
        stated = [
            StatedFact(turn=e.index, fact=f)
            for (e, _), fs in zip(asks, facts, strict=True)
            for f in fs
        ]
        return MetricResult.ok(
            value, reason=f"{kept} of {len(turns)} judged assistant turn(s) keep every earlier fact"
        ).with_evidence(RetentionEvidence(facts=stated, turns=turns))


#: names this module lacks are read from its default metric: ``knowledge_retention.score(...)``
__getattr__ = forward_to_metric(__name__)
