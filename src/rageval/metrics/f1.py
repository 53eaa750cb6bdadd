"""f1: F1@k: the harmonic mean of precision@k and recall@k (no judge, no embeddings; conventions
and the reference, trec_eval, in :mod:`rageval.metrics.retrieval`). ``f1_at_10`` names it with
the cutoff k = 10."""

from __future__ import annotations

from rageval.metrics.base import forward_to_metric, register
from rageval.metrics.retrieval import CutoffMetric, Judged, f1


@register
class F1(CutoffMetric):
    """F1 of precision@k and recall@k (without k trec_eval's set_F, β = 1)."""

    name = "f1"
    in_default_run = False
    summary = "F1@k of the ranked context ids (no LLM): harmonic mean of precision@k and recall@k"

    def value(self, j: Judged) -> float:
        return f1(j, self.k)


#: names this module lacks are read from its default metric: ``f1.score(...)``
__getattr__ = forward_to_metric(__name__)
