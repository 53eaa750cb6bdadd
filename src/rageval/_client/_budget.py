"""A cap on what the judges of a run may spend (``evaluate(max_cost=...)``).

Before a request is sent it reserves the most it can cost: its prompt as estimated and its
whole reply budget (``max_tokens``, times the generations asked for), at the judge model's
price. A request that does not fit beside what was spent and what is reserved waits for the
requests in flight to settle (a settled request books what it really cost and frees its
reservation); one that still does not fit when nothing is in flight raises
:class:`~rageval.errors.BudgetReached`. So the spending never passes the budget (as far as the
prompt estimate holds), and stops less than one request's worst case below it.
"""

from __future__ import annotations

import asyncio
import threading

from rageval.errors import BudgetReached

__all__ = ["SpendingLimit"]


class SpendingLimit:
    """The budget of a run in USD, shared by every judge of the run, on any event loop."""

    def __init__(self, max_cost_usd: float) -> None:
        if not max_cost_usd > 0:
            raise ValueError(f"max_cost must be a positive number of USD, got {max_cost_usd!r}")
        self.max_cost_usd = float(max_cost_usd)
        self.spent_usd = 0.0
        self.reserved_usd = 0.0
        self._in_flight = 0
        self._lock = threading.Lock()
        self._waiters: list[asyncio.Future[None]] = []

    async def reserve(self, cost: float) -> None:
        """Reserve `cost` for a request about to be sent, waiting for the requests in flight
        to settle while it does not fit; BudgetReached when it cannot fit."""
        while True:
            with self._lock:
                if self.spent_usd + self.reserved_usd + cost <= self.max_cost_usd:
                    self.reserved_usd += cost
                    self._in_flight += 1
                    return
                if not self._in_flight:
                    raise BudgetReached(
                        f"the budget of ${self.max_cost_usd:.4f} is reached: "
                        f"${self.spent_usd:.4f} spent, and the next request may cost up to "
                        f"${cost:.4f}",
                        spent_usd=self.spent_usd,
                        max_cost_usd=self.max_cost_usd,
                    )
                waiter = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
            await waiter

    def settle(self, reserved: float, cost: float) -> None:
        """A request that reserved `reserved` is over; it cost `cost` (0 if it failed)."""
        with self._lock:
            self._in_flight -= 1
            # exactly 0 when nothing is in flight, whatever the rounding of the sums
            self.reserved_usd = self.reserved_usd - reserved if self._in_flight else 0.0
            self.spent_usd += cost
            waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            waiter.get_loop().call_soon_threadsafe(_wake, waiter)

    def __repr__(self) -> str:
        return (
            f"SpendingLimit(max_cost_usd={self.max_cost_usd}, spent_usd={self.spent_usd:.6f}, "
            f"reserved_usd={self.reserved_usd:.6f})"
        )


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
