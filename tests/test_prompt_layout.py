"""Prompts laid out for automatic prompt caching (providers', llama.cpp's, vLLM's): every
judge request is the system message, then fixed instructions and the sample's data in one
block. A request that shows the retrieved contexts begins with them (after the system message
alone), so that every such request of a sample, whatever the metric, begins with the same text
(the contexts are most of a sample's text); where a metric's templates rate the same
data, the data comes first, so that its requests for one sample begin with the same data; any
other request gives its instructions first, so that two samples' requests to a metric begin
with the same text."""

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
# show the contexts after their task: with the task last, the real judge (Qwen2.5-Coder-1.5B)
# judged MEMERAG worse than at chance (faithfulness.prompt); a rubric, the user's own long
# instruction, keeps its place first: no labelled data here to check it last against
TASK_BEFORE_CONTEXTS = {"faithfulness", "rubric_score"}
# a pair's two orders begin with the same data (question, reference) and differ from the
# answers on, which they show in turn first: their shared start is what a prompt cache reuses
ORDERS_SHARE_START = {"pairwise"}
# the data of a request: tagged blocks made by rageval.metrics.authoring.tagged, nothing else
_DATA = re.compile(r"(?:<(\w+)>\n.*?\n</\1>\n?)+", re.DOTALL)
_FIRST_TAG = re.compile(r"^<\w+>$", re.MULTILINE)


def _split(request: RecordedRequest) -> tuple[str, str, str]:
    """(fixed part, data part, where the data is) of a request: the system message and the
    user message less its one block of tagged data (the fixed text before and after it); that
    block; "first" when the user message begins with it, else "inside"."""
    system = next(m["content"] for m in request.messages if m["role"] == "system")
    user = next(m["content"] for m in request.messages if m["role"] == "user")
    first = _FIRST_TAG.search(user)
    assert first is not None, f"no tagged data in {user!r}"
    data = _DATA.match(user, first.start())
    assert data is not None, f"no tagged data in {user!r}"
    where = "first" if first.start() == 0 else "inside"
    return f"{system}\n{user[: data.start()]}|{user[data.end() :]}", data.group(0), where


def _contexts_block(sample: dict[str, Any]) -> str:
    """The retrieved contexts as every request that shows them begins."""
    lines = "\n".join(f"[c{i}] {c}" for i, c in enumerate(sample["retrieved_contexts"], 1))
    return f"<contexts>\n{lines}\n</contexts>\n"


def _requests(metric: str, sample: dict[str, Any], mode: Mode) -> list[RecordedRequest]:
    with FakeOpenAI(handle) as server:
        judge = Judge(
            "judge-model", base_url=server.base_url, api_key=FAKE_API_KEY, cache=False, mode=mode
        )
        if metric in ORDERS_SHARE_START:  # a second answer to compare with
            sample = {**sample, "metadata": {"response_b": "Nobody can tell. It is unknown."}}
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
            if where == "first":  # only where other requests of the sample share its start
                shared = data.startswith(_contexts_block(sample))
                shared = shared or [d for _, d, _ in parts].count(data) > 1
                if metric in ORDERS_SHARE_START:
                    starts = {d[: d.index("<answer_1>")] for _, d, _ in parts}
                    shared = shared or (len(parts) == 2 and len(starts) == 1)
                assert shared, f"{metric}: data first, shared with no other request"
            elif "<contexts>" in data and metric not in TASK_BEFORE_CONTEXTS:
                raise AssertionError(f"{metric}: the contexts shown, not first: {data!r}")
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


def test_the_requests_of_a_sample_that_show_its_contexts_all_begin_with_them() -> None:
    """One evaluation of the metrics that show the contexts: every request of the sample that
    holds them begins with the same system message and the same contexts block, so a
    server's prompt cache reads a sample's contexts once, not once per metric."""
    sample = SAMPLES[0]
    metrics = [
        "faithfulness",
        "context_precision",
        "context_recall",
        "context_relevance",
        "response_groundedness",
    ]
    with FakeOpenAI(handle) as server:
        judge = Judge("judge-model", base_url=server.base_url, api_key=FAKE_API_KEY, cache=False)
        result = evaluate([sample], metrics, llm=judge, progress=False)
        requests = server.chat_requests
    assert all(result.statuses(m) == ["ok"] for m in metrics)
    showing = [r for r in requests if r.messages[-1]["content"].startswith("<contexts>")]
    # one request each for precision and recall, two templates each for relevance and
    # groundedness (faithfulness's verdicts show them after the task: TASK_BEFORE_CONTEXTS)
    assert len(showing) == 6
    assert sum("<contexts>" in r.messages[-1]["content"] for r in requests) == 7
    opening = [
        (r.messages[0], r.messages[1]["content"][: len(_contexts_block(sample))]) for r in showing
    ]
    assert all(o == opening[0] for o in opening), opening
    assert opening[0][1] == _contexts_block(sample)
    # how to reply, then the instructions: the judge reads its task last
    for request in showing:
        user = request.messages[-1]["content"]
        assert "\n\nReply " in user and not user.rsplit("\n\n", 1)[-1].startswith("Reply "), user
