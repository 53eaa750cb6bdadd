"""A fake of Anthropic's Messages API, for testing the ``"anthropic"`` judge backend.

``FakeAnthropic`` answers ``POST /v1/messages`` and ``GET /v1/models`` the way Anthropic's API
does: the key in ``x-api-key``, an ``anthropic-version`` header, ``max_tokens`` required, the
system prompt in ``system``, a forced tool (``tools`` with an ``input_schema``,
``tool_choice={"type": "tool", "name": ...}``) answered with a ``tool_use`` block, usage as
``input_tokens`` (the prompt after the cached part), ``cache_read_input_tokens`` and
``output_tokens``, errors as ``{"type": "error", "error": {"type": ..., "message": ...}}``
(529 ``overloaded_error`` among them).

It is a :class:`~rageval.testing.server.FakeOpenAI` on another path: the same script, fault
plan, handlers and latency. A handler sees each request as its OpenAI equivalent (the system
prompt as the first message, the tool as a function whose parameters are the schema, forced),
so one handler scripts both fakes and the two backends can be compared on the same replies::

    with FakeAnthropic(handler) as server:
        judge = Judge("claude-x", backend="anthropic", base_url=server.base_url,
                      api_key=FAKE_API_KEY)

``requests`` records what the server was sent, as Anthropic's API has it.
"""

from __future__ import annotations

import json
import time
from typing import Any

from rageval.testing._wire import (
    CHAT_PATH,
    MODELS_PATH,
    Close,
    Response,
    estimate_tokens,
    json_response,
    text_of,
)
from rageval.testing.records import Fault, RecordedRequest, Reply
from rageval.testing.server import FakeOpenAI

__all__ = ["MESSAGES_PATH", "FakeAnthropic", "anthropic_error", "openai_view"]

MESSAGES_PATH = "/v1/messages"
# the error type Anthropic's API sends with each status
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_ROLES = ("user", "assistant")


def anthropic_error(
    status: int, message: str, headers: list[tuple[str, str]] | None = None
) -> Response:
    """An error response as Anthropic's API sends it."""
    kind = _ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return json_response(status, body, headers)


def openai_view(record: RecordedRequest) -> RecordedRequest:
    """A Messages API request as the chat completion it stands for (what handlers read)."""
    body = record.body
    messages: list[dict[str, Any]] = []
    system = text_of(body.get("system"))
    if system:
        messages.append({"role": "system", "content": system})
    for message in body.get("messages") or ():
        if isinstance(message, dict):
            messages.append(
                {"role": message.get("role"), "content": text_of(message.get("content"))}
            )
    view: dict[str, Any] = {
        "model": body.get("model"),
        "messages": messages,
        "max_tokens": body.get("max_tokens"),
    }
    if "temperature" in body:
        view["temperature"] = body["temperature"]
    tools = [t for t in body.get("tools") or () if isinstance(t, dict)]
    if tools:
        view["tools"] = [
            {
                "type": "function",
                "function": {"name": t.get("name"), "parameters": t.get("input_schema")},
            }
            for t in tools
        ]
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "tool":
        view["tool_choice"] = {"type": "function", "function": {"name": choice.get("name")}}
    return RecordedRequest(CHAT_PATH, record.headers, view, record.started)


