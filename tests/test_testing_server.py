"""FakeOpenAI, schema_instance and the network guard, exercised through the real openai SDK."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import math
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam
from openai.types.shared_params import ResponseFormatJSONSchema
from pydantic import BaseModel, Field

from helpers import server_in_child
from rageval.testing import (
    FAKE_API_KEY,
    FakeOpenAI,
    Fault,
    FaultPlan,
    NetworkBlockedError,
    RecordedRequest,
    Reply,
    hash_embedding,
    schema_instance,
    strict_schema_problem,
)

QUESTION = "Is the sky blue? Answer briefly."
MESSAGES: list[ChatCompletionMessageParam] = [{"role": "user", "content": QUESTION}]


class Verdict(BaseModel):
    verdict: int
    reason: str


VERDICT_TOOL: ChatCompletionToolParam = {
    "type": "function",
    "function": {"name": "record_verdict", "parameters": Verdict.model_json_schema()},
}
JSON_SCHEMA_FORMAT: ResponseFormatJSONSchema = {
    "type": "json_schema",
    "json_schema": {"name": "Verdict", "schema": Verdict.model_json_schema()},
}


def client(server: FakeOpenAI, *, max_retries: int = 0, **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=server.base_url, api_key=FAKE_API_KEY, max_retries=max_retries, **kw
    )


def aclient(server: FakeOpenAI, **kw: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=server.base_url, api_key=FAKE_API_KEY, max_retries=0, **kw)


def chat(c: openai.OpenAI, **kw: Any) -> Any:
    return c.chat.completions.create(model="judge-model", messages=MESSAGES, **kw)


@pytest.fixture
def sdk(fake_openai: FakeOpenAI) -> Iterator[openai.OpenAI]:
    with client(fake_openai) as c:
        yield c


# --------------------------------------------------------------------------- replies
def test_default_reply_looks_like_openai(fake_openai: FakeOpenAI, sdk: openai.OpenAI) -> None:
    completion = chat(sdk)
    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    assert completion.model == "judge-model"
    choice = completion.choices[0]
    assert (choice.index, choice.finish_reason) == (0, "stop")
    assert choice.message.role == "assistant"
    assert choice.message.content == "ok"
    assert choice.message.tool_calls is None
    prompt_chars = len(QUESTION)
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == math.ceil(prompt_chars / 4)
    assert completion.usage.completion_tokens == 1
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + 1


def test_the_schema_sent_is_billed_as_prompt_tokens(sdk: openai.OpenAI) -> None:
    plain = chat(sdk)
    schema = chat(sdk, response_format=JSON_SCHEMA_FORMAT)
    sent = json.dumps({"response_format": JSON_SCHEMA_FORMAT}, separators=(",", ":"))
    chars = len(QUESTION) + len(sent)
    assert schema.usage.prompt_tokens == math.ceil(chars / 4) > plain.usage.prompt_tokens


def test_a_shared_prompt_prefix_is_reported_as_cached_tokens(sdk: openai.OpenAI) -> None:
    """OpenAI's automatic prompt caching: prompts of 1,024 tokens or more; the longest prefix
    seen before, in steps of 128 tokens from 1,024 (here, tokens are 4 characters)."""
    fixed = "Rules. " * 1000  # 7,000 characters: 1,750 tokens

    def ask(tail: str) -> Any:
        messages: list[ChatCompletionMessageParam] = [
            {"role": "system", "content": fixed},
            {"role": "user", "content": tail},
        ]
        return sdk.chat.completions.create(model="judge-model", messages=messages)

    def cached(completion: Any) -> int:
        return int(completion.usage.prompt_tokens_details.cached_tokens)

    first = ask("sample one")
    assert cached(first) == 0 and first.usage.prompt_tokens == math.ceil((7000 + 10) / 4)
    # "<system>" + 7,000 characters are shared: 7,008 -> the step at 6,656 characters (1,664 t.)
    assert cached(ask("sample two")) == 1664
    short = sdk.chat.completions.create(model="judge-model", messages=MESSAGES)
    assert cached(short) == 0  # under 1,024 tokens: never cached
    other = sdk.chat.completions.create(  # another model has a cache of its own
        model="other-model", messages=[{"role": "system", "content": fixed}]
    )
    assert cached(other) == 0
    with FakeOpenAI(prompt_cache=False) as server, client(server) as c:
        c.chat.completions.create(model="m", messages=[{"role": "system", "content": fixed}])
        again = c.chat.completions.create(
            model="m", messages=[{"role": "system", "content": fixed}]
        )
        assert cached(again) == 0
    scripted = Reply.json({"a": 1}, prompt_tokens=5000, cached_tokens=4096)
    with FakeOpenAI() as server, client(server) as c:
        server.script(scripted)
        assert cached(c.chat.completions.create(model="m", messages=MESSAGES)) == 4096


def test_default_handler_answers_schema_in_each_mode(
    fake_openai: FakeOpenAI, sdk: openai.OpenAI
) -> None:
    as_schema = chat(sdk, response_format=JSON_SCHEMA_FORMAT).choices[0].message
    assert Verdict.model_validate_json(as_schema.content) == Verdict(verdict=0, reason="")

    forced = {"type": "function", "function": {"name": "record_verdict"}}
    as_tool = chat(sdk, tools=[VERDICT_TOOL], tool_choice=forced).choices[0].message
    assert as_tool.content is None
    (call,) = as_tool.tool_calls
    assert call.type == "function" and call.function.name == "record_verdict"
    assert Verdict.model_validate_json(call.function.arguments) == Verdict(verdict=0, reason="")

    assert [r.mode for r in fake_openai.chat_requests] == ["json_schema", "tools"]
    assert all(r.schema == Verdict.model_json_schema() for r in fake_openai.chat_requests)


def test_reply_json_follows_the_request_mode(fake_openai: FakeOpenAI, sdk: openai.OpenAI) -> None:
    answer = {"verdict": 1, "reason": "blue by Rayleigh scattering"}
    fake_openai.handler = lambda request: Reply.json(answer)
    tool = chat(sdk, tools=[VERDICT_TOOL]).choices[0].message
    schema = chat(sdk, response_format=JSON_SCHEMA_FORMAT).choices[0].message
    json_object = chat(sdk, response_format={"type": "json_object"}).choices[0].message
    plain = chat(sdk).choices[0].message

    assert json.loads(tool.tool_calls[0].function.arguments) == answer
    assert tool.content is None
    for message in (schema, json_object, plain):
        assert message.tool_calls is None
        assert json.loads(message.content) == answer
    assert [r.mode for r in fake_openai.chat_requests] == ["tools", "json_schema", "json", "text"]


def test_reply_text_and_tool_arguments_are_delivered_verbatim(
    fake_openai: FakeOpenAI, sdk: openai.OpenAI
) -> None:
    fenced = 'Sure!\n```json\n{"verdict": 1}\n```'
    fake_openai.script(Reply.text(fenced), Reply.tool_arguments("{'verdict':"))
    ignored_tools = chat(sdk, tools=[VERDICT_TOOL]).choices[0].message
    assert ignored_tools.content == fenced and ignored_tools.tool_calls is None
    broken = chat(sdk, tools=[VERDICT_TOOL]).choices[0].message
    assert broken.tool_calls[0].function.arguments == "{'verdict':"


def test_reply_usage_and_finish_reason_overrides(
    fake_openai: FakeOpenAI, sdk: openai.OpenAI
) -> None:
    fake_openai.script(
        Reply.json({"a": 1}, prompt_tokens=1000, completion_tokens=7, finish_reason="length")
    )
    completion = chat(sdk)
    assert completion.choices[0].finish_reason == "length"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (1000, 7)
    assert completion.usage.total_tokens == 1007


def test_script_is_consumed_in_order_then_handler(
    fake_openai: FakeOpenAI, sdk: openai.OpenAI
) -> None:
    fake_openai.handler = lambda request: Reply.text("from handler")
    fake_openai.script(Reply.text("first"), Fault.status(500), Reply.text("third"))
    assert fake_openai.scripted_left == 3
    assert chat(sdk).choices[0].message.content == "first"
    with pytest.raises(openai.InternalServerError):
        chat(sdk)
    assert chat(sdk).choices[0].message.content == "third"
    assert chat(sdk).choices[0].message.content == "from handler"
    assert fake_openai.scripted_left == 0


def test_script_rejects_other_types(fake_openai: FakeOpenAI) -> None:
    with pytest.raises(TypeError):
        fake_openai.script({"verdict": 1})  # type: ignore[arg-type]


async def test_async_handler_and_recorded_request(fake_openai: FakeOpenAI) -> None:
    seen: list[RecordedRequest] = []

    async def handler(request: RecordedRequest) -> Reply:
        seen.append(request)
        await asyncio.sleep(0.01)
        return Reply.json({"verdict": len(request.messages), "reason": request.model or ""})

    fake_openai.handler = handler
    async with aclient(fake_openai) as c:
        completion = await c.chat.completions.create(
            model="judge-model",
            messages=[{"role": "system", "content": "be strict"}, *MESSAGES],
            tools=[VERDICT_TOOL],
        )
    tool_calls = completion.choices[0].message.tool_calls
    assert tool_calls is not None and tool_calls[0].type == "function"
    arguments = tool_calls[0].function.arguments
    assert json.loads(arguments) == {"verdict": 2, "reason": "judge-model"}

    (inside,) = seen
    assert math.isnan(inside.finished)  # the handler runs while the request is in flight
    (record,) = fake_openai.requests
    assert record.path == "/v1/chat/completions"
    assert record.headers["authorization"] == f"Bearer {FAKE_API_KEY}"
    assert record.headers["content-type"] == "application/json"
    assert record.tools == [VERDICT_TOOL] and record.response_format is None
    assert record.started < record.finished


def test_handler_exceptions_become_500_and_are_kept(
    fake_openai: FakeOpenAI, sdk: openai.OpenAI
) -> None:
    def broken(request: RecordedRequest) -> Reply:
        raise KeyError("missing")

    fake_openai.handler = broken
    with pytest.raises(openai.InternalServerError, match="KeyError"):
        chat(sdk)
    fake_openai.handler = lambda request: "not a reply"  # type: ignore[assignment,return-value]
    with pytest.raises(openai.InternalServerError, match="TypeError"):
        chat(sdk)
    assert [type(e) for e in fake_openai.handler_errors] == [KeyError, TypeError]


# ----------------------------------------------------------------------------- faults
@pytest.mark.parametrize(
    ("fault", "error", "header", "value"),
    [
        (Fault.rate_limit(), openai.RateLimitError, "retry-after", "1"),
        (
            Fault.rate_limit(2.5, header="retry-after-ms"),
            openai.RateLimitError,
            "retry-after-ms",
            "2500",
        ),
        (Fault.rate_limit(None), openai.RateLimitError, "retry-after", None),
    ],
)
def test_rate_limit(
    fake_openai: FakeOpenAI,
    sdk: openai.OpenAI,
    fault: Fault,
    error: type[Exception],
    header: str,
    value: str | None,
) -> None:
    fake_openai.script(fault)
    with pytest.raises(openai.RateLimitError) as caught:
        chat(sdk)
    assert caught.value.status_code == 429
    assert caught.value.response.headers.get(header) == value
    assert caught.value.code == "rate_limit_exceeded"


def test_sdk_retry_honours_retry_after_ms(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Fault.rate_limit(0.3, header="retry-after-ms"))
    with client(fake_openai, max_retries=1) as c:
        assert chat(c).choices[0].message.content == "ok"
    first, second = fake_openai.chat_requests
    assert second.started - first.finished >= 0.29
    assert second.headers["x-stainless-retry-count"] == "1"


@pytest.mark.parametrize(
    ("code", "error", "error_code"),
    [
        (400, openai.BadRequestError, None),
        (401, openai.AuthenticationError, "invalid_api_key"),
        (404, openai.NotFoundError, "model_not_found"),
        (500, openai.InternalServerError, None),
        (503, openai.InternalServerError, None),
    ],
)
def test_status_faults(
    fake_openai: FakeOpenAI,
    sdk: openai.OpenAI,
    code: int,
    error: type[openai.APIStatusError],
    error_code: str | None,
) -> None:
    fake_openai.script(Fault.status(code, "custom message"))
    with pytest.raises(error) as caught:
        chat(sdk)
    assert caught.value.status_code == code
    assert caught.value.code == error_code
    body = caught.value.body
    assert isinstance(body, dict) and body["message"] == "custom message"
    assert body["type"] == ("server_error" if code >= 500 else "invalid_request_error")


def test_fault_status_rejects_success_codes() -> None:
    with pytest.raises(ValueError):
        Fault.status(200)


def test_timeout_fault_times_out_the_client(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Fault.timeout(2.0))
    with client(fake_openai, timeout=0.3) as c:
        with pytest.raises(openai.APITimeoutError):
            chat(c)
        # a timeout, not the server hanging up after its 2 s: the client's own 0.3 s applied
        # (no upper bound on the time: a loaded machine may take longer to get here)
        assert chat(c).choices[0].message.content == "ok"


def test_timeout_fault_closes_without_answer(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Fault.timeout(0.2))
    with client(fake_openai, timeout=5) as c:
        started = time.monotonic()
        with pytest.raises(openai.APIConnectionError):
            chat(c)
        # it waited for the server, and the hang-up (not the client's 5 s timeout) ended it
        assert time.monotonic() - started >= 0.2


def test_drop_then_recover(fake_openai: FakeOpenAI, sdk: openai.OpenAI) -> None:
    chat(sdk)  # open a keep-alive connection first; the drop must not poison the pool
    fake_openai.script(Fault.drop())
    with pytest.raises(openai.APIConnectionError) as caught:
        chat(sdk)
    assert not isinstance(caught.value, openai.APITimeoutError)
    assert chat(sdk).choices[0].message.content == "ok"


def test_malformed_http_is_200_with_invalid_json(
    fake_openai: FakeOpenAI, sdk: openai.OpenAI
) -> None:
    fake_openai.script(Fault.malformed_http())
    raw = sdk.chat.completions.with_raw_response.create(model="judge-model", messages=MESSAGES)
    assert raw.status_code == 200
    with pytest.raises(ValueError):
        json.loads(raw.text)


def test_truncated_cuts_the_answer_in_the_request_mode(
    fake_openai: FakeOpenAI, sdk: openai.OpenAI
) -> None:
    fake_openai.script(Fault.truncated(), Fault.truncated(), Fault.truncated('{"verdict": 1, "rea'))
    full = json.dumps(schema_instance(Verdict.model_json_schema()))

    as_content = chat(sdk, response_format=JSON_SCHEMA_FORMAT).choices[0]
    as_tool = chat(sdk, tools=[VERDICT_TOOL]).choices[0]
    given = chat(sdk).choices[0]

    assert as_content.finish_reason == as_tool.finish_reason == given.finish_reason == "length"
    assert as_content.message.content == full[: len(full) // 2]
    assert as_tool.message.tool_calls[0].function.arguments == full[: len(full) // 2]
    assert given.message.content == '{"verdict": 1, "rea'
    for cut in (as_content.message.content, given.message.content):
        with pytest.raises(ValueError):
            json.loads(cut)


# ------------------------------------------------------------------- server settings
def test_api_key_check() -> None:
    with FakeOpenAI(api_key="sk-right") as server:
        with openai.OpenAI(base_url=server.base_url, api_key="sk-wrong", max_retries=0) as bad:
            with pytest.raises(openai.AuthenticationError) as caught:
                chat(bad)
            assert caught.value.code == "invalid_api_key"
            with pytest.raises(openai.AuthenticationError):
                bad.embeddings.create(model="e", input="x")
        with openai.OpenAI(base_url=server.base_url, api_key="sk-right", max_retries=0) as good:
            assert chat(good).choices[0].message.content == "ok"


def test_unknown_model_is_404_model_not_found() -> None:
    with FakeOpenAI(models=["judge-model", "embedder"]) as server, client(server) as c:
        assert chat(c).choices[0].message.content == "ok"
        with pytest.raises(openai.NotFoundError) as caught:
            c.chat.completions.create(model="gpt-nope", messages=MESSAGES)
        assert caught.value.code == "model_not_found"
        assert "gpt-nope" in caught.value.message
        with pytest.raises(openai.NotFoundError):
            c.embeddings.create(model="other-embedder", input="x")
        assert sorted(m.id for m in c.models.list()) == ["embedder", "judge-model"]


def test_unsupported_mode_is_400() -> None:
    with FakeOpenAI(supports=("tools", "json")) as server, client(server) as c:
        with pytest.raises(openai.BadRequestError) as caught:
            chat(c, response_format=JSON_SCHEMA_FORMAT)
        assert caught.value.param == "response_format"
        assert chat(c, tools=[VERDICT_TOOL]).choices[0].message.tool_calls
        assert chat(c, response_format={"type": "json_object"}).choices[0].message.content
        assert chat(c).choices[0].message.content == "ok"
    with FakeOpenAI(supports=()) as server, client(server) as c:
        with pytest.raises(openai.BadRequestError) as caught:
            chat(c, tools=[VERDICT_TOOL])
        assert caught.value.param == "tools"
    with pytest.raises(ValueError):
        FakeOpenAI(supports=("grammar",))


def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The schema the way OpenAI's strict mode wants it: every object closed, all required."""
    schema = model.model_json_schema()

    def close(node: Any) -> None:
        if isinstance(node, dict):
            if "properties" in node:
                node["additionalProperties"] = False
                node["required"] = list(node["properties"])
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    close(schema)
    return schema


