"""rouge_l: ROUGE-L F-measure of the response against the reference (no judge, no
embeddings; a lexical baseline, not a semantic judgement: see :mod:`rageval.metrics.lexical`).

L = length of the longest common subsequence of the two SQuAD-normalised token sequences
(articles kept), P = L/|response|, R = L/|reference|, F = 2PR/(P+R) (β = 1; 0 when L = 0).
Unlike the `rouge-score` package there is no stemming, and non-ASCII words are kept.
"""

from __future__ import annotations

from collections.abc import Sequence

from rageval.metrics.base import forward_to_metric, register
from rageval.metrics.lexical import LexicalMetric


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence, bit-parallel (Allison & Dix 1986; Crochemore
    et al. 2001): one big-int step per item of `a`, so long texts stay fast in pure Python.

    Bit j of V is 0 where the LCS of the prefix of `a` seen so far and b[: j + 1] grows."""
    full = (1 << len(b)) - 1
    positions: dict[str, int] = {}
    for j, y in enumerate(b):
        positions[y] = positions.get(y, 0) | (1 << j)
    v = full
    for x in a:
        u = v & positions.get(x, 0)
        v = ((v + u) | (v - u)) & full
    return len(b) - v.bit_count()


@register
class RougeL(LexicalMetric):
    """ROUGE-L F-measure of response vs reference: a lexical baseline, not a semantic judgement."""

    name = "rouge_l"
    drop_articles = False
    overlap_key = "lcs_tokens"
    overlap_text = "in the longest common subsequence"
    summary = "lexical baseline: ROUGE-L (LCS) F-measure of response vs reference (no LLM)"

    @staticmethod
    def count_overlap(response: Sequence[str], reference: Sequence[str]) -> int:
        return lcs_length(response, reference)


def rouge_l_score(response: str, reference: str) -> float:
    """ROUGE-L F-measure (β = 1) of two texts."""
    return RougeL.text_score(response, reference)


#: names this module lacks are read from its default metric: ``rouge_l.score(...)``
__getattr__ = forward_to_metric(__name__)
