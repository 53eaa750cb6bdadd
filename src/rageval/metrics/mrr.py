"""mrr: reciprocal rank: 1 / the rank of the first relevant id (its mean over samples is MRR) (no
judge, no embeddings; conventions and the reference, trec_eval, in
:mod:`rageval.metrics.retrieval`). ``mrr_at_10`` names it with the cutoff k = 10."""

from __future__ import annotations

from rageval.metrics.base import forward_to_metric, register
from rageval.metrics.retrieval import RELEVANT, CutoffMetric, Judged


@register
class MRR(CutoffMetric):
    """Reciprocal rank (trec_eval's recip_rank; with k, only the first k ranks count)."""

    name = "mrr"
    summary = "reciprocal rank of the first relevant context id (no LLM); its mean is MRR"

    def value(self, j: Judged) -> float:
        rank = next((i for i, g in enumerate(j.grades[: self.k], 1) if g >= RELEVANT), None)
        return 1.0 / rank if rank is not None else 0.0


#: names this module lacks are read from its default metric: ``mrr.score(...)``
__getattr__ = forward_to_metric(__name__)