def test_strict_schema_rules_like_openai(fake_openai: FakeOpenAI, sdk: openai.OpenAI) -> None:
    loose = {
        "type": "json_schema",
        "json_schema": {
            "name": "V",
            "strict": True,
            "schema": StatementVerdict.model_json_schema(),
        },
    }
    with pytest.raises(openai.BadRequestError, match="additionalProperties") as caught:
        chat(sdk, response_format=loose)
    assert caught.value.param == "response_format"
    strict_tool = {
        "type": "function",
        "function": {"name": "v", "strict": True, "parameters": Node.model_json_schema()},
    }
    with pytest.raises(openai.BadRequestError, match="additionalProperties"):
        chat(sdk, tools=[strict_tool])

    class Judged(BaseModel):
        verdicts: list[StatementVerdict]
        color: Color
        pet: Cat | Dog = Field(discriminator="kind")
        maybe: float | None

    judged = {
        "type": "json_schema",
        "json_schema": {"name": "J", "strict": True, "schema": strict_schema(Judged)},
    }
    content = chat(sdk, response_format=judged).choices[0].message.content
    Judged.model_validate_json(content)
    # a dict field is an open object, which strict mode refuses (as OpenAI does)
    assert "root.properties.tags" in (strict_schema_problem(strict_schema(Everything)) or "")
    strict_tool["function"]["parameters"] = strict_schema(Node)  # type: ignore[index]
    arguments = chat(sdk, tools=[strict_tool]).choices[0].message.tool_calls[0].function.arguments
    assert Node.model_validate_json(arguments).parent is None

    half_required = strict_schema(Verdict)
    half_required["required"] = ["verdict"]
    assert strict_schema_problem(half_required) == (
        "at root: 'required' must list every property; missing ['reason']"
    )
    assert strict_schema_problem({"anyOf": [half_required]}) is not None


