"""r_precision: relevant ids among the first R over R, R the number of relevant ids (no
judge, no embeddings; conventions and the reference, trec_eval's Rprec, in
:mod:`rageval.metrics.retrieval`)."""

from __future__ import annotations

from rageval.metrics.base import forward_to_metric, register
from rageval.metrics.retrieval import Judged, RetrievalMetric


@register
class RPrecision(RetrievalMetric):
    """R-precision (trec_eval's Rprec): precision at the rank R, the number of relevant ids."""

    name = "r_precision"
    summary = "R-precision of the ranked context ids (no LLM): precision at R, the relevant count"

    def value(self, j: Judged) -> float:
        return j.relevant_in(j.relevant) / j.relevant if j.relevant else 0.0


#: names this module lacks are read from its default metric: ``r_precision.score(...)``
__getattr__ = forward_to_metric(__name__)
