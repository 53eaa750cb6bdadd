"""Observers (rageval.observers): told of a run's start, samples, judge calls and end; a sink
that fails is left out without costing the run; the MLflow and OpenTelemetry sinks, read back
from what they wrote (a real MLflow file store, the OpenTelemetry SDK's in-memory exporter)."""

from __future__ import annotations

import importlib.util
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from helpers import make_judge, rows
from rageval import evaluate
from rageval.errors import FatalJudgeError, RunConfigError
from rageval.log import SampleLine
from rageval.observers import JudgeCall, RunEnd, RunObserver, RunStart, load_observer
from rageval.testing import FakeOpenAI, Fault

METRICS = ["faithfulness", "answer_accuracy"]


class Recorder(RunObserver):
    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_start(self, start: RunStart) -> None:
        self.events.append(("start", start))

    def on_sample(self, line: SampleLine) -> None:
        self.events.append(("sample", line))

    def on_judge_call(self, call: JudgeCall) -> None:
        self.events.append(("call", call))

    def on_end(self, end: RunEnd) -> None:
        self.events.append(("end", end))

    def of(self, kind: str) -> list[Any]:
        return [event for k, event in self.events if k == kind]


def test_an_observer_is_told_the_start_each_sample_each_judge_call_and_the_end(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    judge = make_judge(server, mode="json_schema")  # no probe, which describe() would show
    before = judge.describe()
    recorder = Recorder()
    result = evaluate(
        rows(3), metrics=METRICS, llm=judge, run_dir=tmp_path / "run", observers=[recorder]
    )
    kinds = [k for k, _ in recorder.events]
    assert kinds[0] == "start" and kinds[-1] == "end"
    (start,) = recorder.of("start")
    assert (start.n_rows, start.n_finished, start.run_dir) == (3, 0, tmp_path / "run")
    assert [m.name for m in start.manifest.metrics] == METRICS
    # each sample once, as the run log has it
    lines = recorder.of("sample")
    logged = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    assert sorted(line.id for line in lines) == ["s000", "s001", "s002"]
    assert sorted(json.loads(text)["id"] for text in logged) == ["s000", "s001", "s002"]
    # every request the server saw is in one call, booked to its metric and sample
    calls = recorder.of("call")
    assert sum(c.usage.requests for c in calls) == len(server.chat_requests)
    assert all(c.error is None and c.started <= c.ended for c in calls)
    assert {c.tags["sample"] for c in calls} == {"s000", "s001", "s002"}
    assert sum(c.usage.prompt_tokens for c in calls) == result.usage.prompt_tokens
    (end,) = recorder.of("end")
    assert end.error is None and end.result is result
    assert (
        end.summary.metrics["faithfulness"].mean
        == result.summary_model().metrics["faithfulness"].mean
    )
    assert judge.describe() == before  # the judge is as built: the listeners were the run's


def test_a_failing_observer_is_left_out_with_a_warning_and_the_run_keeps_every_row(
    server: FakeOpenAI, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(RunObserver):
        def on_sample(self, line: SampleLine) -> None:
            raise ConnectionError("the tracking server is down")

    recorder = Recorder()
    with caplog.at_level(logging.WARNING, logger="rageval"):
        result = evaluate(
            rows(3),
            metrics=["faithfulness"],
            llm=make_judge(server),
            run_dir=tmp_path / "run",
            observers=[Broken(), recorder],
        )
    assert result.n_finished == 3
    assert len(recorder.of("sample")) == 3  # the others are still told
    warnings = [r.getMessage() for r in caplog.records if "observer Broken" in r.getMessage()]
    assert warnings == [
        "observer Broken failed in on_sample (ConnectionError: the tracking server is down); "
        "it is left out for the rest of the run"
    ]
    assert (tmp_path / "run" / "summary.json").is_file()


def test_a_run_that_stops_ends_with_its_error_and_what_finished(tmp_path: Path) -> None:
    recorder = Recorder()
    with FakeOpenAI() as server:
        server.script(Fault.status(401))
        with pytest.raises(FatalJudgeError):
            evaluate(
                rows(2),
                metrics=["answer_accuracy"],
                llm=make_judge(server, max_retries=0),
                run_dir=tmp_path / "run",
                observers=[recorder],
            )
    (end,) = recorder.of("end")
    assert isinstance(end.error, FatalJudgeError)
    assert end.result.n_finished == 0
    failed = [c for c in recorder.of("call") if c.error is not None]
    assert failed and failed[0].error.startswith("FatalJudgeError")
    assert (tmp_path / "run" / "summary.json").is_file()


def test_load_observer_names_what_is_installed_when_the_name_is_unknown() -> None:
    with pytest.raises(RunConfigError, match=r"no observer named 'nope' \(installed: "):
        load_observer("nope")


# ---------------------------------------------------------------------- MLflow


def test_mlflow_observer_logs_params_metrics_samples_and_artifacts(
    server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlflow.tracking import MlflowClient

    # a local file store (MLflow 3 asks for this opt-in; a database store needs SQLAlchemy)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")

    from rageval.observers.mlflow import SAMPLES_ARTIFACT, MLflowObserver

    uri = (tmp_path / "mlruns").as_uri()
    sink = MLflowObserver(experiment="rag", run_name="nightly", tracking_uri=uri)
    result = evaluate(
        rows(4),
        metrics=METRICS,
        llm=make_judge(server),
        run_dir=tmp_path / "run",
        metric_params={"answer_accuracy": {"threshold": 0.6}},
        observers=[sink],
    )
    client = MlflowClient(tracking_uri=uri)
    assert sink.run_id is not None
    run = client.get_run(sink.run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "nightly"
    assert client.get_experiment(run.info.experiment_id).name == "rag"
    params = run.data.params
    assert params["metrics"] == "faithfulness,answer_accuracy"
    assert params["judge"] == "test-model" and params["rows"] == "4"
    assert params["answer_accuracy.threshold"] == "0.6"
    summary = result.summary_model().metrics
    for name in METRICS:
        assert run.data.metrics[f"{name}.mean"] == pytest.approx(summary[name].mean)
        assert run.data.metrics[f"{name}.n_measured"] == summary[name].n_measured
    artifacts = {a.path for a in client.list_artifacts(sink.run_id)}
    assert {"summary.json", "report.html", SAMPLES_ARTIFACT} <= artifacts
    table = json.loads(Path(client.download_artifacts(sink.run_id, SAMPLES_ARTIFACT)).read_text())
    assert table["columns"] == ["id", *METRICS]
    by_id = {row[0]: row[1:] for row in table["data"]}
    assert by_id["s002"] == [result["faithfulness"][2], result["answer_accuracy"][2]]


# ---------------------------------------------------------------------- OpenTelemetry


def test_otel_observer_traces_the_run_and_each_judge_call(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import SpanKind

    from rageval.observers.otel import EVALUATION_EVENT, RUN_SPAN, OpenTelemetryObserver

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    result = evaluate(
        rows(3),
        metrics=METRICS,
        llm=make_judge(server),
        run_dir=tmp_path / "run",
        observers=[OpenTelemetryObserver(provider)],
    )
    spans = exporter.get_finished_spans()
    (run,) = [s for s in spans if s.name == RUN_SPAN]
    calls = [s for s in spans if s.name != RUN_SPAN]
    assert run.attributes is not None and run.attributes["rageval.rows_finished"] == 3
    assert all(s.parent is not None and s.parent.span_id == run.context.span_id for s in calls)
    assert all(s.kind == SpanKind.CLIENT and s.name == "chat test-model" for s in calls)
    attributes: list[dict[str, Any]] = [dict(s.attributes or {}) for s in calls]
    assert {a["gen_ai.operation.name"] for a in attributes} == {"chat"}
    assert {a["gen_ai.provider.name"] for a in attributes} == {"openai"}
    assert sum(a["rageval.requests"] for a in attributes) == len(server.chat_requests)
    assert sum(a["gen_ai.usage.input_tokens"] for a in attributes) == result.usage.prompt_tokens
    assert {a["rageval.metric"] for a in attributes} >= {"answer_accuracy"}
    events: dict[Any, dict[str, Any]] = {
        (e.attributes or {}).get("gen_ai.evaluation.name"): dict(e.attributes or {})
        for e in run.events
        if e.name == EVALUATION_EVENT
    }
    assert set(events) == set(METRICS)
    mean = result.summary_model().metrics["faithfulness"].mean
    assert events["faithfulness"]["gen_ai.evaluation.score.value"] == mean


def test_the_sinks_are_found_by_name_through_their_entry_points() -> None:
    from rageval.observers.otel import OpenTelemetryObserver

    assert isinstance(load_observer("otel"), OpenTelemetryObserver)


def test_the_command_line_builds_observers_by_name_and_refuses_an_unknown_one(
    server: FakeOpenAI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from helpers import write_jsonl
    from rageval.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    data = tmp_path / "data.jsonl"
    write_jsonl(data, rows(2))
    judged = [str(data), "-m", "faithfulness", "--llm", "m", "--base-url", server.base_url, "-q"]
    assert main(["evaluate", *judged, "--observer", "nope", "-o", str(tmp_path / "a")]) == 2
    assert "no observer named 'nope'" in capsys.readouterr().err
    assert not (tmp_path / "a" / "results.jsonl").exists()  # refused before the run
    run = tmp_path / "b"
    assert main(["evaluate", *judged, "--no-probe", "--observer", "mlflow", "-o", str(run)]) == 0
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=(tmp_path / "mlruns").as_uri())
    experiment = client.get_experiment_by_name("rageval")  # the default experiment's name
    assert experiment is not None
    (logged,) = client.search_runs([experiment.experiment_id])
    assert logged.data.tags["rageval.run_dir"] == str(run)


@pytest.mark.skipif(
    importlib.util.find_spec("sqlalchemy") is not None, reason="full MLflow: sqlite works"
)
def test_mlflow_observer_without_a_tracking_uri_says_what_to_set_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # mlflow-skinny 3.x defaults to sqlite:///mlflow.db, a store it cannot open (issue 42:
    # the README's block raised MLflow's UnsupportedModelRegistryStoreURIException)
    from rageval.observers.mlflow import MLflowObserver

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(RunConfigError, match=r"cannot log to sqlite:.*mlflow-skinny lacks: give "
                       r"MLFLOW_TRACKING_URI or tracking_uri a tracking server"):  # fmt: skip
        MLflowObserver(experiment="rag-nightly")


def test_mlflow_observer_on_a_file_store_without_the_opt_in_fails_before_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (before: the observer was built, and MLflow's refusal came at the run's start)
    from rageval.observers.mlflow import MLflowObserver

    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    with pytest.raises(RunConfigError, match=r"unless MLFLOW_ALLOW_FILE_STORE=true is set"):
        MLflowObserver(tracking_uri=(tmp_path / "mlruns").as_uri())
