"""Generated (response, reference) text pairs for checking the lexical metrics against their
reference implementations (no real data): the words where tokenisers disagree — numbers with
points and commas ("36" / "36.0", "1,000"), hyphenated compounds, contractions with ' and ’,
Unicode quotes and dashes, accented and non-Latin words (Cyrillic, Greek, Arabic), Chinese,
Japanese, Korean and Thai text, emoji, mixed case (including characters whose lowercase is
not ASCII-clean: İ, K, ß, Σ), underscores, articles glued to punctuation, and whitespace of
every kind (tab, newline, no-break and ideographic spaces).

Each pair is a reference and a response made from it by random edits (words dropped,
swapped, replaced, their punctuation or case changed), so the pairs overlap partly, as a
metric's inputs do. Pair ``i`` depends only on ``(seed, i)``.

``python tests/data/make_lexical_pairs.py -o tests/data/lexical_pairs.jsonl`` wrote the sample the
tests compare on (2,500 pairs, seed 22).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

#: words and word-like pieces, by kind; a text draws from all of them
# fmt: off
_PIECES: dict[str, tuple[str, ...]] = {
    "plain": (
        "the", "a", "an", "The", "A", "An", "THE", "model", "Model", "answer", "river", "city",
        "born", "in", "of", "and", "is", "was", "Paris", "France", "president", "year", "team",
        "won", "cup", "first", "art", "state", "theatre", "another", "banana", "anthem", "i",
        "It", "by", "on", "at", "to", "for", "USA", "NASA", "iPhone", "McDonald", "O'Neil",
    ),
    "number": (
        "36", "36.0", "1,000", "1000", "3.14", "2024", "1990s", "12th", "0.5", "-7", "+3",
        "50%", "$20", "£5", "€10", "10km", "5'11\"", "1/2", "½", "²", "IV", "٣", "三",
    ),
    "hyphen": (
        "state-of-the-art", "well-known", "e-mail", "co-operate", "Jean-Luc", "x-ray",
        "mother-in-law", "self–driving", "non—stop", "re-elected", "T-shirt", "a-b",
    ),
    "apostrophe": (
        "isn't", "isn’t", "don't", "it’s", "it's", "children's", "the’", "’the", "rock'n'roll",
        "l’amour", "’a", "an’", "O’Brien",
    ),
    "quoted": (
        "\"quoted\"", "“curly”", "‘single’", "«guillemets»", "„low“", "(paren)", "[bracket]",
        "{brace}", "<angle>", "「かぎ」", "《书名》",
    ),
    "punct": (
        ".", ",", "!", "?", ";", ":", "...", "…", "–", "—", "-", "'", "’", "“", "”", "/", "|",
        "&", "#", "@", "*", "_", "~", "^", "`", "§", "¶", "•", "·", "、", "。", "！", "？",
    ),
    "latin": (
        "café", "Café", "CAFÉ", "naïve", "Zürich", "façade", "Ångström", "São", "Paulo", "Dvořák",
        "Łódź", "straße", "STRASSE", "İstanbul", "KELVIN", "Σίσυφος", "ΣΊΣΥΦΟΣ", "ǅemal",
        "ﬁnance", "œuvre",
    ),
    "other_script": (
        "Москва", "москва", "Київ", "Αθήνα", "مرحبا", "القاهرة", "שלום", "नमस्ते", "हिन्दी",
        "ধন্যবাদ", "தமிழ்", "ქართული", "Հայերեն",
    ),
    "cjk": (
        "東京", "東京都", "北京", "北京市", "中华人民共和国", "日本語", "ひらがな", "カタカナ",
        "ラーメン", "ｶﾀｶﾅ", "서울", "서울에", "한국어", "대한민국", "ภาษาไทย", "กรุงเทพ",
        "ສະບາຍດີ", "ខ្មែរ", "မြန်မာ", "2024年", "GPT4は", "第3章", "々", "〇",
    ),
    "symbol": (
        "🙂", "🇫🇷", "👍🏽", "→", "≥", "±", "©", "™", "°C", "µm", "∑", "√2", "♪", "★",
    ),
    "underscore": ("snake_case", "__init__", "_private", "a_b_c", "x_1"),
}
# fmt: on
_KINDS = tuple(_PIECES)
_WEIGHTS = (30, 8, 6, 5, 3, 8, 5, 4, 6, 2, 1)
_SPACES = (" ", " ", " ", " ", " ", "  ", "\t", "\n", "\u00a0", "\u3000", "\u2009", "")


def _piece(rng: random.Random) -> str:
    kind = rng.choices(_KINDS, weights=_WEIGHTS)[0]
    word = rng.choice(_PIECES[kind])
    case = rng.random()
    if case < 0.1:
        word = word.upper()
    elif case < 0.2:
        word = word.capitalize()
    if rng.random() < 0.15:  # punctuation glued to the word
        word = word + rng.choice(_PIECES["punct"])
    if rng.random() < 0.05:
        word = rng.choice(_PIECES["punct"]) + word
    return word


def _text(words: list[str], rng: random.Random) -> str:
    return "".join(w + rng.choice(_SPACES) for w in words).strip(" ")


def _edited(words: list[str], rng: random.Random) -> list[str]:
    """`words` after a few random edits: a response that half agrees with its reference."""
    out = list(words)
    for _ in range(rng.randint(0, 4)):
        edit = rng.choice(("drop", "swap", "replace", "insert", "recase", "repunct"))
        if not out and edit != "insert":
            continue
        i = rng.randrange(len(out)) if out else 0
        if edit == "drop":
            del out[i]
        elif edit == "swap":
            j = rng.randrange(len(out))
            out[i], out[j] = out[j], out[i]
        elif edit == "replace":
            out[i] = _piece(rng)
        elif edit == "insert":
            out.insert(i, _piece(rng))
        elif edit == "recase":
            out[i] = rng.choice((out[i].lower(), out[i].upper(), out[i].title()))
        else:
            stripped = out[i].strip("".join(_PIECES["punct"]))
            out[i] = stripped + rng.choice(("", *_PIECES["punct"]))
    return out


def pair(seed: int, i: int) -> dict[str, str]:
    """Pair `i` of `seed`: {"response", "reference"}."""
    rng = random.Random(f"{seed}:{i}")
    words = [_piece(rng) for _ in range(rng.choice((1, 1, 2, 3, 5, 8, 12, 20)))]
    response = words if rng.random() < 0.05 else _edited(words, rng)
    return {"response": _text(response, rng), "reference": _text(words, rng)}


def pairs(n: int, seed: int = 22) -> list[dict[str, str]]:
    return [pair(seed, i) for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=2500, help="pairs (default 2500)")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("-o", "--out", type=Path, help="JSONL file (default: stdout)")
    args = parser.parse_args()
    lines = "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs(args.n, args.seed))
    if args.out:
        args.out.write_text(lines, encoding="utf-8")
    else:
        sys.stdout.write(lines)


if __name__ == "__main__":
    main()
