"""The progress of a run on stderr: on a terminal one line redrawn in place with a carriage
return; elsewhere (a CI log, a notebook, a file) by default the same text as a plain line
every :data:`PLAIN_EVERY_S` seconds, so piped or captured output never carries control
characters and a quick run writes nothing, while an hour against a slow judge is not an hour
of silence. Nothing is ever written to stdout.
"""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TextIO, TypeAlias

_MIN_REDRAW_S = 0.1
# The ETA is the work left over the rate of finished cells (a row's metrics), not rows: every
# row of the scheduling window starts at once and a row finishes with its slowest cell, so rows
# come in waves and the first one says nothing about the rate (a 66 s run once showed 47 min
# from its first row). The rate is measured from the first finished row on: until then the
# pipeline is filling (each row's first requests wait on no earlier reply, its later ones
# do), which is not the pace of the run. No ETA before this many seconds of that and this
# share of the session's cells: a rate measured on less is noise.
ETA_MIN_SHARE = 0.05
ETA_MIN_SECONDS = 5.0
#: the rate is measured over about the last this many seconds, so it follows a run whose pace
#: changes (a slower endpoint, the offline metrics' quick cells at the start)
RATE_WINDOW_SECONDS = 30.0


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
    #: stopping after Ctrl-C: the requests still in flight
    stopping: int | None = None


#: off a terminal, the progress is a plain line this often (none before: a quick run says
#: nothing)
PLAIN_EVERY_S = 60.0

Display: TypeAlias = Literal["redrawn", "plain"]


def display(progress: bool | None, stream: TextIO | None = None) -> Display | None:
    """How to show a run's progress: `progress` False shows none, True the line redrawn in
    place wherever it goes; None (the default) the redrawn line on an interactive terminal and
    plain lines elsewhere."""
    if progress is not None:
        return "redrawn" if progress else None
    stream = stream if stream is not None else sys.stderr
    try:
        interactive = stream.isatty()
    except (AttributeError, ValueError):  # closed or replaced streams
        interactive = False
    return "redrawn" if interactive else "plain"


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
    """Rows done out of total plus the run's counters; `update()` is cheap to call often.

    Work is counted in cells, `cells_per_row` a row: :meth:`cell_done` as each finishes (when
    the engine reports cells), :meth:`row_done` when its row does (counting the row's cells not
    reported yet). `clock` is the time source (seconds, monotonic). With `plain_every`, the line
    is written as a plain line of its own at most that often (the first after that long) instead
    of redrawn in place.
    """

    def __init__(
        self,
        total: int,
        *,
        done: int = 0,
        cells_per_row: int = 1,
        stream: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
        plain_every: float | None = None,
    ) -> None:
        self.total = total
        self.done = done
        self.cells_per_row = max(1, cells_per_row)
        #: cells finished in this session (rows kept from before a resume are not)
        self.cells_done = 0
        self._kept_cells = done * self.cells_per_row
        self._cells_todo = (total - done) * self.cells_per_row
        self._reported: dict[int, int] = {}  # row -> its cells counted by cell_done()
        self._stream = stream if stream is not None else sys.stderr
        self._clock = clock
        # (time, cells done then) from the first row finished on: the oldest is where the rate
        # is measured from
        self._marks: deque[tuple[float, int]] = deque()
        self._plain_every = plain_every
        # plain lines: the first one plain_every after the start
        self._last_draw = clock() if plain_every is not None else float("-inf")
        self._plain_lines = 0
        self._width = 0
        self.counters = Counters()

    def cell_done(self, row: int) -> None:
        counted = self._reported.get(row, 0)
        if counted < self.cells_per_row:  # a cell scored again (repeats) is not more work done
            self._reported[row] = counted + 1
            self.cells_done += 1

    def row_done(self, row: int) -> None:
        self.done += 1
        self.cells_done += self.cells_per_row - self._reported.pop(row, 0)
        if not self._marks:  # the pipeline is full: the rate is measured from here
            self._marks.append((self._clock(), self.cells_done))

    def text(self) -> str:
        c = self.counters
        parts = [f"rows {self.done}/{self.total}"]
        if self.cells_per_row > 1:
            cells_total = self._kept_cells + self._cells_todo
            parts.append(f"cells {self._kept_cells + self.cells_done:,}/{cells_total:,}")
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
        if c.stopping is not None:
            parts.append(f"stopping: {c.stopping:,} in flight")
            return "  ".join(parts)
        eta = self.eta()
        if eta is not None:
            parts.append(f"ETA {_duration(eta)}")
        return "  ".join(parts)

    def eta(self) -> float | None:
        """Seconds left at the recent rate of finished cells; None until that rate means
        something (see :data:`ETA_MIN_SHARE`) and once nothing is left."""
        if not self._marks:
            return None  # no row finished yet
        now = self._clock()
        self._mark(now)
        left = self._cells_todo - self.cells_done
        since, done_then = self._marks[0]
        if (
            left <= 0
            or now - since < ETA_MIN_SECONDS
            or self.cells_done < ETA_MIN_SHARE * self._cells_todo
        ):
            return None
        rate = (self.cells_done - done_then) / (now - since) if now > since else 0.0
        return left / rate if rate > 0 else None

    def _mark(self, now: float) -> None:
        """Remember how far the run was, once a second; forget marks older than the window
        (keeping the newest of those, where the rate is measured from)."""
        if now - self._marks[-1][0] >= 1.0:
            self._marks.append((now, self.cells_done))
        while len(self._marks) > 1 and now - self._marks[1][0] >= RATE_WINDOW_SECONDS:
            self._marks.popleft()

    def update(self, *, force: bool = False) -> None:
        """Draw the line (at most every 0.1 s unless `force`d); plain lines: write it when
        `plain_every` has passed since the last, forced or not (the run forces a redraw twice a
        second while it waits, which is when a plain line falls due)."""
        now = self._clock()
        if self._plain_every is not None:
            if now - self._last_draw >= self._plain_every:
                self._write_plain(now)
            return
        if not force and now - self._last_draw < _MIN_REDRAW_S:
            return
        self._last_draw = now
        line = self.text()
        pad = max(0, self._width - len(line))
        self._width = len(line)
        self._stream.write("\r" + line + " " * pad)
        self._stream.flush()

    def _write_plain(self, now: float) -> None:
        self._last_draw = now
        self._plain_lines += 1
        self._stream.write(f"rageval: {self.text()}\n")
        self._stream.flush()

    def note(self, text: str) -> None:
        """Say `text` on a line of its own above the progress line, then draw the line again
        (plain lines: `text` alone)."""
        if self._plain_every is not None:
            self._stream.write(text + "\n")
            self._stream.flush()
            return
        self._stream.write("\r" + text.ljust(self._width) + "\n")
        self._width = 0
        self.update(force=True)

    def close(self) -> None:
        """Draw the final state and end the line (plain lines: the final state only after
        earlier ones, so a run too quick for any stays silent)."""
        if self._plain_every is None:
            self.update(force=True)
            self._stream.write("\n")
            self._stream.flush()
        elif self._plain_lines:
            self._write_plain(self._clock())


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """`rows` under `header` in columns aligned left, a rule under the header."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, *rows]
    ]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)
