"""The whole evaluate() path under every kind of judge failure, each at 30% of the requests.

The judge is the synthetic judge (valid, deterministic answers) behind a FakeOpenAI whose
FaultPlan injects transport faults and whose handler wrapper corrupts content. Whatever
happens, a run must finish with every cell either the value a clean run gives or "not
measured" with a cause that names what went wrong, never NaN; the judge must retry and re-ask
within its bounds; the counts must add up; every request must be booked in the usage.
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from reliability_helpers import (
    LLM_METRICS,
    assert_retry_bounds,
    check_invariants,
    logical_asks,
    non_finite,
)

from helpers import handle as synthetic_answer, tagged_rows
from rageval.embeddings import Embeddings, embedding_factory
from rageval.judge import Judge
from rageval.metrics import (
    AnswerAccuracy,
    AnswerCorrectness,
    ContextPrecision,
    ContextRelevance,
    Faithfulness,
)
from rageval.metrics.base import Metric
from rageval.results import SHARED_USAGE, EvaluationResult, load_run
from rageval.runner import aevaluate, evaluate
from rageval.testing import FakeOpenAI, Fault, FaultPlan, RecordedRequest, Reply

N = 20
RATE = 0.3
MAX_RETRIES = 3
MAX_REASKS = 2
TIMEOUT = 0.5
RATING_METRICS = ("answer_accuracy", "context_relevance")
VERDICT_METRICS = ("faithfulness", "answer_correctness", "context_precision")


def make_metrics() -> list[Metric]:
    return [
        Faithfulness(),
        AnswerCorrectness(),
        ContextPrecision(),
        AnswerAccuracy(max_retries=MAX_REASKS),
        ContextRelevance(max_retries=MAX_REASKS),
    ]


def make_judge(server: FakeOpenAI) -> Judge:
    return Judge(
        "judge-model",
        base_url=server.base_url,
        api_key="sk-test",
        cache=False,
        timeout=TIMEOUT,
        max_retries=MAX_RETRIES,
        max_reasks=MAX_REASKS,
    )


@pytest.fixture(scope="module")
def embedder() -> Embeddings:
    """The offline model, loaded once for the module (it holds no connection to close)."""
    return embedding_factory("local")


# ---------------------------------------------------------------------- content faults
_ITEM_KEY = re.compile(r"^[a-z]\d+$")


def _item_keys(value: dict[str, Any]) -> list[str]:
    """The per-item verdict keys of a reply ("s1", "c2", ...)."""
    return [k for k, v in value.items() if _ITEM_KEY.match(k) and isinstance(v, dict)]


def _cut_json(reply: Reply) -> Reply:
    text = json.dumps(reply.value)
    return Reply.text(text[: len(text) // 2])  # finish_reason "stop": the cut is not flagged


def _schema_invalid(reply: Reply) -> Reply:
    return Reply.json({"verdict": "it depends", "items": None})


def _invalid_rating(reply: Reply) -> Reply | None:
    if not isinstance(reply.value, dict) or "rating" not in reply.value:
        return None
    return Reply.json({"rating": 3})  # on no scale used by the metrics (0/1/2, 0/2/4)


def _missing_id(reply: Reply) -> Reply | None:
    keys = _item_keys(reply.value) if isinstance(reply.value, dict) else []
    if not keys:
        return None
    return Reply.json({k: v for k, v in reply.value.items() if k != keys[-1]})


def _unknown_id(reply: Reply) -> Reply | None:
    keys = _item_keys(reply.value) if isinstance(reply.value, dict) else []
    if not keys:
        return None
    return Reply.json({**reply.value, f"{keys[0][0]}999": reply.value[keys[0]]})


CONTENT_FAULTS: dict[str, Callable[[Reply], Reply | None]] = {
    "malformed_json": _cut_json,
    "schema_invalid": _schema_invalid,
    "invalid_rating": _invalid_rating,
    "missing_id": _missing_id,
    "unknown_id": _unknown_id,
}


@dataclass
class ContentFaults:
    """A handler: the synthetic judge's answer, corrupted in a fraction `rate` of the requests
    a fault applies to (a rating fault only to rating requests...)."""

    kinds: Sequence[str]
    rate: float
    seed: int = 0
    injected: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._lock = threading.Lock()

    def __call__(self, req: RecordedRequest) -> Reply:
        good = synthetic_answer(req)
        with self._lock:
            options = [(k, bad) for k in self.kinds if (bad := CONTENT_FAULTS[k](good)) is not None]
            if not options or self._rng.random() >= self.rate:
                return good
            kind, bad = options[self._rng.randrange(len(options))]
            self.injected.append(kind)
            return bad


# ---------------------------------------------------------------------- the matrix
@dataclass(frozen=True)
class Case:
    transport: tuple[Fault, ...] = ()
    content: tuple[str, ...] = ()
    cause: str = ""  # what the cause of a cell that always fails must mention
    hits: tuple[str, ...] = LLM_METRICS  # the metrics this fault can break


TRANSPORT_CASES = {
    "429_retry_after": Case((Fault.rate_limit(0.02),), cause="rate limited (429)"),
    "429_retry_after_ms": Case(
        (Fault.rate_limit(0.02, header="retry-after-ms"),), cause="rate limited (429)"
    ),
    "429_no_retry_after": Case((Fault.rate_limit(None),), cause="rate limited (429)"),
    "500": Case((Fault.status(500),), cause="server error (500)"),
    "503": Case((Fault.status(503),), cause="server error (503)"),
    "timeout": Case((Fault.timeout(2),), cause=f"no reply within {TIMEOUT:g} s"),
    "dropped_connection": Case((Fault.drop(),), cause="connection error"),
    "malformed_http_body": Case((Fault.malformed_http(),), cause="malformed response body"),
    "truncated": Case((Fault.truncated(),), cause="output token limit"),
}
CONTENT_CASES = {
    "malformed_json": Case(content=("malformed_json",), cause="re-ask(s)"),
    "schema_invalid": Case(content=("schema_invalid",), cause="re-ask(s)"),
    "invalid_rating": Case(
        content=("invalid_rating",), cause="rating: Input should be", hits=RATING_METRICS
    ),
    "missing_ids": Case(content=("missing_id",), cause="Field required", hits=VERDICT_METRICS),
    "unknown_ids": Case(
        content=("unknown_id",), cause="Extra inputs are not permitted", hits=VERDICT_METRICS
    ),
}
CASES = {**TRANSPORT_CASES, **CONTENT_CASES}


@pytest.fixture(scope="module")
def clean_run(embedder: Embeddings) -> EvaluationResult:
    """The same evaluation with a judge that never fails."""
    with FakeOpenAI(synthetic_answer) as srv:
        result = evaluate(
            tagged_rows(N), make_metrics(), llm=make_judge(srv), embeddings=embedder,
            progress=False,
        )  # fmt: skip
        assert srv.handler_errors == []
    for m in LLM_METRICS:
        assert result.statuses(m) == ["ok"] * N, m
    assert len(set(result["faithfulness"])) > 1, "the data must give varied scores"
    return result


@pytest.fixture
def server(fast_backoff: None) -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as srv:
        yield srv


def _arm(srv: FakeOpenAI, case: Case, rate: float, seed: int) -> tuple[FaultPlan, ContentFaults]:
    plan = FaultPlan(rate if case.transport else 0.0, case.transport, seed=seed)
    content = ContentFaults(case.content, rate if case.content else 0.0, seed=seed)
    srv.faults = plan
    srv.handler = content
    return plan, content


def assert_same_as_clean(result: EvaluationResult, clean: EvaluationResult) -> None:
    """A measured cell holds exactly the clean run's value: no fault changes a score. A rating
    metric whose template failed averages the other one, as documented."""
    for m in LLM_METRICS:
        got, want = result.cells(m), clean.cells(m)
        for row, (cell, ref) in enumerate(zip(got, want, strict=True)):
            assert cell is not None and ref is not None
            if cell.status != "ok":
                continue
            if m in RATING_METRICS and "failures" in cell.evidence:
                ratings = cell.evidence["ratings"]
                for name, r in ratings.items():
                    assert r is None or r == ref.evidence["ratings"][name], (m, row)
                valid = [r for r in ratings.values() if r is not None]
                assert cell.value == pytest.approx(
                    sum(valid) / len(valid) / max(cell.evidence["scale"])
                )
                continue
            assert cell.value == ref.value, f"{m} row {row}: {cell.value} != clean {ref.value}"
            assert dict(cell.evidence) == dict(ref.evidence), f"{m} row {row}"


def assert_causes(result: EvaluationResult, case: Case) -> None:
    for m in LLM_METRICS:
        for cell in result.cells(m):
            assert cell is not None
            if cell.status == "not_measured":
                assert cell.cause and case.cause in cell.cause, f"{m}: {cell.cause}"
            assert cell.status != "skipped", f"{m}: {cell.cause}"


def assert_usage_books_every_request(
    result: EvaluationResult, srv: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    """Every request the server saw, failed ones included, is in the run's usage: the judge's
    under the metrics and the shared statement line, the embeddings' on their own line.

    The judge books attempts: one that timed out or lost its connection before the server read
    it (a starved client on a loaded machine) is booked but never seen, so the surplus is
    bounded by the attempts that failed that way (retried ones are logged, last ones are the
    cause of a cell)."""
    chat, embedding = len(srv.chat_requests), len(srv.embedding_requests)
    by_line = result.usage_by_metric
    judged = sum(by_line[m].requests for m in (*LLM_METRICS, SHARED_USAGE) if m in by_line)
    assert result.usage.requests == judged + embedding
    lost_on_the_way = ("no reply within", "connection error")
    retried = sum(
        any(k in r.getMessage() for k in lost_on_the_way)
        for r in caplog.records
        if r.name == "rageval.judge"
    )
    gave_up = sum(
        any(k in (c.cause or "") for k in lost_on_the_way)
        for m in LLM_METRICS
        for c in result.cells(m)
        if c is not None
    )
    assert chat <= judged <= chat + retried + gave_up, (chat, judged, retried, gave_up)


@pytest.mark.parametrize("name", list(CASES))
def test_thirty_percent_faults_never_break_a_run(
    name: str,
    server: FakeOpenAI,
    clean_run: EvaluationResult,
    embedder: Embeddings,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="rageval.judge")
    case = CASES[name]
    plan, content = _arm(server, case, RATE, seed=len(name))
    judge = make_judge(server)
    metrics = make_metrics()
    result = evaluate(tagged_rows(N), metrics, llm=judge, embeddings=embedder, progress=False)
    assert server.handler_errors == []
    injected = len(plan.injected) + len(content.injected)
    assert injected >= 5, f"only {injected} faults were injected"

    check_invariants(result, LLM_METRICS, N)
    assert_same_as_clean(result, clean_run)
    assert_causes(result, case)
    requests = server.chat_requests
    assert_retry_bounds(requests, max_retries=MAX_RETRIES, max_reasks=MAX_REASKS)
    assert_usage_books_every_request(result, server, caplog)
    # most cells survive a 30% fault rate: retries and re-asks do their job
    measured = sum(s == "ok" for m in LLM_METRICS for s in result.statuses(m))
    assert measured >= 0.8 * N * len(LLM_METRICS)

    # The same judge (it has reached the endpoint) when the fault hits every request: each
    # cell the fault can break is not measured and its cause names the fault; the others are
    # measured. No cell is lost and no retry loop runs past its bound.
    server.reset()
    caplog.clear()
    _arm(server, case, 1.0, seed=1)
    broken = evaluate(
        tagged_rows(2, start=900), metrics, llm=judge, embeddings=embedder, progress=False
    )
    check_invariants(broken, LLM_METRICS, 2)
    for m in LLM_METRICS:
        want = "not_measured" if m in case.hits else "ok"
        assert broken.statuses(m) == [want, want], (m, broken.summary()[m].causes)
    assert_causes(broken, case)
    requests = server.chat_requests
    assert_retry_bounds(requests, max_retries=MAX_RETRIES, max_reasks=MAX_REASKS)
    assert_usage_books_every_request(broken, server, caplog)
    if case.transport:
        # every ask was tried to the limit, not less and not more: 1 + max_retries times, or
        # for a truncated reply once more with a larger budget
        per_ask = 2 if name == "truncated" else 1 + MAX_RETRIES
        by_line = broken.usage_by_metric
        judged = sum(by_line[m].requests for m in (*LLM_METRICS, SHARED_USAGE) if m in by_line)
        assert judged == len(logical_asks(requests)) * per_ask


async def test_a_mix_of_every_fault_with_a_run_directory(
    server: FakeOpenAI,
    clean_run: EvaluationResult,
    embedder: Embeddings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="rageval.judge")
    transport = tuple(f for c in TRANSPORT_CASES.values() for f in c.transport)
    content = tuple(k for c in CONTENT_CASES.values() for k in c.content)
    plan, corrupt = _arm(server, Case(transport, content), RATE, seed=7)
    run_dir = tmp_path / "run"
    judge = make_judge(server)
    try:
        result = await aevaluate(
            tagged_rows(N), make_metrics(), llm=judge, embeddings=embedder, run_dir=run_dir,
            progress=False,
        )  # fmt: skip
    finally:
        await judge.aclose()  # its connections belong to this test's loop
    assert server.handler_errors == []
    assert len({f.kind for f in plan.injected}) >= 4 and len(set(corrupt.injected)) >= 3

    check_invariants(result, LLM_METRICS, N)
    assert_same_as_clean(result, clean_run)
    assert_retry_bounds(server.chat_requests, max_retries=MAX_RETRIES, max_reasks=MAX_REASKS)
    assert_usage_books_every_request(result, server, caplog)
    for m in LLM_METRICS:
        for cell in result.cells(m):
            assert cell is not None
            if cell.status == "not_measured":
                known = ("failed", "re-ask", "token limit", "rating", "no template")
                assert any(k in (cell.cause or "") for k in known), cell.cause

    # what is on disk is what was returned, in strict JSON
    stored = load_run(run_dir)
    for m in LLM_METRICS:
        assert stored[m] == result[m] and stored.statuses(m) == result.statuses(m)
        assert [c.cause for c in stored.cells(m) if c] == [c.cause for c in result.cells(m) if c]
    for line in (run_dir / "results.jsonl").read_text(encoding="utf-8").splitlines():
        assert non_finite(json.loads(line)) == []
    summary = json.loads((run_dir / "summary.json").read_text(encoding="utf-8"))
    assert non_finite(summary) == []
    for m in LLM_METRICS:
        s = summary["metrics"][m]
        assert s["n_measured"] + s["n_not_measured"] + s["n_skipped"] == s["n_cells"] == N
        assert s["mean"] is None or math.isfinite(s["mean"])
