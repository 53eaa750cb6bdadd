"""Embeddings: the base interface, the embedded offline model and OpenAI-compatible endpoints.

``embedding_factory("local")`` (the default) is all-MiniLM-L6-v2 running offline in numpy;
``embedding_factory("openai", model=...)`` is any OpenAI-compatible endpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rageval.embeddings._weights import ModelFilesError
from rageval.embeddings.base import Embeddings, cosine, embedding_factory
from rageval.embeddings.local import LocalEmbeddings

__all__ = [
    "Embeddings",
    "LocalEmbeddings",
    "ModelFilesError",
    "OpenAIEmbeddings",
    "cosine",
    "embedding_factory",
]


def __getattr__(name: str) -> Any:
    # the OpenAI client pulls in the judge layer and the openai SDK: only on demand
    if name == "OpenAIEmbeddings":
        from rageval.embeddings.openai import OpenAIEmbeddings

        return OpenAIEmbeddings
    raise AttributeError(f"module 'rageval.embeddings' has no attribute {name!r}")


if TYPE_CHECKING:
    from rageval.embeddings.openai import OpenAIEmbeddings
