"""The F1 of the official SQuAD v2 evaluation script (``evaluate-v2.0.py``), written here from
its documented definition to check rageval's token_f1 against (no code of the script copied):

* an answer is normalised by lowercasing it, deleting every character of Python's
  ``string.punctuation``, replacing each article a / an / the that stands as a word (regular
  expression ``\\b(a|an|the)\\b``) by a space, and collapsing whitespace; its tokens are the
  whitespace-separated pieces (none for an empty answer);
* F1 of a prediction against a gold answer: the shared tokens are counted as a multiset; when
  either side has no token, 1 if both have none else 0; no shared token gives 0; otherwise
  precision = shared / prediction tokens, recall = shared / gold tokens and
  F1 = 2 · precision · recall / (precision + recall). (With several gold answers the script
  takes the maximum over them; a rageval sample has one reference.)
"""

from __future__ import annotations

import re
import string
from collections import Counter

_DELETE_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLE = re.compile(r"\b(?:a|an|the)\b")


def squad_tokens(answer: str) -> list[str]:
    if not answer:
        return []
    lowered = answer.lower().translate(_DELETE_PUNCTUATION)
    return _ARTICLE.sub(" ", lowered).split()


def squad_f1(prediction: str, gold: str) -> float:
    predicted, expected = squad_tokens(prediction), squad_tokens(gold)
    if not predicted or not expected:
        return float(predicted == expected)
    shared = sum((Counter(predicted) & Counter(expected)).values())
    if shared == 0:
        return 0.0
    precision = 1.0 * shared / len(predicted)
    recall = 1.0 * shared / len(expected)
    return (2 * precision * recall) / (precision + recall)
