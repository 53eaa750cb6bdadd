"""Cost control of a run: its budget (``max_cost``) and, in batch mode, the Batch API queues,
in the run's context while it lasts (:mod:`rageval._client._run`; docs/cost.md)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rageval._client._batch import BatchQueue, BatchSettings, RecordedBatch
from rageval._client._budget import SpendingLimit
from rageval._client._run import current_run, run_scope
from rageval.errors import BudgetReached, RunConfigError
from rageval.log import BatchEvent, append_batch_event, read_batch_events

if TYPE_CHECKING:
    from rageval.judge import Judge
    from rageval.log import SampleLine

__all__ = ["Admission", "RunBatchJournal", "limit_spending", "send_in_batches", "unpriced"]


def unpriced(judges: Sequence[Judge], *, batch: bool = False) -> list[str]:
    """The models among `judges` whose price (at batch rates with `batch`) is unknown."""
    return sorted({j.model for j in judges if j.prices.cost(j.model, 1, 1, batch=batch) is None})


class Admission:
    """Starts a row only while it fits in the budget beside the rows in flight, so that the
    rows a run starts are the ones it can finish: rows in flight progress together, and a
    budget that runs out while many are half done leaves them all unfinished. A row fits when
    the rows in flight at their planned cost (:mod:`rageval.runner._estimate`), this row's,
    and the most any one of their requests may cost (what the budget reserves for a request
    before sending it: the room their last requests need) stay within the budget. Once no row
    fits, the next row starts alone, with nothing else in flight, and spends what is left up
    to the budget's own per-request check (:class:`SpendingLimit`, which also holds what a
    row costs beyond its plan): so the run stops within one request of the budget, with at
    most that row unfinished."""

    def __init__(
        self, limit: SpendingLimit, row_cost: Callable[[int], tuple[float, float]]
    ) -> None:
        self.limit = limit
        #: row -> (planned cost, the most one of its requests may cost)
        self._row_cost = row_cost
        self._planned: dict[int, tuple[float, float]] = {}  # rows in flight
        self._spent_finished = 0.0
        self._next: tuple[int, tuple[float, float]] | None = None  # the row refused last

    def admits(self, row: int) -> bool:
        """Whether `row` may start now (then it is counted as in flight)."""
        in_flight_spent = max(0.0, self.limit.spent_usd - self._spent_finished)
        planned = sum(cost for cost, _ in self._planned.values())
        committed = self._spent_finished + max(planned, in_flight_spent)
        if committed >= self.limit.max_cost_usd:
            return False
        if self._next is None or self._next[0] != row:
            self._next = (row, self._row_cost(row))
        cost, largest = self._next[1]
        room = max([largest, *(worst for _, worst in self._planned.values())])
        if self._planned and committed + cost + room > self.limit.max_cost_usd:
            return False  # wait for the rows in flight
        self._planned[row] = (cost, largest)
        self._next = None
        return True

    def finished(self, line: SampleLine) -> None:
        self._planned.pop(line.row, None)
        cost = line.usage.cost_usd or 0.0
        if line.embeddings_usage is not None:  # remote embeddings are not on the budget
            cost -= line.embeddings_usage.cost_usd or 0.0
        self._spent_finished += cost

    def reached(self, left: int) -> BudgetReached:
        limit = self.limit
        return BudgetReached(
            f"the budget of ${limit.max_cost_usd:.4f} is reached: ${limit.spent_usd:.4f} "
            f"spent, {left} row(s) not started",
            spent_usd=limit.spent_usd,
            max_cost_usd=limit.max_cost_usd,
        )


@contextlib.contextmanager
def limit_spending(max_cost: float | None) -> Iterator[SpendingLimit | None]:
    """`max_cost` USD shared by every judge of the run while the block runs (nothing when
    None), in the run's context: the judges themselves are left as they are. A run made by a
    command that holds a budget for all its runs (align's) spends from that one."""
    if max_cost is None:
        yield None
        return
    outer = current_run().spending
    if outer is not None:
        yield outer
        return
    limit = SpendingLimit(max_cost)
    with run_scope(spending=limit):
        yield limit


class RunBatchJournal:
    """The uploads of a run in batch mode, in its directory's ``batches.jsonl``
    (:class:`~rageval.log.BatchEvent`), for :class:`~rageval._client._batch.BatchQueue`."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.run_dir = Path(run_dir)

    def recorded(self) -> list[RecordedBatch]:
        uploads: dict[str, RecordedBatch] = {}
        for event in read_batch_events(self.run_dir):
            if event.event == "uploaded" and event.endpoint and event.url:
                uploads[event.file_id] = RecordedBatch(
                    event.file_id,
                    event.endpoint,
                    event.url,
                    dict(event.lines),
                    tokens=event.tokens or 0,
                )
            elif event.event == "created" and event.file_id in uploads:
                uploads[event.file_id].batch_id = event.batch_id
        return list(uploads.values())

    def uploaded(self, batch: RecordedBatch) -> None:
        append_batch_event(
            self.run_dir,
            BatchEvent(
                event="uploaded",
                file_id=batch.file_id,
                endpoint=batch.endpoint,
                url=batch.url,
                lines=batch.lines,
                tokens=batch.tokens,
            ),
        )

    def created(self, file_id: str, batch_id: str) -> None:
        append_batch_event(
            self.run_dir, BatchEvent(event="created", file_id=file_id, batch_id=batch_id)
        )


@contextlib.asynccontextmanager
async def send_in_batches(
    judges: Sequence[Judge], settings: BatchSettings | None, journal: RunBatchJournal | None
) -> AsyncIterator[list[BatchQueue]]:
    """Every judge of `judges` sends through its endpoint's Batch API while the block runs, in
    the run's context (nothing changes when `settings` is None); the queues are closed afterwards (a batch in
    flight runs on at the endpoint, and a resumed run re-attaches to it)."""
    if settings is None:
        yield []
        return
    for judge in judges:
        if not judge.traits.batch_api:
            raise RunConfigError(
                f"batch mode sends through OpenAI's Batch API: the {judge.traits.kind} judge "
                f"{judge.model!r} cannot; run it without --batch"
            )
    endpoints = {id(j.endpoint): j.endpoint for j in judges}
    queues = {key: BatchQueue(endpoint, settings, journal) for key, endpoint in endpoints.items()}
    try:
        with run_scope(batch_queues=queues):
            yield list(queues.values())
    finally:
        for queue in queues.values():
            await queue.aclose()
