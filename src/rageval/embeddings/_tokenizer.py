"""A pure-Python BERT WordPiece tokenizer that reproduces Hugging Face ``tokenizers``.

It follows the rules of the ``BertNormalizer`` + ``BertPreTokenizer`` + ``WordPiece``
pipeline described by the model's ``tokenizer.json`` (uncased: lower-case and strip accents):

1. clean: drop U+0000, U+FFFD and control, format, private-use and surrogate characters
   (Cc, Cf, Co, Cs; tab, newline and carriage return excepted); map whitespace to a space;
2. put spaces around CJK ideographs;
3. strip accents: NFD, then drop non-spacing marks (category Mn);
4. lower-case character by character (so no context-dependent final sigma, as in ``tokenizers``);
5. split on whitespace, and isolate every punctuation character (ASCII punctuation or P*);
6. WordPiece: greedy longest match, ``##`` continuation prefix, a word longer than 100
   characters or with an unmatched piece becomes ``[UNK]``.

Steps 1-4 are in that order because ``tokenizers`` applies them in that order.

Character classes come from Python's ``unicodedata``, whose Unicode version is newer than the
tables compiled into ``tokenizers``. Checked one code point at a time over all 1,112,064, the
ids agree except for 503 code points (Python 3.11) that were assigned after those tables were
made -- newer marks and punctuation of historic and minority scripts, which ``tokenizers``
still treats as unassigned letters.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

__all__ = ["WordPieceTokenizer"]

_MAX_CHARS_PER_WORD = 100
_WORD_CACHE_LIMIT = 200_000

# ASCII fast path: controls other than \t \n \r are deleted, those three become spaces.
_ASCII_CLEAN: dict[int, str | None] = {c: None for c in (*range(0, 9), 11, 12, *range(14, 32), 127)}
_ASCII_CLEAN.update({9: " ", 10: " ", 13: " "})
_ASCII_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ASCII_WORDS = re.compile(r"[a-z0-9]+|[!-/:-@\[-`{-~]")

# "Other" characters that cleaning drops; unassigned code points (Cn) are kept, as in tokenizers.
_DROPPED_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs"})

# CJK ideograph blocks, as ``tokenizers`` defines them.
_CJK_RANGES = (
    (0x4E00, 0x9FFF),
    (0x3400, 0x4DBF),
    (0x20000, 0x2A6DF),
    (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F),
    (0x2B920, 0x2CEAF),
    (0xF900, 0xFAFF),
    (0x2F800, 0x2FA1F),
)


def _is_cjk(cp: int) -> bool:
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _clean_char(ch: str) -> str:
    """Steps 1-2 for one character: '' (dropped), ' ', ' X ' (CJK) or the character."""
    if ch in "\t\n\r":
        return " "
    cp = ord(ch)
    if cp == 0 or cp == 0xFFFD or unicodedata.category(ch) in _DROPPED_CATEGORIES:
        return ""
    if ch.isspace():
        return " "
    if _is_cjk(cp):
        return f" {ch} "
    return ch


class WordPieceTokenizer:
    """Text -> token ids for an uncased BERT vocabulary (``vocab.txt``)."""

    def __init__(self, vocab: dict[str, int], *, max_length: int = 256) -> None:
        if max_length < 2:
            raise ValueError("max_length must leave room for [CLS] and [SEP]")
        self.vocab = vocab
        self.max_length = max_length
        self.cls_id = vocab["[CLS]"]
        self.sep_id = vocab["[SEP]"]
        self.unk_id = vocab["[UNK]"]
        self._word_ids: dict[str, tuple[int, ...]] = {}
        self._char_map: dict[str, str] = {}

    @classmethod
    def from_vocab_file(cls, path: str | Path, *, max_length: int = 256) -> WordPieceTokenizer:
        with open(path, encoding="utf-8") as fh:
            tokens = fh.read().split("\n")
        if tokens and tokens[-1] == "":
            tokens.pop()
        return cls({tok: i for i, tok in enumerate(tokens)}, max_length=max_length)

    # --------------------------------------------------------- normalisation

    def _normalize(self, text: str) -> str:
        if text.isascii():
            if _ASCII_CONTROL.search(text):
                text = text.translate(_ASCII_CLEAN)
            return text.lower()
        char_map = self._char_map
        parts = []
        for ch in text:
            mapped = char_map.get(ch)
            if mapped is None:
                mapped = char_map[ch] = _clean_char(ch)
            parts.append(mapped)
        decomposed = unicodedata.normalize("NFD", "".join(parts))
        return "".join(
            ch.lower() for ch in decomposed if ch.isascii() or unicodedata.category(ch) != "Mn"
        )

    def _words(self, normalized: str) -> list[str]:
        if normalized.isascii():
            return _ASCII_WORDS.findall(normalized)
        words: list[str] = []
        for chunk in normalized.split():
            if chunk.isalnum():
                words.append(chunk)
                continue
            start = 0
            for i, ch in enumerate(chunk):
                if _is_punctuation(ch):
                    if start < i:
                        words.append(chunk[start:i])
                    words.append(ch)
                    start = i + 1
            if start < len(chunk):
                words.append(chunk[start:])
        return words

    # ------------------------------------------------------------- wordpiece

    def _wordpiece(self, word: str) -> tuple[int, ...]:
        cached = self._word_ids.get(word)
        if cached is not None:
            return cached
        ids: tuple[int, ...] = (self.unk_id,)
        if len(word) <= _MAX_CHARS_PER_WORD:
            pieces: list[int] = []
            vocab = self.vocab
            start, n = 0, len(word)
            while start < n:
                end = n
                while end > start:
                    piece = word[start:end] if start == 0 else "##" + word[start:end]
                    token_id = vocab.get(piece)
                    if token_id is not None:
                        pieces.append(token_id)
                        break
                    end -= 1
                else:
                    break  # no piece matched: the whole word is unknown
                start = end
            else:
                ids = tuple(pieces)
        if len(self._word_ids) < _WORD_CACHE_LIMIT:
            self._word_ids[word] = ids
        return ids

    # ---------------------------------------------------------------- public

    def count(self, text: str) -> int:
        """How many tokens `text` has, [CLS] and [SEP] included, before any truncation."""
        return 2 + sum(len(self._wordpiece(w)) for w in self._words(self._normalize(text)))

    def encode(self, text: str) -> list[int]:
        """Token ids with [CLS] and [SEP], truncated to ``max_length``."""
        budget = self.max_length - 2
        ids = [self.cls_id]
        for word in self._words(self._normalize(text)):
            ids.extend(self._wordpiece(word))
            if len(ids) > budget:
                del ids[budget + 1 :]
                break
        ids.append(self.sep_id)
        return ids
