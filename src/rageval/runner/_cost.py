"""Cost control of a run: its budget (``max_cost``) and, in batch mode, the Batch API queues,
attached to the run's judges while it lasts (see README "Cost control")."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from rageval._client._budget import SpendingLimit

if TYPE_CHECKING:
    from rageval.judge import Judge

__all__ = ["limit_spending", "unpriced"]


def unpriced(judges: Sequence[Judge], *, batch: bool = False) -> list[str]:
    """The models among `judges` whose price (at batch rates with `batch`) is unknown."""
    return sorted({j.model for j in judges if j.prices.cost(j.model, 1, 1, batch=batch) is None})


@contextlib.contextmanager
def limit_spending(
    judges: Sequence[Judge], max_cost: float | None
) -> Iterator[SpendingLimit | None]:
    """`max_cost` USD shared by every judge of `judges` while the block runs (nothing when
    None); each judge's own setting is back afterwards."""
    if max_cost is None:
        yield None
        return
    limit = SpendingLimit(max_cost)
    distinct = list({id(j): j for j in judges}.values())
    before = [j.spending for j in distinct]
    for judge in distinct:
        judge.spending = limit
    try:
        yield limit
    finally:
        for judge, old in zip(distinct, before, strict=True):
            judge.spending = old
