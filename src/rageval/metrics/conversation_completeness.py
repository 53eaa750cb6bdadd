"""conversation_completeness: the share of the user's intentions the conversation satisfied
(judge; DeepEval's ConversationCompletenessMetric).

1. The intentions: the judge reads the whole conversation (every turn, the assistant's tool
   calls and what they returned) and lists the distinct things the user wanted to get, learn
   or have done, one sentence each.
2. The verdicts: for each intention, whether the conversation satisfied it (one request for
   all of them, the conversation shown again).

score = satisfied intentions / intentions. A conversation in which the judge finds no
intention is not measured (0/0 is not a score). Evidence: the verdicts on the intentions
(:class:`~rageval.metrics.evidence.VerdictEvidence`), each with its reason. Unlike
agent_goal_accuracy_without_reference, which rules on one inferred goal and the end state,
every request the user made counts, so a dropped side request lowers the value.
Judge requests: 2.
"""

from __future__ import annotations

from pydantic import Field

from rageval.metrics.authoring import (
    PlannedRequest,
    ReplyModel,
    VerdictQuestion,
    judged_items,
    reply_budget,
    share_true,
    text_tokens,
    verdict_prompt,
)
from rageval.metrics.base import MetricResult, ScoringContext, forward_to_metric, register
from rageval.metrics.conversation_judges import (
    ConversationJudgeMetric,
    exchanges,
    transcript_request,
)
from rageval.metrics.evidence import VerdictEvidence
from rageval.samples import Sample, transcript

SATISFIED = "true only if the conversation gives the user what this intention asked for"


class UserIntentions(ReplyModel):
    intentions: list[str] = Field(description="what the user wanted, one sentence each")


def intentions_prompt(conversation: str) -> list[dict[str, str]]:
    """The request for the user's intentions in `conversation`."""
    return transcript_request(
        "List the distinct intentions the user expressed: each thing the user wanted to get, "
        "learn or have done, one short sentence each, in the order the user raised them. A "
        "conversation in which the user asks for nothing gives an empty list.",
        conversation,
        'Reply as {"intentions": ["...", "..."]}.',
    )


def satisfied_question(conversation: str) -> VerdictQuestion:
    """Did the conversation satisfy each intention?"""
    task = (
        "Below is a conversation between a user and an AI assistant and, numbered, the "
        "intentions the user expressed in it. For each intention, decide whether the "
        "conversation satisfied it (satisfied true: the assistant gave what was asked for, or "
        "did it) or not (false: refused, left undone, only promised, or done only in part)."
    )
    prompt = verdict_prompt(task, "intentions", conversation=conversation)
    return VerdictQuestion(prompt, prefix="i", verdict="satisfied", meaning=SATISFIED)


#: the score from the verdicts: satisfied / intentions; None when there is no intention
conversation_completeness_score = share_true


@register
class ConversationCompleteness(ConversationJudgeMetric):
    """The share of the user's intentions that the conversation satisfied."""

    name = "conversation_completeness"
    required_fields = ("turns",)
    summary = "share of the user's intentions the conversation satisfied, judged"

    def planned_requests(self, sample: Sample) -> list[PlannedRequest]:
        conversation = self.conversation(sample)
        text = transcript(conversation.turns)
        # one intention expected per user message
        predicted = [e.asked for e in exchanges(conversation)]
        extract = PlannedRequest(
            intentions_prompt(text),
            UserIntentions,
            reply_tokens=8 + sum(text_tokens(a) for a in predicted),
            max_tokens=reply_budget(text=" ".join(predicted)),
        )
        if not predicted:
            return [extract]
        return [extract, *satisfied_question(text).plan(predicted, predicted=True)]

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        conversation = self.conversation(sample)
        text = transcript(conversation.turns)
        said = " ".join(e.asked for e in exchanges(conversation))
        found = await ctx.ask(
            intentions_prompt(text), UserIntentions, max_tokens=reply_budget(text=said)
        )
        intentions = [i for i in found.intentions if i.strip()]
        if not intentions:
            return MetricResult.not_measured("the judge found no intention of the user to satisfy")
        verdicts, _ = await satisfied_question(text).ask(ctx, intentions)
        value = conversation_completeness_score([v.weight for v in verdicts])
        assert value is not None  # intentions is not empty
        satisfied = sum(v.verdict for v in verdicts)
        return MetricResult.ok(
            value, reason=f"{satisfied} of {len(verdicts)} user intention(s) satisfied"
        ).with_evidence(
            VerdictEvidence(
                items="user intentions", means="satisfied", verdicts=judged_items(verdicts)
            )
        )


#: names this module lacks are read from its default metric:
#: ``conversation_completeness.score(...)``
__getattr__ = forward_to_metric(__name__)
