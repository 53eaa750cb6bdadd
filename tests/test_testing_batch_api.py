"""FakeOpenAI's Batch API through the real openai SDK: files, batches, their statuses and the
failures it injects (expired batch with partial output, errors on some lines, failed batch,
cancelled batch)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from rageval.testing import FAKE_API_KEY, FakeOpenAI, Reply
from rageval.testing.batch_api import BatchFault


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(lambda req: Reply.json({"echo": req.messages[-1]["content"]})) as s:
        yield s


@pytest.fixture
def sdk(server: FakeOpenAI) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key=FAKE_API_KEY, max_retries=0) as c:
        yield c


def jsonl(n: int, url: str = "/v1/chat/completions") -> bytes:
    lines = [
        {
            "custom_id": f"q{i}",
            "method": "POST",
            "url": url,
            "body": {"model": "m", "messages": [{"role": "user", "content": f"question {i}"}]},
        }
        for i in range(n)
    ]
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def run_batch(sdk: openai.OpenAI, content: bytes) -> Any:
    uploaded = sdk.files.create(file=("in.jsonl", content), purpose="batch")
    batch = sdk.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    deadline = time.monotonic() + 10
    while batch.status not in ("completed", "failed", "expired", "cancelled"):
        assert time.monotonic() < deadline
        time.sleep(0.01)
        batch = sdk.batches.retrieve(batch.id)
    return batch


def lines_of(sdk: openai.OpenAI, file_id: str | None) -> dict[str, Any]:
    if file_id is None:
        return {}
    text = sdk.files.content(file_id).content.decode()
    return {line["custom_id"]: line for line in map(json.loads, text.splitlines())}


def test_a_batch_is_answered_by_the_same_handler_as_online(
    server: FakeOpenAI, sdk: openai.OpenAI
) -> None:
    batch = run_batch(sdk, jsonl(3))
    assert batch.status == "completed" and batch.error_file_id is None
    assert (batch.request_counts.total, batch.request_counts.completed) == (3, 3)
    out = lines_of(sdk, batch.output_file_id)
    body = out["q1"]["response"]["body"]
    assert out["q1"]["response"]["status_code"] == 200
    assert json.loads(body["choices"][0]["message"]["content"]) == {"echo": "question 1"}
    assert body["usage"]["prompt_tokens"] > 0
    assert "cached_tokens" in body["usage"]["prompt_tokens_details"]
    assert [r.messages[0]["content"] for r in server.batch_api.lines] == [
        f"question {i}" for i in range(3)
    ]
    assert server.chat_requests == []  # the lines are no HTTP requests of their own
    assert server.batch_api.uploads == [jsonl(3)]
    listed = sdk.batches.list()
    assert [b.id for b in listed.data] == [batch.id]


def test_injected_failures(server: FakeOpenAI, sdk: openai.OpenAI) -> None:
    api = server.batch_api
    api.script(BatchFault.expire(after=2), BatchFault.line_errors(every=2), BatchFault.fail())
    expired = run_batch(sdk, jsonl(5))
    assert expired.status == "expired" and expired.expired_at is not None
    assert set(lines_of(sdk, expired.output_file_id)) == {"q0", "q1"}  # the partial output
    errors = lines_of(sdk, expired.error_file_id)
    assert set(errors) == {"q2", "q3", "q4"}
    assert errors["q2"]["response"] is None and errors["q2"]["error"]["code"] == "batch_expired"
    partial = run_batch(sdk, jsonl(4))
    assert partial.status == "completed"
    assert (partial.request_counts.completed, partial.request_counts.failed) == (2, 2)
    failed_lines = lines_of(sdk, partial.error_file_id)
    assert set(failed_lines) == {"q1", "q3"}
    assert failed_lines["q1"]["response"]["status_code"] == 500
    failed = run_batch(sdk, jsonl(2))
    assert failed.status == "failed" and failed.errors is not None and failed.errors.data
    assert failed.output_file_id is None and failed.error_file_id is None
    # a file that is not a batch of one endpoint fails validation
    bad = jsonl(2).replace(b'"q1"', b'"q0"')
    invalid = run_batch(sdk, bad)
    assert invalid.status == "failed" and invalid.errors is not None
    assert invalid.errors.data[0].code == "duplicate_custom_id"
    with pytest.raises(openai.BadRequestError):
        sdk.batches.create(input_file_id="file-nope", endpoint="/v1/chat/completions",
                           completion_window="24h")  # fmt: skip


def test_cancel_before_the_lines_run(server: FakeOpenAI, sdk: openai.OpenAI) -> None:
    server.batch_api.delay = 5.0
    uploaded = sdk.files.create(file=("in.jsonl", jsonl(2)), purpose="batch")
    batch = sdk.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                               completion_window="24h")  # fmt: skip
    assert batch.status == "validating"
    cancelled = sdk.batches.cancel(batch.id)
    assert cancelled.status == "cancelled"
    errors = lines_of(sdk, cancelled.error_file_id)
    assert {e["error"]["code"] for e in errors.values()} == {"batch_cancelled"}
    assert server.batch_api.lines == []
    with pytest.raises(openai.APIStatusError):
        sdk.batches.cancel(batch.id)  # already over
    with pytest.raises(openai.NotFoundError):
        sdk.batches.retrieve("batch_nope")


def test_the_batch_api_checks_the_key() -> None:
    with FakeOpenAI(api_key="right") as server:
        wrong = openai.OpenAI(base_url=server.base_url, api_key="wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError):
            wrong.files.create(file=("in.jsonl", jsonl(1)), purpose="batch")