def test_bad_requests(fake_openai: FakeOpenAI, sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError):
        sdk.chat.completions.create(model="judge-model", messages=[])
    with pytest.raises(openai.BadRequestError):
        sdk.embeddings.create(model="e", input="")
    with pytest.raises(openai.NotFoundError):
        sdk.post("/nowhere", cast_to=object, body={})
    with pytest.raises(openai.BadRequestError):
        chat(sdk, stream=True)


def raw_exchange(server: FakeOpenAI, request: bytes) -> tuple[bytes, bytes]:
    """Send raw bytes; return (status line and headers, everything after them until close)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def test_raw_http_edge_cases(fake_openai: FakeOpenAI) -> None:
    body = json.dumps({"model": "m", "messages": MESSAGES}).encode()
    close = b"POST /v1/chat/completions HTTP/1.1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
    head, rest = raw_exchange(fake_openai, close % len(body) + body)
    assert head.startswith(b"HTTP/1.1 200 OK") and b"connection: close" in head
    assert json.loads(rest)["choices"][0]["message"]["content"] == "ok"

    head, rest = raw_exchange(
        fake_openai, b"GET /v2/anything HTTP/1.1\r\nConnection: close\r\n\r\n"
    )
    assert head.startswith(b"HTTP/1.1 404") and json.loads(rest)["error"]["code"] == "unknown_url"

    chunked = (
        b"POST /v1/embeddings HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n"
    )
    head, _ = raw_exchange(fake_openai, chunked)
    assert head.startswith(b"HTTP/1.1 501")

    head, rest = raw_exchange(fake_openai, close % 3 + b"{x]")
    assert head.startswith(b"HTTP/1.1 400") and "JSON" in json.loads(rest)["error"]["message"]

    head, rest = raw_exchange(fake_openai, b"GET /v1/models HTTP/1.0\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200") and json.loads(rest)["data"][0]["id"] == "fake-model"
    assert [r.path for r in fake_openai.requests][-1] == "/v1/models"


# ----------------------------------------------------------------------- embeddings
def test_embeddings_float_and_base64_agree(fake_openai: FakeOpenAI, sdk: openai.OpenAI) -> None:
    texts = ["alpha", "beta", "alpha"]
    default = sdk.embeddings.create(model="e", input=texts)  # the SDK asks for base64
    floats = sdk.embeddings.create(model="e", input=texts, encoding_format="float")
    assert [r.body["encoding_format"] for r in fake_openai.embedding_requests] == [
        "base64",
        "float",
    ]
    vectors = [d.embedding for d in default.data]
    assert vectors == [d.embedding for d in floats.data]
    assert [d.index for d in default.data] == [0, 1, 2]
    assert vectors[0] == vectors[2] != vectors[1]
    assert all(len(v) == 8 for v in vectors)
    assert all(abs(math.fsum(x * x for x in v) - 1.0) < 1e-5 for v in vectors)
    assert vectors[0] == pytest.approx(hash_embedding("alpha", 8), abs=0)
    # ceil(len/4) per text: alpha 2, beta 1, alpha 2
    assert default.usage.prompt_tokens == default.usage.total_tokens == 5


def test_embeddings_dimensions_single_input_and_custom_embedder() -> None:
    with FakeOpenAI(embed_dim=32) as server, client(server) as c:
        assert len(c.embeddings.create(model="e", input="one").data[0].embedding) == 32
        assert len(c.embeddings.create(model="e", input="one", dimensions=5).data[0].embedding) == 5

    def embedder(text: str) -> list[float]:
        return [1.0, 0.0] if "cat" in text else [0.0, 1.0]

    with FakeOpenAI(embedder=embedder) as server, client(server) as c:
        data = c.embeddings.create(model="e", input=["a cat", "a dog"]).data
    assert [d.embedding for d in data] == [[1.0, 0.0], [0.0, 1.0]]


async def test_async_embeddings_base64(fake_openai: FakeOpenAI) -> None:
    async with aclient(fake_openai) as c:
        result = await c.embeddings.create(model="e", input=["x", "y"])
    assert [d.embedding for d in result.data] == [hash_embedding("x", 8), hash_embedding("y", 8)]


# --------------------------------------------------------------- concurrency, latency
async def test_latency_overlaps_and_max_in_flight() -> None:
    async with FakeOpenAI(latency=0.2) as server, aclient(server) as c:
        started = time.monotonic()
        results = await asyncio.gather(
            *(c.chat.completions.create(model="m", messages=MESSAGES) for _ in range(16))
        )
        elapsed = time.monotonic() - started
    assert all(r.choices[0].message.content == "ok" for r in results)
    # the latencies overlap: all 16 were in flight at once (a count, whatever the machine's
    # load: a time limit would fail on a busy machine)
    assert server.max_in_flight == 16
    assert elapsed >= 0.2
    assert all(r.finished - r.started >= 0.2 for r in server.requests)


async def test_many_concurrent_requests_over_keep_alive(fake_openai: FakeOpenAI) -> None:
    async def round_of(c: openai.AsyncOpenAI, count: int) -> None:
        replies = await asyncio.gather(
            *(
                c.chat.completions.create(
                    model="m",
                    messages=[{"role": "user", "content": f"question {i}"}],
                )
                for i in range(count)
            )
        )
        assert all(r.choices[0].message.content == "ok" for r in replies)

    async with aclient(fake_openai) as c:
        await round_of(c, 150)
        assert len(fake_openai.chat_requests) == 150
        fake_openai.reset()
        # the SDK's pool keeps up to 100 idle connections: later rounds of 50 open none
        for _ in range(2):
            await round_of(c, 50)
    assert len(fake_openai.chat_requests) == 100
    assert fake_openai.connections_opened == 0
    assert fake_openai.in_flight == 0


def test_sequential_requests_share_one_connection(
    fake_openai: FakeOpenAI, sdk: openai.OpenAI
) -> None:
    for _ in range(50):
        chat(sdk)
    assert fake_openai.connections_opened == 1
    assert fake_openai.max_in_flight == 1


def test_reset_clears_records_and_counters(fake_openai: FakeOpenAI, sdk: openai.OpenAI) -> None:
    handler = fake_openai.handler = lambda request: Reply.text("kept")
    fake_openai.script(Reply.text("dropped by reset"))
    sdk.embeddings.create(model="e", input="x")
    fake_openai.reset()
    assert fake_openai.requests == [] and fake_openai.max_in_flight == 0
    assert fake_openai.scripted_left == 0 and fake_openai.handler is handler
    assert chat(sdk).choices[0].message.content == "kept"
    assert len(fake_openai.requests) == 1


def test_stop_ends_requests_in_flight_and_restart_works() -> None:
    server = FakeOpenAI(latency=30).start()
    first_url = server.base_url
    with client(server, timeout=20) as c:
        import threading

        errors: list[BaseException] = []

        def call() -> None:
            try:
                chat(c)
            except BaseException as exc:
                errors.append(exc)

        worker = threading.Thread(target=call)
        worker.start()
        while not server.requests:
            time.sleep(0.01)
        server.stop()
        worker.join(timeout=60)  # the request's own timeout is far longer
        assert not worker.is_alive()
        assert [type(e) for e in errors] == [openai.APIConnectionError]
    assert not server.running
    server.latency = 0
    with server, client(server) as c:
        assert chat(c).choices[0].message.content == "ok"
        assert server.base_url.startswith("http://127.0.0.1:")
    assert first_url.endswith("/v1")


# ------------------------------------------------------------------------ fault plan
def outcomes(server: FakeOpenAI, count: int) -> list[str]:
    seen = []
    with client(server, timeout=2) as c:
        for _ in range(count):
            try:
                chat(c)
                seen.append("ok")
            except openai.APIStatusError as exc:
                seen.append(str(exc.status_code))
            except openai.APIConnectionError:
                seen.append("connection")
    return seen


def test_fault_plan_is_deterministic_per_seed() -> None:
    faults = [Fault.rate_limit(0.01), Fault.status(503), Fault.drop()]
    runs = []
    for seed in (7, 7, 8):
        with FakeOpenAI(faults=FaultPlan(0.3, faults, seed=seed)) as server:
            runs.append(outcomes(server, 60))
            assert len(server.faults.injected) == sum(o != "ok" for o in runs[-1])  # type: ignore[union-attr]
    assert runs[0] == runs[1] != runs[2]
    failures = sum(o != "ok" for o in runs[0])
    assert 6 <= failures <= 30
    assert set(runs[0]) == {"ok", "429", "503", "connection"}


def test_fault_plan_replays_after_reset_and_leaves_script_alone() -> None:
    plan = FaultPlan(0.5, [Fault.status(500)], seed=1)
    with FakeOpenAI(faults=plan) as server:
        first = outcomes(server, 20)
        server.reset()
        assert outcomes(server, 20) == first
        server.reset()
        server.script(*(Reply.text(str(i)) for i in range(20)))
        with client(server) as c:
            delivered = []
            for _ in range(20):
                with contextlib.suppress(openai.InternalServerError):
                    delivered.append(chat(c).choices[0].message.content)
        # a planned fault does not eat a scripted reply: they arrive in order, none skipped
        assert delivered == [str(i) for i in range(len(delivered))]


def test_fault_plan_paths_and_validation() -> None:
    plan = FaultPlan(1.0, [Fault.status(500)], paths=["/v1/embeddings"])
    with FakeOpenAI(faults=plan) as server, client(server) as c:
        assert chat(c).choices[0].message.content == "ok"
        with pytest.raises(openai.InternalServerError):
            c.embeddings.create(model="e", input="x")
    with pytest.raises(ValueError):
        FaultPlan(1.5, [Fault.drop()])
    with pytest.raises(ValueError):
        FaultPlan(0.1, [])
    with pytest.raises(ValueError):
        FaultPlan(0.1, [Fault.truncated()], paths=["/v1/embeddings"])


# --------------------------------------------------------------------- schema_instance
class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class StatementVerdict(BaseModel):
    id: int = Field(ge=1)
    verdict: Literal[0, 1]
    reason: str = Field(min_length=3)


class Cat(BaseModel):
    kind: Literal["cat"]
    lives: int = Field(gt=0, le=9)


class Dog(BaseModel):
    kind: Literal["dog"]
    good: bool


class Node(BaseModel):
    label: str
    parent: Node | None
    children: list[Node]


class Everything(BaseModel):
    verdicts: list[StatementVerdict] = Field(min_length=2, max_length=4)
    color: Color
    score: float = Field(gt=0.0, lt=0.1)
    rating: Annotated[int, Field(ge=0, le=4, multiple_of=2)]
    maybe: float | None
    pet: Cat | Dog = Field(discriminator="kind")
    tags: dict[str, int]
    pair: tuple[int, str]
    unique: set[int] = Field(min_length=3)
    tree: Node
    optional_note: str = "not required"


def test_schema_instance_validates_for_pydantic_models() -> None:
    for model in (Verdict, StatementVerdict, Node, Everything):
        instance = schema_instance(model.model_json_schema())
        model.model_validate(instance)
    everything = schema_instance(Everything.model_json_schema())
    assert "optional_note" not in everything
    assert len(everything["verdicts"]) == 2
    assert everything["verdicts"][0] == {"id": 1, "verdict": 0, "reason": "xxx"}
    assert everything["color"] == "red"
    assert 0 < everything["score"] < 0.1
    assert everything["maybe"] == 0.0
    assert everything["tree"] == {"label": "", "parent": None, "children": []}
    assert len(set(everything["unique"])) == 3


def test_schema_instance_plain_schemas() -> None:
    assert schema_instance({"type": "integer", "exclusiveMinimum": 3}) == 4
    assert schema_instance({"type": "number", "maximum": -2}) == -2
    assert schema_instance({"type": ["null", "string"], "format": "date"}) == "1970-01-01"
    assert schema_instance({"const": 42}) == 42
    assert schema_instance({"type": "array", "items": {"type": "boolean"}, "minItems": 2}) == [
        False,
        True,
    ]
    with pytest.raises(ValueError):
        schema_instance({"$ref": "https://example.com/schema.json"})


# --------------------------------------------------------------------- network guard
@pytest.mark.parametrize("address", [("10.255.255.1", 9), ("93.184.216.34", 80)])
def test_network_guard_blocks_before_any_packet(address: tuple[str, int]) -> None:
    for attempt in ("connect", "connect_ex"):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            started = time.monotonic()
            with pytest.raises(NetworkBlockedError, match="network guard"):
                getattr(sock, attempt)(address)
            assert time.monotonic() - started < 4  # refused, not the socket's 5 s timeout
            # an unbound socket never got a source port: no SYN can have left
            assert sock.getsockname() == ("0.0.0.0", 0)
    with pytest.raises(NetworkBlockedError):
        socket.create_connection(address, timeout=5)


def test_network_guard_blocks_lookups_and_ipv6_and_udp() -> None:
    with pytest.raises(NetworkBlockedError):
        socket.getaddrinfo("example.com", 443)
    with pytest.raises(NetworkBlockedError):
        socket.create_connection(("example.com", 443), timeout=5)
    with pytest.raises(NetworkBlockedError):
        socket.gethostbyname("example.com")
    with (
        socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock,
        pytest.raises(NetworkBlockedError),
    ):
        sock.connect(("2606:2800:220:1:248:1893:25c8:1946", 80))
    with (
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock,
        pytest.raises(NetworkBlockedError),
    ):
        sock.sendto(b"x", ("8.8.8.8", 53))


def guard_error_in(exc: BaseException | None) -> bool:
    """Whether a NetworkBlockedError is ``exc`` or hides in its causes or exception groups."""
    if exc is None:
        return False
    if isinstance(exc, NetworkBlockedError):
        return True
    nested = getattr(exc, "exceptions", ())
    return any(guard_error_in(e) for e in (*nested, exc.__cause__, exc.__context__))


async def test_network_guard_blocks_asyncio_and_sdk() -> None:
    with pytest.raises(NetworkBlockedError):
        await asyncio.wait_for(asyncio.open_connection("10.255.255.1", 9), timeout=5)
    started = time.monotonic()
    async with openai.AsyncOpenAI(
        base_url="http://10.255.255.1:9/v1", api_key="k", max_retries=3, timeout=30
    ) as c:
        # not an OSError, so neither httpx nor the SDK turn it into a retried connection error;
        # anyio wraps it in an exception group, whose type varies by Python version
        with pytest.raises(Exception) as caught:
            await c.chat.completions.create(model="m", messages=MESSAGES)
    assert guard_error_in(caught.value)
    assert time.monotonic() - started < 2
    sync = openai.OpenAI(base_url="http://10.255.255.1:9/v1", api_key="k", max_retries=3)
    with sync, pytest.raises(NetworkBlockedError):
        chat(sync)


def test_network_guard_allows_loopback_and_unix(fake_openai: FakeOpenAI, tmp_path: Path) -> None:
    for host in ("127.0.0.1", "localhost"):
        with socket.create_connection((host, fake_openai.port), timeout=5):
            pass
    path = str(tmp_path / "s.sock")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(path)
        listener.listen()
        with socket.socket(socket.AF_UNIX) as sock:
            sock.connect(path)


def test_test_environment_is_isolated(rageval_cache_dir: Path) -> None:
    assert os.environ["RAGEVAL_CACHE_DIR"] == str(rageval_cache_dir)
    assert Path.home() not in rageval_cache_dir.parents
    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert "OPENAI_API_KEY" not in os.environ


def test_openai_env_points_the_sdk_at_the_fake(openai_env: FakeOpenAI) -> None:
    with openai.OpenAI(max_retries=0) as c:  # everything from the environment
        assert chat(c).choices[0].message.content == "ok"
    (request,) = openai_env.requests
    assert request.headers["authorization"] == f"Bearer {FAKE_API_KEY}"


# ------------------------------------------------------------------------ command line
def test_standalone_server_process(tmp_path: Path) -> None:
    (tmp_path / "my_judge.py").write_text(
        "from rageval.testing import Reply\n"
        "def handle(request):\n"
        "    return Reply.json({'echo': request.messages[-1]['content']})\n"
    )
    args = ("--port", "0", "--latency-ms", "300", "--handler", "my_judge:handle")
    with (
        server_in_child(*args, path=[tmp_path]) as base_url,
        openai.OpenAI(base_url=base_url, api_key="k", max_retries=0) as c,
    ):
        started = time.monotonic()
        completion = chat(c)
        assert time.monotonic() - started >= 0.3
    assert json.loads(completion.choices[0].message.content) == {"echo": MESSAGES[0]["content"]}
