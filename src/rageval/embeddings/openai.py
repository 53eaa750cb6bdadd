"""Embeddings from any OpenAI-compatible ``/embeddings`` endpoint.

Requests go through the endpoint client the judge uses too (:mod:`rageval._client`): the same
per-endpoint limiter (so a judge and an embeddings client on one server share its concurrency
and rate limits), the same retry loop and fatal-error handling, and the same request cache file
(table ``embeddings``, keyed by endpoint + model + dimensions + text). The in-memory cache and batching come from
:class:`~rageval.embeddings.base.Embeddings`.
"""

from __future__ import annotations

import base64
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from rageval._client._cache import RequestCache, cache_key
from rageval._client._endpoint import EndpointClient
from rageval._client._run import current_run
from rageval._client._settings import EndpointOptions, Limits
from rageval._client._transport import BadBody
from rageval._client._usage import PriceTable, Tally, Usage
from rageval.embeddings.base import Embeddings, FloatArray
from rageval.errors import FatalJudgeError

if TYPE_CHECKING:
    from typing_extensions import Unpack

__all__ = ["DEFAULT_OPENAI_EMBEDDING_MODEL", "OpenAIEmbeddings"]

DEFAULT_OPENAI_EMBEDDING_MODEL = "text-embedding-3-small"
_CACHE_FORMAT = 1


class OpenAIEmbeddings(Embeddings, EndpointClient):
    """An OpenAI-compatible embeddings model, e.g. ``OpenAIEmbeddings("text-embedding-3-small")``.

    ``client`` may be an ``openai.AsyncOpenAI`` (or a sync ``openai.OpenAI``, whose settings are
    reused); otherwise ``base_url`` (default ``RAGEVAL_BASE_URL``, ``OPENAI_BASE_URL`` or
    OpenAI) and the key from ``api_key`` or ``$api_key_env``. ``limits`` and ``retry`` (or
    their shorthands) are as for :class:`rageval.judge.Judge`, except that by default this
    client leaves the endpoint's concurrency to whoever else set it (16 if nobody did). The API
    rejects empty strings, so an empty text is sent as a single space.
    """

    def __init__(
        self,
        model: str | None = None,
        *,
        dimensions: int | None = None,
        batch_size: int | None = 128,
        cache_size: int = 50_000,
        cache: RequestCache | bool | str | os.PathLike[str] = True,
        prices: PriceTable | None = None,
        **endpoint: Unpack[EndpointOptions],
    ) -> None:
        super().__init__(batch_size=batch_size, cache_size=cache_size)
        if dimensions is not None and dimensions < 1:
            raise ValueError(f"dimensions must be >= 1, got {dimensions}")
        self.model = model or DEFAULT_OPENAI_EMBEDDING_MODEL
        self.name = f"openai:{self.model}"
        self.dimensions = dimensions
        self.dim = dimensions
        self._connect("embeddings endpoint", self.model, Limits(), cache, prices, endpoint)

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "model": self.model,
            "dimensions": self.dimensions,
            **self._endpoint_description(),
        }

    def __repr__(self) -> str:
        return f"OpenAIEmbeddings(model={self.model!r}, base_url={self.base_url!r})"

    async def _aembed_batch(self, texts: list[str]) -> FloatArray:
        self._endpoint.check_fatal()
        # the keys only serve the persistent cache
        keys = {text: self._key(text) for text in texts} if self.cache is not None else {}
        found: dict[str, FloatArray] = {}
        if self.cache is not None:
            blobs = self.cache.get_vectors(list(keys.values()))
            for text, key in keys.items():
                if key in blobs:
                    found[text] = np.frombuffer(blobs[key], dtype=np.float32)
            if found:
                self._book(Usage(cache_hits=len(found)))
        missing = [t for t in dict.fromkeys(texts) if t not in found]
        if missing:
            fresh = await self._request(missing)
            found.update(fresh)
            if self.cache is not None:
                blobs = {keys[t]: v.astype(np.float32).tobytes() for t, v in fresh.items()}
                self.cache.put_vectors(self.model, blobs)
        return np.stack([found[t] for t in texts]).astype(np.float32, copy=False)

    async def _request(self, texts: list[str]) -> dict[str, FloatArray]:
        params: dict[str, Any] = {
            "model": self.model,
            "input": [t if t else " " for t in texts],
            # base64 of little-endian float32: smaller than a JSON float list and decoded by
            # numpy at once instead of number by number
            "encoding_format": "base64",
        }
        if self.dimensions is not None:
            params["dimensions"] = self.dimensions
        estimate = sum(len(t) for t in texts) // 4 + len(texts)
        tally = Tally()
        try:
            vectors, prompt_tokens = await self._endpoint.post_json(
                "/embeddings",
                params,
                read=_read_embeddings,
                estimated_tokens=estimate,
                tally=tally,
            )
            tally.prompt_tokens = prompt_tokens or 0
            self._endpoint.limiter.settle(
                estimate, estimate if prompt_tokens is None else prompt_tokens
            )
        except FatalJudgeError as exc:
            self._endpoint.remember_fatal(exc)
            raise
        finally:
            if tally.requests:
                tally.cost_usd = self.prices.cost(self.model, tally.prompt_tokens, 0)
                self._book(tally.usage())
        if len(vectors) != len(texts):
            raise ValueError(
                f"{self.name} at {self.base_url} returned {len(vectors)} vectors for "
                f"{len(texts)} texts"
            )
        return dict(zip(texts, vectors, strict=True))

    def _book(self, usage: Usage) -> None:
        """`usage` in this client's ledger and in the run's that asked (a client shared by
        two runs at once books each request to its own run)."""
        self.usage.record(usage)
        current_run().book_embeddings(usage)

    def _key(self, text: str) -> str:
        return cache_key(
            {
                "format": _CACHE_FORMAT,
                "endpoint": self.base_url,
                "model": self.model,
                "dimensions": self.dimensions,
                "text": text,
            }
        )


def _read_embeddings(data: dict[str, Any]) -> tuple[list[FloatArray], int | None]:
    """The vectors of an ``/embeddings`` reply in input order, and its prompt tokens if given.

    A server that ignores ``encoding_format`` and sends float lists is read as well.
    """
    items = data.get("data")
    if not isinstance(items, list) or not all(
        isinstance(item, dict) and isinstance(item.get("index"), int) for item in items
    ):
        raise BadBody("no data list of indexed items in an embeddings reply")
    vectors = []
    for item in sorted(items, key=lambda item: item["index"]):
        embedding = item.get("embedding")
        if isinstance(embedding, str):
            vectors.append(np.frombuffer(base64.b64decode(embedding), dtype="<f4"))
        elif isinstance(embedding, list):
            vectors.append(np.asarray(embedding, dtype=np.float32))
        else:
            raise BadBody("an embedding is neither base64 nor a list of numbers")
    usage = data.get("usage")
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return vectors, tokens if isinstance(tokens, int) and tokens >= 0 else None
