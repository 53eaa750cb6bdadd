"""token_f1: SQuAD token F1 of the response against the reference (no judge, no embeddings;
a lexical baseline, not a semantic judgement: see :mod:`rageval.metrics.lexical`).

overlap = |multiset(response) ∩ multiset(reference)| over the texts' tokens,
P = overlap/|response|, R = overlap/|reference|, F1 = 2PR/(P+R) (0 when overlap = 0; 1.0 when
neither text has a token, 0.0 when one has none). With the default tokenizer ("auto") the
value equals ``compute_f1(reference, response)`` of the official SQuAD v2 evaluation script
on every pair of texts without a character of a script written without spaces (Chinese,
Japanese, Thai...: those pairs are read by "unicode", each such character a token, as the
Chinese and Korean reading-comprehension benchmarks CMRC 2018 and KorQuAD count).
``tokenizer="unicode"`` also deletes Unicode punctuation and reads scripts written without
spaces on every text; ``"squad"`` is the script's tokens on every text (see
:mod:`rageval.metrics.lexical`). A sample with several acceptable references scores its best
match, as the script takes the maximum over the gold answers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from rageval.metrics.authoring import NO_REFERENCE
from rageval.metrics.base import forward_to_metric, register
from rageval.metrics.lexical import (
    LexicalMetric,
    Tokenizer,
    squad_tokens,
    unicode_squad_tokens,
)

F1Tokenizer = Literal["auto", "squad", "unicode"]


def token_overlap(response: Sequence[str], reference: Sequence[str]) -> int:
    """Size of the multiset intersection of two token lists."""
    return sum((Counter(response) & Counter(reference)).values())


@register
class TokenF1(LexicalMetric):
    """SQuAD token F1 of response vs reference: a lexical baseline, not a semantic judgement.
    By default equal to the official SQuAD v2 script's F1 on text with spaces between words."""

    name = "token_f1"
    tokenizers: ClassVar[Mapping[str, Tokenizer]] = {
        "squad": squad_tokens,
        "unicode": unicode_squad_tokens,
    }
    # a blank response is scored by SQuAD's rule: 0.0, or 1.0 against a reference without a
    # token (only articles and punctuation), as the script scores an empty prediction
    blank_rules = (NO_REFERENCE,)
    reference_tokenizer = "squad"
    overlap_key = "shared_tokens"
    overlap_text = "shared (as a multiset)"
    summary = "lexical baseline: SQuAD token F1 of response vs reference (no LLM)"

    def __init__(self, *, tokenizer: F1Tokenizer = "auto", **kw: Any) -> None:
        super().__init__(tokenizer=tokenizer, **kw)

    @staticmethod
    def count_overlap(response: Sequence[str], reference: Sequence[str]) -> int:
        return token_overlap(response, reference)


def token_f1_score(response: str, reference: str, *, tokenizer: F1Tokenizer = "auto") -> float:
    """SQuAD token F1 of two texts."""
    return float(TokenF1(tokenizer=tokenizer).compare(response, reference))


#: names this module lacks are read from its default metric: ``token_f1.score(...)``
__getattr__ = forward_to_metric(__name__)
