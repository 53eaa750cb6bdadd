"""What the agent goal metrics share (agent_goal_accuracy, with a reference goal, and
agent_goal_accuracy_without_reference; one module each): ragas' AgentGoalAccuracyWithReference
and AgentGoalAccuracyWithoutReference as the published definitions (docs/metrics.md).

Two judge requests per conversation:

1. the outcome: the judge reads the whole conversation (:func:`rageval.samples.transcript`:
   every turn, the assistant's tool calls and what the tools returned) and states the goal the
   user wanted reached and the end state the conversation arrived at (:class:`GoalOutcome`);
2. the verdict: the judge compares the desired outcome -- the conversation's `reference_goal`,
   or without one the goal it inferred in 1 -- with the end state, and rules whether the end
   state achieves it (:class:`GoalVerdict`). Its one-sentence reason comes *after* the
   verdict: a small judge that reasoned first argued itself out of plain matches ("the test
   was fixed" against "all 42 tests pass": "not achieved"); on twenty hand-labelled pairs
   the verdict first read 18 right where the reason first read 14 (benchmarks/RESULTS.md,
   "agent_goal_accuracy's outcome step and verdict").

score = 1 if achieved else 0 (:func:`agent_goal_score`); averaged over conversations, the share
of conversations whose goal was reached. The inferred goal, the end state, the desired outcome
and the judge's reason are the evidence.
"""

from __future__ import annotations

from pydantic import Field, StrictBool

from rageval.metrics._prompting import (
    EXPECTED_REASON_TOKENS,
    EXPECTED_VERDICT_TOKENS,
    PlannedRequest,
    ReplyModel,
    messages,
    tagged,
    text_tokens,
)
from rageval.metrics.base import MetricResult, ScoringContext
from rageval.metrics.conversation_judges import ConversationJudgeMetric, transcript_request
from rageval.metrics.evidence import GoalEvidence
from rageval.samples import Conversation, Sample, transcript


class GoalOutcome(ReplyModel):
    user_goal: str = Field(description="the goal the user wanted the conversation to reach")
    end_state: str = Field(description="what the conversation actually achieved for the user")


class GoalVerdict(ReplyModel):
    achieved: StrictBool = Field(description="true only if the end state achieves the outcome")
    reason: str = Field(description="one short sentence")


def outcome_prompt(conversation: str) -> list[dict[str, str]]:
    """The request for the user's goal and the conversation's end state."""
    return transcript_request(
        "State the goal the user wanted to reach (user_goal), and the end state: what the "
        "conversation actually achieved for the user by its last turn, including what failed "
        "or was left undone (end_state).",
        conversation,
        'Reply as {"user_goal": "...", "end_state": "..."}.',
    )


def verdict_prompt(desired: str, end_state: str) -> list[dict[str, str]]:
    """The request for whether `end_state` achieves the `desired` outcome."""
    return messages(
        "Below are the outcome a user wanted from a conversation with an AI assistant, and "
        "the end state the conversation reached. achieved: does the end state show the desired "
        "outcome reached? true if it does, whatever its wording and whatever else it says; "
        "false if the outcome was not reached, was reached only in part, or something else "
        "was done instead.\n\n"
        f"{tagged('desired_outcome', desired)}\n{tagged('end_state', end_state)}",
        'Reply as {"achieved": true or false, "reason": "one short sentence"}.',
    )


def agent_goal_score(achieved: bool) -> float:
    """1.0 when the end state achieves the desired outcome, else 0.0."""
    return 1.0 if achieved else 0.0


def _said(conversation: Conversation, role: str, *, last: bool) -> str:
    """The first (or last) text a `role` turn says: what the plan predicts the judge to read
    as the goal (the user's first message) and the end state (the assistant's last one)."""
    said = [t.content for t in conversation.turns if t.role == role and t.content]
    return (said[-1] if last else said[0]) if said else ""


class AgentGoalMetric(ConversationJudgeMetric):
    """Whether a conversation reached its desired outcome (:meth:`desired_outcome`): a judge
    infers its end state, then rules on the two."""

    def desired_outcome(self, conversation: Conversation, inferred_goal: str) -> str:
        """What the end state is compared with: the inferred goal (without a reference)."""
        return inferred_goal

    def planned_requests(self, sample: Sample) -> list[PlannedRequest]:
        conversation = self.conversation(sample)
        goal, end = (
            _said(conversation, "user", last=False),
            _said(conversation, "assistant", last=True),
        )
        outcome = PlannedRequest(
            outcome_prompt(transcript(conversation.turns)),
            GoalOutcome,
            reply_tokens=12 + text_tokens(goal) + text_tokens(end),
        )
        verdict = PlannedRequest(
            verdict_prompt(self.desired_outcome(conversation, goal), end),
            GoalVerdict,
            reply_tokens=EXPECTED_REASON_TOKENS + EXPECTED_VERDICT_TOKENS,
            predicted=True,
        )
        return [outcome, verdict]

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        conversation = self.conversation(sample)
        outcome = await ctx.ask(outcome_prompt(transcript(conversation.turns)), GoalOutcome)
        desired = self.desired_outcome(conversation, outcome.user_goal)
        verdict = await ctx.ask(verdict_prompt(desired, outcome.end_state), GoalVerdict)
        value = agent_goal_score(verdict.achieved)
        return MetricResult.ok(
            value,
            reason=("goal achieved: " if verdict.achieved else "goal not achieved: ")
            + verdict.reason,
        ).with_evidence(
            GoalEvidence(
                user_goal=outcome.user_goal,
                end_state=outcome.end_state,
                desired_outcome=desired,
                achieved=verdict.achieved,
            )
        )
