"""What the offline lexical baselines share (token_f1 and rouge_l, one module each): their
tokenisers and the F-measure.

These count shared words; they are cheap, deterministic reference points, NOT semantic
judgements: a correct paraphrase scores low and a fluent wrong answer that reuses the
reference's words scores high. No judge, no embeddings, pure Python.

Each baseline equals a reference implementation by default, tokens included (docs/metrics.md):

* ``"squad"`` (token_f1's default): the official SQuAD v2 evaluation script's normalisation:
  lowercase, ASCII punctuation (``string.punctuation``) deleted, the articles a/an/the
  removed, split on whitespace. "state-of-the-art" is one token, "stateoftheart"; Unicode
  punctuation (’ – “) is kept as part of a word.
* ``"rouge_score"`` (rouge_l's default): the default tokenizer of Google's `rouge-score`
  package (no stemming): lowercase, every character other than a–z and 0–9 separates words.
  "36.0" is two tokens, "state-of-the-art" four; letters of any other script (é, ж, 日) are
  separators too, so a text in them has no token.
* ``"auto"`` (either baseline's default): the reference's tokenizer above, unless one of the
  two texts compared has a character of a script written without spaces
  (:data:`UNSPACED_SCRIPTS`: Chinese, Japanese, Korean, Thai...); then both are read by
  ``"unicode"``. The references do not read such text (SQuAD's script takes a whole unspaced
  sentence for one word, rouge-score finds no token in it), so the default equals them on
  every pair of texts without such a character and reads the others.
* ``"unicode"`` (either baseline, for text in any script): the default's rule extended to
  Unicode, and the scripts written without spaces between words cut into characters. For
  token_f1 every punctuation character (Unicode category P) is deleted as well, the articles
  removed; for rouge_l every character that is not a letter, digit or combining mark
  (categories L, N, M) separates words. Then each character of Han, Hiragana, Katakana,
  Hangul, Thai, Lao, Khmer and Myanmar (:data:`UNSPACED_SCRIPTS`) is a token of its own, with
  the combining marks that follow it ("東京都" → 東, 京, 都, as the character-level F1 of
  Chinese and Korean reading-comprehension benchmarks counts). No Unicode normalisation
  (NFC/NFKC) is applied.

Given an overlap count, P = overlap/|response|, R = overlap/|reference|, F = 2PR/(P+R)
(0 when the overlap is 0), computed as both references compute it, so the values are equal
to the last bit.
"""

from __future__ import annotations

import abc
import bisect
import importlib
import re
import string
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from rageval.metrics.base import Metric, MetricResult, ScoringContext
from rageval.metrics.evidence import OverlapEvidence
from rageval.samples import Sample

Tokenizer = Callable[[str], list[str]]
#: the tokenizer name that picks, per pair of texts, the reference's tokenizer or "unicode"
AUTO = "auto"

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_ASCII_PUNCT = frozenset(string.punctuation)
_NOT_ROUGE_WORD = re.compile(r"[^a-z0-9]+")

