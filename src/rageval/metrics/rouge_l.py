"""rouge_l: ROUGE-L F-measure of the response against the reference (no judge, no
embeddings; a lexical baseline, not a semantic judgement: see :mod:`rageval.metrics.lexical`).

L = length of the longest common subsequence of the two token sequences, P = L/|response|,
R = L/|reference|, F = 2PR/(P+R) (β = 1; 0 when L = 0). With the default tokenizer
("auto") the value equals Google's `rouge-score` package,
``RougeScorer(["rougeL"]).score(reference, response)["rougeL"].fmeasure`` (its defaults: no
stemming), whenever the reference has a token, on every pair of texts without a character of
a script written without spaces; a pair with one (Chinese, Japanese, Thai...: rouge-score
finds no token in them) is read by "unicode", each such character a token. A reference
without a token (only punctuation, or only letters outside a–z, such as a Russian text) is
not measured, where rouge-score says 0. ``tokenizer="unicode"`` reads every script, and
``"rouge_score"`` is rouge-score's tokens on every text (see :mod:`rageval.metrics.lexical`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from rageval.metrics.authoring import NO_REFERENCE, zero_if_blank
from rageval.metrics.base import MetricResult, forward_to_metric, register
from rageval.metrics.lexical import (
    LexicalMetric,
    Tokenizer,
    rouge_score_tokens,
    unicode_rouge_tokens,
)

RougeTokenizer = Literal["auto", "rouge_score", "unicode"]


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


@register
class RougeL(LexicalMetric):
    """ROUGE-L F-measure of response vs reference: a lexical baseline, not a semantic judgement.
    By default equal to the `rouge-score` package's rougeL F-measure on text with spaces
    between words."""

    name = "rouge_l"
    tokenizers: ClassVar[Mapping[str, Tokenizer]] = {
        "rouge_score": rouge_score_tokens,
        "unicode": unicode_rouge_tokens,
    }
    reference_tokenizer = "rouge_score"
    blank_rules = (NO_REFERENCE, zero_if_blank("response", "the response is empty"))
    overlap_key = "lcs_tokens"
    overlap_text = "in the longest common subsequence"
    summary = "lexical baseline: ROUGE-L (LCS) F-measure of response vs reference (no LLM)"

    def __init__(self, *, tokenizer: RougeTokenizer = "auto", **kw: Any) -> None:
        super().__init__(tokenizer=tokenizer, **kw)

    @staticmethod
    def count_overlap(response: Sequence[str], reference: Sequence[str]) -> int:
        return lcs_length(response, reference)

    def without_reference_tokens(self, reference: str) -> MetricResult:
        hint = (
            " (it keeps only a-z and 0-9: tokenizer='unicode' reads every script)"
            if self.tokenizer != "unicode"
            else ""
        )
        return MetricResult.not_measured(
            f"the reference has no token under the {self.tokenizer!r} tokenizer{hint}: "
            "nothing to compare with"
        )


def rouge_l_score(response: str, reference: str, *, tokenizer: RougeTokenizer = "auto") -> float:
    """ROUGE-L F-measure (β = 1) of two texts. ValueError (with the cause) when the reference
    has no token under `tokenizer`."""
    return float(RougeL(tokenizer=tokenizer).compare(response, reference))


#: names this module lacks are read from its default metric: ``rouge_l.score(...)``
__getattr__ = forward_to_metric(__name__)
