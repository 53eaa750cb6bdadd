"""map: average precision: the precision at each relevant id's rank, summed, over all relevant ids
(its mean over samples is MAP) (no judge, no embeddings; conventions and the reference,
trec_eval, in :mod:`rageval.metrics.retrieval`). ``map_at_10`` names it with the cutoff k = 10."""

from __future__ import annotations

from rageval.metrics.base import forward_to_metric, register
from rageval.metrics.retrieval import RELEVANT, CutoffMetric, Judged


@register
class MAP(CutoffMetric):
    """Average precision (trec_eval's map; with k, map_cut_k)."""

    name = "map"
    summary = "average precision of the ranked context ids (no LLM); its mean is MAP"

    def value(self, j: Judged) -> float:
        total, found = 0.0, 0
        for i, g in enumerate(j.grades[: self.k], 1):
            if g >= RELEVANT:
                found += 1
                total += found / i
        return total / j.relevant if found else 0.0


#: names this module lacks are read from its default metric: ``map.score(...)``
__getattr__ = forward_to_metric(__name__)