#: the scripts written without spaces between words (Korean is spaced, but its particles
#: cling to the word: "서울에" is "in Seoul"), whose characters the "unicode" tokenisers make
#: tokens of their own: script -> its Unicode blocks (first and last code point)
UNSPACED_SCRIPTS: dict[str, tuple[tuple[int, int], ...]] = {
    "Han": (
        (0x2E80, 0x2FDF),  # CJK radicals supplement, Kangxi radicals
        (0x3005, 0x3007),  # 々 〆 〇
        (0x3021, 0x3029),  # Hangzhou numerals
        (0x3038, 0x303B),
        (0x3400, 0x4DBF),  # CJK unified ideographs extension A
        (0x4E00, 0x9FFF),  # CJK unified ideographs
        (0xF900, 0xFAFF),  # CJK compatibility ideographs
        (0x20000, 0x3FFFF),  # extensions B-I and the compatibility supplement
    ),
    "Hiragana": ((0x3041, 0x309F), (0x1B000, 0x1B16F)),
    "Katakana": ((0x30A0, 0x30FF), (0x31F0, 0x31FF), (0xFF66, 0xFF9F), (0x1AFF0, 0x1AFFF)),
    "Hangul": (
        (0x1100, 0x11FF),  # Hangul jamo
        (0x3130, 0x318F),  # compatibility jamo
        (0xA960, 0xA97F),
        (0xAC00, 0xD7FF),  # syllables, jamo extended-B
        (0xFFA0, 0xFFDC),  # halfwidth jamo
    ),
    "Thai": ((0x0E00, 0x0E7F),),
    "Lao": ((0x0E80, 0x0EFF),),
    "Khmer": ((0x1780, 0x17FF), (0x19E0, 0x19FF)),
    "Myanmar": ((0x1000, 0x109F), (0xA9E0, 0xA9FF), (0xAA60, 0xAA7F)),
}
_UNSPACED_BLOCKS = sorted(block for blocks in UNSPACED_SCRIPTS.values() for block in blocks)
_UNSPACED_FIRST = [first for first, _ in _UNSPACED_BLOCKS]
_ANY_UNSPACED = re.compile(
    "[" + "".join(f"{chr(first)}-{chr(last)}" for first, last in _UNSPACED_BLOCKS) + "]"
)


def _unspaced(char: str) -> bool:
    i = bisect.bisect_right(_UNSPACED_FIRST, ord(char)) - 1
    return i >= 0 and ord(char) <= _UNSPACED_BLOCKS[i][1]


def _space_unspaced(text: str) -> str:
    """`text` with spaces around each character of a script written without spaces (and the
    combining marks that follow it), so that splitting on whitespace makes it a token."""
    if not _ANY_UNSPACED.search(text):
        return text
    pieces: list[str] = []
    after_unspaced = False
    for char in text:
        if after_unspaced and unicodedata.category(char).startswith("M"):
            pieces.append(char)  # a Thai vowel sign, a kana voicing mark: part of the character
        elif _unspaced(char):
            pieces.append(f" {char}")
            after_unspaced = True
        else:
            pieces.append(f" {char}" if after_unspaced else char)
            after_unspaced = False
    return "".join(pieces)


def squad_tokens(text: str) -> list[str]:
    """The official SQuAD v2 script's tokens: lowercase, ASCII punctuation deleted, articles
    removed, split on whitespace."""
    kept = "".join(c for c in text.lower() if c not in _ASCII_PUNCT)
    return _ARTICLES.sub(" ", kept).split()


def unicode_squad_tokens(text: str) -> list[str]:
    """SQuAD's tokens with every punctuation character (ASCII or Unicode category P) deleted
    and each character of a script without spaces a token."""
    kept = "".join(
        c
        for c in text.lower()
        if c not in _ASCII_PUNCT and not unicodedata.category(c).startswith("P")
    )
    return _ARTICLES.sub(" ", _space_unspaced(kept)).split()


def rouge_score_tokens(text: str) -> list[str]:
    """The tokens of rouge-score's default tokenizer (no stemming): lowercase, every run of
    characters other than a-z and 0-9 a separator."""
    return _NOT_ROUGE_WORD.sub(" ", text.lower()).split()


def unicode_rouge_tokens(text: str) -> list[str]:
    """rouge-score's rule for any script: every character that is not a letter, a digit or a
    combining mark separates words, and each character of a script without spaces is a
    token."""
    words = "".join(c if unicodedata.category(c)[0] in "LNM" else " " for c in text.lower())
    return _space_unspaced(words).split()


def f_measure(overlap: int, n_response: int, n_reference: int) -> float:
    """Harmonic mean of overlap/n_response and overlap/n_reference, with SQuAD's rule for no
    tokens: 1.0 when neither text has one, else 0.0 when one has none."""
    if n_response == 0 or n_reference == 0:
        return 1.0 if n_response == n_reference else 0.0
    if overlap == 0:
        return 0.0
    precision, recall = overlap / n_response, overlap / n_reference
    return 2 * precision * recall / (precision + recall)


