"""Embeddings: the base interface, the embedded offline model and OpenAI-compatible endpoints.

``embedding_factory("local")`` (the default) is all-MiniLM-L6-v2 running offline in numpy;
``embedding_factory("openai", model=...)`` is any OpenAI-compatible endpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rageval.embeddings._weights import ModelFilesError
from rageval.embeddings.base import Embeddings, cosine
from rageval.embeddings.local import LocalEmbeddings

__all__ = [
    "Embeddings",
    "LocalEmbeddings",
    "ModelFilesError",
    "OpenAIEmbeddings",
    "cosine",
    "embedding_factory",
]


def embedding_factory(
    provider: str = "local", *, model: str | None = None, client: Any = None, **kw: Any
) -> Embeddings:
    """Build an embeddings model.

    Args:
        provider: ``"local"``, the embedded all-MiniLM-L6-v2 (offline, no torch), or
            ``"openai"``, any OpenAI-compatible embeddings endpoint.
        model: the endpoint's embeddings model (``"openai"``; the local one has its own).
        client: an ``openai.AsyncOpenAI`` to send the requests through (``"openai"`` only).
        **kw: the provider class's other settings (the local model's ``threads``; the
            endpoint's ``base_url``, ``limits``, ``retry``...).
    """
    key = provider.strip().lower()
    if key == "local":
        if client is not None:
            raise ValueError("the local embeddings model takes no client")
        return LocalEmbeddings(model=model, **kw)
    if key == "openai":
        from rageval.embeddings.openai import OpenAIEmbeddings

        return OpenAIEmbeddings(model=model, client=client, **kw)
    raise ValueError(f"unknown embeddings provider {provider!r}; expected 'local' or 'openai'")


def __getattr__(name: str) -> Any:
    # the OpenAI client pulls in the judge layer and the openai SDK: only on demand
    if name == "OpenAIEmbeddings":
        from rageval.embeddings.openai import OpenAIEmbeddings

        return OpenAIEmbeddings
    raise AttributeError(f"module 'rageval.embeddings' has no attribute {name!r}")


if TYPE_CHECKING:
    from rageval.embeddings.openai import OpenAIEmbeddings
