"""precision: precision@k: relevant ids among the first k over k; without k, over the ids retrieved
(no judge, no embeddings; conventions and the reference, trec_eval, in
:mod:`rageval.metrics.retrieval`). ``precision_at_10`` names it with the cutoff k = 10."""

from __future__ import annotations

from rageval.metrics.base import forward_to_metric, register
from rageval.metrics.retrieval import CutoffMetric, Judged, precision


@register
class Precision(CutoffMetric):
    """Precision (P_k; without k trec_eval's set_P, ragas' IDBasedContextPrecision)."""

    name = "precision"
    aliases = ("id_based_context_precision",)
    summary = "precision@k of the ranked context ids (no LLM): relevant among the first k over k"

    def value(self, j: Judged) -> float:
        return precision(j, self.k)


#: names this module lacks are read from its default metric: ``precision.score(...)``
__getattr__ = forward_to_metric(__name__)
