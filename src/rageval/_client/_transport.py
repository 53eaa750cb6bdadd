"""How a request reaches the endpoint: two senders behind one interface.

Both hand back the HTTP response of a successful POST and raise the openai SDK's own error
classes otherwise (``APIStatusError`` with status, headers and body; ``APITimeoutError``;
``APIConnectionError``), which is what :func:`rageval._client._retry.classify` sorts.

* :class:`SdkSender` -- for a client the caller built (Azure, custom auth, their own HTTP
  client or proxy): every request goes through the SDK's ``post()``.
* :class:`DirectSender` -- for the clients rageval builds itself from a base URL and a key:
  the URL, headers (auth, user agent, organisation/project) and HTTP client are the SDK
  client's, but the request is sent by that HTTP client directly. That skips the SDK's
  per-request option models, header merging and URL re-parsing, which cost about 0.3 ms of
  client CPU a request, a third of what the whole request costs (``benchmarks/RESULTS.md``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

from rageval._client._retry import RequestNotSent
from rageval.errors import RagevalError

__all__ = ["BadBody", "DirectSender", "PreEncoded", "SdkSender", "Sender", "post_json"]

R = TypeVar("R")


class PreEncoded:
    """A request argument and its JSON text, made once (see :func:`encode_body`)."""

    __slots__ = ("text", "value")

    def __init__(self, value: Any) -> None:
        self.value = value
        self.text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class BadBody(RagevalError, ValueError):
    """A 200 reply whose JSON is not what the endpoint's API promises."""


class Sender(Protocol):
    async def post(self, path: str, body: Mapping[str, Any], *, timeout: float) -> Any:
        """POST ``body`` as JSON to ``path`` (below the base URL); the 2xx response."""


async def post_json(
    sender: Sender,
    path: str,
    body: Mapping[str, Any],
    *,
    timeout: float,
    read: Callable[[dict[str, Any]], R],
) -> R:
    """POST ``body`` and ``read`` the decoded JSON object of the reply.

    A body that is not JSON, or that ``read`` rejects with a ValueError, raises the SDK's
    ``APIResponseValidationError``: a malformed response, retried.
    """
    import openai

    response = await sender.post(path, body, timeout=timeout)
    try:
        data = json.loads(response.content)
        if not isinstance(data, dict):
            raise BadBody(f"expected a JSON object, got a JSON {type(data).__name__}")
        return read(data)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError (not text) and BadBody
        raise openai.APIResponseValidationError(
            response, body=None, message=f"malformed response body: {exc}"
        ) from exc


def encode_body(body: Mapping[str, Any]) -> bytes:
    """The JSON of a request body whose top-level values may be :class:`PreEncoded`."""
    parts = []
    for key, value in body.items():
        text = value.text if isinstance(value, PreEncoded) else _dumps(value)
        parts.append(f"{_dumps(key)}:{text}")
    return ("{" + ",".join(parts) + "}").encode()


def plain_body(body: Mapping[str, Any]) -> dict[str, Any]:
    """`body` with :class:`PreEncoded` values replaced by the values themselves."""
    return {k: v.value if isinstance(v, PreEncoded) else v for k, v in body.items()}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class SdkSender:
    """Every request through the SDK client's ``post()``, handing back the raw response."""

    def __init__(self, client: Any) -> None:
        self._client = client

    async def post(self, path: str, body: Mapping[str, Any], *, timeout: float) -> Any:
        import openai

        try:
            return await self._client.post(
                path,
                body=plain_body(body),
                cast_to=_httpx().Response,
                options={"timeout": timeout, "security": {"bearer_auth": True}},
            )
        except openai.OpenAIError:
            raise
        except Exception as exc:  # e.g. an exception group from the transport, a network policy
            raise RequestNotSent(type(exc).__name__) from exc


class DirectSender:
    """Requests sent by an HTTP client directly: for rageval's own openai clients, with the SDK
    client's URL and headers (only for clients whose headers are fixed at construction, a string
    API key); for an API that is not OpenAI's, with headers of its own."""

    def __init__(
        self,
        http_client: Any,
        base_url: str,
        headers: Mapping[str, str],
        query: Mapping[str, str] | None = None,
    ) -> None:
        self._http = http_client
        self._base_url = base_url.rstrip("/")
        self._headers = dict(headers)
        self._query = dict(query) if query else None

    @classmethod
    def of_sdk_client(cls, client: Any, http_client: Any) -> DirectSender:
        """Requests with `client`'s URL, headers and query, sent by `http_client`."""
        # auth is part of the default headers before openai 3, added per request since; the
        # SDK marks headers a caller removed with a sentinel, so only real values are sent
        headers = {**client.default_headers, **client.auth_headers}
        query = {k: v for k, v in client.default_query.items() if isinstance(v, str)}
        return cls(
            http_client,
            str(client.base_url),
            {k: v for k, v in headers.items() if isinstance(v, str)},
            query,
        )

    async def post(self, path: str, body: Mapping[str, Any], *, timeout: float) -> Any:
        import openai

        httpx = _httpx()
        request = self._http.build_request(
            "POST",
            self._base_url + path,
            content=encode_body(body),
            headers=self._headers,
            params=self._query,
            timeout=timeout,
        )
        try:
            response = await self._http.send(request)
        except httpx.TimeoutException as exc:
            raise openai.APITimeoutError(request=request) from exc
        except httpx.HTTPError as exc:
            raise openai.APIConnectionError(request=request) from exc
        except Exception as exc:  # e.g. a network policy refusing the connection
            raise RequestNotSent(type(exc).__name__) from exc
        if response.status_code >= 400:
            raise _status_error(response)
        return response


def _status_error(response: Any) -> Exception:
    """The SDK's error for an error response, with the message and body the SDK would give."""
    import openai

    text = response.text.strip()
    try:
        body: Any = json.loads(text)
    except ValueError:
        body = text
    data = body.get("error", body) if isinstance(body, dict) else body
    details = data.get("details") if isinstance(data, dict) else None
    if isinstance(details, dict) and isinstance(details.get("error_code"), str):
        # Anthropic's error code (a spending limit reached...) is where OpenAI's `code` is
        data = {**data, "code": data.get("code") or details["error_code"]}
    message = data.get("message") if isinstance(data, dict) else None
    summary = f"Error code: {response.status_code}"
    if isinstance(message, str) and message:
        summary += f" - {message}"
    return openai.APIStatusError(summary, response=response, body=data)


@functools.cache
def _httpx() -> Any:
    """The HTTP library under the installed SDK: ``httpx2`` from openai 3 on, ``httpx`` before."""
    from openai import _base_client

    names = vars(_base_client)
    return names.get("httpx2") or names["httpx"]
