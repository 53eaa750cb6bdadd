"""What the offline lexical baselines share (token_f1 and rouge_l, one module each): the
tokens they count and the F-measure with its rules for empty texts.

These count shared words; they are cheap, deterministic reference points, NOT semantic
judgements: a correct paraphrase scores low and a fluent wrong answer that reuses the
reference's words scores high. No judge, no embeddings, pure Python.

Tokens: lowercase, punctuation (ASCII and Unicode) deleted, split on whitespace
(SQuAD's normalisation; token_f1 also drops the articles "a", "an", "the", as SQuAD does).
Given an overlap count, P = overlap/|response|, R = overlap/|reference|, F = 2PR/(P+R)
(0 when the overlap is 0).

Edge cases: a blank reference leaves nothing to compare with (not measured); a blank response
scores 0.0. When normalisation leaves no tokens on either side (e.g. "The." vs "a!") the two
texts are lexically identical and score 1.0; tokens on one side only score 0.0 (SQuAD's rule).
"""

from __future__ import annotations

import abc
import importlib
import re
import string
import unicodedata
from collections.abc import Sequence
from typing import Any, ClassVar

from rageval.metrics.authoring import NO_REFERENCE, zero_if_blank
from rageval.metrics.base import Metric, MetricResult, ScoringContext
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


def f_measure(overlap: int, n_response: int, n_reference: int) -> float:
    """Harmonic mean of overlap/n_response and overlap/n_reference, with SQuAD's empty rule."""
    if n_response == 0 or n_reference == 0:
        return 1.0 if n_response == n_reference else 0.0
    if overlap == 0:
        return 0.0
    precision, recall = overlap / n_response, overlap / n_reference
    return 2 * precision * recall / (precision + recall)


class LexicalMetric(Metric):
    """Shared flow of the lexical baselines: empty-input rules, then an overlap count
    (:meth:`count_overlap`, the one thing a lexical baseline defines) and its F-measure."""

    required_fields = ("response", "reference")
    value_range = (0.0, 1.0)
    blank_rules = (NO_REFERENCE, zero_if_blank("response", "the response is empty"))
    drop_articles: ClassVar[bool]
    #: evidence key and reason wording of the overlap count
    overlap_key: ClassVar[str]
    overlap_text: ClassVar[str]

    @staticmethod
    @abc.abstractmethod
    def count_overlap(response: Sequence[str], reference: Sequence[str]) -> int:
        """How many tokens the two token lists share, by this baseline's rule."""

    @classmethod
    def text_score(cls, response: str, reference: str) -> float:
        """This baseline's F-measure of two texts."""
        r = tokens(response, drop_articles=cls.drop_articles)
        g = tokens(reference, drop_articles=cls.drop_articles)
        return f_measure(cls.count_overlap(r, g), len(r), len(g))

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        response, reference = sample.text("response"), sample.text("reference")
        r = tokens(response, drop_articles=self.drop_articles)
        g = tokens(reference, drop_articles=self.drop_articles)
        overlap = self.count_overlap(r, g)
        return MetricResult.ok(
            f_measure(overlap, len(r), len(g)),
            reason=(
                f"{overlap} {'token' if overlap == 1 else 'tokens'} {self.overlap_text}; "
                f"the response has {len(r)} tokens, the reference {len(g)}"
            ),
            **{self.overlap_key: overlap},
            response_tokens=len(r),
            reference_tokens=len(g),
        )


#: the names that lived here before each baseline got its own module, by their new module
_MOVED = {
    "token_f1": ("TokenF1", "token_f1_score", "token_overlap"),
    "rouge_l": ("RougeL", "rouge_l_score", "lcs_length"),
}


def __getattr__(name: str) -> Any:
    """``from rageval.metrics.lexical import TokenF1`` (and the other moved names) still works."""
    home = next((m for m, names in _MOVED.items() if name in names), None)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"rageval.metrics.{home}"), name)
