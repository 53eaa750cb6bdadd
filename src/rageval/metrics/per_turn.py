"""What the per-turn metrics share (turn_faithfulness, one module each): a single-turn metric
applied to each assistant turn of a conversation, the conversation's value the mean over the
turns it scored, each turn's value and evidence kept (docs/metrics.md).

A turn is read as its single-turn sample (:meth:`rageval.samples.Conversation.turn_sample`):
its text as the response, its own retrieved contexts and reference, and the conversation so
far as the user input. It is scored when that sample has every field the single-turn metric
requires (faithfulness: a response and retrieved contexts); every other assistant turn is
listed as not scored, with why, and so is a turn whose own value is not defined (a response
that makes no statement). The single-turn metric's blank rules, prompts, response models and
scoring are used as they are, so a turn's value is what the single-turn metric gives its
sample; the statements of a turn are extracted once per turn, whichever per-turn metrics read
them (:meth:`~rageval.metrics._statements.SharedStatements.for_turn`).

The conversation's value is the mean of its scored turns' values (:func:`turn_mean`), each turn
weighing the same whatever its length: a conversation is judged turn by turn, as its user read
it, and a long turn does not drown the short ones (pooling the statements of every turn would
make a 20-statement turn count 20 times a 1-statement one).

A judge call that fails for good in any turn leaves the whole conversation not measured (the
mean of the turns that happened to succeed would be a different quantity).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import ClassVar

from rageval.metrics._prompting import PlannedRequest
from rageval.metrics.base import BlankRule, Metric, MetricResult, ScoringContext
from rageval.metrics.evidence import PerTurnEvidence, TurnNotScored, TurnScore
from rageval.samples import Conversation, Sample, missing_fields


def turn_mean(values: Sequence[float]) -> float | None:
    """The conversation's value: the mean of its scored turns' values; None when no turn was
    scored (no value is not a 0)."""
    return sum(values) / len(values) if values else None


def turn_problems(sample: Sample) -> list[tuple[str, str]]:
    """(field, message) for each assistant turn that cannot be read at all: one with neither
    text nor tool calls says nothing (a turn that only calls tools is fine: not scored). The
    field names the turn, ``turns[3].content``."""
    if not isinstance(sample, Conversation):
        return []
    return [
        (
            f"turns[{i}].content",
            "an assistant turn with neither content nor tool_calls: give its response text",
        )
        for i, turn in enumerate(sample.turns)
        if turn.role == "assistant" and turn.content is None and not turn.tool_calls
    ]


def _why_not(missing: Sequence[str]) -> str:
    """Why a turn lacking the `missing` fields of its single-turn sample is not scored."""
    why = {
        "response": "no response text (the turn only calls tools)",
        "retrieved_contexts": "no retrieved_contexts (the turn retrieved nothing)",
        "reference": "no reference for this turn",
    }
    return "; ".join(why.get(f, f"no {f}") for f in missing)


class PerTurnMetric(Metric):
    """A single-turn metric (`single`) applied to each assistant turn of a conversation. A
    subclass derives from this class first and from `single` second, sets `name` and
    `summary`, and keeps `single`'s parameters, prompts and scoring::

        class TurnFaithfulness(PerTurnMetric, Faithfulness):
            single = Faithfulness
    """

    single: ClassVar[type[Metric]]
    required_fields: ClassVar[tuple[str, ...]] = ("turns",)
    # the single-turn metric's blank rules are applied to each turn, not to the conversation
    blank_rules: ClassVar[tuple[BlankRule, ...]] = ()

    def input_problems(self, sample: Sample) -> list[tuple[str, str]]:
        return super().input_problems(sample) or turn_problems(sample)

    def turns(self, sample: Sample) -> tuple[dict[int, Sample], dict[int, str]]:
        """The assistant turns this metric scores, as their single-turn samples, and the
        others with why they are not scored."""
        if not isinstance(sample, Conversation):
            raise TypeError(f"{self.name} scores a conversation")
        scored: dict[int, Sample] = {}
        skipped: dict[int, str] = {}
        for i, turn in enumerate(sample.turns):
            if turn.role != "assistant":
                continue
            view = sample.turn_sample(i)
            missing = missing_fields(view, self.single.required_fields)
            if missing:
                skipped[i] = _why_not(missing)
            else:
                scored[i] = view
        return scored, skipped

    def _blank(self, view: Sample) -> MetricResult | None:
        rule = next((r for r in self.single.blank_rules if r.applies_to(view)), None)
        return None if rule is None else rule.result()

    def planned_requests(self, sample: Sample) -> list[PlannedRequest]:
        scored, _ = self.turns(sample)
        plan: list[PlannedRequest] = []
        for i, view in scored.items():
            if self._blank(view) is None:
                plan += [_of_turn(r, i) for r in self.single.planned_requests(self, view) or ()]
        return plan

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        scored, skipped = self.turns(sample)
        results = await asyncio.gather(
            *(self._measure_turn(i, view, ctx) for i, view in scored.items())
        )
        turns: list[TurnScore] = []
        values: list[float] = []
        for i, result in zip(scored, results, strict=True):
            if result.value is None:
                skipped[i] = result.cause or "not measured"
                continue
            values.append(result.value)
            turns.append(
                TurnScore(
                    turn=i, value=result.value, reason=result.reason, evidence=result.evidence
                )
            )
        not_scored = [TurnNotScored(turn=i, why=why) for i, why in sorted(skipped.items())]
        evidence = PerTurnEvidence(turns=turns, not_scored=not_scored)
        value = turn_mean(values)
        if value is None:
            listed = "; ".join(f"turn {t.turn}: {t.why}" for t in not_scored)
            return MetricResult.not_measured(
                f"no assistant turn could be scored ({listed or 'no assistant turn'})"
            ).with_evidence(evidence)
        each = ", ".join(f"turn {t.turn} {t.value:.3g}" for t in turns)
        reason = f"mean over {len(values)} scored turn(s): {each}"
        if not_scored:
            reason += f"; {len(not_scored)} assistant turn(s) not scored"
        return MetricResult.ok(value, reason=reason).with_evidence(evidence)

    async def _measure_turn(self, turn: int, view: Sample, ctx: ScoringContext) -> MetricResult:
        """Turn `turn` (`view`, its single-turn sample) as the single-turn metric scores it,
        its statements kept under the turn."""
        blank = self._blank(view)
        if blank is not None:
            return blank
        at_turn = dataclasses.replace(ctx, statements=ctx.statements.for_turn(turn))
        return await self.single.measure(self, view, at_turn)


def _of_turn(request: PlannedRequest, turn: int) -> PlannedRequest:
    """A planned request of a turn's single-turn sample: shared work (``statements:response``)
    is the turn's own (``statements:turns[3].response``)."""
    if request.shared is None:
        return request
    kind, _, what = request.shared.partition(":")
    return dataclasses.replace(request, shared=f"{kind}:turns[{turn}].{what}")
