"""turn_context_relevance: context relevance of each assistant turn of a conversation
(DeepEval's turn_contextual_relevancy asks the same of each turn's retrieval context).

Each assistant turn with retrieved contexts is scored as the single-turn context_relevance of
its sample (:meth:`rageval.samples.Conversation.turn_sample`): two templates rate 0/1/2 how
relevant the turn's contexts are to the conversation so far, score_t = the mean of the valid
ratings / 2 (0 without a non-blank context). The conversation's value is the mean over its
scored turns, (1/T) Σ_t score_t (:mod:`rageval.metrics.per_turn`), each turn's ratings kept in
the evidence; turns without contexts are listed as not scored. A turn that retrieved but has
no text of its own (it went on to call a tool) is scored: its contexts still answer, or not,
the conversation so far.
Judge requests per scored turn: 2 (more only for re-asks).
"""

from __future__ import annotations

from rageval.metrics.base import forward_to_metric, register
from rageval.metrics.context_relevance import ContextRelevance
from rageval.metrics.per_turn import PerTurnMetric


@register
class TurnContextRelevance(PerTurnMetric, ContextRelevance):
    """Context relevance of each assistant turn's retrieved contexts to the conversation so
    far, averaged over the conversation's scored turns."""

    name = "turn_context_relevance"
    single = ContextRelevance
    summary = (
        "mean over a conversation's assistant turns of the relevance of each turn's retrieved "
        "contexts to the conversation so far (two templates rating 0/1/2)"
    )


#: names this module lacks are read from its default metric: ``turn_context_relevance.score(...)``
__getattr__ = forward_to_metric(__name__)
