"""ndcg: nDCG@k with graded gains: DCG of the first k over the ideal ranking's (no judge, no
embeddings; conventions and the reference, trec_eval, in :mod:`rageval.metrics.retrieval`).
``ndcg_at_10`` names it with the cutoff k = 10."""

from __future__ import annotations

from rageval.metrics.base import forward_to_metric, register
from rageval.metrics.retrieval import CutoffMetric, Judged, ndcg


@register
class NDCG(CutoffMetric):
    """nDCG (trec_eval's ndcg; with k, ndcg_cut_k): linear gains, log2(rank + 1) discount."""

    name = "ndcg"
    summary = "nDCG@k of the ranked context ids (no LLM): graded gains, DCG over the ideal DCG"

    def value(self, j: Judged) -> float:
        return ndcg(j, self.k)


#: names this module lacks are read from its default metric: ``ndcg.score(...)``
__getattr__ = forward_to_metric(__name__)
