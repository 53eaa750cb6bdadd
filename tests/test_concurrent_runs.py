"""Two runs at once sharing one object: an observer given to both is told each event with its
own run's id (and the MLflow and OpenTelemetry sinks keep the two apart by it); one remote
embeddings client shared by both books each request to the run that made it, not the
difference of its ledger, which the other run adds to as well."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from helpers import make_judge, rows
from rageval import aevaluate
from rageval.embeddings.openai import OpenAIEmbeddings
from rageval.log import SampleLine
from rageval.observers import JudgeCall
from rageval.results import EvaluationResult
from rageval.testing import FAKE_API_KEY, FakeOpenAI, RecordedRequest
from rageval.testing._wire import estimate_tokens
from synthetic_judge import handle
from test_observers import Recorder

METRICS = ["faithfulness", "answer_accuracy"]


def two_datasets() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run A's rows s000-s002 and run B's s003-s007: every prompt and text names its own."""
    data = rows(8)
    return data[:3], data[3:]


async def both(
    first: list[dict[str, Any]], second: list[dict[str, Any]], **kw: Any
) -> tuple[EvaluationResult, EvaluationResult]:
    a, b = await asyncio.gather(
        aevaluate(first, progress=False, **kw), aevaluate(second, progress=False, **kw)
    )
    return a, b


def ids_of(data: Sequence[dict[str, Any]]) -> set[str]:
    return {str(r["id"]) for r in data}


async def test_one_observer_given_to_two_runs_at_once_gets_each_events_run_id() -> None:
    first, second = two_datasets()
    recorder = Recorder()
    with FakeOpenAI(handle, latency=0.01) as server:
        await both(first, second, metrics=METRICS, llm=make_judge(server), observers=[recorder])
    starts, ends = recorder.of("start"), recorder.of("end")
    run_ids = [s.run_id for s in starts]
    assert len(set(run_ids)) == 2 and all(run_ids)
    assert {e.run_id for e in ends} == set(run_ids)
    # which run is which: by the rows each started with
    run_of = {start.run_id: start.n_rows for start in starts}
    rows_of = {3: ids_of(first), 5: ids_of(second)}
    samples: list[SampleLine] = recorder.of("sample")
    assert len(samples) == 8
    for line in samples:
        assert line.id in rows_of[run_of[str(line.run_id)]]
    calls: list[JudgeCall] = recorder.of("call")
    assert calls and {c.run_id for c in calls} == set(run_ids)
    for call in calls:
        assert call.tags["sample"] in rows_of[run_of[call.run_id]]
    # the runs overlapped: the second started before the first ended
    kinds = [k for k, _ in recorder.events]
    assert kinds.index("end") > [i for i, k in enumerate(kinds) if k == "start"][1]


async def test_the_otel_sink_shared_by_two_runs_parents_each_call_on_its_own_run() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from rageval.observers.otel import RUN_SPAN, OpenTelemetryObserver

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = OpenTelemetryObserver(provider)
    first, second = two_datasets()
    with FakeOpenAI(handle, latency=0.01) as server:
        await both(first, second, metrics=METRICS, llm=make_judge(server), observers=[sink])
    spans = exporter.get_finished_spans()
    runs = {s.context.span_id: s for s in spans if s.name == RUN_SPAN}
    assert len(runs) == 2
    samples_under: dict[int, set[str]] = {span_id: set() for span_id in runs}
    for call in (s for s in spans if s.name != RUN_SPAN):
        assert call.parent is not None and call.parent.span_id in runs
        samples_under[call.parent.span_id].add(str((call.attributes or {})["rageval.sample"]))
    assert sorted(samples_under.values(), key=len) == [ids_of(first), ids_of(second)]
    finished = [(r.attributes or {}).get("rageval.rows_finished") for r in runs.values()]
    assert sorted(f for f in finished if isinstance(f, int)) == [3, 5]


async def test_the_mlflow_sink_shared_by_two_runs_logs_each_to_its_own_mlflow_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient

    from rageval.observers.mlflow import SAMPLES_ARTIFACT, MLflowObserver

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    uri = (tmp_path / "mlruns").as_uri()
    sink = MLflowObserver(experiment="two", tracking_uri=uri)
    first, second = two_datasets()
    with FakeOpenAI(handle, latency=0.01) as server:
        await both(first, second, metrics=METRICS, llm=make_judge(server), observers=[sink])
    assert len(sink.runs) == 2 and len(set(sink.runs.values())) == 2
    client = MlflowClient(tracking_uri=uri)
    tables = []
    for mlflow_run in sink.runs.values():
        assert client.get_run(mlflow_run).info.status == "FINISHED"
        path = Path(client.download_artifacts(mlflow_run, SAMPLES_ARTIFACT))
        tables.append({row[0] for row in json.loads(path.read_text())["data"]})
    assert sorted(tables, key=len) == [ids_of(first), ids_of(second)]


def _inputs(request: RecordedRequest) -> list[str]:
    found = request.body["input"]
    return [found] if isinstance(found, str) else list(found)


async def test_two_runs_sharing_one_embeddings_client_each_record_only_their_own_requests() -> None:
    first, second = two_datasets()
    with FakeOpenAI(latency=0.02) as server:
        shared = OpenAIEmbeddings(
            model="e", base_url=server.base_url, api_key=FAKE_API_KEY, cache=False, batch_size=2
        )
        a, b = await both(first, second, metrics=["semantic_similarity"], embeddings=shared)
        sent = server.embedding_requests
    # every request carries one run's texts (each names its sample), so whose it is is known
    owner = {}
    for request in sent:
        texts = _inputs(request)
        (run,) = {("a" if any(i in t for i in ids_of(first)) else "b") for t in texts}
        owner[id(request)] = run
    for result, run in ((a, "a"), (b, "b")):
        mine = [r for r in sent if owner[id(r)] == run]
        tokens = sum(estimate_tokens(len(t)) for r in mine for t in _inputs(r))
        assert mine and result.embeddings_usage.requests == len(mine)
        assert result.embeddings_usage.prompt_tokens == tokens
        # and the run log's lines add up to it
        lines = [result.sample(row).embeddings_usage for row in range(len(result))]
        assert sum(u.requests for u in lines if u is not None) == len(mine)
    assert a.embeddings_usage.requests + b.embeddings_usage.requests == len(sent)
    assert shared.usage.total.requests == len(sent)
