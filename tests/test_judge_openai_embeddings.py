"""OpenAIEmbeddings through the real openai SDK against FakeOpenAI: batching, the persistent
cache, and the judge layer's shared limiter, retries and fatal errors."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest
from pydantic import BaseModel

from rageval._client._cache import shared_cache
from rageval.embeddings.openai import OpenAIEmbeddings
from rageval.judge import FatalJudgeError, Judge
from rageval.testing import FakeOpenAI, Fault, FaultPlan, hash_embedding

KEY = "sk-test-SECRET-1234567890"


def make(server: FakeOpenAI, **kw: Any) -> OpenAIEmbeddings:
    kw.setdefault("api_key", KEY)
    return OpenAIEmbeddings("emb", base_url=server.base_url, **kw)


async def test_batches_and_returns_the_servers_vectors(fake_openai: FakeOpenAI) -> None:
    emb = make(fake_openai, batch_size=4)
    texts = [f"text {i}" for i in range(10)]
    out = await emb.aembed_texts(texts)
    assert out.shape == (10, 8) and out.dtype == np.float32
    for row, text in zip(out, texts, strict=True):
        np.testing.assert_allclose(row, hash_embedding(text, 8), rtol=1e-6)
    requests = fake_openai.embedding_requests
    assert sorted(len(r.body["input"]) for r in requests) == [2, 4, 4]
    # base64 is decoded with numpy: far cheaper than a Python list of floats per vector
    assert all(r.body["encoding_format"] == "base64" for r in requests)
    assert emb.dim == 8
    assert emb.usage.total.requests == 3


async def test_persistent_cache_survives_a_new_client(fake_openai: FakeOpenAI) -> None:
    first = await make(fake_openai).aembed_texts(["a", "b"])
    again = make(fake_openai)
    second = await again.aembed_texts(["b", "a", "c"])
    np.testing.assert_array_equal(second[:2], first[::-1])
    [_, late] = fake_openai.embedding_requests
    assert late.body["input"] == ["c"]
    assert again.usage.total.cache_hits == 2
    # writes are queued; the process's own cache object commits them before counting
    assert shared_cache().stats()["entries"]["embeddings"] == 3


async def test_models_and_dimensions_do_not_share_vectors(fake_openai: FakeOpenAI) -> None:
    await make(fake_openai).aembed_texts(["a"])
    other = OpenAIEmbeddings("emb-2", base_url=fake_openai.base_url, api_key=KEY)
    await other.aembed_texts(["a"])
    short = await make(fake_openai, dimensions=4).aembed_texts(["a"])
    assert short.shape == (1, 4)
    assert len(fake_openai.embedding_requests) == 3
    assert fake_openai.embedding_requests[-1].body["dimensions"] == 4


async def test_retries_and_fatal_errors_come_from_the_judge_layer() -> None:
    with FakeOpenAI(api_key=KEY) as server:
        server.faults = FaultPlan(1.0, [Fault.rate_limit(0.3)], paths=["/v1/embeddings"])
        emb = make(server, max_retries=3)
        task = asyncio.create_task(emb.aembed_texts(["x"]))
        await asyncio.sleep(0.5)
        server.faults = None
        assert (await task).shape == (1, 8)
        starts = [r.started for r in server.embedding_requests]
        assert all(b - a >= 0.3 for a, b in itertools.pairwise(starts))
        assert emb.usage.total.retries == len(starts) - 1 >= 1

        wrong = make(server, api_key="sk-wrong")
        with pytest.raises(FatalJudgeError, match=r"embeddings endpoint .* rejected the API key"):
            await wrong.aembed_texts(["y"])
        sent = len(server.embedding_requests)
        with pytest.raises(FatalJudgeError):
            await wrong.aembed_texts(["z"])
        assert len(server.embedding_requests) == sent


async def test_shares_the_endpoint_limiter_with_a_judge() -> None:
    class Verdict(BaseModel):
        verdict: int

    with FakeOpenAI(latency=0.05) as server:
        judge = Judge("m", base_url=server.base_url, api_key=KEY, max_concurrency=3, cache=False)
        emb = make(server, batch_size=1, cache=False)
        assert emb._endpoint.limiter is judge._endpoint.limiter
        asks = [judge.ask([{"role": "user", "content": str(i)}], Verdict) for i in range(10)]
        await asyncio.gather(emb.aembed_texts([f"t{i}" for i in range(10)]), *asks)
        assert server.max_in_flight == 3


async def test_given_client_and_empty_text(fake_openai: FakeOpenAI) -> None:
    client = openai.AsyncOpenAI(base_url=fake_openai.base_url, api_key=KEY)
    emb = OpenAIEmbeddings("emb", client=client)
    out = await emb.aembed_texts(["", "x"])
    assert out.shape == (2, 8)
    assert fake_openai.embedding_requests[0].body["input"] == [" ", "x"]


def test_sync_use_and_repr(fake_openai: FakeOpenAI, rageval_cache_dir: Path) -> None:
    emb = make(fake_openai)
    assert emb.embed_text("hello").shape == (8,)
    assert KEY not in repr(emb) + repr(emb.describe())
    assert emb.describe()["base_url"] == fake_openai.base_url
    for path in rageval_cache_dir.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes()
