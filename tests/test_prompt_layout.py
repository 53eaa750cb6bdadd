"""Prompts laid out for providers' automatic prompt caching: every judge request puts what is
fixed first and the sample's text last, so two samples' requests to a metric begin with the
same text (the part a provider can serve from its cache)."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest

from helpers import handle
from rageval.judge import Judge
from rageval.judge._modes import Mode
from rageval.metrics.base import registered_metrics, scores_conversations
from rageval.runner import evaluate
from rageval.testing import FAKE_API_KEY, FakeOpenAI, RecordedRequest

# Two samples with different text and the same shape (2 sentences, 2 contexts), so that
# verdict requests ask about as many items and their schemas are the same.
SAMPLES: list[dict[str, Any]] = [
    {
        "user_input": "When was the first Super Bowl played?",
        "response": "The first Super Bowl was played on January 15, 1967. It was in Los Angeles.",
        "retrieved_contexts": [
            "Super Bowl I was played on January 15, 1967, at the Los Angeles Coliseum.",
            "The Green Bay Packers won it.",
        ],
        "reference": "It was played on January 15, 1967. The venue was the Coliseum.",
        "reference_contexts": ["Super Bowl I took place in 1967."],
    },
    {
        "user_input": "Which gas do plants absorb from the air?",
        "response": "Plants absorb carbon dioxide. They release oxygen in daylight.",
        "retrieved_contexts": [
            "Photosynthesis turns carbon dioxide and water into sugar and oxygen.",
            "Leaves take in air through small pores called stomata.",
        ],
        "reference": "Plants absorb carbon dioxide. Oxygen is given off as a by-product.",
        "reference_contexts": ["Plants take up carbon dioxide."],
    },
]
# the single-turn judge metrics (a per-turn metric sends its single-turn metric's requests)
JUDGE_METRICS = sorted(
    name
    for name, cls in registered_metrics().items()
    if cls.needs_llm and not scores_conversations(cls)
)
# the data of a request: tagged blocks made by rageval.metrics.authoring.tagged, nothing else
_DATA = re.compile(r"(?:<(\w+)>\n.*?\n</\1>\n?)+", re.DOTALL)
_FIRST_TAG = re.compile(r"^<\w+>$", re.MULTILINE)


def _split(request: RecordedRequest) -> tuple[str, str]:
    """(fixed part, data part) of a request: the system message and the user message's text
    up to its first tagged block; then the rest of the user message."""
    system = next(m["content"] for m in request.messages if m["role"] == "system")
    user = next(m["content"] for m in request.messages if m["role"] == "user")
    first = _FIRST_TAG.search(user)
    assert first is not None, f"no tagged data in {user!r}"
    return system + "\n" + user[: first.start()], user[first.start() :]


def _requests(metric: str, sample: dict[str, Any], mode: Mode) -> list[RecordedRequest]:
    with FakeOpenAI(handle) as server:
        judge = Judge(
            "judge-model", base_url=server.base_url, api_key=FAKE_API_KEY, cache=False, mode=mode
        )
        result = evaluate([sample], [metric], llm=judge, progress=False)
        assert result.statuses(metric) == ["ok"], result.sample(0).cells[metric]
        return server.chat_requests


@pytest.mark.parametrize("mode", ["json_schema", "json"])
@pytest.mark.parametrize("metric", JUDGE_METRICS)
def test_every_request_is_fixed_text_then_the_samples_data(metric: str, mode: Mode) -> None:
    fixed: list[Counter[str]] = []
    for sample in SAMPLES:
        requests = _requests(metric, sample, mode)
        assert requests
        parts = [_split(r) for r in requests]
        for head, data in parts:
            # nothing fixed after the data begins, and nothing of the sample before it
            assert _DATA.fullmatch(data), f"{metric}: text after the data: {data!r}"
            assert sample["user_input"] not in head and sample["response"] not in head
        fixed.append(Counter(head for head, _ in parts))
    # the two samples' requests begin with the same fixed text, request for request
    assert fixed[0] == fixed[1]
