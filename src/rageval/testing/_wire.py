"""The HTTP framing of the test server, shared by :mod:`rageval.testing.server` and
:mod:`rageval.testing.batch_api`: the paths it serves, the status lines, and OpenAI-style
error bodies."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

CHAT_PATH = "/v1/chat/completions"
EMBEDDINGS_PATH = "/v1/embeddings"
MODELS_PATH = "/v1/models"
FAKE_API_KEY = "sk-rageval-fake-test-key"
#: llama.cpp's llama-server describes itself here (beside /v1), FakeOpenAI(llama_cpp_slots=N) too
PROPS_PATH = "/props"
ROUTES = {CHAT_PATH: "POST", EMBEDDINGS_PATH: "POST", MODELS_PATH: "GET", PROPS_PATH: "GET"}

MAX_HEADER_BYTES = 1 << 20
REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    409: "Conflict",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
    529: "Overloaded",
}
# (type, code, default message) of the error body OpenAI sends for each status.
ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request."),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: ("invalid_request_error", None, "You are not allowed to access this resource."),
    404: ("invalid_request_error", "model_not_found", "The model does not exist."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached. Please try again later."),
    500: ("server_error", None, "The server had an error while processing your request."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}


def error_kind(status: int) -> tuple[str, str | None, str]:
    if status in ERRORS:
        return ERRORS[status]
    kind = "server_error" if status >= 500 else "invalid_request_error"
    return kind, None, REASONS.get(status, f"HTTP {status}")


def estimate_tokens(chars: int) -> int:
    return max(1, math.ceil(chars / 4))


def text_of(content: Any) -> str:
    """The text of a message's content, whether a string or a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


@dataclass
class Response:
    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=list)


class Close:
    """Close the connection without answering, after ``delay`` seconds."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay


def json_response(
    status: int, payload: Any, headers: list[tuple[str, str]] | None = None
) -> Response:
    body = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    return Response(status, body, headers or [])


def error_response(
    status: int,
    message: str,
    *,
    code: str | None = None,
    param: str | None = None,
    headers: list[tuple[str, str]] | None = None,
) -> Response:
    kind, default_code, _ = error_kind(status)
    error = {"message": message, "type": kind, "param": param, "code": code or default_code}
    return json_response(status, {"error": error}, headers)


def llama_context_error(prompt_tokens: int, window: int) -> Response:
    """llama-server's 400 for a prompt over a slot's context (``exceed_context_size_error``),
    in its own error shape: a numeric ``code`` and the token counts."""
    message = (
        f"request ({prompt_tokens} tokens) exceeds the available context size ({window} "
        "tokens), try increasing it"
    )
    error = {"code": 400, "message": message, "type": "exceed_context_size_error",
             "n_prompt_tokens": prompt_tokens, "n_ctx": window}  # fmt: skip
    return json_response(400, {"error": error})
