"""Prompts laid out for automatic prompt caching (providers', llama.cpp's, vLLM's): every
judge request is the fixed system message, then fixed instructions and the sample's data in
one block: the instructions first, so that two samples' requests to a metric begin with the
same text; or, where a metric's templates rate the same data, the data first, so that its
requests for one sample begin with the same data (far longer than the instructions)."""

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


def _split(request: RecordedRequest) -> tuple[str, str, str]:
    """(fixed part, data part, where the data is) of a request: the system message and the
    user message less its one block of tagged data; that block; "last" or "first"."""
    system = next(m["content"] for m in request.messages if m["role"] == "system")
    user = next(m["content"] for m in request.messages if m["role"] == "user")
    first = _FIRST_TAG.search(user)
    assert first is not None, f"no tagged data in {user!r}"
    if first.start() > 0:
        return system + "\n" + user[: first.start()], user[first.start() :], "last"
    data = _DATA.match(user)
    assert data is not None, f"no tagged data at the start of {user!r}"
    return system + "\n" + user[data.end() :], data.group(0), "first"


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
def test_every_request_is_fixed_text_and_one_block_of_the_samples_data(
    metric: str, mode: Mode
) -> None:
    fixed: list[Counter[str]] = []
    for sample in SAMPLES:
        requests = _requests(metric, sample, mode)
        assert requests
        parts = [_split(r) for r in requests]
        for head, data, where in parts:
            # the data in one block, nothing of the sample outside it
            assert _DATA.fullmatch(data), f"{metric}: fixed text inside the data: {data!r}"
            assert sample["user_input"] not in head and sample["response"] not in head
            if where == "first":  # only where another request of the sample shares the data
                assert [d for _, d, _ in parts].count(data) > 1, f"{metric}: data first alone"
        fixed.append(Counter(head for head, _, _ in parts))
    # the two samples' requests hold the same fixed text, request for request
    assert fixed[0] == fixed[1]


@pytest.mark.parametrize("metric", ["context_relevance", "response_groundedness"])
def test_templates_that_rate_the_same_data_begin_with_it(metric: str) -> None:
    """A server's prompt cache serves the second template the data the first one read."""
    first, second = _requests(metric, SAMPLES[0], "json_schema")
    (system_1, user_1), (system_2, user_2) = (
        [m["content"] for m in r.messages if m["role"] in ("system", "user")]
        for r in (first, second)
    )
    data = _DATA.match(user_1)
    assert system_1 == system_2 and data is not None and user_2.startswith(data.group(0))
    assert user_1 != user_2