class LexicalMetric(Metric):
    """Shared flow of the lexical baselines: the texts' tokens by the chosen tokenizer (one of
    :attr:`tokenizers`), an overlap count (:meth:`count_overlap`, the one thing a lexical
    baseline defines) and its F-measure."""

    required_fields = ("response", "reference")
    value_range = (0.0, 1.0)
    #: the tokenisers this baseline offers, by the name its `tokenizer` parameter takes
    #: (besides "auto")
    tokenizers: ClassVar[Mapping[str, Tokenizer]]
    #: the tokenizer of the reference implementation, which "auto" uses on texts it reads
    reference_tokenizer: ClassVar[str]
    #: what the overlap counts (its evidence's ``counted``) and its wording in the reason
    overlap_key: ClassVar[str]
    overlap_text: ClassVar[str]

    def __init__(self, *, tokenizer: str, **kw: Any) -> None:
        super().__init__(**kw)
        if tokenizer != AUTO and tokenizer not in self.tokenizers:
            names = ", ".join(map(repr, [AUTO, *self.tokenizers]))
            raise ValueError(f"tokenizer is one of {names}, got {tokenizer!r}")
        self.tokenizer = tokenizer

    def tokenizer_for(self, *texts: str) -> str:
        """The tokenizer that reads `texts` (the two compared): the one chosen, and under
        "auto" "unicode" when one of them has a character of a script written without
        spaces, else the reference's."""
        if self.tokenizer != AUTO:
            return self.tokenizer
        if any(_ANY_UNSPACED.search(text) for text in texts):
            return "unicode"
        return self.reference_tokenizer

    def tokens(self, text: str) -> list[str]:
        """`text`'s tokens by this metric's tokenizer (under "auto", as read alone)."""
        return self.tokenizers[self.tokenizer_for(text)](text)

    @staticmethod
    @abc.abstractmethod
    def count_overlap(response: Sequence[str], reference: Sequence[str]) -> int:
        """How many tokens the two token lists share, by this baseline's rule."""

    def without_reference_tokens(self, reference: str) -> MetricResult | None:
        """The cell when the reference has no token (None: the F-measure's rule decides)."""
        return None

    def compare(self, response: str, reference: str) -> MetricResult:
        """This baseline's F-measure of two texts, with its evidence."""
        tokenize = self.tokenizers[self.tokenizer_for(response, reference)]
        r, g = tokenize(response), tokenize(reference)
        if not g:
            ruled = self.without_reference_tokens(reference)
            if ruled is not None:
                return ruled
        overlap = self.count_overlap(r, g)
        return MetricResult.ok(
            f_measure(overlap, len(r), len(g)),
            reason=(
                f"{overlap} {'token' if overlap == 1 else 'tokens'} {self.overlap_text}; "
                f"the response has {len(r)} tokens, the reference {len(g)}"
            ),
        ).with_evidence(
            OverlapEvidence(
                overlap=overlap,
                counted=self.overlap_key,
                response_tokens=len(r),
                reference_tokens=len(g),
            )
        )

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        response, references = sample.text("response"), sample.references
        results = [self.compare(response, reference) for reference in references]
        if len(results) == 1:
            return results[0]
        # several acceptable references: the best match counts, as SQuAD's F1 takes the maximum
        # over the gold answers (a reference without tokens competes only when all are so)
        measured = [i for i, r in enumerate(results) if r.value is not None]
        best = max(measured, key=lambda i: results[i].value or 0.0) if measured else 0
        chosen = results[best]
        values = [r.value for r in results]
        return chosen.model_copy(
            update={
                "reason": f"{chosen.reason} (reference {best + 1} of {len(results)}, the best)",
                "evidence": chosen.evidence.noted(reference_values=values, best_reference=best),
            }
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
