"""Helpers for metric tests: a real judge (openai SDK) on a FakeOpenAI, and request routing.

Metric templates run concurrently, so a handler must not rely on arrival order: `route` picks
the reply by the tags present in the request's first user message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import openai

from rageval.judge import Judge, llm_factory
from rageval.testing import FakeOpenAI, Fault, RecordedRequest, Reply


def judge_for(server: FakeOpenAI, **kw: Any) -> Judge:
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
    return llm_factory("test-model", client=client, **kw)


def embeddings_for(server: FakeOpenAI) -> Any:
    from rageval.embeddings import embedding_factory

    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="sk-test")
    return embedding_factory("openai", model="e", client=client)


def user_text(req: RecordedRequest) -> str:
    """The first user message: the metric's prompt, whatever re-asks were appended after it."""
    return next(str(m["content"]) for m in req.messages if m.get("role") == "user")


def attempt(req: RecordedRequest) -> int:
    """1 for a first ask, 2 for the first re-ask, ..."""
    return sum(1 for m in req.messages if m.get("role") == "user")


Answer = Reply | Callable[[RecordedRequest], Reply]


def route(*rules: tuple[Sequence[str], Answer]) -> Callable[[RecordedRequest], Reply | Fault]:
    """A handler answering with the first rule whose tags all appear in the prompt; a request
    no rule expects gets a 400, which the judge treats as fatal, so the test fails loudly."""

    def handler(req: RecordedRequest) -> Reply | Fault:
        text = user_text(req)
        for tags, answer in rules:
            if all(f"<{t}>" in text for t in tags):
                return answer(req) if callable(answer) else answer
        return Fault.status(400, f"unexpected request: {text[:300]}")

    return handler


def keyed(prefix: str, field: str, *flags: bool, first: int = 1, **extra: object) -> Reply:
    """A verdict reply with one key per item, ``{prefix}1`` …: ``{"reason", field}``."""
    body: dict[str, object] = dict(extra)
    for i, flag in enumerate(flags, start=first):
        body[f"{prefix}{i}"] = {"reason": f"because {i}", field: flag}
    return Reply.json(body)


def chat_count(server: FakeOpenAI) -> int:
    return len(server.chat_requests)


def prompts_with(server: FakeOpenAI, *tags: str) -> list[str]:
    texts = [user_text(r) for r in server.chat_requests]
    return [t for t in texts if all(f"<{tag}>" in t for tag in tags)]
