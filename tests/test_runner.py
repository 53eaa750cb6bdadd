"""evaluate()/aevaluate(): scheduling, validation, skipping, usage, results."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any, ClassVar

import pytest

from helpers import handle, make_judge, rows, sample_id_of, user_text
from rageval.judge import FatalJudgeError, Judge
from rageval.metrics import AnswerCorrectness, Faithfulness
from rageval.metrics.base import Metric, MetricResult, ScoringContext
from rageval.metrics.evidence import VerdictEvidence
from rageval.results import EvaluationResult, load_run
from rageval.runner import NO_JUDGE_CAUSE, RunConfigError, aevaluate, evaluate
from rageval.runner._schedule import MIN_WINDOW
from rageval.samples import InvalidDataError, Sample
from rageval.testing import FAKE_API_KEY, FakeOpenAI, Fault, Reply

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "rag_sample.jsonl"
LLM_METRICS = ["faithfulness", "context_recall", "answer_accuracy"]


# ---------------------------------------------------------------------- scheduling


def test_requests_stay_at_the_concurrency_limit_across_samples_and_metrics() -> None:
    with FakeOpenAI(handle, latency=0.05) as srv:
        result = evaluate(
            rows(40), LLM_METRICS, llm=make_judge(srv, max_concurrency=8), progress=False
        )
        assert srv.max_in_flight == 8
        assert srv.handler_errors == []
    for metric in LLM_METRICS:
        assert result.statuses(metric) == ["ok"] * 40
    # one of the two response statements is in the contexts; the reference's one is
    assert result["faithfulness"] == [0.5] * 40
    assert result["context_recall"] == [1.0] * 40


class _Probe(Metric):
    """Counts samples being scored at once (not registered: only for this test)."""

    name = "probe"
    required_fields: ClassVar[tuple[str, ...]] = ("response",)
    active = 0
    peak = 0

    async def measure(self, sample: Sample, ctx: ScoringContext) -> MetricResult:
        type(self).active += 1
        type(self).peak = max(type(self).peak, type(self).active)
        await asyncio.sleep(0.001)
        type(self).active -= 1
        return MetricResult.ok(1.0)


async def test_samples_stream_through_a_bounded_window() -> None:
    data = [{"response": f"r{i}"} for i in range(500)]
    result = await aevaluate(data, [_Probe()], progress=False)
    assert result["probe"] == [1.0] * 500
    assert 2 <= _Probe.peak <= MIN_WINDOW  # the window, not 500 samples at once


async def test_sync_evaluate_works_inside_a_running_event_loop(server: FakeOpenAI) -> None:
    asyncio.get_running_loop()  # this test runs on pytest-asyncio's loop
    result = evaluate(rows(3), ["faithfulness"], llm=make_judge(server), progress=False)
    assert result["faithfulness"] == [0.5, 0.5, 0.5]


def test_shared_statements_are_extracted_once_per_sample_and_booked_on_their_own_line(
    server: FakeOpenAI,
) -> None:
    metrics = [Faithfulness(), AnswerCorrectness(weights=(1.0, 0.0))]
    result = evaluate(rows(5), metrics, llm=make_judge(server), progress=False)
    extraction = [
        r
        for r in server.chat_requests
        if (r.response_format or {}).get("json_schema", {}).get("name") == "Statements"
    ]
    assert len(extraction) == 5  # the response's statements, once per sample for both metrics
    usage = result.usage_by_metric
    assert usage["shared:statements"].requests == 5
    assert usage["faithfulness"].requests == 5
    assert usage["answer_correctness"].requests == 5
    assert result.usage.requests == len(server.chat_requests) == 15
    cell = result.sample("s002").cells["faithfulness"]
    assert cell.usage.requests == 1 and cell.usage.prompt_tokens > 0
    assert isinstance(cell.evidence, VerdictEvidence)
    assert [s.verdict for s in cell.evidence.verdicts] == [True, False]


# ---------------------------------------------------------------------- no judge


def test_without_a_judge_offline_metrics_run_and_llm_metrics_are_skipped_with_a_hint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RAGEVAL_LLM", raising=False)
    result = evaluate(EXAMPLE, ["token_f1", "rouge_l", "faithfulness"], progress=False)
    n = len(result)
    assert n >= 5
    assert all(s == "ok" for s in result.statuses("token_f1"))
    assert all(v is not None for v in result["rouge_l"])
    assert result.statuses("faithfulness") == ["skipped"] * n
    summary = result.summary()["faithfulness"]
    assert summary.mean is None and summary.n_skipped == n and summary.n_measured == 0
    assert list(summary.causes) == [f"skipped: {NO_JUDGE_CAUSE}"]
    for var in ("RAGEVAL_LLM", "OPENAI_BASE_URL", "OPENAI_API_KEY"):
        assert var in NO_JUDGE_CAUSE
    assert "\n" not in NO_JUDGE_CAUSE


def test_the_judge_comes_from_the_environment(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAGEVAL_LLM", "env-model")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    result = evaluate(rows(2), ["answer_accuracy"], progress=False)
    assert result.statuses("answer_accuracy") == ["ok", "ok"]
    assert {r.model for r in server.chat_requests} == {"env-model"}
    assert result.judge is not None and result.judge["model"] == "env-model"


# ---------------------------------------------------------------------- validation


def test_invalid_rows_are_reported_by_row_id_field_and_metric_before_any_request(
    server: FakeOpenAI,
) -> None:
    data = rows(4)
    del data[2]["reference"]
    data[3]["retrieved_contexts"] = "not a list"
    with pytest.raises(InvalidDataError) as info:
        evaluate(data, ["context_recall", "faithfulness"], llm=make_judge(server), progress=False)
    text = str(info.value)
    assert "row 2, id 's002', field 'reference', metric 'context_recall'" in text
    assert "row 3" in text and "retrieved_contexts" in text
    assert server.requests == []


def test_skip_invalid_turns_those_cells_into_skipped_with_the_reason(server: FakeOpenAI) -> None:
    data = rows(3)
    del data[1]["reference"]
    result = evaluate(
        data,
        ["context_recall", "faithfulness"],
        llm=make_judge(server),
        on_invalid="skip",
        progress=False,
    )
    assert result.statuses("context_recall") == ["ok", "skipped", "ok"]
    assert result.statuses("faithfulness") == ["ok", "ok", "ok"]
    cell = result.sample(1).cells["context_recall"]
    assert cell.value is None and "reference" in (cell.cause or "")
    assert {sample_id_of(r) for r in server.chat_requests} == {"s000", "s001", "s002"}
    summary = result.summary()["context_recall"]
    assert (summary.n_measured, summary.n_skipped, summary.n_not_measured) == (2, 1, 0)


def test_unparsable_rows_are_skipped_whole_when_asked() -> None:
    data = [{"response": "a", "reference": "a"}, {"response": ["not", "text"], "reference": "b"}]
    with pytest.raises(InvalidDataError, match="row 1"):
        evaluate(data, ["token_f1"], progress=False)
    result = evaluate(data, ["token_f1"], on_invalid="skip", progress=False)
    assert result.statuses("token_f1") == ["ok", "skipped"]
    assert "invalid row" in (result.sample(1).cells["token_f1"].cause or "")


def test_a_bad_field_stops_only_the_metrics_that_read_it(server: FakeOpenAI) -> None:
    data = rows(3)
    data[1]["retrieved_contexts"] = "one context as a string"
    result = evaluate(data, ["token_f1"], progress=False)  # reads response and reference only
    assert result.statuses("token_f1") == ["ok", "ok", "ok"]
    with pytest.raises(InvalidDataError, match="row 1, id 's001', field 'retrieved_contexts'"):
        evaluate(data, ["token_f1", "faithfulness"], llm=make_judge(server), progress=False)
    assert server.requests == []
    result = evaluate(
        data,
        ["token_f1", "faithfulness"],
        llm=make_judge(server),
        on_invalid="skip",
        progress=False,
    )
    assert result.statuses("token_f1") == ["ok", "ok", "ok"]
    assert result.statuses("faithfulness") == ["ok", "skipped", "ok"]
    cause = result.sample(1).cells["faithfulness"].cause or ""
    assert cause.startswith("invalid row: field 'retrieved_contexts'") and "single string" in cause
    assert {sample_id_of(r) for r in server.chat_requests} == {"s000", "s002"}


def test_unknown_metric_names_fail_before_anything_runs(server: FakeOpenAI) -> None:
    with pytest.raises(RunConfigError, match=r"faithfullness.*did you mean faithfulness"):
        evaluate(rows(2), ["faithfullness"], llm=make_judge(server), progress=False)
    with pytest.raises(RunConfigError, match="more than once"):
        evaluate(rows(2), ["token_f1", "token_f1"], progress=False)
    assert server.requests == []


def test_default_metrics_are_those_whose_fields_the_data_has(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("RAGEVAL_LLM", raising=False)
    legacy = {"question": ["q?"], "answer": ["an answer"]}  # the seeds' dict-of-lists shape
    result = evaluate(legacy, progress=False)
    assert "answer_relevancy" in result.metrics and "faithfulness" not in result.metrics
    assert "token_f1" not in result.metrics  # needs a reference


# ---------------------------------------------------------------------- failures


def test_a_fatal_judge_error_stops_the_run_and_keeps_finished_rows(tmp_path: Path) -> None:
    with FakeOpenAI(handle, api_key="the-right-key") as srv:
        judge = Judge("m", base_url=srv.base_url, api_key="a-wrong-key", cache=False)
        with pytest.raises(FatalJudgeError):
            evaluate(  # no probe: the refusal comes in the middle of the run
                rows(50),
                ["answer_accuracy"],
                llm=judge,
                run_dir=tmp_path / "run",
                progress=False,
                probe=False,
            )
        # the run stopped at once: no request for most of the 50 samples
        assert len(srv.chat_requests) < 40
    # the directory says how far the run got: a summary and a report of the finished rows
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["n_rows"] == 50 and summary["n_finished"] < 40
    assert (tmp_path / "run" / "report.html").exists()


def test_judge_call_failures_are_not_measured_and_never_averaged_as_zero(
    tmp_path: Path,
) -> None:
    def flaky(req: Any) -> Any:
        sid = sample_id_of(req)
        if sid in ("s001", "s003") and "SupportedVerdict" in json.dumps(req.schema):
            return Reply.json({})  # never covers the ids: re-asked, then given up
        return handle(req)

    with FakeOpenAI(flaky) as srv:
        result = evaluate(
            rows(5),
            ["faithfulness"],
            llm=make_judge(srv, max_reasks=1),
            progress=False,
            run_dir=tmp_path / "run",
        )
    assert result.statuses("faithfulness") == ["ok", "not_measured", "ok", "not_measured", "ok"]
    assert result["faithfulness"] == [0.5, None, 0.5, None, 0.5]
    summary = result.summary()["faithfulness"]
    assert summary.mean == 0.5 and summary.n_measured == 3 and summary.n_not_measured == 2
    cell = result.sample("s001").cells["faithfulness"]
    assert "judge call failed" in (cell.cause or "")
    assert cell.usage.requests == 2  # the ask and its re-ask are booked to the cell
    assert "not measured" in result.summary_table() and "2" in result.summary_table()
    # the cause's stable kind, everywhere a cause is: cells, summary, to_pandas, the run log
    assert cell.cause_kind == "invalid_reply"
    assert [(g.kind, g.count) for g in summary.failures] == [("invalid_reply", 2)]
    frame = result.to_pandas()
    kinds = frame["faithfulness_cause_kind"]
    assert list(kinds[kinds.notna()].index) == [1, 3]
    assert set(kinds.dropna()) == {"invalid_reply"}
    stored = load_run(tmp_path / "run")
    assert stored.sample("s003").cells["faithfulness"].cause_kind == "invalid_reply"
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    (group,) = on_disk["metrics"]["faithfulness"]["failures"]
    assert (group["kind"], group["count"]) == ("invalid_reply", 2)


def test_server_errors_that_are_not_fatal_are_retried(server: FakeOpenAI) -> None:
    server.script(Fault.status(503), Fault.status(500))
    result = evaluate(rows(2), ["answer_accuracy"], llm=make_judge(server), progress=False)
    assert result.statuses("answer_accuracy") == ["ok", "ok"]
    assert result.usage.retries == 2


# ---------------------------------------------------------------------- results


def test_result_views(server: FakeOpenAI) -> None:
    import pandas as pd

    data = rows(3)
    data[1]["response"] = "<b>Answer</b> & more"
    result = evaluate(data, ["faithfulness", "token_f1"], llm=make_judge(server), progress=False)
    assert isinstance(result, EvaluationResult)
    df = result.to_pandas()
    assert list(df["id"]) == ["s000", "s001", "s002"]
    for col in (
        "user_input",
        "response",
        "retrieved_contexts",
        "reference",
        "faithfulness",
        "faithfulness_status",
        "faithfulness_reason",
        "token_f1",
    ):
        assert col in df.columns
    assert df["faithfulness"].dtype.kind == "f"
    assert isinstance(df, pd.DataFrame)
    table = result.summary_table()
    assert "faithfulness" in table and "shared:statements" in table and "95% CI" in table
    assert "faithfulness" in repr(result)
    html = result._repr_html_()
    assert "<table>" in html and "<b>" not in html


def test_to_pandas_marks_not_measured_as_nan_with_its_status() -> None:
    result = evaluate(
        [{"response": "a b", "reference": "a b"}, {"response": "x", "reference": None}],
        ["token_f1"],
        on_invalid="skip",
        progress=False,
    )
    df = result.to_pandas()
    assert df["token_f1"].isna().tolist() == [False, True]
    assert df["token_f1_status"].tolist() == ["ok", "skipped"]
    assert "reference" in df["token_f1_reason"][1]


# ---------------------------------------------------------------------- progress


LEXICAL = [{"id": f"x{i}", "response": f"a b {i}", "reference": "a b c"} for i in range(3)]


def test_progress_is_drawn_on_stderr_only(capsys: pytest.CaptureFixture[str]) -> None:
    evaluate(LEXICAL, ["token_f1"], progress=True)
    out, err = capsys.readouterr()
    assert out == ""
    assert "\rrows 3/3" in err and err.endswith("\n")


def test_a_quick_run_off_a_terminal_writes_no_progress(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # off a terminal the progress is a plain line a minute: none for a run of a second
    evaluate(LEXICAL, ["token_f1"])
    assert capsys.readouterr() == ("", "")
    evaluate(LEXICAL, ["token_f1"], show_progress=True)  # the ragas name
    assert "rows 3/3" in capsys.readouterr().err


def test_a_long_run_off_a_terminal_writes_plain_progress_lines(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CI log or a notebook: a plain line each time the interval has passed, also while a
    slow request holds the run, and the final state; no carriage return."""
    from rageval import _progress

    monkeypatch.setattr(_progress, "PLAIN_EVERY_S", 0.4)

    async def slow(req: Any) -> Any:
        await asyncio.sleep(0.5)  # longer than the interval: lines come while it waits
        return handle(req)

    with FakeOpenAI(slow) as srv:
        result = evaluate(rows(2), ["faithfulness"], llm=make_judge(srv, max_concurrency=1))
    assert result.statuses("faithfulness") == ["ok", "ok"]
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and "\r" not in err and len(lines) >= 3, err
    assert all(line.startswith("rageval: rows ") for line in lines), err
    assert lines[0].startswith("rageval: rows 0/2") and lines[-1].startswith("rageval: rows 2/2")


