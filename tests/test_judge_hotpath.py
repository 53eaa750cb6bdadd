"""The judge's and embeddings' raw request path: the openai SDK's client sends the request (base
URL, auth, error classes) but rageval builds the body and reads the JSON reply itself.

These tests pin what that must not change: the bytes on the wire match what the SDK's own
``chat.completions.create`` sends, and any 200 body that is not a usable reply (not JSON, not
UTF-8, not an object, no choices, no data) is a retried "malformed response body", never a
crash or a silent empty answer.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import openai
import pytest
from pydantic import BaseModel

from rageval._client._transport import _httpx
from rageval.embeddings.openai import OpenAIEmbeddings
from rageval.judge import Judge, JudgeCallFailed
from rageval.judge._modes import Mode
from rageval.testing import FakeOpenAI, hash_embedding

# the HTTP library the installed SDK is built on: httpx2 from openai 3 on, httpx before
httpx = _httpx()

KEY = "sk-test-SECRET-1234567890"
BASE_URL = "http://127.0.0.1:9/v1"  # never connected to: a mock transport answers
# Headers that differ between any two requests, whoever sends them.
VOLATILE = {"idempotency-key", "x-stainless-retry-count", "x-stainless-read-timeout"}


class Verdict(BaseModel):
    verdict: int
    reason: str


def ask_text(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Judge it."}, {"role": "user", "content": text}]


def completion(content: str | None = '{"verdict": 1, "reason": "ok"}', **message: Any) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, **message},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16},
        }
    ).encode()


class Replies:
    """A mock transport that answers with the given bodies in turn and records the requests."""

    def __init__(self, *bodies: bytes | Callable[[Any], Any]) -> None:
        self.bodies = list(bodies)
        self.requests: list[Any] = []

    def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        body = self.bodies.pop(0)
        if callable(body):
            return body(request)
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    def client(self) -> openai.AsyncOpenAI:
        http = openai.DefaultAsyncHttpxClient(transport=httpx.MockTransport(self))
        return openai.AsyncOpenAI(base_url=BASE_URL, api_key=KEY, http_client=http)


def wire(request: Any) -> tuple[str, str, dict[str, Any], dict[str, str]]:
    headers = {k.lower(): v for k, v in request.headers.items() if k.lower() not in VOLATILE}
    return request.method, str(request.url), json.loads(request.content), headers


@pytest.mark.parametrize("mode", ["json_schema", "tools", "json"])
async def test_request_matches_the_sdks_own_create(mode: Mode) -> None:
    tool_reply = completion(
        None,
        tool_calls=[
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "Verdict", "arguments": '{"verdict": 1, "reason": "ok"}'},
            }
        ],
    )
    replies = Replies(tool_reply if mode == "tools" else completion(), completion())
    client = replies.client()
    judge = Judge("m", client=client, mode=mode, seed=3, timeout=12.5, cache=False)
    reply = await judge.ask(ask_text("q"), Verdict)
    assert reply.value == Verdict(verdict=1, reason="ok")
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (11, 5)

    ours = replies.requests[0]
    sent = json.loads(ours.content)
    await client.with_options(max_retries=0).chat.completions.create(
        **sent, timeout=judge._endpoint.timeout
    )
    theirs = replies.requests[1]
    assert wire(ours) == wire(theirs)
    assert ours.headers["authorization"] == f"Bearer {KEY}"
    assert ours.extensions["timeout"] == theirs.extensions["timeout"]
    assert ours.extensions["timeout"]["read"] == 12.5


@pytest.mark.parametrize("mode", ["json_schema", "tools"])
async def test_our_own_clients_request_matches_the_sdks_create_on_the_wire(mode: Mode) -> None:
    """A judge built from a base URL and key sends through its SDK client's HTTP client
    directly (rageval._client._transport.DirectSender): same path, body and headers as the SDK's
    own ``create`` with the same settings, over real HTTP."""
    with FakeOpenAI(supports=("json_schema", "tools")) as server:
        judge = Judge(
            "m",
            base_url=server.base_url,
            api_key=KEY,
            mode=mode,
            seed=3,
            timeout=12.5,
            cache=False,
        )
        await judge.ask(ask_text("q"), Verdict)
        ours = server.chat_requests[0]
        sdk = openai.AsyncOpenAI(base_url=server.base_url, api_key=KEY, max_retries=0)
        await sdk.chat.completions.create(**ours.body)
        await sdk.close()
        theirs = server.chat_requests[1]
    assert (ours.path, ours.body) == (theirs.path, theirs.body)
    # headers that belong to the SDK client, not to one HTTP library or one request
    same = {"authorization", "user-agent", "content-type", "accept"}
    same |= {k for k in theirs.headers if k.lower().startswith("x-stainless-")} - VOLATILE
    picked = [
        {k.lower(): v for k, v in r.headers.items() if k.lower() in same} for r in (ours, theirs)
    ]
    assert picked[0] == picked[1]
    assert picked[0]["authorization"] == f"Bearer {KEY}"
    assert len(picked[0]) >= 6


@pytest.mark.parametrize(
    "body",
    [
        b'{"id": "chatcmpl-broken", "choi',
        b"\xff\xfe\xfa not text at all",
        b"[1, 2]",
        b'"just a string"',
        b'{"error": {"message": "upstream hiccup"}}',
        b'{"choices": []}',
        b'{"choices": [{"index": 0, "message": null, "finish_reason": "stop"}]}',
        b'{"choices": ["text"]}',
    ],
    ids=["cut", "binary", "list", "string", "no-choices", "empty", "null-message", "str-choice"],
)
async def test_unusable_200_bodies_are_retried_as_malformed(body: bytes) -> None:
    replies = Replies(body, completion())
    judge = Judge("m", client=replies.client(), mode="json_schema", cache=False)
    reply = await judge.ask(ask_text("q"), Verdict)
    assert reply.value.verdict == 1
    assert (reply.usage.requests, reply.usage.retries, reply.usage.reasks) == (2, 1, 0)

    again = Replies(body)
    judge = Judge("m", client=again.client(), mode="json_schema", cache=False, max_retries=0)
    with pytest.raises(JudgeCallFailed, match="malformed response body"):
        await judge.ask(ask_text("q"), Verdict)


async def test_status_errors_still_come_from_the_sdk() -> None:
    def rate_limited(request: Any) -> Any:
        return httpx.Response(
            429,
            json={"error": {"message": "slow down", "type": "rate_limit", "code": None}},
            headers={"retry-after-ms": "10"},
        )

    replies = Replies(rate_limited, completion())
    judge = Judge("m", client=replies.client(), mode="json_schema", cache=False)
    reply = await judge.ask(ask_text("q"), Verdict)
    assert reply.usage.retries == 1


async def test_odd_but_usable_replies() -> None:
    # arguments as an object (not a JSON string), no usage block, a usage with junk counts
    tool = completion(
        None,
        tool_calls=[{"type": "function", "function": {"arguments": {"verdict": 2, "reason": "x"}}}],
    )
    data = json.loads(completion())
    del data["usage"]
    junk = json.loads(completion())
    junk["usage"] = {"prompt_tokens": "many", "completion_tokens": None}
    replies = Replies(tool, json.dumps(data).encode(), json.dumps(junk).encode())
    client = replies.client()
    tools = Judge("m", client=client, mode="tools", cache=False)
    assert (await tools.ask(ask_text("a"), Verdict)).value.verdict == 2
    plain = Judge("m2", client=client, mode="json_schema", cache=False)
    for text in ("b", "c"):
        reply = await plain.ask(ask_text(text), Verdict)
        assert reply.value.verdict == 1
        assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (0, 0)


async def test_refusal_and_truncation_are_read_from_the_raw_reply() -> None:
    refused = completion(None, refusal="I can't help with that.")
    cut = json.loads(completion('{"verdict": 1, "rea'))
    cut["choices"][0]["finish_reason"] = "length"
    cut["usage"]["completion_tokens"] = 50  # cut at the budget, as a server counts it
    replies = Replies(refused, json.dumps(cut).encode(), completion())
    client = replies.client()
    judge = Judge("m", client=client, mode="json_schema", cache=False, max_tokens=50)
    with pytest.raises(JudgeCallFailed, match="refused to answer: I can't help"):
        await judge.ask(ask_text("a"), Verdict)
    reply = await judge.ask(ask_text("b"), Verdict)
    assert reply.value.verdict == 1
    assert json.loads(replies.requests[-1].content)["max_tokens"] == 100


# ------------------------------------------------------------------ embeddings


async def test_embeddings_ask_for_base64_and_decode_it() -> None:
    with FakeOpenAI(embed_dim=16) as server:
        emb = OpenAIEmbeddings("emb", base_url=server.base_url, api_key=KEY, cache=False)
        texts = ["alpha", "beta", "gamma"]
        out = await emb.aembed_texts(texts)
        [request] = server.embedding_requests
        assert request.body["encoding_format"] == "base64"
    assert out.dtype == np.float32 and out.shape == (3, 16)
    for row, text in zip(out, texts, strict=True):
        np.testing.assert_array_equal(row, np.asarray(hash_embedding(text, 16), np.float32))
    assert emb.usage.total.prompt_tokens > 0


def embeddings_body(vectors: list[Any], order: list[int] | None = None) -> bytes:
    order = order if order is not None else list(range(len(vectors)))
    data = [{"object": "embedding", "index": i, "embedding": vectors[i]} for i in order]
    return json.dumps({"object": "list", "data": data, "usage": {"prompt_tokens": 4}}).encode()


async def test_embeddings_read_float_lists_and_any_order() -> None:
    # a server that ignores encoding_format and answers out of order
    first, second = [0.5, -1.0, 2.0], [1.0, 0.0, 0.25]
    packed = base64.b64encode(np.asarray(second, "<f4").tobytes()).decode()
    replies = Replies(embeddings_body([first, packed], order=[1, 0]))
    emb = OpenAIEmbeddings("emb", client=replies.client(), cache=False)
    out = await emb.aembed_texts(["one", "two"])
    np.testing.assert_array_equal(out, np.asarray([first, second], np.float32))
    assert emb.usage.total.prompt_tokens == 4


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b'{"object": "list"}',
        b'{"data": [{"embedding": [1.0]}]}',
        b'{"data": [{"index": 0, "embedding": null}]}',
    ],
    ids=["not-json", "no-data", "no-index", "null-vector"],
)
async def test_unusable_embeddings_bodies_are_retried(body: bytes) -> None:
    replies = Replies(body, embeddings_body([[1.0, 2.0]]))
    emb = OpenAIEmbeddings("emb", client=replies.client(), cache=False)
    out = await emb.aembed_texts(["x"])
    np.testing.assert_array_equal(out, [[1.0, 2.0]])
    assert (emb.usage.total.requests, emb.usage.total.retries) == (2, 1)

    emb = OpenAIEmbeddings("emb", client=Replies(body).client(), cache=False, max_retries=0)
    with pytest.raises(JudgeCallFailed, match="malformed response body"):
        await emb.aembed_texts(["x"])
