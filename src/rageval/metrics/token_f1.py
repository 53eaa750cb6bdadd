"""token_f1: SQuAD-style token F1 of the response against the reference (no judge, no
embeddings; a lexical baseline, not a semantic judgement: see :mod:`rageval.metrics.lexical`).

overlap = |multiset(response) ∩ multiset(reference)| over SQuAD-normalised tokens (articles
dropped), P = overlap/|response|, R = overlap/|reference|, F1 = 2PR/(P+R) (0 when overlap = 0).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from rageval.metrics.base import forward_to_metric, register
from rageval.metrics.lexical import LexicalMetric


def token_overlap(response: Sequence[str], reference: Sequence[str]) -> int:
    """Size of the multiset intersection of two token lists."""
    return sum((Counter(response) & Counter(reference)).values())


@register
class TokenF1(LexicalMetric):
    """SQuAD-style token F1 of response vs reference: a lexical baseline, not a semantic judgement."""

    name = "token_f1"
    drop_articles = True
    overlap_key = "shared_tokens"
    overlap_text = "shared (as a multiset)"
    summary = "lexical baseline: SQuAD token F1 of response vs reference (no LLM)"

    @staticmethod
    def count_overlap(response: Sequence[str], reference: Sequence[str]) -> int:
        return token_overlap(response, reference)


def token_f1_score(response: str, reference: str) -> float:
    """SQuAD token F1 of two texts."""
    return TokenF1.text_score(response, reference)


#: names this module lacks are read from its default metric: ``token_f1.score(...)``
__getattr__ = forward_to_metric(__name__)
