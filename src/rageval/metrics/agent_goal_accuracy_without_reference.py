"""agent_goal_accuracy_without_reference: whether a conversation achieved the goal its user
had, as the judge infers it (ragas' AgentGoalAccuracyWithoutReference).

The judge reads the whole conversation and states the user's goal and the end state reached;
then it rules whether that end state achieves the inferred goal: score = 1 if it does, else 0
(:mod:`rageval.metrics.agent_goal`). Needs no reference, at the price of trusting the judge's
reading of the goal (kept in the evidence as ``user_goal``).
Judge requests: 2 (the goal and end state, then the verdict).
"""

from __future__ import annotations

from rageval.metrics.agent_goal import AgentGoalMetric
from rageval.metrics.base import forward_to_metric, register


@register
class AgentGoalAccuracyWithoutReference(AgentGoalMetric):
    """Whether the conversation's end state achieves the goal the judge infers (1) or not
    (0)."""

    name = "agent_goal_accuracy_without_reference"
    required_fields = ("turns",)
    summary = "whether the conversation achieved the user's goal as the judge infers it (0 or 1)"


#: names this module lacks are read from its default metric:
#: ``agent_goal_accuracy_without_reference.score(...)``
__getattr__ = forward_to_metric(__name__)
