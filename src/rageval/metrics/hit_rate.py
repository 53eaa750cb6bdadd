"""hit_rate: hit rate@k: 1 when a relevant id is among the first k (no judge, no embeddings;
conventions and the reference, trec_eval, in :mod:`rageval.metrics.retrieval`).
``hit_rate_at_10`` names it with the cutoff k = 10."""

from __future__ import annotations

from rageval.metrics.base import forward_to_metric, register
from rageval.metrics.retrieval import CutoffMetric, Judged


@register
class HitRate(CutoffMetric):
    """Hit rate (trec_eval's success@k)."""

    name = "hit_rate"
    in_default_run = False
    summary = "hit rate@k of the ranked context ids (no LLM): 1 if a relevant id is in the first k"

    def value(self, j: Judged) -> float:
        return 1.0 if j.relevant_in(self.k) else 0.0


#: names this module lacks are read from its default metric: ``hit_rate.score(...)``
__getattr__ = forward_to_metric(__name__)
