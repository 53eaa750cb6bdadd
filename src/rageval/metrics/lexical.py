"""Offline lexical baselines: token_f1 and rouge_l of the response against the reference.

These count shared words; they are cheap, deterministic reference points, NOT semantic
judgements: a correct paraphrase scores low and a fluent wrong answer that reuses the
reference's words scores high. No judge, no embeddings, pure Python.

Tokens: lowercase, punctuation (ASCII and Unicode) deleted, split on whitespace
(SQuAD's normalisation; token_f1 also drops the articles "a", "an", "the", as SQuAD does).

* token_f1 (SQuAD-style): overlap = |multiset(response) ∩ multiset(reference)|,
  P = overlap/|response|, R = overlap/|reference|, F1 = 2PR/(P+R) (0 when overlap = 0).
* rouge_l: L = length of the longest common subsequence of the two token sequences,
  P = L/|response|, R = L/|reference|, F = 2PR/(P+R) (β = 1; 0 when L = 0). Unlike the
  `rouge-score` package there is no stemming, and non-ASCII words are kept.

Edge cases: a blank reference leaves nothing to compare with (not measured); a blank response
scores 0.0. When normalisation leaves no tokens on either side (e.g. "The." vs "a!") the two
texts are lexically identical and score 1.0; tokens on one side only score 0.0 (SQuAD's rule).
"""

from __future__ import annotations

import abc
import re
import string
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import ClassVar

from rageval.metrics.base import Metric, MetricResult, ScoringContext, register
from rageval.samples import Sample

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCT = frozenset(string.punctuation)


def tokens(text: str, *, drop_articles: bool) -> list[str]:
    """SQuAD-normalised tokens: lowercase, punctuation deleted, optionally articles dropped."""
    lowered = text.lower()
    kept = "".join(
        c for c in lowered if c not in _ASCII_PUNCT and not unicodedata.category(c).startswith("P")
    )
    if drop_articles:
        kept = _ARTICLES.sub(" ", kept)
    return kept.split()


def _f_measure(overlap: int, n_response: int, n_reference: int) -> float:
    """Harmonic mean of overlap/n_response and overlap/n_reference, with SQuAD's empty rule."""
    if n_response == 0 or n_reference == 0:
        return 1.0 if n_response == n_reference else 0.0
    if overlap == 0:
        return 0.0
    precision, recall = overlap / n_response, overlap / n_reference
    return 2 * precision * recall / (precision + recall)


def token_overlap(response: Sequence[str], reference: Sequence[str]) -> int:
    """Size of the multiset intersection of two token lists."""
    return sum((Counter(response) & Counter(reference)).values())


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence, bit-parallel (Allison & Dix 1986; Crochemore
    et al. 2001): one big-int step per item of `a`, so long texts stay fast in pure Python.

    Bit j of V is 0 where the LCS of the prefix of `a` seen so far and b[: j + 1] grows."""
    full = (1 << len(b)) - 1
    positions: dict[str, int] = {}
    for j, y in enumerate(b):
        positions[y] = positions.get(y, 0) | (1 << j)
    v = full
    for x in a:
        u = v & positions.get(x, 0)
        v = ((v + u) | (v - u)) & full
    return len(b) - v.bit_count()


def token_f1_score(response: str, reference: str) -> float:
    """SQuAD token F1 of two texts."""
    r, g = tokens(response, drop_articles=True), tokens(reference, drop_articles=True)
    return _f_measure(token_overlap(r, g), len(r), len(g))


def rouge_l_score(response: str, reference: str) -> float:
    """ROUGE-L F-measure (β = 1) of two texts."""
    r, g = tokens(response, drop_articles=False), tokens(reference, drop_articles=False)
    return _f_measure(lcs_length(r, g), len(r), len(g))


class _LexicalMetric(Metric):
    """Shared flow of the lexical baselines: empty-input rules, then an overlap count."""

    required_fields: ClassVar[tuple[str, ...]] = ("response", "reference")
    drop_articles: ClassVar[bool]
    #: evidence key and reason wording of the overlap count
    overlap_key: ClassVar[str]
    overlap_text: ClassVar[str]

    @staticmethod
    @abc.abstractmethod
    def _overlap(response: Sequence[str], reference: Sequence[str]) -> int: ...

    async def _score(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        response, reference = sample.text("response"), sample.text("reference")
        if not reference.strip():
            return MetricResult.not_measured("the reference is empty: nothing to compare with")
        if not response.strip():
            return MetricResult.ok(0.0, reason="the response is empty")
        r = tokens(response, drop_articles=self.drop_articles)
        g = tokens(reference, drop_articles=self.drop_articles)
        overlap = self._overlap(r, g)
        return MetricResult.ok(
            _f_measure(overlap, len(r), len(g)),
            reason=(
                f"{overlap} {'token' if overlap == 1 else 'tokens'} {self.overlap_text}; "
                f"the response has {len(r)} tokens, the reference {len(g)}"
            ),
            **{self.overlap_key: overlap},
            response_tokens=len(r),
            reference_tokens=len(g),
        )


@register
class TokenF1(_LexicalMetric):
    """SQuAD-style token F1 of response vs reference: a lexical baseline, not a semantic judgement."""

    name = "token_f1"
    drop_articles = True
    overlap_key = "shared_tokens"
    overlap_text = "shared (as a multiset)"
    summary = "lexical baseline: SQuAD token F1 of response vs reference (no LLM)"

    @staticmethod
    def _overlap(response: Sequence[str], reference: Sequence[str]) -> int:
        return token_overlap(response, reference)


@register
class RougeL(_LexicalMetric):
    """ROUGE-L F-measure of response vs reference: a lexical baseline, not a semantic judgement."""

    name = "rouge_l"
    drop_articles = False
    overlap_key = "lcs_tokens"
    overlap_text = "in the longest common subsequence"
    summary = "lexical baseline: ROUGE-L (LCS) F-measure of response vs reference (no LLM)"

    @staticmethod
    def _overlap(response: Sequence[str], reference: Sequence[str]) -> int:
        return lcs_length(response, reference)
