"""Batch mode (`evaluate(batch=True)`, `--batch`): the judge requests go through the endpoint's
Batch API as successive batches and the results are those of the online run; failed lines go
into the next batch; an expired, failed or cancelled batch is handled; a resumed run
re-attaches to what an earlier session uploaded instead of uploading it again."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import openai
import pytest

from helpers import handle, rows, write_jsonl
from rageval import evaluate
from rageval.judge import BatchSettings, FatalJudgeError, Judge
from rageval.log import read_batch_events, read_lines, read_manifest
from rageval.results import EvaluationResult
from rageval.testing import FAKE_API_KEY, FakeOpenAI, Fault, FaultPlan, RandomJudge
from rageval.testing.batch_api import BatchFault

METRICS = ["faithfulness", "answer_correctness", "answer_accuracy", "context_precision"]
FAST = BatchSettings(poll_interval=0.02, settle=0.05)


def judge(server: FakeOpenAI, **kw: Any) -> Judge:
    return Judge("gpt-4o-mini", base_url=server.base_url, api_key=FAKE_API_KEY, cache=False, **kw)


def values(result: EvaluationResult, metrics: list[str] = METRICS) -> dict[str, Any]:
    return {m: result[m] for m in metrics}


def uploaded_bodies(server: FakeOpenAI) -> list[str]:
    """The request body of every line of every file uploaded for a batch."""
    return [
        json.dumps(json.loads(line)["body"], sort_keys=True)
        for upload in server.batch_api.uploads
        for line in upload.decode().splitlines()
    ]


@pytest.fixture(scope="module")
def online() -> EvaluationResult:
    with FakeOpenAI(handle) as server:
        return evaluate(rows(12), METRICS, llm=judge(server), progress=False)


def test_a_batched_run_gives_the_online_results_in_two_batches(
    online: EvaluationResult, tmp_path: Path
) -> None:
    with FakeOpenAI(handle) as server:
        run = tmp_path / "run"
        result = evaluate(rows(12), METRICS, llm=judge(server), run_dir=run, batch=FAST,
                          progress=False)  # fmt: skip
        assert server.chat_requests == []  # nothing went online
        batches = server.batch_api.batches
    assert values(result) == values(online)
    # statements and the one-stage metrics, then the verdicts on the statements
    assert [b["request_counts"]["total"] for b in batches] == [12 * 4, 12 * 2]
    assert all(b["status"] == "completed" for b in batches)
    assert result.usage.requests == online.usage.requests == 12 * 6
    assert result.usage.prompt_tokens == online.usage.prompt_tokens
    # priced at gpt-4o-mini's batch rates: half
    assert online.usage.cost_usd is not None
    assert result.usage.cost_usd == pytest.approx(online.usage.cost_usd / 2)
    ids = [entry.line.id for entry in read_lines(run / "results.jsonl")]
    assert sorted(ids) == sorted(online.ids) and len(ids) == 12  # every row once
    assert read_manifest(run).batch is True
    events = read_batch_events(run)
    assert [e.event for e in events] == ["uploaded", "created", "uploaded", "created"]
    assert [e.batch_id for e in events if e.event == "created"] == [b["id"] for b in batches]


def test_a_judge_that_answers_at_random_within_the_schema() -> None:
    with FakeOpenAI(RandomJudge(3)) as server:
        result = evaluate(rows(8), METRICS, llm=judge(server), batch=FAST, progress=False)
    for metric in METRICS:
        assert result.statuses(metric) == ["ok"] * 8, metric


def test_a_structured_output_mode_the_endpoint_refuses_is_dropped_batch_by_batch(
    online: EvaluationResult,
) -> None:
    """No probe in batch mode: every request tries the modes in order, and a line the
    endpoint refuses (a 400 for json_schema, then for tools) goes into the next batch in the
    next mode; once a mode answered, later requests use it."""
    with FakeOpenAI(handle, supports=("json",)) as server:
        result = evaluate(rows(12), METRICS, llm=judge(server), batch=FAST, progress=False)
        batches = server.batch_api.batches
        modes = [line.mode for line in server.batch_api.lines]
    assert values(result) == values(online)
    # stage one in json_schema, tools, then json; the verdicts straight in json
    assert [b["request_counts"] for b in batches] == [
        {"total": 48, "completed": 0, "failed": 48},
        {"total": 48, "completed": 0, "failed": 48},
        {"total": 48, "completed": 48, "failed": 0},
        {"total": 24, "completed": 24, "failed": 0},
    ]
    assert Counter(modes) == {"json_schema": 48, "tools": 48, "text": 72}  # json: in the text


def test_failed_lines_and_an_expired_batch_go_into_the_next_batch(
    online: EvaluationResult,
) -> None:
    with FakeOpenAI(handle) as server:
        server.batch_api.script(
            BatchFault.expire(after=20),  # 28 of the first 48 lines never ran
            BatchFault.line_errors(every=3),  # 500s and 429s are sent again
            BatchFault.line_errors(every=4, status=429),
        )
        result = evaluate(rows(12), METRICS, llm=judge(server), batch=FAST, progress=False)
        batches = server.batch_api.batches
        bodies = uploaded_bodies(server)
    assert values(result) == values(online)
    assert batches[0]["status"] == "expired"
    assert batches[0]["request_counts"] == {"total": 48, "completed": 20, "failed": 28}
    assert len(batches) >= 4
    assert result.usage.retries > 0 and result.usage.requests == 12 * 6 + result.usage.retries
    # a line is uploaded again only after it failed
    assert len(bodies) == 12 * 6 + result.usage.retries


def test_replies_that_fail_validation_are_asked_again_in_the_next_batch() -> None:
    plan = FaultPlan(0.3, [Fault.garbage()], seed=5)
    with FakeOpenAI(handle, faults=plan) as server:
        result = evaluate(rows(10), METRICS, llm=judge(server), batch=FAST, progress=False)
        assert plan.injected  # some lines were prose
    assert result.usage.reasks > 0
    for metric in METRICS:
        assert set(result.statuses(metric)) <= {"ok", "not_measured"}
        assert result.statuses(metric).count("ok") >= 5


def test_a_failed_or_cancelled_batch_stops_the_run_resumably(
    online: EvaluationResult, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    with FakeOpenAI(handle) as server:
        server.batch_api.script(BatchFault.fail("token_limit_exceeded: enqueued token limit"))
        with pytest.raises(FatalJudgeError, match=r"batch batch_\w+ .* failed: .*token_limit"):
            evaluate(rows(12), METRICS, llm=judge(server), run_dir=run, batch=FAST,
                     progress=False)  # fmt: skip
        # batch=True on a resume: batch mode with the run's own settings, not the defaults
        resumed = evaluate(rows(12), METRICS, llm=judge(server), run_dir=run, resume=True,
                           progress=False, batch=True)  # fmt: skip
        assert values(resumed) == values(online)
        assert read_manifest(run).batch_settings == dataclasses.asdict(FAST)
    with FakeOpenAI(handle, batch_delay=30.0) as server:

        def cancel_when_created() -> None:  # someone cancels the batch outside the run
            deadline = time.monotonic() + 10
            while not server.batch_api.batches:
                assert time.monotonic() < deadline
                time.sleep(0.01)
            batch_id = server.batch_api.batches[0]["id"]
            with openai.OpenAI(base_url=server.base_url, api_key="k") as sdk:
                sdk.batches.cancel(batch_id)

        canceller = threading.Thread(target=cancel_when_created)
        canceller.start()
        with pytest.raises(FatalJudgeError, match="cancelled before this request ran"):
            evaluate(rows(3), METRICS, llm=judge(server), batch=FAST, progress=False)
        canceller.join()


def test_batches_stay_under_the_enqueued_token_limit(online: EvaluationResult) -> None:
    """The endpoint refuses a batch that would take its batches in progress past its
    enqueued-token limit (OpenAI's per-model cap); max_enqueued_tokens keeps a run under it:
    batches cut to that size, each sent once the ones in progress leave room."""
    assert online.usage.prompt_tokens > 0
    limit = online.usage.prompt_tokens // 4  # the first stage's lines hold most of it
    with FakeOpenAI(handle, batch_delay=0.05) as server:
        server.batch_api.enqueued_token_limit = limit
        with pytest.raises(FatalJudgeError, match="token_limit_exceeded: Enqueued token limit"):
            evaluate(rows(12), METRICS, llm=judge(server), batch=FAST, progress=False)
    capped = dataclasses.replace(FAST, max_enqueued_tokens=limit)
    with FakeOpenAI(handle, batch_delay=0.05) as server:
        server.batch_api.enqueued_token_limit = limit
        result = evaluate(rows(12), METRICS, llm=judge(server), batch=capped, progress=False)
        batches = server.batch_api.batches
    assert values(result) == values(online)
    assert len(batches) >= 5 and all(b["status"] == "completed" for b in batches)
    assert sum(b["request_counts"]["total"] for b in batches) == 12 * 6


def test_a_resume_finds_an_upload_whose_batch_was_never_created(
    online: EvaluationResult, tmp_path: Path
) -> None:
    """Killed between the upload and the batch: the resumed run creates the batch from the
    recorded file instead of uploading the requests again."""
    run = tmp_path / "run"
    with FakeOpenAI(handle) as server:
        api = server.batch_api
        refuse = api._create  # the first creation fails for good (a 403)

        def refused(raw: bytes) -> Any:
            from rageval.testing._wire import error_response

            api._create = refuse  # type: ignore[method-assign]
            return error_response(403, "batch creation is not allowed right now")

        api._create = refused  # type: ignore[method-assign]
        with pytest.raises(FatalJudgeError, match="403"):
            evaluate(rows(12), METRICS, llm=judge(server), run_dir=run, batch=FAST,
                     progress=False)  # fmt: skip
        assert [e.event for e in read_batch_events(run)] == ["uploaded"]
        assert len(api.uploads) == 1 and api.batches == []
        resumed = evaluate(rows(12), METRICS, llm=judge(server), run_dir=run, resume=True,
                           progress=False, batch=FAST)  # fmt: skip
        bodies = uploaded_bodies(server)
    assert values(resumed) == values(online)
    assert len(bodies) == 12 * 6 and len(set(bodies)) == len(bodies)


def test_kill_9_while_a_batch_is_in_flight_then_resume_reattaches(
    online: EvaluationResult, tmp_path: Path
) -> None:
    data = tmp_path / "data.jsonl"
    write_jsonl(data, rows(12))
    config = tmp_path / "rageval.toml"
    config.write_text("batch = { poll_interval = 0.1, settle = 0.1 }\n")
    run = tmp_path / "run"
    env = {**os.environ, "OPENAI_API_KEY": FAKE_API_KEY}
    with FakeOpenAI(handle, batch_delay=1.5) as server:
        base = [sys.executable, "-m", "rageval", "evaluate", "--config", str(config),
                "--no-cache", "--no-probe", "-q"]  # fmt: skip
        first = subprocess.Popen(
            [
                *base,
                str(data),
                "-m",
                ",".join(METRICS),
                "-o",
                str(run),
                "--llm",
                "gpt-4o-mini",
                "--base-url",
                server.base_url,
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 60
        while not any(e.event == "created" for e in read_batch_events(run)):
            assert first.poll() is None, first.stderr.read() if first.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.02)
        first.send_signal(signal.SIGKILL)  # the first batch is in flight
        first.wait()
        assert len(server.batch_api.uploads) == 1
        assert server.batch_api.batches[0]["status"] in ("validating", "in_progress")
        done = subprocess.run([*base, "--resume", str(run)], env=env, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert "through the endpoint's Batch API: 2 batches" in done.stdout
        bodies = uploaded_bodies(server)
        batches = server.batch_api.batches
    # no request was uploaded twice: the resume waited on the batch in flight
    assert Counter(bodies).most_common(1)[0][1] == 1
    assert len(bodies) == 12 * 6 and len(batches) == 2
    resumed = [entry.line for entry in read_lines(run / "results.jsonl")]
    assert sorted(line.id for line in resumed) == sorted(online.ids)
    by_id = {line.id: line for line in resumed}
    for metric in METRICS:
        assert [by_id[i].cells[metric].value for i in online.ids] == online[metric]


def test_a_budget_in_batch_mode_counts_batch_prices(
    online: EvaluationResult, tmp_path: Path
) -> None:
    from rageval.errors import BudgetReached

    assert online.usage.cost_usd is not None
    half = online.usage.cost_usd / 2  # the whole run, at batch prices
    run = tmp_path / "run"
    with FakeOpenAI(handle) as server:
        with pytest.raises(BudgetReached) as stopped:
            evaluate(rows(12), METRICS, llm=judge(server), batch=FAST, max_cost=half / 2,
                     run_dir=run, progress=False)  # fmt: skip
        assert half / 4 < stopped.value.spent_usd <= half / 2
        # max_cost=None given: no budget now (not given, the run's own would apply again)
        resumed = evaluate(rows(12), METRICS, llm=judge(server), run_dir=run, resume=True,
                           max_cost=None, progress=False)  # fmt: skip
    assert values(resumed) == values(online)


def test_the_progress_line_shows_the_batches_waited_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with FakeOpenAI(handle, batch_delay=1.2) as server:
        evaluate(rows(3), ["answer_accuracy"], llm=judge(server), batch=FAST, progress=True)
    # drawn twice a second while the one batch (six lines) is in progress
    assert "batches 1 in flight (0/6 lines done)" in capsys.readouterr().err


def test_an_event_after_a_torn_last_line_of_the_batch_journal_replaces_it(tmp_path: Path) -> None:
    from rageval.log import BatchEvent, append_batch_event

    append_batch_event(tmp_path, BatchEvent(event="uploaded", file_id="f1", lines={"a": "k"}))
    with (tmp_path / "batches.jsonl").open("ab") as fh:
        fh.write(b'{"format_version": 4, "event": "upl')  # killed while writing
    append_batch_event(tmp_path, BatchEvent(event="created", file_id="f1", batch_id="b1"))
    events = read_batch_events(tmp_path)
    assert [(e.event, e.file_id, e.batch_id) for e in events] == [
        ("uploaded", "f1", None),
        ("created", "f1", "b1"),
    ]


def test_a_batched_run_and_an_online_run_at_once_on_one_judge(online: EvaluationResult) -> None:
    """Batch mode belongs to the run, not to the judge or its endpoint: an online run that
    shares the judge with a batched run at the same time sends its requests online."""
    with FakeOpenAI(handle) as server:
        shared = judge(server)

        async def both() -> tuple[EvaluationResult, EvaluationResult]:
            from rageval import aevaluate

            return await asyncio.gather(
                aevaluate(rows(12), METRICS, llm=shared, batch=FAST, progress=False),
                aevaluate(rows(12), METRICS, llm=shared, progress=False),
            )

        batched, direct = asyncio.run(both())
        assert len(server.chat_requests) == 12 * 6  # the online run's, every one
        assert sum(b["request_counts"]["total"] for b in server.batch_api.batches) == 12 * 6
    assert values(batched) == values(direct) == values(online)
    assert direct.usage.cost_usd is not None
    assert batched.usage.cost_usd == pytest.approx(direct.usage.cost_usd / 2)


def test_an_endpoint_without_a_batch_api_is_named_as_such_not_as_an_unknown_model() -> None:
    # llama.cpp's llama-server (and Ollama) answer /v1/files with 404: said of a chat
    # request a 404 means an unknown model, which is what --batch used to report
    with FakeOpenAI(handle, llama_cpp_slots=1) as server:
        with pytest.raises(FatalJudgeError, match="has no Batch API") as refused:
            evaluate(rows(2), ["faithfulness"], llm=judge(server), batch=FAST, progress=False)
        assert server.chat_requests == []
    assert refused.value.status == 404 and "not found" not in str(refused.value).split("(")[0]
    assert "run without --batch" in str(refused.value)
