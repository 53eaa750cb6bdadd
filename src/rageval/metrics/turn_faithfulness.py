"""turn_faithfulness: faithfulness of each assistant turn of a conversation to the contexts
retrieved for it (DeepEval's turn_faithfulness; ragas scores faithfulness on single turns).

Each assistant turn with a response and retrieved contexts is scored as the single-turn
faithfulness of its sample (:meth:`rageval.samples.Conversation.turn_sample`): the turn's
statements (extracted once per turn, with the conversation so far as the question), each
ruled supported or not by the turn's own contexts, score_t = supported_t / total_t. The
conversation's value is the mean over its scored turns, (1/T) Σ_t score_t (not the statements
pooled across turns: :mod:`rageval.metrics.per_turn`), each turn's value, verdicts and
statements kept in the evidence (``turns``); assistant turns without contexts, or whose
response makes no statement, are listed under ``not_scored`` with why. What a tool returned is
conversation history, not a context: a claim grounded only in a tool's result is unsupported,
as the turn's retrieval did not give it. People's guidance (`instructions`, `examples`,
`reasons`, `threshold`) is faithfulness', the threshold applied to the conversation's value.
Judge requests per scored turn: 1 for the verdicts + 1 for the turn's statements.
"""

from __future__ import annotations

from rageval.metrics.base import forward_to_metric, register
from rageval.metrics.faithfulness import Faithfulness
from rageval.metrics.per_turn import PerTurnMetric


@register
class TurnFaithfulness(PerTurnMetric, Faithfulness):
    """Faithfulness of each assistant turn to its own retrieved contexts, averaged over the
    conversation's scored turns."""

    name = "turn_faithfulness"
    single = Faithfulness
    summary = (
        "mean over a conversation's assistant turns of the share of each turn's claims "
        "supported by the contexts retrieved for it"
    )


#: names this module lacks are read from its default metric: ``turn_faithfulness.score(...)``
__getattr__ = forward_to_metric(__name__)
