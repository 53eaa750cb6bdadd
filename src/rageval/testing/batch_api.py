"""The OpenAI Batch API of ``FakeOpenAI``: ``/v1/files`` and ``/v1/batches``.

A thin hook in the server's routing hands every request under those paths to :class:`BatchAPI`:

=======  =============================  ==========================================================
POST     /v1/files                      upload (``multipart/form-data``: ``purpose``, ``file``)
GET      /v1/files/{id}                 the file object
GET      /v1/files/{id}/content         the file's bytes
POST     /v1/batches                    create (``input_file_id``, ``endpoint``,
                                        ``completion_window``, ``metadata``)
GET      /v1/batches                    list, newest first
GET      /v1/batches/{id}               retrieve
POST     /v1/batches/{id}/cancel        cancel
=======  =============================  ==========================================================

A batch is checked when it is created, as OpenAI does: every line of its input file a JSON
object with a ``custom_id`` of its own, ``method`` POST and the batch's ``endpoint`` as its
``url``; a file that is not makes a ``failed`` batch whose ``errors`` name the lines. A good
batch is ``validating``, then ``in_progress`` for :attr:`BatchAPI.delay` seconds, then every
line is answered by the server's own chat (or embeddings) handling -- the script, the fault
plan and the handler, so the same judges answer in batch as online, the prefix-cache
simulation included -- and it is ``completed`` with an output file (the 2xx responses) and an
error file (the other responses, and lines that were never run). A fault that would drop the
connection becomes a 500 line.

Failures to inject, one per batch in the order batches are created (:meth:`BatchAPI.script`):

* :meth:`BatchFault.expire` -- only the first ``after`` lines are answered; the batch
  ``expired`` and the rest are error lines with code ``batch_expired`` (OpenAI's behaviour when
  the 24-hour window ends: partial output plus error lines);
* :meth:`BatchFault.fail` -- the batch ``failed`` as a whole (``errors``), no line answered;
* :meth:`BatchFault.line_errors` -- every ``every``-th line gets an error response (500 by
  default) instead of an answer, the others complete.

``POST /v1/batches/{id}/cancel`` before the lines are answered gives a ``cancelled`` batch
whose lines are error lines with code ``batch_cancelled``.

:attr:`BatchAPI.enqueued_token_limit` (None: no limit) is OpenAI's per-model cap on the input
tokens of the batches in progress at once: a batch that would pass it fails at creation with
the code ``token_limit_exceeded``. Tokens are counted as the server bills them
(ceil(characters / 4) of each line's messages and the structured-output schema).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import re
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from rageval.testing._wire import (
    CHAT_PATH,
    EMBEDDINGS_PATH,
    Close,
    Response,
    error_response,
    json_response,
)
from rageval.testing.records import RecordedRequest

#: how the server answers one request of a batch line, by the line's path
LineAnswer = Callable[[RecordedRequest], Awaitable[Response | Close]]

__all__ = ["BATCH_PATHS", "BatchAPI", "BatchFault"]

#: the path prefixes the Batch API owns
BATCH_PATHS = ("/v1/files", "/v1/batches")
_FILE = re.compile(r"^/v1/files/([\w-]+)(/content)?$")
_BATCH = re.compile(r"^/v1/batches/([\w-]+)(/cancel)?$")
_TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
_URLS = {"/v1/chat/completions": CHAT_PATH, "/v1/embeddings": EMBEDDINGS_PATH}


@dataclass(frozen=True)
class BatchFault:
    """A failure the Batch API produces for one batch (see the module docstring)."""

    kind: Literal["expire", "fail", "line_errors"]
    after: int = 0
    every: int = 0
    status: int = 500
    message: str = ""

    @staticmethod
    def expire(after: int) -> BatchFault:
        """The batch expires once `after` of its lines are answered."""
        return BatchFault("expire", after=after)

    @staticmethod
    def fail(message: str = "The batch could not be processed.") -> BatchFault:
        return BatchFault("fail", message=message)

    @staticmethod
    def line_errors(every: int, status: int = 500) -> BatchFault:
        """Every `every`-th line (the `every`-th, the 2·`every`-th...) gets an error."""
        if every < 1:
            raise ValueError("every must be >= 1")
        return BatchFault("line_errors", every=every, status=status)


@dataclass
class _Batch:
    obj: dict[str, Any]
    lines: list[dict[str, Any]]
    fault: BatchFault | None
    task: asyncio.Task[None] | None = None
    answering: bool = False
    cancel_asked: bool = False
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the input tokens of its lines (what the enqueued-token limit counts)
    tokens: int = 0


class BatchAPI:
    """Files and batches of one FakeOpenAI (``server.batch_api``); `answer` answers a line's
    request as the server would online, by its path (chat completions, embeddings)."""

    def __init__(self, answer: Mapping[str, LineAnswer], *, delay: float = 0.0) -> None:
        self._online = dict(answer)
        #: seconds a batch stays in progress before its lines are answered (settable)
        self.delay = delay
        #: the most input tokens the batches in progress may hold at once (None: no limit)
        self.enqueued_token_limit: int | None = None
        self.files: dict[str, dict[str, Any]] = {}
        self._content: dict[str, bytes] = {}
        self._batches: dict[str, _Batch] = {}
        self._script: deque[BatchFault] = deque()
        #: the requests of every line answered, in the order they were answered
        self.lines: list[RecordedRequest] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ test controls
    def script(self, *faults: BatchFault) -> None:
        """Faults for the next batches created, one each, in order."""
        with self._lock:
            self._script.extend(faults)

    @property
    def batches(self) -> list[dict[str, Any]]:
        """Every batch object, oldest first (copies)."""
        with self._lock:
            return [json.loads(json.dumps(b.obj)) for b in self._batches.values()]

    @property
    def uploads(self) -> list[bytes]:
        """The content of every file uploaded with purpose ``batch``, in order."""
        with self._lock:
            return [self._content[i] for i, f in self.files.items() if f["purpose"] == "batch"]

    def reset(self) -> None:
        with self._lock:
            self.files.clear()
            self._content.clear()
            self._batches.clear()
            self._script.clear()
            self.lines.clear()

    # ------------------------------------------------------------------ routing
    @staticmethod
    def owns(path: str) -> bool:
        return any(path == p or path.startswith(p + "/") for p in BATCH_PATHS)

    async def handle(
        self, method: str, path: str, headers: dict[str, str], raw: bytes
    ) -> Response | Close:
        if path == "/v1/files":
            if method != "POST":
                return error_response(405, f"Method {method} not allowed on {path}")
            return self._upload(headers, raw)
        if path == "/v1/batches":
            if method == "POST":
                return self._create(raw)
            if method == "GET":
                with self._lock:
                    data = [b.obj for b in reversed(self._batches.values())]
                return json_response(200, {"object": "list", "data": data, "has_more": False})
            return error_response(405, f"Method {method} not allowed on {path}")
        found = _FILE.match(path)
        if found and method == "GET":
            file_id, content = found.groups()
            if file_id not in self.files:
                return error_response(404, f"No such File object: {file_id}", code="not_found")
            if content:
                return Response(200, self._content[file_id])
            return json_response(200, self.files[file_id])
        found = _BATCH.match(path)
        if found:
            batch_id, cancel = found.groups()
            batch = self._batches.get(batch_id)
            if batch is None:
                return error_response(
                    404, f"No batch found with id '{batch_id}'.", code="not_found"
                )
            if cancel and method == "POST":
                return self._cancel(batch)
            if not cancel and method == "GET":
                return json_response(200, batch.obj)
        return error_response(404, f"Invalid URL ({method} {path})", code="unknown_url")

    # ------------------------------------------------------------------ files
    def _store(self, content: bytes, purpose: str, filename: str) -> dict[str, Any]:
        file_id = f"file-fake{next(self._ids):08x}"
        obj = {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
        }
        with self._lock:
            self.files[file_id] = obj
            self._content[file_id] = content
        return obj

    def _upload(self, headers: dict[str, str], raw: bytes) -> Response:
        parts = _multipart(headers.get("content-type", ""), raw)
        if parts is None or "file" not in parts or "purpose" not in parts:
            return error_response(
                400, "Expected multipart/form-data with the fields 'purpose' and 'file'."
            )
        purpose = parts["purpose"][1].decode("utf-8", "replace")
        filename, content = parts["file"]
        return json_response(200, self._store(content, purpose, filename or "upload.jsonl"))

    # ------------------------------------------------------------------ batches
    def _create(self, raw: bytes) -> Response:
        try:
            body = json.loads(raw)
        except ValueError:
            return error_response(400, "We could not parse the JSON body of your request.")
        if not isinstance(body, dict):
            return error_response(400, "We could not parse the JSON body of your request.")
        file_id, endpoint = body.get("input_file_id"), body.get("endpoint")
        if file_id not in self.files:
            return error_response(
                400, f"Invalid 'input_file_id': {file_id!r}.", param="input_file_id"
            )
        if self.files[file_id]["purpose"] != "batch":
            return error_response(400, "The input file must be uploaded with purpose 'batch'.")
        if endpoint not in _URLS:
            return error_response(400, f"Invalid 'endpoint': {endpoint!r}.", param="endpoint")
        if body.get("completion_window") != "24h":
            return error_response(400, "Invalid 'completion_window': only '24h' is supported.")
        now = int(time.time())
        batch_id = f"batch_fake{next(self._ids):08x}"
        lines, problems = _lines(self._content[file_id], endpoint)
        with self._lock:
            fault = self._script.popleft() if self._script else None
        obj: dict[str, Any] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": endpoint,
            "errors": None,
            "input_file_id": file_id,
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": None,
            "expires_at": now + 24 * 3600,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
        }
        batch = _Batch(obj, lines, fault, tokens=sum(_line_tokens(line) for line in lines))
        with self._lock:
            enqueued = sum(
                b.tokens for b in self._batches.values() if b.obj["status"] not in _TERMINAL
            )
            self._batches[batch_id] = batch
        limit = self.enqueued_token_limit
        if limit is not None and not problems and enqueued + batch.tokens > limit:
            problems = [
                {
                    "code": "token_limit_exceeded",
                    "message": f"Enqueued token limit reached for {_model(lines)}. Limit: "
                    f"{limit:,} enqueued tokens. Please try again once some in_progress "
                    "batches have been completed.",
                }
            ]
        if problems or (fault is not None and fault.kind == "fail"):
            errors = problems or [{"code": "failed", "message": fault.message if fault else ""}]
            obj.update(
                status="failed",
                failed_at=now,
                errors={
                    "object": "list",
                    "data": [{"param": None, "line": None, **e} for e in errors],
                },
            )
        else:
            batch.task = asyncio.ensure_future(self._run(batch))
        return json_response(200, obj)

    def _cancel(self, batch: _Batch) -> Response:
        obj = batch.obj
        if obj["status"] in _TERMINAL or obj["status"] == "cancelling":
            return error_response(409, f"Cannot cancel a batch with status '{obj['status']}'.")
        obj.update(status="cancelling", cancelling_at=int(time.time()))
        batch.cancel_asked = True
        if not batch.answering and batch.task is not None:
            batch.task.cancel()  # still waiting: no line will run
            self._finish(batch, "cancelled")
        return json_response(200, obj)

    async def _run(self, batch: _Batch) -> None:
        await asyncio.sleep(0)
        batch.obj.update(status="in_progress", in_progress_at=int(time.time()))
        await asyncio.sleep(self.delay)
        batch.answering = True
        fault = batch.fault
        lines = batch.lines
        if fault is not None and fault.kind == "expire":
            lines = lines[: fault.after]
        answers = await asyncio.gather(
            *(self._answer(i, line, fault) for i, line in enumerate(lines, start=1))
        )
        for line, answer in zip(lines, answers, strict=True):
            batch.results[line["custom_id"]] = answer
        expired = fault is not None and fault.kind == "expire"
        self._finish(
            batch, "cancelled" if batch.cancel_asked else "expired" if expired else "completed"
        )

    async def _answer(
        self, number: int, line: dict[str, Any], fault: BatchFault | None
    ) -> dict[str, Any]:
        path = _URLS[line["url"]]
        if fault is not None and fault.kind == "line_errors" and number % fault.every == 0:
            response: Response | Close = error_response(
                fault.status, "The server had an error processing this request."
            )
        else:
            record = RecordedRequest(path, {}, line["body"], time.monotonic())
            self.lines.append(record)
            response = await self._online[path](record)
        if isinstance(response, Close):  # a dropped connection has no line of its own
            response = error_response(500, "The server had an error processing this request.")
        return {
            "response": {
                "status_code": response.status,
                "request_id": f"req_fakebatch{number:08x}",
                "body": json.loads(response.body),
            },
            "error": None,
        }

    def _finish(self, batch: _Batch, status: str) -> None:
        obj = batch.obj
        now = int(time.time())
        code = {"expired": "batch_expired", "cancelled": "batch_cancelled"}.get(status)
        out, err = [], []
        completed = failed = 0
        for number, line in enumerate(batch.lines, start=1):
            found = batch.results.get(line["custom_id"])
            if found is None:  # never ran
                found = {
                    "response": None,
                    "error": {
                        "code": code or "batch_failed",
                        "message": "This request could not be executed before the batch "
                        f"was {status}.",
                    },
                }
            entry = {"id": f"batch_req_fake{number:08x}", "custom_id": line["custom_id"], **found}
            response = found["response"]
            if response is not None and 200 <= response["status_code"] < 300:
                out.append(entry)
                completed += 1
            else:
                err.append(entry)
                failed += 1

        def store(entries: list[dict[str, Any]], name: str) -> str | None:
            if not entries:
                return None
            text = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in entries)
            return str(self._store(text.encode(), "batch_output", name)["id"])

        obj.update(
            status="finalizing",
            finalizing_at=now,
            request_counts={"total": len(batch.lines), "completed": completed, "failed": failed},
            output_file_id=store(out, f"{obj['id']}_output.jsonl"),
            error_file_id=store(err, f"{obj['id']}error_response.jsonl"),
        )
        obj.update(status=status, **{f"{status}_at": now})


def _line_tokens(line: dict[str, Any]) -> int:
    """A line's input tokens, as the server bills a request: its messages and schema."""
    body = line["body"]
    record = RecordedRequest(CHAT_PATH, {}, body, 0.0)
    return math.ceil((record.prompt_chars + len(record.schema_text)) / 4)


