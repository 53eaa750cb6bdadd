"""Requests through an endpoint's Batch API: ``evaluate(batch=True)``, ``--batch``.

OpenAI (and compatible providers) run a JSONL file of requests within 24 hours at about half
the price. In batch mode an endpoint's :class:`BatchQueue` stands where the HTTP request would
go: a request is queued and its caller waits. Once no new request has come for
:attr:`BatchSettings.settle` seconds (everything the run could ask is asked: every cell in
flight waits on the queue), or the queue holds a file's worth
(:attr:`~BatchSettings.max_requests`, :attr:`~BatchSettings.max_bytes`), the queued requests go
out as one batch: the file is uploaded (``purpose=batch``), the batch created and polled every
:attr:`~BatchSettings.poll_interval` seconds until it ends; then its output and error files are
read and each waiting request gets its own line back. So everything above -- the judge's
validation and re-asks, the metrics -- is unchanged: a metric with two stages (statements, then
verdicts) makes two successive batches, a re-ask or a request to send again goes into the next
one.

A line's fate, sorted by the retry loop like the HTTP reply it stands for
(:mod:`rageval._client._retry`): an answer is read as a chat completion; an error response
(429, 5xx) is sent again in the next batch, a 400 is fatal; a line that never ran (the batch
expired first) or whose reply cannot be read is sent again. A batch that failed as a whole, or
that was cancelled outside the run, stops the run with its reason.

OpenAI also caps, per model, the input tokens of the batches in progress at once (the
"enqueued token limit" of your usage tier); a batch that would pass it fails at creation.
:attr:`BatchSettings.max_enqueued_tokens` keeps a run under it: batches are cut to that size
and a batch goes out only once the run's batches in progress leave room for it (tokens
estimated as a quarter of each request body's bytes, more than the tokens billed).

Re-attaching: each upload is recorded in the run directory (:class:`BatchJournal`) with the
request behind each line (a hash of the request), before the batch is created, and then the
batch's id. A resumed run in batch mode finds a request it asks again among the recorded lines
and waits on that batch -- polling it, or reading its files if it ended -- instead of uploading
it again; a recorded upload without a batch id (the run was killed between the two) is found
among the endpoint's batches by its file, or the batch is created then.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import urlsplit

from rageval._client._retry import BatchLineError, BatchLineLost, call_with_retries
from rageval._client._transport import encode_body
from rageval._client._usage import Tally
from rageval.errors import FatalJudgeError

if TYPE_CHECKING:
    from openai.types import FileObject

    from rageval._client._endpoint import Endpoint

__all__ = ["BatchJournal", "BatchQueue", "BatchSettings", "RecordedBatch", "request_key"]

log = logging.getLogger("rageval.judge")

R = TypeVar("R")
_ENDED = frozenset({"completed", "failed", "expired", "cancelled"})


@dataclass(frozen=True)
class BatchSettings:
    """How a run uses the Batch API."""

    #: seconds between two status checks of a batch in flight
    poll_interval: float = 30.0
    #: a batch goes out once no new request came for this long
    settle: float = 1.0
    #: at most this many requests, and bytes, in one batch (OpenAI: 50,000 and 200 MB)
    max_requests: int = 50_000
    max_bytes: int = 190 * 1024 * 1024
    completion_window: str = "24h"
    #: at most this many input tokens in the run's batches in progress at once (the
    #: provider's enqueued-token limit for the model; None: no cap)
    max_enqueued_tokens: int | None = None

    def __post_init__(self) -> None:
        if not (self.poll_interval > 0 and self.settle >= 0):
            raise ValueError("poll_interval must be > 0 and settle >= 0")
        if self.max_requests < 1 or self.max_bytes < 1:
            raise ValueError("max_requests and max_bytes must be >= 1")
        if self.max_enqueued_tokens is not None and self.max_enqueued_tokens < 1:
            raise ValueError("max_enqueued_tokens must be >= 1 (or None)")


@dataclass
class RecordedBatch:
    """An upload of a run: its file, the batch made of it (once created) and the request
    behind each line (custom_id -> :func:`request_key`)."""

    file_id: str
    endpoint: str
    #: the API path every line goes to, as the Batch API names it ("/v1/chat/completions")
    url: str
    lines: dict[str, str]
    batch_id: str | None = None
    #: its lines' input tokens, as estimated (what the enqueued-token cap counts)
    tokens: int = 0


class BatchJournal(Protocol):
    """Where a run keeps its uploads, so that a resumed run re-attaches to them."""

    def recorded(self) -> list[RecordedBatch]:
        """The uploads recorded so far (an earlier session's too)."""

    def uploaded(self, batch: RecordedBatch) -> None:
        """A file of requests was uploaded (no batch yet)."""

    def created(self, file_id: str, batch_id: str) -> None:
        """The batch of an uploaded file was created."""


def request_key(path: str, body: Mapping[str, Any]) -> str:
    """What identifies a request among batch lines: a hash of its path and body."""
    digest = hashlib.sha256(path.encode() + b"\0" + encode_body(body))
    return digest.hexdigest()


@dataclass
class _Queued:
    key: str
    path: str
    body: bytes
    future: asyncio.Future[dict[str, Any]]

    @property
    def tokens(self) -> int:
        """More than the input tokens the request is billed (its body holds them and more)."""
        return -(-len(self.body) // 4)


class _Room:
    """Estimated input tokens of the batches in progress, under a cap (None: no cap); a batch
    larger than the cap alone goes out when nothing else is in progress."""

    def __init__(self, cap: int | None) -> None:
        self.cap = cap
        self.used = 0
        self._waiters: list[asyncio.Future[None]] = []

    async def take(self, tokens: int) -> None:
        while self.cap is not None and self.used and self.used + tokens > self.cap:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            await waiter
        self.used += tokens

    def give(self, tokens: int) -> None:
        self.used -= tokens
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)


@dataclass
class _Batch:
    """A batch of the run: its lines' outcomes once it ended (a reply body or an error)."""

    record: RecordedBatch
    #: uploaded by an earlier session of the run (then a failed or cancelled batch is no
    #: reason to stop again: its lines are sent anew)
    earlier: bool = False
    collected: asyncio.Task[dict[str, dict[str, Any] | Exception]] | None = None
    waiting: dict[str, list[asyncio.Future[dict[str, Any]]]] = field(default_factory=dict)


class BatchQueue:
    """The Batch API queue of one endpoint for one run (see the module docstring)."""

    def __init__(
        self,
        endpoint: Endpoint,
        settings: BatchSettings | None = None,
        journal: BatchJournal | None = None,
    ) -> None:
        self._endpoint = endpoint
        self.settings = settings or BatchSettings()
        self._journal = journal
        self._url_prefix = urlsplit(endpoint.base_url).path.rstrip("/")
        self._room = _Room(self.settings.max_enqueued_tokens)
        self._pending: list[_Queued] = []
        self._pending_bytes = 0
        self._last = 0.0
        self._watcher: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        # an earlier session's lines, by request: (batch, custom_id), used once each
        self._recorded: dict[str, list[tuple[_Batch, str]]] = {}
        for record in journal.recorded() if journal is not None else ():
            if record.endpoint == endpoint.base_url:
                known = _Batch(record, earlier=True)
                for custom_id, key in record.lines.items():
                    self._recorded.setdefault(key, []).append((known, custom_id))
        #: batch id -> (lines done, lines) of each batch being waited on, as last polled
        self.waiting_on: dict[str, tuple[int, int]] = {}
        #: batches created, lines uploaded, and lines found in an earlier session's batches
        self.created = 0
        self.uploaded_lines = 0
        self.reattached_lines = 0

    # ------------------------------------------------------------------ requests
    async def submit(self, path: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """The reply body of `body` sent to `path` through a batch (see the module docstring)."""
        key = request_key(path, body)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[dict[str, Any]] = loop.create_future()
        found = self._recorded.get(key)
        if found:
            batch, custom_id = found.pop(0)
            self.reattached_lines += 1
            batch.waiting.setdefault(custom_id, []).append(future)
            self._follow(batch)
            return await future
        data = encode_body(body)
        self._pending.append(_Queued(key, path, data, future))
        self._pending_bytes += len(data)
        self._last = loop.time()
        full = len(self._pending) >= self.settings.max_requests
        if full or self._pending_bytes >= self.settings.max_bytes:
            self._send_pending()
        elif self._watcher is None:
            self._watcher = self._spawn(self._watch())
        return await future

    async def _watch(self) -> None:
        """Send the queued requests once none came for `settle` seconds."""
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                wait = self._last + self.settings.settle - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                else:
                    self._send_pending()
        finally:
            self._watcher = None

    def _send_pending(self) -> None:
        queued, self._pending, self._pending_bytes = self._pending, [], 0
        by_path: dict[str, list[_Queued]] = {}
        for item in queued:  # a batch goes to one API path
            by_path.setdefault(item.path, []).append(item)
        for items in by_path.values():
            for chunk in self._chunks(items):
                self._spawn(self._send(chunk))

    def _chunks(self, items: list[_Queued]) -> list[list[_Queued]]:
        """`items` cut into batches of at most the enqueued-token cap each."""
        cap = self.settings.max_enqueued_tokens
        if cap is None:
            return [items]
        chunks: list[list[_Queued]] = [[]]
        size = 0
        for item in items:
            if chunks[-1] and size + item.tokens > cap:
                chunks.append([])
                size = 0
            chunks[-1].append(item)
            size += item.tokens
        return chunks

    async def _send(self, queued: list[_Queued]) -> None:
        """Upload `queued` as one batch once the batches in progress leave room for it,
        create it, and hand each its line once it ended."""
        tokens = sum(item.tokens for item in queued)
        taken = False
        try:
            await self._room.take(tokens)
            taken = True
            lines = {f"r{i}": item for i, item in enumerate(queued, start=1)}
            url = self._url(queued[0].path)
            content = b"".join(
                b'{"custom_id":"%s","method":"POST","url":%s,"body":%s}\n'
                % (custom_id.encode(), json.dumps(url).encode(), item.body)
                for custom_id, item in lines.items()
            )
            uploaded = await self._upload(content)
            record = RecordedBatch(
                uploaded.id,
                self._endpoint.base_url,
                url,
                {custom_id: item.key for custom_id, item in lines.items()},
                tokens=tokens,
            )
            if self._journal is not None:
                self._journal.uploaded(record)
            self.uploaded_lines += len(lines)
            batch = _Batch(record)
            for custom_id, item in lines.items():
                batch.waiting.setdefault(custom_id, []).append(item.future)
            await self._create(batch)
            self._follow(batch)  # gives the room back once the batch ended
        except BaseException as exc:
            if taken:
                self._room.give(tokens)
            for item in queued:
                _fail(item.future, exc)
            if not isinstance(exc, Exception):
                raise

    # ------------------------------------------------------------------ batches
    def _follow(self, batch: _Batch) -> None:
        """Collect `batch` (once) and hand its lines to whoever waits on them."""
        if batch.collected is None:
            tokens = batch.record.tokens
            if batch.earlier:  # in progress at the endpoint: it holds its tokens there
                self._room.used += tokens
            batch.collected = self._spawn(self._collect(batch))
            batch.collected.add_done_callback(lambda _: self._room.give(tokens))
            batch.collected.add_done_callback(lambda _: self._deliver(batch))
        elif batch.collected.done():
            self._deliver(batch)

    def _deliver(self, batch: _Batch) -> None:
        assert batch.collected is not None and batch.collected.done()
        if batch.collected.cancelled():
            return
        failure = batch.collected.exception()
        outcomes = {} if failure is not None else batch.collected.result()
        waiting, batch.waiting = batch.waiting, {}
        for custom_id, futures in waiting.items():
            outcome = (
                failure
                or outcomes.get(custom_id)
                or BatchLineLost(
                    f"batch {batch.record.batch_id} ended without a line for this request"
                )
            )
            for future in futures:
                if isinstance(outcome, BaseException):
                    _fail(future, outcome)
                elif not future.done():
                    future.set_result(outcome)

    async def _create(self, batch: _Batch) -> None:
        client = await self._endpoint.client()
        created = await self._control(
            lambda: client.batches.create(
                input_file_id=batch.record.file_id,
                endpoint=batch.record.url,
                completion_window=self.settings.completion_window,
                metadata={"created_by": "rageval"},
            )
        )
        batch.record.batch_id = created.id
        self.created += 1
        if self._journal is not None:
            self._journal.created(batch.record.file_id, created.id)
        log.info("batch %s: %d requests", created.id, len(batch.record.lines))

    async def _collect(self, batch: _Batch) -> dict[str, dict[str, Any] | Exception]:
        """Wait for `batch` to end; each line's reply body, or the error it stands for."""
        client = await self._endpoint.client()
        record = batch.record
        if record.batch_id is None:  # uploaded by a session that stopped before creating it
            listed = await self._control(lambda: client.batches.list(limit=100))
            found = next((b for b in listed.data if b.input_file_id == record.file_id), None)
            if found is not None:
                record.batch_id = found.id
                if self._journal is not None:
                    self._journal.created(record.file_id, found.id)
            else:
                await self._create(batch)
        batch_id = record.batch_id
        assert batch_id is not None
        try:
            while True:
                state = await self._control(lambda: client.batches.retrieve(batch_id))
                if state.status in _ENDED:
                    break
                counts = state.request_counts
                done = counts.completed + counts.failed if counts is not None else 0
                self.waiting_on[batch_id] = (done, len(record.lines))
                await asyncio.sleep(self.settings.poll_interval)
        except FatalJudgeError as exc:
            if exc.status == 404:  # gone (an earlier session's, past its retention)
                return {}
            raise
        finally:
            self.waiting_on.pop(batch_id, None)
        if state.status == "failed":
            if batch.earlier:  # a resumed run tries its lines again
                return {}
            errors = getattr(state.errors, "data", None) or []
            why = "; ".join(f"{e.code}: {e.message}" for e in errors) or "no reason given"
            raise FatalJudgeError(f"batch {batch_id} at {self._endpoint.base_url} failed: {why}")
        outcomes: dict[str, dict[str, Any] | Exception] = {}
        for file_id in (state.output_file_id, state.error_file_id):
            if file_id:
                outcomes.update(_read_lines(await self._download(client, file_id)))
        if state.status == "cancelled":
            for custom_id in record.lines:
                if isinstance(outcomes.get(custom_id), dict):
                    continue
                outcomes[custom_id] = (
                    BatchLineLost(f"batch {batch_id} was cancelled before this request ran")
                    if batch.earlier
                    else FatalJudgeError(
                        f"batch {batch_id} at {self._endpoint.base_url} was cancelled before "
                        "this request ran (not by this run)"
                    )
                )
        return outcomes

    async def _download(self, client: Any, file_id: str) -> bytes:
        try:
            found = await self._control(lambda: client.files.content(file_id))
        except FatalJudgeError as exc:
            if exc.status == 404:
                return b""
            raise
        content: bytes = found.content
        return content

    # ------------------------------------------------------------------ plumbing
    async def _control(self, call: Callable[[], Awaitable[R]]) -> R:
        """A Files or Batches API call, with the endpoint's limiter and retries."""
        endpoint = self._endpoint
        return await call_with_retries(
            call,
            target=endpoint.target,
            limiter=endpoint.limiter,
            estimated_tokens=0,
            max_retries=endpoint.max_retries,
            tally=Tally(),
            check_fatal=endpoint.check_fatal,
            reached=lambda: True,
        )

    async def _upload(self, content: bytes) -> FileObject:
        """Upload a batch's input file: the first call of batch mode, so a 404 here says that
        the endpoint has no Batch API at all (llama.cpp, Ollama), which the error names --
        said of a chat request a 404 is an unknown model, said of a batch a purged one."""
        client = await self._endpoint.client()
        try:
            return await self._control(
                lambda: client.files.create(file=("rageval-batch.jsonl", content), purpose="batch")
            )
        except FatalJudgeError as e:
            if e.status != 404:
                raise
            raise FatalJudgeError(
                f"{self._endpoint.base_url} has no Batch API (404 from its Files API: "
                f"{e.detail}); batch mode needs an endpoint that offers OpenAI's Batch API "
                f"(OpenAI, Azure OpenAI...): run without --batch / batch=True",
                status=404,
                detail=e.detail,
            ) from None

    def _url(self, path: str) -> str:
        return self._url_prefix + path

    def _spawn(self, coro: Awaitable[R]) -> asyncio.Task[R]:
        task: asyncio.Task[R] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def aclose(self) -> None:
        """Stop waiting (a batch in flight runs on at the endpoint: a resume re-attaches)."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for item in self._pending:
            item.future.cancel()
        self._pending = []


def _read_lines(content: bytes) -> dict[str, dict[str, Any] | Exception]:
    """custom_id -> reply body (a 2xx response) or the error the line stands for."""
    out: dict[str, dict[str, Any] | Exception] = {}
    for raw in content.splitlines():
        try:
            line = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
            continue
        response = line.get("response")
        if isinstance(response, dict) and isinstance(response.get("status_code"), int):
            status, body = response["status_code"], response.get("body")
            if 200 <= status < 300 and isinstance(body, dict):
                out[line["custom_id"]] = body
            else:
                out[line["custom_id"]] = BatchLineError(status, body)
        else:
            error = line.get("error")
            error = error if isinstance(error, dict) else {}
            why = f"{error.get('code') or 'no response'}: {error.get('message') or ''}".strip()
            out[line["custom_id"]] = BatchLineLost(f"the batch line got no answer ({why})")
    return out


def _fail(future: asyncio.Future[Any], exc: BaseException) -> None:
    if future.done():
        return
    if isinstance(exc, asyncio.CancelledError):
        future.cancel()
    else:
        future.set_exception(exc)
