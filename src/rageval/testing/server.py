"""An OpenAI-compatible HTTP server for tests and benchmarks, standard library only.

``FakeOpenAI`` answers ``POST /v1/chat/completions``, ``POST /v1/embeddings``,
``GET /v1/models`` and the Batch API (``/v1/files``, ``/v1/batches``:
:mod:`rageval.testing.batch_api`) the way the real API does, closely enough for the ``openai`` SDK to parse
every reply. What a chat request gets back is decided, in this order, by: the API-key check,
the model allow-list, the structured-output modes the server claims to support, a random
``FaultPlan``, the queue filled by ``script()``, and finally the ``handler``.

The server runs on its own event loop in a daemon thread, so synchronous and asynchronous
clients in the test's thread can both use it. ``python -m rageval.testing.serve`` runs it as a
process of its own (:mod:`rageval.testing.serve`).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import hashlib
import inspect
import itertools
import json
import math
import struct
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from rageval.testing._wire import (
    CHAT_PATH,
    EMBEDDINGS_PATH,
    FAKE_API_KEY,
    MAX_HEADER_BYTES,
    MODELS_PATH,
    PROPS_PATH,
    REASONS,
    ROUTES,
    Close,
    Response,
    error_response,
    estimate_tokens,
    json_response,
    llama_context_error,
)
from rageval.testing.prompt_cache import PrefixCache
from rageval.testing.records import (
    Fault,
    FaultPlan,
    Handler,
    RecordedRequest,
    Reply,
    ReplyDetails,
)
from rageval.testing.schema import schema_instance, strict_schema_problem, truncated_reply

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "CHAT_PATH",
    "EMBEDDINGS_PATH",
    "FAKE_API_KEY",
    "MODELS_PATH",
    "FakeOpenAI",
    "Fault",
    "FaultPlan",
    "Handler",
    "RecordedRequest",
    "Reply",
    "ReplyDetails",
]


def hash_embedding(text: str, dim: int) -> list[float]:
    """A unit vector of ``dim`` float32 values determined by ``text`` alone."""
    seed = text.encode("utf-8", "surrogatepass")
    raw: list[float] = []
    block = 0
    while len(raw) < dim:
        digest = hashlib.blake2b(seed, digest_size=64, salt=block.to_bytes(16, "little")).digest()
        raw.extend(v / 2**31 - 1.0 for v in struct.unpack("<16I", digest))
        block += 1
    del raw[dim:]
    norm = math.sqrt(sum(v * v for v in raw)) or 1.0
    # Round through float32 so that "float" and "base64" encodings carry identical numbers.
    return list(struct.unpack(f"<{dim}f", struct.pack(f"<{dim}f", *(v / norm for v in raw))))


class FakeOpenAI:
    """An OpenAI-compatible server on 127.0.0.1 with scripted replies and injected faults.

    ``latency`` (seconds, settable while running) delays every successful answer (chat,
    embeddings, ``Fault.truncated`` and ``Fault.malformed_http``) with ``asyncio.sleep``, so
    concurrent requests overlap; error statuses and dropped connections come back at once.
    A request with ``strict: true`` whose schema OpenAI would refuse gets OpenAI's 400.
    ``embedder`` replaces the hash vectors (e.g. to give chosen texts chosen similarities);
    ``keep_records=False`` stops recording requests (for long benchmark runs).
    ``context_window`` (tokens, estimated at 4 characters each) makes a chat request whose
    prompt and ``max_tokens`` together exceed it get OpenAI's 400 ``context_length_exceeded``
    (in llama.cpp mode, as llama-server: a prompt over it gets llama.cpp's 400, and a reply
    that would not fit beside its prompt stops, ``finish_reason: "length"``, where the
    context is full; ``GET /props`` reports it as the slots' ``n_ctx``; with
    ``list_window=True`` the model list gives it as each model's ``max_model_len``, as vLLM's).
    ``ignore_n=True`` answers every chat request with one choice whatever its ``n`` (as Ollama
    does). ``llama_cpp_slots=N`` answers as llama.cpp's llama-server with N slots does: its
    models are ``owned_by: "llamacpp"``, ``GET /props`` reports ``total_slots`` (404
    otherwise), a chat request with ``n`` above N gets its 400, and there is no Batch API
    (``/v1/files`` and ``/v1/batches`` answer 404).

    Usage, as OpenAI reports it: ``prompt_tokens`` counts the message texts and the
    structured-output schema sent (``response_format`` or ``tools``), at 4 characters a token;
    ``usage.prompt_tokens_details.cached_tokens`` says how much of the prompt an automatic
    prefix cache served (:mod:`rageval.testing.prompt_cache`; ``prompt_cache=False`` reports
    0). A ``Reply`` may set any of these counts itself.

    ``batch_api`` (:class:`~rageval.testing.batch_api.BatchAPI`) serves ``/v1/files`` and
    ``/v1/batches``; ``batch_delay`` seconds pass before a batch's lines are answered, by the
    same script, fault plan and handler as online requests.
    """

    def __init__(
        self,
        handler: Handler | None = None,
        *,
        latency: float = 0.0,
        embed_dim: int = 8,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        models: Collection[str] | None = None,
        supports: Collection[str] = ("json_schema", "tools", "json"),
        faults: FaultPlan | None = None,
        embedder: Callable[[str], Sequence[float]] | None = None,
        keep_records: bool = True,
        context_window: int | None = None,
        ignore_n: bool = False,
        llama_cpp_slots: int | None = None,
        list_window: bool = False,
        prompt_cache: bool = True,
        batch_delay: float = 0.0,
    ) -> None:
        unknown = set(supports) - {"json_schema", "tools", "json"}
        if unknown:
            raise ValueError(f"unknown modes in supports: {sorted(unknown)}")
        self.handler: Handler | None = handler
        self.latency = latency
        self.embed_dim = embed_dim
        self.host = host
        self.port = port
        self.api_key = api_key
        self.models = frozenset(models) if models is not None else None
        self.supports = frozenset(supports)
        self.faults = faults
        self.embedder = embedder
        self.keep_records = keep_records
        self.context_window = context_window
        self.ignore_n = ignore_n
        self.llama_cpp_slots = llama_cpp_slots
        self.list_window = list_window
        self.prompt_cache: PrefixCache | None = PrefixCache() if prompt_cache else None
        from rageval.testing.batch_api import BatchAPI

        #: the Batch API (files and batches; ``batch_delay``: seconds a batch is in progress)
        self.batch_api = BatchAPI(
            {CHAT_PATH: self._chat, EMBEDDINGS_PATH: self._embeddings}, delay=batch_delay
        )
        self.handler_errors: list[BaseException] = []
        self.max_in_flight = 0
        self.in_flight = 0
        self.connections_opened = 0
        self._records: dict[int, RecordedRequest] = {}
        self._script: deque[Reply | Fault] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    # ----------------------------------------------------------------- lifecycle
    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not running; call start() first")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def running(self) -> bool:
        return self._server is not None

    def start(self) -> Self:
        if self._thread is not None:
            return self
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="FakeOpenAI", daemon=True)
        thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._open(), loop).result(timeout=10)
        except BaseException:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            loop.close()
            raise
        self._loop, self._thread = loop, thread
        return self

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._close(), loop).result(timeout=10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            loop.close()
            self._loop = self._thread = None
            self._server = None

    async def _open(self) -> None:
        self._server = await asyncio.start_server(
            self._serve_connection, self.host, self.port, limit=MAX_HEADER_BYTES
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _close(self) -> None:
        server = self._server
        if server is not None:
            server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if server is not None:
            await server.wait_closed()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)

    # ------------------------------------------------------------- test controls
    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._records.values())

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == CHAT_PATH]

    @property
    def embedding_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == EMBEDDINGS_PATH]

    def script(self, *replies: Reply | Fault) -> None:
        """Queue answers for the next chat requests, before falling back to the handler."""
        for reply in replies:
            if not isinstance(reply, (Reply, Fault)):
                raise TypeError(f"script() takes Reply or Fault, got {type(reply).__name__}")
        with self._lock:
            self._script.extend(replies)

    @property
    def scripted_left(self) -> int:
        with self._lock:
            return len(self._script)

    def reset(self) -> None:
        """Forget recorded requests, the script, counters and the fault plan's progress."""
        with self._lock:
            self._records.clear()
            self._script.clear()
            self.handler_errors.clear()
            self.max_in_flight = self.in_flight
            self.connections_opened = 0
        if self.faults is not None:
            self.faults.reset()
        self.batch_api.reset()

    # ---------------------------------------------------------------------- HTTP
    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        self.connections_opened += 1
        try:
            while await self._serve_one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # stop() cancels open connections; ending quietly keeps asyncio's stream callback
            # (which calls task.exception()) from logging the cancellation as an error.
            pass
        finally:
            self._connections.discard(task)
            writer.close()

    async def _serve_one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Read one request and answer it; False when the connection must close."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        except asyncio.LimitOverrunError:
            await self._write(writer, error_response(431, "request headers too large"), False)
            return False
        request_line, *header_lines = head[:-4].decode("latin-1").split("\r\n")
        try:
            method, target, version = request_line.split(" ", 2)
        except ValueError:
            await self._write(writer, error_response(400, "malformed request line"), False)
            return False
        headers: dict[str, str] = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            await self._write(
                writer, error_response(501, "chunked request bodies are not supported"), False
            )
            return False
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError:
            await self._write(writer, error_response(400, "bad content-length"), False)
            return False
        raw = await reader.readexactly(length) if length > 0 else b""
        keep_alive = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"

        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        key = next(self._ids)
        try:
            outcome = await self._dispatch(key, method, target.split("?", 1)[0], headers, raw)
            if isinstance(outcome, Close) and outcome.delay > 0:
                await asyncio.sleep(outcome.delay)
        finally:
            # Settled before any byte goes out, so a client that holds its reply already sees
            # the request as finished and no longer in flight.
            self.in_flight -= 1
            self._finish(key)
        if isinstance(outcome, Close):
            return False
        await self._write(writer, outcome, keep_alive)
        return keep_alive

    @staticmethod
    async def _write(writer: asyncio.StreamWriter, response: Response, keep_alive: bool) -> None:
        lines = [
            f"HTTP/1.1 {response.status} {REASONS.get(response.status, 'Unknown')}",
            "content-type: application/json",
            f"content-length: {len(response.body)}",
            f"connection: {'keep-alive' if keep_alive else 'close'}",
            *(f"{name}: {value}" for name, value in response.headers),
        ]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + response.body)
        await writer.drain()

    def _record(self, key: int, record: RecordedRequest) -> None:
        if not self.keep_records:
            return
        with self._lock:
            self._records[key] = record

    def _finish(self, key: int) -> None:
        now = time.monotonic()
        with self._lock:
            record = self._records.get(key)
            if record is not None:
                self._records[key] = dataclasses.replace(record, finished=now)

    # ------------------------------------------------------------------ routing
    async def _dispatch(
        self, key: int, method: str, path: str, headers: dict[str, str], raw: bytes
    ) -> Response | Close:
        started = time.monotonic()
        body: Any = {}
        bad_json = False
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                bad_json = True
        record = RecordedRequest(path, headers, body if isinstance(body, dict) else {}, started)
        self._record(key, record)

        if self.batch_api.owns(path) and self.llama_cpp_slots is None:
            if (
                self.api_key is not None
                and headers.get("authorization") != f"Bearer {self.api_key}"
            ):
                return error_response(401, "Incorrect API key provided.", code="invalid_api_key")
            return await self.batch_api.handle(method, path, headers, raw)
        if path not in ROUTES:
            return error_response(404, f"Invalid URL ({method} {path})", code="unknown_url")
        if method != ROUTES[path]:
            return error_response(405, f"Method {method} not allowed on {path}")
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            return error_response(401, "Incorrect API key provided.", code="invalid_api_key")
        if path == MODELS_PATH:
            return self._models_response()
        if path == PROPS_PATH:
            if self.llama_cpp_slots is None:
                return error_response(404, f"Invalid URL ({method} {path})", code="unknown_url")
            props: dict[str, Any] = {"total_slots": self.llama_cpp_slots, "build_info": "fake"}
            if self.context_window is not None:
                props["default_generation_settings"] = {"n_ctx": self.context_window}
            return json_response(200, props)
        if bad_json or not isinstance(body, dict):
            return error_response(400, "We could not parse the JSON body of your request.")
        model = record.model
        if model is None:
            return error_response(400, "you must provide a model parameter", param="model")
        if self.models is not None and model not in self.models:
            return error_response(
                404,
                f"The model `{model}` does not exist or you do not have access to it.",
                code="model_not_found",
            )
        if path == EMBEDDINGS_PATH:
            return await self._embeddings(record)
        return await self._chat(record)

    def _models_response(self) -> Response:
        names = sorted(self.models) if self.models is not None else ["fake-model"]
        owner = "llamacpp" if self.llama_cpp_slots is not None else "rageval"
        data: list[dict[str, Any]] = [
            {"id": n, "object": "model", "created": 0, "owned_by": owner} for n in names
        ]
        if self.list_window and self.context_window is not None:
            for model in data:
                model["max_model_len"] = self.context_window
        return json_response(200, {"object": "list", "data": data})

    # --------------------------------------------------------------------- chat
    async def _chat(self, record: RecordedRequest) -> Response | Close:
        if not record.messages:
            return error_response(400, "'messages' must be a non-empty array", param="messages")
        if record.body.get("stream"):
            return error_response(400, "FakeOpenAI does not support streaming", param="stream")
        mode = record.mode
        if mode != "text" and mode not in self.supports:
            param = "tools" if mode == "tools" else "response_format"
            return error_response(
                400, f"This server does not support {mode} ({param}).", param=param
            )
        n, slots = record.body.get("n"), self.llama_cpp_slots
        if slots is not None and isinstance(n, int) and n > slots:
            # llama-server decodes the n generations of a request in n slots at once
            return error_response(
                400, f"Field 'n': Value must be between 1 <= value <= {slots}, but got {n}"
            )
        schema = record.schema
        problem = strict_schema_problem(schema) if schema is not None and record.strict else None
        if problem:
            param = "tools" if mode == "tools" else "response_format"
            return error_response(400, f"Invalid schema for {param}: {problem}", param=param)

        if self.context_window is not None:
            over = await self._over_context(record, self.context_window)
            if over is not None:
                return over
        return await self._respond(record, self._fault, self._completion)

    async def _over_context(self, record: RecordedRequest, window: int) -> Response | None:
        """What a request whose prompt, or prompt and reply budget, exceed the context `window`
        gets: llama-server's 400 for a prompt over it, or its reply stopped where the context is
        full; OpenAI's ``context_length_exceeded``. None: it fits."""
        budget = record.body.get("max_tokens")
        prompt = estimate_tokens(record.prompt_chars)
        wanted = prompt + (budget if isinstance(budget, int) else 0)
        if self.llama_cpp_slots is not None and prompt > window:
            return llama_context_error(prompt, window)
        if self.llama_cpp_slots is not None and wanted > window:
            # llama-server decodes until its context is full, whatever max_tokens says,
            # and counts the tokens it generated: fewer than max_tokens
            await self._delay()
            room = window - prompt
            kind: Literal["tool_arguments", "text"] = (
                "tool_arguments" if record.mode == "tools" else "text"
            )
            cut = truncated_reply(record.schema)
            return self._completion(record, Reply(kind, cut, "length", completion_tokens=room))
        if wanted > window:
            return error_response(
                400,
                f"This model's maximum context length is {window} tokens. "
                f"However, you requested {wanted} tokens. Please reduce the length of the "
                "messages or completion.",
                code="context_length_exceeded",
                param="messages",
            )
        return None

    async def _respond(
        self,
        record: RecordedRequest,
        fault: Callable[[RecordedRequest, Fault], Awaitable[Response | Close]],
        render: Callable[[RecordedRequest, Reply], Response],
    ) -> Response | Close:
        """What a chat request that passed the checks gets, in the wire format of `fault` and
        `render` (this server's, or the Anthropic one's): a fault the plan draws, else the next
        scripted answer, else the handler's (a handler that raises gets a 500, and its error is
        kept); a reply comes after the server's latency."""
        answer: Reply | Fault | None = self.faults.draw(record.path) if self.faults else None
        if answer is None:
            with self._lock:
                answer = self._script.popleft() if self._script else None
        if answer is None:
            try:
                answer = await self._call_handler(record)
            except Exception as exc:  # the handler is test code: report its bug, keep serving
                self.handler_errors.append(exc)
                name = type(self).__name__
                return error_response(500, f"{name} handler raised {type(exc).__name__}: {exc}")
        if isinstance(answer, Fault):
            return await fault(record, answer)
        await self._delay()
        return render(record, answer)

    async def _call_handler(self, record: RecordedRequest) -> Reply | Fault:
        handler = self.handler or default_handler
        result = handler(record)
        if inspect.isawaitable(result):
            result = await result
        if not isinstance(result, (Reply, Fault)):
            raise TypeError(f"handler must return Reply or Fault, got {type(result).__name__}")
        return result

    async def _delay(self) -> None:
        if self.latency > 0:
            await asyncio.sleep(self.latency)

    async def _fault(self, record: RecordedRequest, fault: Fault) -> Response | Close:
        if fault.kind == "status":
            param = "model" if fault.status_code == 404 else None
            return error_response(
                fault.status_code, fault.message, param=param, headers=list(fault.headers)
            )
        if fault.kind == "timeout":
            return Close(fault.seconds)
        if fault.kind == "drop":
            return Close()
        broken = b'{"id": "chatcmpl-broken", "object": "chat.completion", "choi'
        cut: Literal["tool_arguments", "text"] = (
            "tool_arguments" if record.mode == "tools" else "text"
        )
        return await self._faulty_reply(record, fault, broken, cut, self._completion)

    async def _faulty_reply(
        self,
        record: RecordedRequest,
        fault: Fault,
        broken: bytes,
        cut: Literal["tool_arguments", "text"],
        render: Callable[[RecordedRequest, Reply], Response],
    ) -> Response:
        """A fault that answers, after the latency, in the wire format of `render`: the body
        cut off mid-JSON (`broken`), the fault's text as the reply, or a reply of kind `cut`
        stopped at the token limit (the fault's content, else the start of a reply that fits
        the schema)."""
        await self._delay()
        if fault.kind == "malformed_http":
            return Response(200, broken)
        if fault.kind == "garbage":
            return render(record, Reply.text(fault.content or ""))
        content = fault.content if fault.content is not None else truncated_reply(record.schema)
        used = fault.completion_tokens
        return render(record, Reply(cut, content, "length", completion_tokens=used))

    def _completion(self, record: RecordedRequest, reply: Reply) -> Response:
        number = next(self._ids)
        n = record.body.get("n")
        count = n if isinstance(n, int) and n > 0 and not self.ignore_n else 1
        if reply.kind == "choices":
            replies: list[Reply] = list(reply.value)[:count]
        else:
            replies = [reply] * count
        choices = []
        completion = 0
        for i, one in enumerate(replies):
            message, text = self._message(record, one, number)
            choices.append(
                {
                    "index": i,
                    "message": message,
                    "logprobs": _logprobs(record, one),
                    "finish_reason": one.finish_reason,
                }
            )
            completion += one.reported_completion_tokens(text, record.body.get("max_tokens"))
        prompt, cached = self._prompt_usage(record, replies[0])
        payload = {
            "id": f"chatcmpl-fake{number:08x}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": record.model,
            "system_fingerprint": "fp_rageval_fake",
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }
        return json_response(200, payload, [("x-request-id", f"req_fake{number:08x}")])

    def _prompt_usage(self, record: RecordedRequest, reply: Reply) -> tuple[int, int]:
        """The prompt tokens of `reply` to `record` and how many of them the provider's prompt
        cache served: what the reply says, else estimated from the prompt (and its schema) and
        looked up in the server's prefix cache."""
        prompt = reply.prompt_tokens
        if prompt is None:
            prompt = estimate_tokens(record.prompt_chars + len(record.schema_text))
        cached = reply.cached_tokens
        if cached is None:
            cache = self.prompt_cache
            cached = cache.lookup(record.model or "", record.prompt_text, prompt) if cache else 0
        return prompt, cached

    @staticmethod
    def _message(record: RecordedRequest, reply: Reply, number: int) -> tuple[dict[str, Any], str]:
        """The assistant message of one choice, and its text."""
        if reply.kind == "json":
            text = json.dumps(reply.value, ensure_ascii=False)
            as_tool = record.mode == "tools"
        else:
            text = str(reply.value)
            as_tool = reply.kind == "tool_arguments"
        message: dict[str, Any] = {"role": "assistant", "content": text, "refusal": None}
        if as_tool:
            call = {
                "id": f"call_{number:08x}",
                "type": "function",
                "function": {"name": record.tool_name or "answer", "arguments": text},
            }
            message["content"] = None
            message["tool_calls"] = [call]
        return message, text

    # --------------------------------------------------------------- embeddings
    async def _embeddings(self, record: RecordedRequest) -> Response | Close:
        texts = _embedding_inputs(record.body.get("input"))
        if isinstance(texts, str):
            return error_response(400, texts, param="input")
        fault = self.faults.draw(record.path) if self.faults else None
        if fault is not None:
            return await self._fault(record, fault)
        encoding = record.body.get("encoding_format", "float")
        if encoding not in ("float", "base64"):
            return error_response(
                400, f"unknown encoding_format {encoding!r}", param="encoding_format"
            )
        dimensions = record.body.get("dimensions")
        dim = dimensions if isinstance(dimensions, int) and dimensions > 0 else self.embed_dim
        await self._delay()
        data = []
        for index, text in enumerate(texts):
            vector = list(self.embedder(text)) if self.embedder else hash_embedding(text, dim)
            packed: Any = vector
            if encoding == "base64":
                packed = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
            data.append({"object": "embedding", "index": index, "embedding": packed})
        tokens = sum(estimate_tokens(len(t)) for t in texts)
        payload = {
            "object": "list",
            "data": data,
            "model": record.model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
        return json_response(200, payload)


def _embedding_inputs(value: Any) -> list[str] | str:
    """The texts to embed, or an error message. Token arrays are embedded by their repr."""
    items: list[Any] = (
        [value] if isinstance(value, str) else value if isinstance(value, list) else []
    )
    if items and all(isinstance(v, int) for v in items):
        items = [items]
    if not items:
        return "'input' must be a non-empty string or array"
    texts: list[str] = []
    for item in items:
        if isinstance(item, str):
            if not item:
                return "'input' cannot contain an empty string"
            texts.append(item)
        elif isinstance(item, list) and item and all(isinstance(v, int) for v in item):
            texts.append(repr(item))
        else:
            return "'input' items must be strings or token arrays"
    return texts


def _logprobs(record: RecordedRequest, reply: Reply) -> dict[str, Any] | None:
    """A choice's ``logprobs`` as OpenAI sends them (``content``: each token with its
    ``top_logprobs``, most likely first, as many as the request asked), when the request asked
    for them and the reply has them scripted; else None."""
    if record.body.get("logprobs") is not True or reply.logprobs is None:
        return None
    asked = record.body.get("top_logprobs")
    top_n = asked if isinstance(asked, int) and asked > 0 else 0

    def entry(token: str, logprob: float) -> dict[str, Any]:
        return {"token": token, "logprob": logprob, "bytes": list(token.encode())}

    content = []
    for scripted in reply.logprobs:
        token, logprob = scripted[0], scripted[1]
        alternatives = {token: logprob, **(scripted[2] if len(scripted) > 2 else {})}
        ranked = sorted(alternatives.items(), key=lambda item: -item[1])[:top_n]
        content.append({**entry(token, logprob), "top_logprobs": [entry(*a) for a in ranked]})
    return {"content": content, "refusal": None}


def default_handler(record: RecordedRequest) -> Reply:
    """A schema-valid instance when the request carries a schema, else the text ``ok``."""
    schema = record.schema
    if schema is not None:
        return Reply.json(schema_instance(schema))
    return Reply.text("ok")
