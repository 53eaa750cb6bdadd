"""f1: F1@k: the harmonic mean of precision@k and recall@k (no judge, no embeddings; conventions
and the reference, trec_eval, in :mod:`rageval.metrics.retrieval`). ``f1_at_10`` names it with
the cutoff k = 10."""

from __future__ import annotations

from rageval.metrics.base import forward_to_metric, register
from rageval.metrics.retrieval import CutoffMetric, Judged, precision, recall


@register
class F1(CutoffMetric):
    """F1 of precision@k and recall@k, computed as trec_eval does (without k, its set_F with
    β = 1); 0 when no relevant id is retrieved."""

    name = "f1"
    in_default_run = False
    summary = "F1@k of the ranked context ids (no LLM): harmonic mean of precision@k and recall@k"

    def value(self, j: Judged) -> float:
        p, r = precision(j, self.k), recall(j, self.k)
        return 2.0 * p * r / (p + r) if j.relevant_in(self.k) else 0.0


#: names this module lacks are read from its default metric: ``f1.score(...)``
__getattr__ = forward_to_metric(__name__)
