"""agent_goal_accuracy: whether a conversation achieved its reference goal (judge; ragas'
AgentGoalAccuracyWithReference).

The judge reads the whole conversation and states the end state it reached; then it rules
whether that end state achieves the conversation's `reference_goal`: score = 1 if it does,
else 0 (:mod:`rageval.metrics.agent_goal`). A blank reference goal gives nothing to compare
with: not measured. Averaged over conversations: the share that reached their goal.
Judge requests: 2 (the end state, then the verdict).
"""

from __future__ import annotations

from typing import ClassVar

from rageval.metrics.agent_goal import AgentGoalMetric
from rageval.metrics.base import (
    BlankRule,
    forward_to_metric,
    not_measured_if_blank,
    register,
)
from rageval.samples import Conversation


@register
class AgentGoalAccuracy(AgentGoalMetric):
    """Whether the conversation's end state achieves its reference goal (1) or not (0)."""

    name = "agent_goal_accuracy"
    required_fields = ("turns", "reference_goal")
    summary = "whether the conversation achieved its reference goal, judged (0 or 1)"
    blank_rules: ClassVar[tuple[BlankRule, ...]] = (
        not_measured_if_blank("reference_goal", "the reference goal is empty: nothing to reach"),
    )

    def desired_outcome(self, conversation: Conversation, inferred_goal: str) -> str:
        """The reference goal (the inferred one is evidence only)."""
        return conversation.reference_goal or ""


#: names this module lacks are read from its default metric: ``agent_goal_accuracy.score(...)``
__getattr__ = forward_to_metric(__name__)
