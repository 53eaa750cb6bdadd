"""The plan of a generation run, made from a seed: which question type each of the requested
items is, and for each attempt at an item, its style and the chunks it is written from.

An item's type is fixed for good when the run starts (the requested mix, every type asked for
present once the count allows it); attempt ``a`` of item ``i`` draws its style and chunks from
a random generator seeded with ``(seed, i, a)``, drawing again while it draws a style and chunks
an earlier attempt of the slot had (the same request, which the cache would answer with the same
item), as long as the slot has a combination left untried. So the plan of an attempt depends on
the seed, the slot and the attempt's number alone, never on what other attempts gave: a resumed
run re-plans every attempt exactly as the first run did, and a dropped item is replaced by the
next attempt at the same slot, of the same type, written from other chunks or in another style.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

from rageval.generation._corpus import Chunk

__all__ = [
    "STYLES",
    "TYPES",
    "Attempt",
    "ItemType",
    "Style",
    "as_styles",
    "link_pairs",
    "plan_attempt",
]

ItemType = Literal["single_hop", "multi_hop", "comparison", "summary", "unanswerable", "follow_up"]
Style = Literal["plain", "terse", "misspelled", "expert", "non_native"]
TYPES: tuple[ItemType, ...] = get_args(ItemType)
STYLES: tuple[Style, ...] = get_args(Style)


def as_styles(names: Sequence[str]) -> tuple[Style, ...]:
    """`names` as styles, in their order; a name that is none is a ValueError."""
    by_name: dict[str, Style] = {s: s for s in STYLES}
    try:
        return tuple(by_name[n] for n in names)
    except KeyError as e:
        raise ValueError(
            f"unknown style {e.args[0]!r}; expected one of {', '.join(STYLES)}"
        ) from None


#: the types written from two linked chunks
TWO_CHUNKS: frozenset[str] = frozenset({"multi_hop", "comparison"})
_ENTITY = re.compile(r"\b[A-Z][\w-]{2,}\b")


@dataclass(frozen=True)
class Attempt:
    """One attempt at the item of slot `slot`: its type, style and the chunks it is written
    from (by index in the corpus)."""

    slot: int
    attempt: int
    type: ItemType
    style: Style
    chunks: tuple[int, ...]


def slot_types(n: int, mix: Mapping[str, float], seed: int) -> list[ItemType]:
    """The type of each of `n` items: shares as near `mix` as whole numbers allow (largest
    remainders), every type of positive weight at least once when `n` allows, in an order
    shuffled by `seed`.

    Args:
        n: the items requested.
        mix: the weight of each type (types left out are not generated).
        seed: the plan's seed.
    """
    unknown = sorted(set(mix) - set(TYPES))
    if unknown:
        raise ValueError(f"unknown question type {unknown[0]!r}; expected one of {TYPES}")
    if any(w < 0 for w in mix.values()) or not any(w > 0 for w in mix.values()):
        raise ValueError("the mix needs a positive weight for at least one type")
    wanted = [t for t in TYPES if mix.get(t, 0) > 0]
    total = sum(mix[t] for t in wanted)
    shares = {t: n * mix[t] / total for t in wanted}
    counts = {t: int(shares[t]) for t in wanted}
    if n >= len(wanted):
        for t in wanted:
            counts[t] = max(counts[t], 1)
    by_remainder = sorted(wanted, key=lambda t: (-(shares[t] - int(shares[t])), TYPES.index(t)))
    while sum(counts.values()) < n:
        for t in by_remainder:
            if sum(counts.values()) < n:
                counts[t] += 1
    while sum(counts.values()) > n:  # the minimum of one each took from the largest
        largest = max(wanted, key=lambda t: (counts[t], -TYPES.index(t)))
        counts[largest] -= 1
    types = [t for t in wanted for _ in range(counts[t])]
    random.Random(f"{seed}:types").shuffle(types)
    return types


def entities(text: str) -> set[str]:
    """The capitalised words of `text` (names, places, products) longer than two letters."""
    return set(_ENTITY.findall(text))


def link_pairs(chunks: Sequence[Chunk], vectors: npt.NDArray[np.float32]) -> list[tuple[int, int]]:
    """The pairs of chunks a two-chunk item may join: those that share a name (a capitalised
    word that the corpus never writes in lower case, so not a sentence's first "The"), and
    each chunk with its nearest other chunk by embedding cosine. Sorted, each pair once.

    Args:
        chunks: the corpus.
        vectors: the chunks' embeddings, one row per chunk.
    """
    lower = {w for c in chunks for w in re.findall(r"\b[a-z][\w-]{2,}\b", c.text)}
    names = [{e for e in entities(c.text) if e.lower() not in lower} for c in chunks]
    pairs: set[tuple[int, int]] = set()
    for i in range(len(chunks)):
        for j in range(i + 1, len(chunks)):
            if names[i] & names[j]:
                pairs.add((i, j))
    if len(chunks) > 1:
        unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        sims = unit @ unit.T
        np.fill_diagonal(sims, -np.inf)
        for i in range(len(chunks)):
            j = int(np.argmax(sims[i]))
            pairs.add((min(i, j), max(i, j)))
    return sorted(pairs)


def plan_attempt(
    slot: int,
    attempt: int,
    item_type: ItemType,
    *,
    corpus_size: int,
    pairs: Sequence[tuple[int, int]],
    styles: Sequence[Style],
    seed: int,
) -> Attempt:
    """Attempt `attempt` at slot `slot` (see the module docstring).

    Args:
        slot: the item's index in the requested set.
        attempt: 0 for the first attempt, 1 for the one after it was dropped...
        item_type: the slot's type.
        corpus_size: the number of chunks.
        pairs: the linked pairs of chunks (:func:`link_pairs`).
        styles: the styles drawn from.
        seed: the plan's seed.
    """
    if item_type in TWO_CHUNKS and not pairs:
        raise ValueError(f"a {item_type} item needs two linked chunks; the corpus has one")
    combinations = len(set(styles)) * (len(set(pairs)) if item_type in TWO_CHUNKS else corpus_size)
    tried: set[tuple[Style, tuple[int, ...]]] = set()
    for number in range(attempt + 1):
        rng = random.Random(f"{seed}:{slot}:{number}")
        while True:
            style = styles[rng.randrange(len(styles))]
            if item_type in TWO_CHUNKS:
                chosen: tuple[int, ...] = tuple(pairs[rng.randrange(len(pairs))])
            else:
                chosen = (rng.randrange(corpus_size),)
            # an untried combination is left while fewer than all of them were tried
            if (style, chosen) not in tried or len(tried) >= combinations:
                break
        tried.add((style, chosen))
    return Attempt(slot, attempt, item_type, style, chosen)