class FakeAnthropic(FakeOpenAI):
    """Anthropic's Messages API on 127.0.0.1 (see the module docstring), with the options of
    :class:`~rageval.testing.server.FakeOpenAI`. ``api_key`` None accepts any key (but a
    request without ``x-api-key`` gets a 401); ``context_window`` (tokens, at 4 characters
    each) makes a longer prompt get the API's "prompt is too long"."""

    @property
    def message_requests(self) -> list[RecordedRequest]:
        """The ``POST /v1/messages`` requests so far, as sent."""
        return [r for r in self.requests if r.path == MESSAGES_PATH]

    async def _dispatch(
        self, key: int, method: str, path: str, headers: dict[str, str], raw: bytes
    ) -> Response | Close:
        try:
            body: Any = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        record = RecordedRequest(
            path, headers, body if isinstance(body, dict) else {}, time.monotonic()
        )
        self._record(key, record)
        given = headers.get("x-api-key")
        if not given or (self.api_key is not None and given != self.api_key):
            return anthropic_error(401, "invalid x-api-key")
        if path == MODELS_PATH and method == "GET":
            names = sorted(self.models) if self.models is not None else ["fake-claude"]
            data = [{"type": "model", "id": n, "display_name": n} for n in names]
            return json_response(200, {"data": data, "has_more": False})
        if path != MESSAGES_PATH:
            return anthropic_error(404, f"Not found: {method} {path}")
        if method != "POST":
            return anthropic_error(405, f"Method {method} not allowed")
        if not headers.get("anthropic-version"):
            return anthropic_error(400, "anthropic-version: header is required")
        if body is None or not isinstance(body, dict):
            return anthropic_error(400, "The request body is not valid JSON.")
        problem = _problem(record.body)
        if problem:
            return anthropic_error(400, problem)
        if self.models is not None and record.model not in self.models:
            return anthropic_error(404, f"model: {record.model}")
        view = openai_view(record)
        if self.context_window is not None:
            prompt = estimate_tokens(view.prompt_chars + len(view.schema_text))
            if prompt > self.context_window:
                return anthropic_error(
                    400, f"prompt is too long: {prompt} tokens > {self.context_window} maximum"
                )
        return await self._respond(view, self._anthropic_fault, self._anthropic_message)

    async def _anthropic_fault(self, view: RecordedRequest, fault: Fault) -> Response | Close:
        if fault.kind == "status":
            return anthropic_error(fault.status_code, fault.message, list(fault.headers))
        if fault.kind in ("timeout", "drop"):
            return Close(fault.seconds)
        broken = b'{"id": "msg_broken", "type": "message", "cont'
        return await self._faulty_reply(view, fault, broken, "text", self._anthropic_message)

    def _anthropic_message(self, view: RecordedRequest, reply: Reply) -> Response:
        number = next(self._ids)
        if reply.kind == "choices":  # the API has no n: the first choice
            reply = reply.value[0]
        block: dict[str, Any]
        value: Any = reply.value
        if reply.kind == "tool_arguments":
            try:
                value = json.loads(reply.value)
            except ValueError:
                value = None  # no object to give as a tool's input: the model wrote text
        if (
            reply.kind in ("json", "tool_arguments")
            and view.mode == "tools"
            and isinstance(value, dict)
        ):
            block = {"type": "tool_use", "id": f"toolu_fake{number:08x}",
                     "name": view.tool_name or "answer", "input": value}  # fmt: skip
            text, stop = json.dumps(value, ensure_ascii=False), "tool_use"
        else:
            text = (
                json.dumps(value, ensure_ascii=False) if reply.kind == "json" else str(reply.value)
            )
            block, stop = {"type": "text", "text": text}, "end_turn"
        if reply.finish_reason == "length":
            stop = "max_tokens"
        elif reply.finish_reason == "content_filter":
            stop = "refusal"
        prompt, cached = self._prompt_usage(view, reply)
        output = reply.reported_completion_tokens(text, view.body.get("max_tokens"))
        payload = {
            "id": f"msg_fake{number:08x}",
            "type": "message",
            "role": "assistant",
            "model": view.model,
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {
                "input_tokens": prompt - cached,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": cached,
                "output_tokens": output,
            },
        }
        return json_response(200, payload, [("request-id", f"req_fake{number:08x}")])


def _problem(body: dict[str, Any]) -> str | None:
    """What the API would refuse in a Messages request (400), if anything."""
    if not isinstance(body.get("model"), str):
        return "model: Field required"
    if not isinstance(body.get("max_tokens"), int) or body["max_tokens"] < 1:
        return "max_tokens: Field required (an integer >= 1)"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    roles = [m.get("role") if isinstance(m, dict) else None for m in messages]
    if any(role not in _ROLES for role in roles):
        return "messages: roles must be 'user' or 'assistant' (the system prompt goes in 'system')"
    if roles[0] != "user":
        return "messages: the first message must use the 'user' role"
    if "n" in body or "response_format" in body or "seed" in body:
        return "Extra inputs are not permitted (n, response_format, seed)"
    tools = body.get("tools")
    names: list[Any] = []
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict) or not isinstance(tool.get("input_schema"), dict):
            return "tools: each tool needs a name and an input_schema"
        if tool["input_schema"].get("type") != "object":
            return "tools.input_schema.type: Input should be 'object'"
        names.append(tool.get("name"))
    choice = body.get("tool_choice")
    if (
        isinstance(choice, dict)
        and choice.get("type") == "tool"
        and choice.get("name") not in names
    ):
        return f"tool_choice: no tool named {choice.get('name')!r}"
    return None
