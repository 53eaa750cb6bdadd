"""The error for a metric name the registry does not know, naming what the user may have
meant: a close registered name, or the name rageval gives a cutoff written as other tools
write it (``ndcg@10``, trec_eval's ``ndcg_cut_10``: ``ndcg_at_10``)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection, Iterable, Sequence

#: a cutoff as other tools write it, or a cutoff of 0 (``ndcg_at_0``)
_OTHER_CUTOFF = re.compile(r"(?P<name>[a-z0-9_]+?)(?:@|_cut_|_at_)(?P<k>[0-9]+)")


def unknown_metric(
    name: str, metrics: Sequence[str], with_cutoff: Collection[str], aliases: Iterable[str]
) -> KeyError:
    """The KeyError for `name`, which names none of the registry's `metrics` (those in
    `with_cutoff` take a cutoff) or `aliases`: the names it is close to, and every name known."""
    # compared as the registry spells names: lower case, "_" between words (TOKEN_F1, token-f1)
    spelled = name.lower().replace("-", "_")
    close = _cutoff_spelled_otherwise(name, with_cutoff) or difflib.get_close_matches(
        spelled, [*metrics, *aliases], n=3
    )
    hint = f" (did you mean {', '.join(close)}?)" if close else ""
    cutoffs = ", ".join(f"{n}_at_K" for n in metrics if n in with_cutoff)
    cutoffs = f"; with a cutoff K: {cutoffs}" if cutoffs else ""
    return KeyError(f"unknown metric {name!r}{hint}; known: {', '.join(metrics)}{cutoffs}")


def _cutoff_spelled_otherwise(name: str, with_cutoff: Collection[str]) -> list[str]:
    """``ndcg_at_10`` for ``ndcg@10`` or ``NDCG_cut_10`` (a metric that takes a cutoff);
    ``ndcg_at_K with K from 1 up`` for ``ndcg_at_0``; nothing for any other name."""
    cut = _OTHER_CUTOFF.fullmatch(name.lower())
    if cut is None or cut["name"] not in with_cutoff:
        return []
    k = int(cut["k"])
    return [f"{cut['name']}_at_{k}" if k > 0 else f"{cut['name']}_at_K with K from 1 up"]
