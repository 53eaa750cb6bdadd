"""recall: recall@k: relevant ids among the first k over all relevant ids (no judge, no embeddings;
conventions and the reference, trec_eval, in :mod:`rageval.metrics.retrieval`). ``recall_at_10``
names it with the cutoff k = 10."""

from __future__ import annotations

from rageval.metrics.base import forward_to_metric, register
from rageval.metrics.retrieval import CutoffMetric, Judged, recall


@register
class Recall(CutoffMetric):
    """Recall (recall_k; without k trec_eval's set_recall, ragas' IDBasedContextRecall)."""

    name = "recall"
    aliases = ("id_based_context_recall",)
    summary = (
        "recall@k of the ranked context ids (no LLM): relevant among the first k over all relevant"
    )

    def value(self, j: Judged) -> float:
        return recall(j, self.k)


#: names this module lacks are read from its default metric: ``recall.score(...)``
__getattr__ = forward_to_metric(__name__)