def _model(lines: list[dict[str, Any]]) -> str:
    model = lines[0]["body"].get("model") if lines else None
    return model if isinstance(model, str) else "the model"


def _lines(content: bytes, endpoint: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The request lines of an input file, and the problems that fail the batch."""
    lines: list[dict[str, Any]] = []
    problems: list[dict[str, Any]] = []
    seen: set[str] = set()
    for number, raw in enumerate(content.decode("utf-8", "replace").splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            line = None
        if not isinstance(line, dict) or not isinstance(line.get("body"), dict):
            problems.append({"code": "invalid_json_line", "message": "not a JSON request line",
                             "line": number})  # fmt: skip
            continue
        custom_id = line.get("custom_id")
        if not isinstance(custom_id, str) or custom_id in seen:
            problems.append({"code": "duplicate_custom_id", "message": "custom_id must be unique",
                             "line": number})  # fmt: skip
        elif line.get("method") != "POST" or line.get("url") != endpoint:
            problems.append({"code": "mismatched_endpoint", "line": number,
                             "message": f"method must be POST and url {endpoint}"})  # fmt: skip
        else:
            seen.add(custom_id)
            lines.append(line)
    if not lines and not problems:
        problems.append({"code": "empty_file", "message": "the input file has no request"})
    return lines, problems


def _multipart(content_type: str, raw: bytes) -> dict[str, tuple[str | None, bytes]] | None:
    """The fields of a multipart/form-data body: name -> (filename, content)."""
    found = re.search(r'boundary="?([^";]+)"?', content_type)
    if not content_type.startswith("multipart/form-data") or found is None:
        return None
    boundary = b"--" + found.group(1).encode()
    fields: dict[str, tuple[str | None, bytes]] = {}
    for part in raw.split(boundary)[1:]:
        if part.startswith(b"--"):
            break
        head, _, body = part.lstrip(b"\r\n").partition(b"\r\n\r\n")
        disposition = head.decode("utf-8", "replace")
        name = re.search(r'name="([^"]*)"', disposition)
        filename = re.search(r'filename="([^"]*)"', disposition)
        if name is not None:
            content = body[:-2] if body.endswith(b"\r\n") else body
            fields[name.group(1)] = (filename.group(1) if filename else None, content)
    return fields
