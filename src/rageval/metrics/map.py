"""map: average precision: the precision at each relevant id's rank, summed, over all relevant ids
(its mean over samples is MAP) (no judge, no embeddings; conventions and the reference,
trec_eval, in :mod:`rageval.metrics.retrieval`). ``map_at_10`` names it with the cutoff k = 10."""

from __future__ import annotations

from rageval.metrics.base import forward_to_metric, register
from rageval.metrics.retrieval import CutoffMetric, Judged, average_precision


@register
class MAP(CutoffMetric):
    """Average precision (trec_eval's map; with k, map_cut_k)."""

    name = "map"
    summary = "average precision of the ranked context ids (no LLM); its mean is MAP"

    def value(self, j: Judged) -> float:
        return average_precision(j, self.k)


#: names this module lacks are read from its default metric: ``map.score(...)``
__getattr__ = forward_to_metric(__name__)