def test_progress_shows_retries_and_reasks_while_a_stall_lasts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every ask fails twice with 503 before its first reply, which fails validation once:
    the row takes seconds, and the line says why while it waits."""
    from rageval._client import _retry

    # each retry waits 0.4-0.8 s: the second ask's stall outlasts the line's 0.5 s redraw
    monkeypatch.setattr(_retry, "BACKOFF_BASE", 0.8)
    monkeypatch.setattr(_retry, "BACKOFF_CAP", 0.8)
    attempts: dict[str, int] = {}

    def flaky(req: Any) -> Any:
        prompt = user_text(req)
        attempts[prompt] = attempts.get(prompt, 0) + 1
        if attempts[prompt] <= 2:
            return Fault.status(503)
        if attempts[prompt] == 3:
            return Reply.json({"not": "what was asked"})
        return handle(req)

    with FakeOpenAI(flaky) as srv:
        result = evaluate(rows(1), ["faithfulness"], llm=make_judge(srv), progress=True)
    assert result.statuses("faithfulness") == ["ok"]
    draws = capsys.readouterr().err.split("\r")

    def count(what: str, draw: str) -> int:
        found = re.search(rf"{what} (\d+)", draw)
        return int(found.group(1)) if found else 0

    stalled = [d for d in draws if d.startswith("rows 0/1")]
    assert max(count("retries", d) for d in stalled) >= 2, draws
    assert max(count("re-asks", d) for d in stalled) >= 1, draws
    # two asks (statements, verdicts), each retried twice and re-asked once
    assert (count("retries", draws[-1]), count("re-asks", draws[-1])) == (4, 2), draws


def test_progress_line_content() -> None:
    import io

    from rageval._progress import ProgressLine, display

    stream = io.StringIO()
    now = [0.0]
    line = ProgressLine(10, done=2, cells_per_row=2, stream=stream, clock=lambda: now[0])
    line.row_done(2)
    now[0] = 10.0
    for row in range(3, 6):
        line.row_done(row)
    line.counters.requests, line.counters.tokens = 12, 3400
    line.counters.cost_usd, line.counters.cache_hits, line.counters.not_measured = 0.0012, 2, 1
    text = line.text()
    for part in (
        "rows 6/10",
        "cells 12/20",
        "requests 12",
        "tokens 3,400",
        "cost $0.0012",
        "cache hits 2",
        "not measured 1",
        "ETA 13s",  # 6 cells in the 10 s since the first row, 8 left
    ):
        assert part in text
    line.close()
    assert stream.getvalue().startswith("\r") and stream.getvalue().endswith("\n")
    # a StringIO is no terminal: by default plain lines; asked for, the redrawn line
    assert display(None, stream) == "plain" and display(True, stream) == "redrawn"
    assert display(False, stream) is None


def test_remote_embedding_calls_are_counted_on_their_own_line(server: FakeOpenAI) -> None:
    from rageval.embeddings import embedding_factory

    embedder = embedding_factory(
        "openai", model="emb", base_url=server.base_url, api_key=FAKE_API_KEY, cache=False
    )
    result = evaluate(rows(4), ["semantic_similarity"], embeddings=embedder, progress=False)
    assert result.statuses("semantic_similarity") == ["ok"] * 4
    assert result.embeddings_usage is not None
    assert result.embeddings_usage.requests == len(server.embedding_requests) >= 1
    assert result.usage_by_metric["embeddings"] == result.embeddings_usage
    assert "embeddings" in result.summary_table()


def test_to_pandas_without_pandas_says_how_to_get_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    result = evaluate(LEXICAL, ["token_f1"], progress=False)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match=r"pip install 'rageval\[pandas\]'"):
        result.to_pandas()
