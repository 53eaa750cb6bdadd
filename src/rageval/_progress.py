"""A one-line progress display on stderr, redrawn in place with a carriage return.

Shown only when asked, or by default when stderr is a terminal, so piped or captured output
never carries control characters. Nothing is ever written to stdout.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TextIO

_MIN_REDRAW_S = 0.1


@dataclass
class Counters:
    """What the line shows besides the row count."""

    requests: int = 0
    tokens: int = 0
    cost_usd: float | None = 0.0
    cache_hits: int = 0
    not_measured: int = 0
    retries: int = 0  # requests sent again after a transient error (429, 5xx, timeout)
    reasks: int = 0  # replies asked again because they failed validation
    #: the run's budget (max_cost), shown next to the cost
    budget_usd: float | None = None
    #: batch mode: (batches waited on, their lines done, their lines), as last polled
    batches: tuple[int, int, int] | None = None


def wanted(progress: bool | None, stream: TextIO | None = None) -> bool:
    """`progress` if given, else whether the stream is an interactive terminal."""
    if progress is not None:
        return progress
    stream = stream if stream is not None else sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        return False


def _duration(duration: float) -> str:
    seconds = round(duration)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class ProgressLine:
    """Rows done out of total plus the run's counters; `update()` is cheap to call often."""

    def __init__(self, total: int, *, done: int = 0, stream: TextIO | None = None) -> None:
        self.total = total
        self.done = done
        self._start_done = done
        self._stream = stream if stream is not None else sys.stderr
        self._started = time.monotonic()
        self._last_draw = 0.0
        self._width = 0
        self.counters = Counters()

    def text(self) -> str:
        c = self.counters
        parts = [f"rows {self.done}/{self.total}"]
        if c.requests or c.cache_hits:
            parts.append(f"requests {c.requests:,}")
            parts.append(f"tokens {c.tokens:,}")
            cost = "cost ?" if c.cost_usd is None else f"cost ${c.cost_usd:.4f}"
            parts.append(cost if c.budget_usd is None else f"{cost} / ${c.budget_usd:.4f}")
            parts.append(f"cache hits {c.cache_hits:,}")
        if c.batches is not None and c.batches[0]:
            count, done, lines = c.batches
            parts.append(f"batches {count} in flight ({done:,}/{lines:,} lines done)")
        if c.retries:
            parts.append(f"retries {c.retries:,}")
        if c.reasks:
            parts.append(f"re-asks {c.reasks:,}")
        if c.not_measured:
            parts.append(f"not measured {c.not_measured:,}")
        eta = self.eta()
        if eta is not None:
            parts.append(f"ETA {_duration(eta)}")
        return "  ".join(parts)

    def eta(self) -> float | None:
        finished_here = self.done - self._start_done
        remaining = self.total - self.done
        if finished_here <= 0 or remaining <= 0:
            return None
        elapsed = time.monotonic() - self._started
        return elapsed / finished_here * remaining

    def update(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_draw < _MIN_REDRAW_S:
            return
        self._last_draw = now
        line = self.text()
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self._stream.write("\r" + line + " " * pad)
        self._stream.flush()

    def close(self) -> None:
        """Draw the final state and end the line."""
        self.update(force=True)
        self._stream.write("\n")
        self._stream.flush()
