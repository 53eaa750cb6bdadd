"""turn_answer_relevancy: answer relevancy of each assistant turn of a conversation (DeepEval's
turn_relevancy asks the same of each turn against its sliding window of the conversation).

Each assistant turn with a response is scored as the single-turn answer_relevancy of its sample
(:meth:`rageval.samples.Conversation.turn_sample`): the judge writes, N = `strictness` times,
the question the turn's response answers, and score_t = (1/N) Σ_i cos(E(q_i), E(user_input_t))
(0 when every generation finds the response noncommittal), where user_input_t is the
conversation so far -- the last user message alone is often elliptical ("and when?"), the
history is what the response answers. The conversation's value is the mean over its scored
turns, (1/T) Σ_t score_t (:mod:`rageval.metrics.per_turn`), each turn's generated questions
and cosines kept in the evidence; turns that only call tools are listed as not scored.
Range -1..1 (cosines, not clipped), as answer_relevancy's.
Judge requests per scored turn: 1 (N where the endpoint ignores `n`); embedding calls: 1.
"""

from __future__ import annotations

from rageval.metrics.answer_relevancy import AnswerRelevancy
from rageval.metrics.base import forward_to_metric, register
from rageval.metrics.per_turn import PerTurnMetric


@register
class TurnAnswerRelevancy(PerTurnMetric, AnswerRelevancy):
    """Answer relevancy of each assistant turn to the conversation so far, averaged over the
    conversation's scored turns."""

    name = "turn_answer_relevancy"
    single = AnswerRelevancy
    summary = (
        "mean over a conversation's assistant turns of the cosine of questions generated from "
        "each turn's response to the conversation so far"
    )


#: names this module lacks are read from its default metric: ``turn_answer_relevancy.score(...)``
__getattr__ = forward_to_metric(__name__)
