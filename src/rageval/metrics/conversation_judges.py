"""What the metrics that judge a whole conversation share (agent goal accuracy, topic
adherence, knowledge retention, conversation completeness): the conversation itself, refused
before any request when one of its assistant turns says nothing, and its user messages with
the turns that answer them (:func:`exchanges`), and a request about the whole transcript
(:func:`transcript_request`)."""

from __future__ import annotations

from dataclasses import dataclass

from rageval.metrics._prompting import messages, tagged
from rageval.metrics.base import Metric
from rageval.metrics.per_turn import turn_problems
from rageval.samples import Conversation, Sample, Turn

#: how a request introduces a conversation's transcript (:func:`rageval.samples.transcript`:
#: every turn, the assistant's tool calls and what they returned)
TRANSCRIPT_SHOWN = (
    "Below is a conversation between a user and an AI assistant, with the tools the assistant "
    "called and what they returned."
)


def transcript_request(task: str, conversation: str, reply: str) -> list[dict[str, str]]:
    """A request about a whole conversation: the transcript introduced (:data:`TRANSCRIPT_SHOWN`)
    and the `task`, then the transcript (`conversation`) in its tags; `reply` says how to
    reply."""
    return messages(f"{TRANSCRIPT_SHOWN} {task}\n\n{tagged('conversation', conversation)}", reply)


@dataclass(frozen=True)
class Exchange:
    """A user message (turn `index`, its text `asked`) and the turns after it up to the next
    user message (`replies`: the assistant's answers, its tool calls and what they returned)."""

    index: int
    asked: str
    replies: tuple[Turn, ...]

    @property
    def answered_by_assistant(self) -> bool:
        """Whether an assistant turn replies to the message (the conversation may end on it)."""
        return any(t.role == "assistant" for t in self.replies)


def exchanges(conversation: Conversation) -> list[Exchange]:
    """The conversation's user messages that say something, each with the turns answering it."""
    starts = [
        i
        for i, t in enumerate(conversation.turns)
        if t.role == "user" and (t.content or "").strip()
    ]
    ends = [
        next(
            (
                j
                for j in range(i + 1, len(conversation.turns))
                if conversation.turns[j].role == "user"
            ),
            len(conversation.turns),
        )
        for i in starts
    ]
    return [
        Exchange(i, conversation.turns[i].content or "", tuple(conversation.turns[i + 1 : end]))
        for i, end in zip(starts, ends, strict=True)
    ]


class ConversationJudgeMetric(Metric):
    """A judge metric that reads a whole conversation and scores it in [0, 1]."""

    needs_llm = True
    value_range = (0.0, 1.0)

    def input_problems(self, sample: Sample) -> list[tuple[str, str]]:
        return super().input_problems(sample) or turn_problems(sample)

    def conversation(self, sample: Sample) -> Conversation:
        if not isinstance(sample, Conversation):
            raise TypeError(f"{self.name} scores a conversation")
        return sample
