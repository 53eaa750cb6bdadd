"""benchmarks/metered_proxy.py (the real-judge comparison with ragas) in front of the project's
test server: a request for ``n`` generations goes upstream as ``n`` requests of one and comes
back as one reply of ``n`` choices, every completion's tokens are counted, an upstream error
passes through counted as failed, and ``/v1/embeddings`` is answered with the embedded
all-MiniLM-L6-v2, the vectors rageval itself computes."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from _harness import MeteredProxy
from rageval.embeddings import LocalEmbeddings
from rageval.testing import FakeOpenAI, Fault, RecordedRequest, Reply


@pytest.fixture
def proxy(fake_openai: FakeOpenAI) -> Iterator[MeteredProxy]:
    with MeteredProxy(fake_openai.base_url.removesuffix("/v1")) as p:
        yield p


def post(url: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return int(response.status), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return int(error.code), json.loads(error.read())


CHAT = {"model": "m", "messages": [{"role": "user", "content": "Is the sky blue?"}]}


def test_n_generations_are_n_upstream_requests_joined_and_counted(
    proxy: MeteredProxy, fake_openai: FakeOpenAI
) -> None:
    _, single = post(f"{proxy.base_url}/chat/completions", CHAT)
    proxy.reset()
    fake_openai.reset()

    status, reply = post(f"{proxy.base_url}/chat/completions", {**CHAT, "n": 3})

    assert status == 200
    assert [c["index"] for c in reply["choices"]] == [0, 1, 2]
    assert [r.body.get("n") for r in fake_openai.chat_requests] == [1, 1, 1]
    stats = proxy.stats()
    assert (stats["chat_requests"], stats["completions"], stats["failed_completions"]) == (1, 3, 0)
    assert stats["prompt_tokens"] == 3 * single["usage"]["prompt_tokens"]
    assert stats["completion_tokens"] == reply["usage"]["completion_tokens"]
    assert reply["usage"]["prompt_tokens"] == stats["prompt_tokens"]


def test_an_upstream_error_passes_through_and_counts_as_failed(
    proxy: MeteredProxy, fake_openai: FakeOpenAI
) -> None:
    fake_openai.script(Fault.status(400, "n must be 1"))

    status, reply = post(f"{proxy.base_url}/chat/completions", CHAT)

    assert status == 400
    assert "n must be 1" in json.dumps(reply)
    stats = proxy.stats()
    assert (stats["completions"], stats["failed_completions"], stats["prompt_tokens"]) == (1, 1, 0)


def test_embeddings_are_rageval_s_own_minilm_vectors(
    proxy: MeteredProxy, fake_openai: FakeOpenAI
) -> None:
    texts = ["The river runs through the town.", "Which river runs through it?"]

    status, reply = post(f"{proxy.base_url}/embeddings", {"model": "any", "input": texts})

    assert status == 200
    served = np.array([item["embedding"] for item in reply["data"]])
    np.testing.assert_allclose(served, LocalEmbeddings().embed_texts(texts), rtol=0, atol=1e-6)
    assert fake_openai.embedding_requests == []  # answered by the proxy, not forwarded
    assert proxy.stats()["embedded_texts"] == 2


def test_a_request_llama_server_has_not_answered_is_in_flight_until_it_is() -> None:
    release = threading.Event()

    async def held(record: RecordedRequest) -> Reply:
        while not release.is_set():  # the server's loop runs in its own thread
            await asyncio.sleep(0.01)
        return Reply.text("yes")

    with FakeOpenAI(held) as upstream, MeteredProxy(upstream.base_url.removesuffix("/v1")) as p:
        sent = threading.Thread(target=post, args=(f"{p.base_url}/chat/completions", CHAT))
        sent.start()
        while not upstream.chat_requests:  # the proxy has forwarded it
            time.sleep(0.05)
        assert p.stats()["in_flight"] == 1
        release.set()
        sent.join()
        assert (p.stats()["in_flight"], p.stats()["completions"]) == (0, 1)
