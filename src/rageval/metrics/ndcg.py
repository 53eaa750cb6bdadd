"""ndcg: nDCG@k with graded gains: DCG of the first k over the ideal ranking's (no judge, no
embeddings; conventions and the reference, trec_eval, in :mod:`rageval.metrics.retrieval`).
``ndcg_at_10`` names it with the cutoff k = 10."""

from __future__ import annotations

import math
from collections.abc import Sequence

from rageval.metrics.base import forward_to_metric, register
from rageval.metrics.retrieval import CutoffMetric, Judged


def dcg(gains: Sequence[int], k: int | None = None) -> float:
    """Discounted cumulative gain of the first `k` gains: gain / log2(rank + 1), summed in
    rank order (gains of 0 or less add nothing)."""
    total = 0.0
    for i, gain in enumerate(gains[:k]):
        if gain > 0:
            total += gain / math.log2(i + 2)
    return total


@register
class NDCG(CutoffMetric):
    """nDCG (trec_eval's ndcg; with k, ndcg_cut_k): linear gains, log2(rank + 1) discount."""

    name = "ndcg"
    summary = "nDCG@k of the ranked context ids (no LLM): graded gains, DCG over the ideal DCG"

    def value(self, j: Judged) -> float:
        ideal = dcg(j.ideal, self.k)
        return dcg(j.grades, self.k) / ideal if ideal > 0.0 else 0.0


#: names this module lacks are read from its default metric: ``ndcg.score(...)``
__getattr__ = forward_to_metric(__name__)
