"""The ``"anthropic"`` judge backend: Anthropic's native Messages API.

``POST {base_url}/messages`` (default base URL ``https://api.anthropic.com/v1``) with the key
in ``x-api-key`` and the API version in ``anthropic-version``, sent by rageval's own HTTP client
(no ``anthropic`` SDK). Structured output is one tool whose ``input_schema`` is the response
model's schema, forced with ``tool_choice``; the reply's ``tool_use`` block holds the object (a
model that answers in text instead is read like a reply in the ``json`` mode, and re-asked if
need be). The system messages go into the request's ``system`` field. The API has no ``n``
(each generation of ``Judge.ask_n`` is a request of its own) and no ``seed`` (a judge's seed is
not sent). Usage: ``input_tokens`` counts only the prompt after the last cache breakpoint, so
the prompt is that plus ``cache_creation_input_tokens`` and ``cache_read_input_tokens``, the
last being the cached part.

Errors are sorted like an OpenAI-compatible endpoint's (:mod:`rageval._client._retry`): 429
(after ``retry-after``), 529 ``overloaded_error`` and other 5xx are retried; 401, 403, 404 and
other 4xx are fatal, a 429 for a spending limit too; "prompt is too long" fails the one call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rageval._client._transport import BadBody
from rageval.judge._backend import (
    Completion,
    CompletionRequest,
    Exchange,
    count,
    estimate_prompt_tokens,
)

if TYPE_CHECKING:
    from rageval._client._endpoint import Endpoint
    from rageval.judge._modes import Shape

__all__ = ["ANTHROPIC_VERSION", "AnthropicBackend", "anthropic_headers"]

#: the version of the Messages API requests are written for (the ``anthropic-version`` header)
ANTHROPIC_VERSION = "2023-06-01"
#: the one structured-output mechanism of this backend
MODE = "tools"
_ROLES = ("user", "assistant")


def anthropic_headers(api_key: str | None) -> dict[str, str]:
    """The headers of every request to the Messages API."""
    return {
        "x-api-key": api_key or "",
        "anthropic-version": ANTHROPIC_VERSION,
        "content-type": "application/json",
        "accept": "application/json",
    }


class AnthropicBackend:
    """Messages of one Claude model at one endpoint of Anthropic's API."""

    kind = "anthropic"

    def __init__(self, endpoint: Endpoint, model: str) -> None:
        self.endpoint = endpoint
        self.model = model

    # ------------------------------------------------------------ identity

    def structured_output(self, mode: str, *, settled: bool) -> str | None:
        return MODE

    def honours_n(self) -> bool | None:
        return False

    def cache_identity(self) -> dict[str, Any]:
        return {"backend": self.kind}

    def preview(self, request: CompletionRequest) -> tuple[list[dict[str, Any]], str]:
        system, messages = _split(request.messages)
        sent = [{"role": "system", "content": system}, *messages] if system else messages
        return sent, json.dumps(_tooling(request.shape), separators=(",", ":"))

    # ------------------------------------------------------------- sending

    async def complete(self, request: CompletionRequest, exchange: Exchange) -> list[Completion]:
        system, messages = _split(request.messages)
        tooling = _tooling(request.shape)
        schema_chars = len(json.dumps(tooling, separators=(",", ":")))
        shown = [{"content": system}, *messages] if system else messages
        prompt = estimate_prompt_tokens(shown, schema_chars)

        def body(max_tokens: int) -> dict[str, Any]:
            sent: dict[str, Any] = {
                "model": self.model,
                "max_tokens": max_tokens,
                "messages": messages,
                "temperature": request.temperature,
                **tooling,
            }
            if system:
                sent["system"] = system
            return sent

        return await exchange.post_json(
            self.endpoint,
            "/messages",
            body,
            read=_read_message,
            prompt_tokens=prompt,
            max_tokens=request.max_tokens,
        )


def _split(messages: list[dict[str, str]]) -> tuple[str, list[dict[str, str]]]:
    """The system prompt (every system message, in order) and the conversation, with
    consecutive messages of one role joined: the API wants the roles to alternate."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    turns: list[dict[str, str]] = []
    for message in messages:
        role = message["role"]
        if role not in _ROLES:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1] = {"role": role, "content": f"{turns[-1]['content']}\n\n{message['content']}"}
        else:
            turns.append({"role": role, "content": message["content"]})
    return system, turns


def _tooling(shape: Shape) -> dict[str, Any]:
    """The forced tool whose input is the response model's object."""
    tool = {"name": shape.name, "description": "Record your answer.", "input_schema": shape.schema}
    return {"tools": [tool], "tool_choice": {"type": "tool", "name": shape.name}}


def _read_message(data: dict[str, Any]) -> list[Completion]:
    """The reply of a Messages request, its one generation (the API has no ``n``): the first
    ``tool_use`` block's input as JSON text, else the text of its text blocks."""
    content = data.get("content")
    if not isinstance(content, list):
        raise BadBody("no content in a Messages API reply")
    text = ""
    for block in content:
        if isinstance(block, Mapping) and block.get("type") == "tool_use":
            given = block.get("input")
            text = given if isinstance(given, str) else json.dumps(given, ensure_ascii=False)
            break
    else:
        text = "".join(
            str(block.get("text") or "")
            for block in content
            if isinstance(block, Mapping) and block.get("type") == "text"
        )
    stop = data.get("stop_reason")
    usage = data.get("usage")
    cache_read = count(usage, "cache_read_input_tokens")
    prompt = count(usage, "input_tokens") + count(usage, "cache_creation_input_tokens") + cache_read
    generation = Completion(
        text,
        "length" if stop == "max_tokens" else stop if isinstance(stop, str) else None,
        (text or "the model declined to answer") if stop == "refusal" else None,
        prompt_tokens=prompt,
        completion_tokens=count(usage, "output_tokens"),
        counted=isinstance(usage, dict),
        cached_tokens=cache_read,
    )
    return [generation]
