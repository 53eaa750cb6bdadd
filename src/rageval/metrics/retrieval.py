"""What the retrieval metrics share (precision, recall, f1, hit_rate, ndcg, map, mrr,
r_precision; one module each, with its definition): a ranking read against relevance
judgements, and trec_eval's conventions. No judge, no embeddings, no network: they compare ids.

A sample gives ``retrieved_context_ids`` (the ids the retriever returned, best first) and
``reference_context_ids``: the relevant ids (each of grade 1), or a mapping of every judged id
to its relevance grade, an integer as in TREC qrels. Each value equals trec_eval's (as
pytrec_eval computes it, ``relevance_level`` 1, a run scored by rank) to the last bit; the
tests check it on random and adversarial rankings (docs/retrieval.md):

* relevant: a grade of 1 or more. Grade 0, a negative grade and an id the judgements do not
  name are not relevant and gain nothing.
* duplicates: an id given twice counts once, at its first (best) rank; the ids after it move
  up. trec_eval refuses a run with a repeated document and pytrec_eval's run, a mapping,
  cannot hold one: the first rank is what a retriever's best placement of it means.
* the number of relevant ids R counts every judged id of grade ≥ 1, retrieved or not.
  With R = 0 every measure but precision is 0, as trec_eval scores such a query.
* cutoffs: precision@k divides by k even when fewer than k ids were retrieved; recall@k by R.
  Without a cutoff, precision, recall and f1 are trec_eval's set measures (set_P, set_recall,
  set_F: the whole ranking, precision 0 for an empty one) -- ragas' IDBasedContextPrecision
  and IDBasedContextRecall.
* nDCG: linear gains (the gain of an id is its grade, not 2^grade - 1), the discount
  log2(rank + 1), the ideal ranking every judged id of positive grade sorted by grade; 0 when
  that ideal has no gain (trec_eval's ndcg and ndcg_cut, Järvelin and Kekäläinen 2002).
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rageval.metrics.base import Metric, MetricResult, ScoringContext
from rageval.samples import Sample

#: the lowest grade that is relevant (trec_eval's default relevance_level)
RELEVANT = 1


@dataclass(frozen=True)
class Judged:
    """A ranking read against the judgements."""

    #: the grade of each retrieved id in rank order, an id given again left out (0 for an id
    #: the judgements do not name)
    grades: tuple[int, ...]
    #: R: the judged ids of grade 1 or more, retrieved or not
    relevant: int
    #: the positive grades of every judged id, highest first: the ideal ranking's gains
    ideal: tuple[int, ...]
    #: how many ids of the ranking repeated one ranked above them
    duplicates: int

    def relevant_in(self, k: int | None = None) -> int:
        """How many relevant ids are ranked in the first `k` (all when None)."""
        return sum(1 for g in self.grades[:k] if g >= RELEVANT)


def judged(ranking: Sequence[str], grades: Mapping[str, int]) -> Judged:
    """`ranking` (ids, best first) read against `grades` (each judged id's grade)."""
    first = list(dict.fromkeys(ranking))
    return Judged(
        grades=tuple(grades.get(i, 0) for i in first),
        relevant=sum(1 for g in grades.values() if g >= RELEVANT),
        ideal=tuple(sorted((g for g in grades.values() if g > 0), reverse=True)),
        duplicates=len(ranking) - len(first),
    )


def precision(j: Judged, k: int | None = None) -> float:
    """Relevant ids among the first `k` over k (P_k); without k, over the ids retrieved
    (set_P; 0 for none)."""
    n = k if k is not None else len(j.grades)
    return j.relevant_in(k) / n if n else 0.0


def recall(j: Judged, k: int | None = None) -> float:
    """Relevant ids among the first `k` (all without k) over R (recall_k, set_recall)."""
    return j.relevant_in(k) / j.relevant if j.relevant else 0.0


class RetrievalMetric(Metric):
    """Shared flow of the retrieval metrics: the sample's ranking read against its judgements
    (:func:`judged`), one value of it (:meth:`value`, the one thing a retrieval metric
    defines), and evidence saying what was counted."""

    required_fields = ("retrieved_context_ids", "reference_context_ids")
    value_range = (0.0, 1.0)
    #: the cutoff; None: the whole ranking
    k: int | None = None

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)

    @abc.abstractmethod
    def value(self, j: Judged) -> float:
        """This metric's value of a judged ranking."""

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        j = judged(sample.retrieved_context_ids or [], sample.context_grades)
        cut = "" if self.k is None else f" in the first {self.k}"
        repeated = (
            f"; {j.duplicates} repeated {'id' if j.duplicates == 1 else 'ids'} counted at "
            "the first rank"
            if j.duplicates
            else ""
        )
        return MetricResult.ok(
            self.value(j),
            reason=(
                f"{j.relevant_in(self.k)} of the {j.relevant} relevant ids retrieved{cut} "
                f"({len(j.grades)} distinct ids ranked{repeated})"
            ),
            grades=list(j.grades[: self.k]),
            relevant=j.relevant,
            retrieved=len(j.grades),
            duplicates=j.duplicates,
            cutoff=self.k,
        )


class CutoffMetric(RetrievalMetric):
    """A retrieval metric with an optional cutoff `k`: ``ndcg_at_10`` is ``NDCG(k=10)``,
    which reports under that name."""

    takes_cutoff: ClassVar[bool] = True

    def __init__(self, *, k: int | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ValueError(f"k (the cutoff) is a positive integer or None, got {k!r}")
        self.k = k
        if k is not None:
            self.name = f"{type(self).name}_at_{k}"
