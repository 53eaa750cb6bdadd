"""Judge: per-endpoint limiter, rate limits, retries and backoff, measured at the FakeOpenAI
server (real openai SDK, 127.0.0.1)."""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from rageval import evaluate
from rageval._client._retry import parse_retry_after
from rageval._client._run import StopSending, run_scope
from rageval._client._settings import LOCAL_SERVER_TIMEOUT
from rageval.judge import FatalJudgeError, Judge, JudgeCallFailed
from rageval.log import read_manifest
from rageval.testing import FAKE_API_KEY, FakeOpenAI, Fault, RecordedRequest, Reply
from rageval.testing._wire import estimate_tokens

OK = Reply.json({"verdict": 1})


class Verdict(BaseModel):
    verdict: int


def question(i: object) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"question {i}"}]


def make_judge(server: FakeOpenAI, **kw: Any) -> Judge:
    kw.setdefault("cache", False)
    return Judge("m", base_url=server.base_url, api_key="sk-test", **kw)


@pytest.mark.parametrize("header", ["retry-after", "retry-after-ms"])
async def test_retry_honours_retry_after(fake_openai: FakeOpenAI, header: str) -> None:
    fake_openai.script(Fault.rate_limit(0.8, header=header), OK)
    reply = await make_judge(fake_openai).ask(question(1), Verdict)
    first, second = fake_openai.chat_requests
    assert second.started - first.finished >= 0.8
    assert (reply.usage.requests, reply.usage.retries) == (2, 1)


async def test_retry_after_as_http_date(fake_openai: FakeOpenAI) -> None:
    # whole seconds, counted from before the client exists (its first request also starts the
    # HTTP stack): the wait is 2-3 s minus that start-up
    when = email.utils.formatdate(time.time() + 3, usegmt=True)
    fake_openai.script(Fault("status", 429, "slow down", (("retry-after", when),)), OK)
    await make_judge(fake_openai).ask(question(1), Verdict)
    first, second = fake_openai.chat_requests
    assert second.started - first.finished >= 0.9


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    date = email.utils.formatdate(1_000_010, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=1_000_000) == pytest.approx(10)
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


@pytest.mark.parametrize(
    "fault",
    [Fault.status(500), Fault.status(503), Fault.drop(), Fault.malformed_http(), Fault.timeout(2)],
    ids=["500", "503", "drop", "malformed", "timeout"],
)
async def test_transient_failures_are_retried(fake_openai: FakeOpenAI, fault: Fault) -> None:
    fake_openai.script(fault, OK)
    reply = await make_judge(fake_openai, timeout=0.5).ask(question(1), Verdict)
    assert reply.value.verdict == 1
    assert (reply.usage.requests, reply.usage.retries) == (2, 1)


async def test_a_timed_out_attempt_names_the_timeout_it_had(fake_openai: FakeOpenAI) -> None:
    # a llama.cpp server whose slots the run follows gives each attempt its longer timeout:
    # the message names that one, not the endpoint's
    from rageval._client._run import ServerSlots

    fake_openai.script(Fault.timeout(2))
    judge = make_judge(fake_openai, timeout=0.2, max_retries=0)
    slots = {id(judge.endpoint): ServerSlots(slots=1, concurrency=None, timeout=0.6)}
    with run_scope(server_slots=slots), pytest.raises(JudgeCallFailed) as info:
        await judge.ask(question(1), Verdict)
    assert "no reply within 0.6 s" in info.value.cause, info.value.cause


async def test_retries_are_bounded(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(*[Fault.status(503)] * 3)
    judge = make_judge(fake_openai, max_retries=2)
    with pytest.raises(JudgeCallFailed) as info:
        await judge.ask(question(1), Verdict)
    assert "failed 3 times" in info.value.cause and "503" in info.value.cause
    assert len(fake_openai.chat_requests) == 3
    assert judge.usage.total.retries == 2
    # not fatal: the next call goes out
    assert (await judge.ask(question(2), Verdict)).usage.requests == 1


async def test_concurrency_limit_holds_at_the_server() -> None:
    with FakeOpenAI(latency=0.05) as server:
        judge = make_judge(server, max_concurrency=4)
        replies = await asyncio.gather(*(judge.ask(question(i), Verdict) for i in range(50)))
        assert len(replies) == 50
        assert server.max_in_flight == 4
        assert len(server.chat_requests) == 50


async def test_one_limiter_per_endpoint_tightest_wins() -> None:
    with FakeOpenAI(latency=0.05) as server:
        a = Judge("m1", base_url=server.base_url, api_key="k", max_concurrency=3, cache=False)
        b = Judge("m2", base_url=server.base_url + "/", api_key="k", max_concurrency=2, cache=False)
        asks = [j.ask(question(i), Verdict) for i in range(12) for j in (a, b)]
        await asyncio.gather(*asks)
        assert server.max_in_flight == 2
        assert a._endpoint.limiter is b._endpoint.limiter


async def test_slot_is_released_while_sleeping_before_a_retry() -> None:
    with FakeOpenAI(latency=0.05) as server:
        server.script(Fault.rate_limit(None))  # no Retry-After: plain backoff, no global pause
        # a fixed mode: no first-call probe, which the other calls would wait for
        judge = make_judge(server, max_concurrency=1, mode="json_schema")
        await asyncio.gather(*(judge.ask(question(i), Verdict) for i in range(4)))
        # the three others went through while the first one slept
        retried = [r for r in server.chat_requests if r.messages[0]["content"] == "question 0"]
        assert len(retried) == 2
        others = [r for r in server.chat_requests if r.messages[0]["content"] != "question 0"]
        assert max(r.started for r in others) < retried[1].started


async def test_requests_per_minute_are_paced() -> None:
    with FakeOpenAI() as server:
        judge = make_judge(server, requests_per_minute=120)
        started = time.monotonic()
        await asyncio.gather(*(judge.ask(question(i), Verdict) for i in range(6)))
        elapsed = time.monotonic() - started
        starts = sorted(r.started for r in server.chat_requests)
        assert elapsed >= 2.4
        # one request per 0.5 s. Arrival times at the server carry scheduling jitter on a busy
        # machine, so check spans of two intervals (1.0 s) with 0.25 s of slack rather than
        # single gaps; without pacing all six would arrive within milliseconds
        assert all(c - a >= 0.75 for a, c in zip(starts, starts[2:], strict=False)), starts


async def test_tokens_per_minute_are_paced_on_the_estimate() -> None:
    with FakeOpenAI() as server:
        # each request is estimated at ~1000 tokens (max_tokens dominates): 0.5 s of budget;
        # a fixed mode so that all five book their budget before any reply credits it back
        judge = make_judge(server, tokens_per_minute=120_000, max_tokens=1000, mode="json_schema")
        started = time.monotonic()
        await asyncio.gather(*(judge.ask(question(i), Verdict) for i in range(5)))
        assert time.monotonic() - started >= 2.0
        # the real usage (a few tokens) is credited back, so a later request is not held up
        t0 = time.monotonic()
        await judge.ask(question("late"), Verdict)
        assert time.monotonic() - t0 < 1.0


async def test_cancelled_waiters_do_not_leak_slots() -> None:
    with FakeOpenAI(latency=0.3) as server:
        judge = make_judge(server, max_concurrency=2)
        tasks = [asyncio.create_task(judge.ask(question(i), Verdict)) for i in range(8)]
        await asyncio.sleep(0.1)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert judge._endpoint.limiter.in_flight == 0
        server.latency = 0.05
        await asyncio.gather(*(judge.ask(question(f"after {i}"), Verdict) for i in range(6)))
        assert judge._endpoint.limiter.in_flight == 0


async def test_unreachable_endpoint_is_fatal() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: connections are refused
        judge = Judge("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="k", max_retries=1)
        with pytest.raises(FatalJudgeError, match="could not reach the judge"):
            await judge.ask(question(1), Verdict)


# ------------------------------------------------- a llama.cpp server's slots (run's probe)

SLOT_METRICS = ["faithfulness", "context_recall", "answer_accuracy"]


def _probed_run(server: FakeOpenAI, judge: Judge, tmp_path: Path, n_rows: int) -> Any:
    """What the run's manifest says of how it drove the server."""
    from helpers import rows

    def settings() -> dict[str, Any]:
        # less the structured-output mode the endpoint settles on: a fact of the server
        return {k: v for k, v in judge.describe().items() if k != "structured_output"}

    before = settings()
    result = evaluate(rows(n_rows), SLOT_METRICS, llm=judge, probe=True, run_dir=tmp_path / "run")
    assert server.handler_errors == []
    for metric in SLOT_METRICS:
        assert result.statuses(metric) == ["ok"] * n_rows
    assert settings() == before  # the run's settings were the run's, not the judge's
    return read_manifest(tmp_path / "run").servers


@pytest.mark.parametrize("key_from", ["variable", "argument"])
def test_a_llama_cpp_server_s_slots_are_the_run_s_concurrency_with_a_longer_timeout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, key_from: str
) -> None:
    from helpers import handle

    # a key from its variable, or given as api_key= (a local server's usual "sk-no-key"),
    # which the check before the run used to skip: 60 s timeouts on a one-slot server
    key: str | None = None
    if key_from == "variable":
        monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    else:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        key = FAKE_API_KEY
    with FakeOpenAI(handle, latency=0.05, llama_cpp_slots=2) as server:
        judge = Judge("m", base_url=server.base_url, api_key=key, cache=False, mode="json_schema")
        servers = _probed_run(server, judge, tmp_path, n_rows=12)
        # one GET /props, and never more requests at once than the server has slots
        assert [r.path for r in server.requests].count("/props") == 1
        assert server.max_in_flight == 2
    assert servers == {
        judge.base_url: {
            "server": "llama.cpp",
            "slots": 2,
            "max_concurrency": 2,
            "timeout": LOCAL_SERVER_TIMEOUT,
            "context": None,  # this server does not report one
        }
    }


def test_the_command_line_follows_a_llama_cpp_servers_slots_with_the_longer_timeout(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The CLI makes its judge from a JudgeSpec: a timeout no layer chose is not a choice
    (it was: every attempt at a busy llama.cpp server was cut at 60 s)."""
    from helpers import handle, rows, write_jsonl
    from rageval.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    data = tmp_path / "rows.jsonl"
    write_jsonl(data, rows(2))
    with FakeOpenAI(handle, llama_cpp_slots=2) as server:
        command = ["evaluate", str(data), "-m", "faithfulness", "--llm", "m", "--base-url",
                   server.base_url, "--no-cache", "-q"]  # fmt: skip
        assert main([*command, "-o", str(tmp_path / "run")]) == 0
        config = tmp_path / "rageval.toml"
        config.write_text("[judge]\ntimeout = 30\n")
        assert main([*command, "--config", str(config), "-o", str(tmp_path / "chosen")]) == 0
        url = server.base_url
    assert read_manifest(tmp_path / "run").servers[url]["timeout"] == LOCAL_SERVER_TIMEOUT
    chosen = read_manifest(tmp_path / "chosen")
    assert chosen.servers[url]["timeout"] == 30.0  # a chosen timeout stands
    assert chosen.judge is not None and chosen.judge.timeout == 30.0


def test_a_run_that_does_not_probe_follows_the_slots_an_earlier_probe_found(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """As the pytest plugin runs: the first run probes, later ones do not; they too send a
    one-slot llama.cpp server one request at a time (not 16, each waiting out its timeout)."""
    from helpers import handle, rows

    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    with FakeOpenAI(handle, latency=0.05, llama_cpp_slots=1) as server:
        judge = Judge("m", base_url=server.base_url, cache=False, mode="json_schema")
        _probed_run(server, judge, tmp_path, n_rows=2)
        server.reset()
        later = tmp_path / "later"
        evaluate(rows(6), SLOT_METRICS, llm=judge, probe=False, run_dir=later, progress=False)
        assert "/v1/models" not in [r.path for r in server.requests]
        assert server.max_in_flight == 1
    assert read_manifest(later).servers[judge.base_url]["max_concurrency"] == 1


@pytest.mark.parametrize("one_at_a_time", ["chosen concurrency", "one-slot llama.cpp server"])
def test_with_one_request_at_a_time_the_rows_finish_in_order(
    monkeypatch: pytest.MonkeyPatch, one_at_a_time: str
) -> None:
    """Every row of the window starts at once. Served in arrival order, one request at a time,
    every row's first request (statements) went before the second (verdicts) of all but the
    first, so half-way through the requests one row had finished. The earliest row's requests
    go first: a row finishes about every two requests."""
    from helpers import handle, rows, sample_id_of

    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    llama = one_at_a_time == "one-slot llama.cpp server"
    n = 12
    with FakeOpenAI(handle, latency=0.01, llama_cpp_slots=1 if llama else None) as server:
        judge = Judge("m", base_url=server.base_url, cache=False,
                      max_concurrency=None if llama else 1)  # fmt: skip
        result = evaluate(rows(n), ["faithfulness"], llm=judge, probe=llama, progress=False)
        asked = [sample_id_of(r) for r in server.chat_requests]
        assert server.max_in_flight == 1
    assert result.statuses("faithfulness") == ["ok"] * n
    assert len(asked) == 2 * n  # statements and verdicts of each row
    # rows whose both requests were among the first half (arrival order: 1; in row order
    # about n / 2, less if a row's verdict request is made after the slot it could take was
    # given to a later row's first request, which a loaded machine can do now and then)
    first_half = asked[:n]
    done_early = sum(first_half.count(f"s{i:03d}") == 2 for i in range(n))
    assert done_early >= n // 3, asked


def test_the_endpoint_is_checked_by_default_before_anything_is_written(tmp_path: Path) -> None:
    from helpers import handle, rows

    with FakeOpenAI(handle, api_key=FAKE_API_KEY) as server:
        judge = Judge("m", base_url=server.base_url, api_key="sk-wrong", cache=False)
        with pytest.raises(FatalJudgeError, match=r"refused the API key"):
            evaluate(rows(3), SLOT_METRICS, llm=judge, run_dir=tmp_path / "run", progress=False)
        assert [r.path for r in server.requests] == ["/v1/models"]
    assert not (tmp_path / "run").exists()


def test_a_key_given_as_an_argument_is_checked_before_the_run(tmp_path: Path) -> None:
    from helpers import handle, rows

    with FakeOpenAI(handle, api_key=FAKE_API_KEY) as server:
        judge = Judge("m", base_url=server.base_url, api_key="sk-wrong", cache=False)
        with pytest.raises(FatalJudgeError, match=r"from the api_key argument \(401\)"):
            evaluate(rows(3), SLOT_METRICS, llm=judge, probe=True, progress=False)
        assert [r.path for r in server.requests] == ["/v1/models"]


def test_a_chosen_concurrency_and_timeout_stand_against_the_server_s_slots(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from helpers import handle

    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    with FakeOpenAI(handle, latency=0.05, llama_cpp_slots=1) as server:
        judge = Judge(
            "m", base_url=server.base_url, cache=False, max_concurrency=3, timeout=30, mode="tools"
        )
        servers = _probed_run(server, judge, tmp_path, n_rows=6)
        assert server.max_in_flight == 3
    # recorded as the user drove it: more requests at once than the server has slots
    assert servers == {
        judge.base_url: {
            "server": "llama.cpp",
            "slots": 1,
            "max_concurrency": 3,
            "timeout": 30.0,
            "context": None,
        }
    }


def _long_row(rows: list[dict[str, Any]], row: int, tokens: int) -> list[dict[str, Any]]:
    """`rows` with row `row`'s contexts made about `tokens` tokens long (4 characters each)."""
    filler = "The harbour wall was rebuilt in stone after the storm. "
    rows[row]["retrieved_contexts"] = [filler * (4 * tokens // len(filler))]
    return rows


def test_a_llama_cpp_server_s_context_fits_each_request_and_a_prompt_it_cannot_hold_is_not_sent(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """llama-server refuses a prompt over a slot's context (400) and stops a reply where the
    context is full, whatever max_tokens said. Its /props reports that context: a row whose
    prompt cannot fit costs nothing and is not measured, with the cause; the others' reply
    budgets are fitted beside their prompts (the judge's default 1,024 would not fit)."""
    from helpers import handle, rows, sample_id_of

    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    window = 1200
    data = _long_row(rows(4), 2, tokens=3000)
    with FakeOpenAI(handle, llama_cpp_slots=1, context_window=window) as server:
        judge = Judge("m", base_url=server.base_url, cache=False, mode="json_schema")
        result = evaluate(data, ["context_recall"], llm=judge, probe=True,
                          run_dir=tmp_path / "run", progress=False)  # fmt: skip
        asked = server.chat_requests
        assert server.handler_errors == []
    assert result.statuses("context_recall") == ["ok", "ok", "not_measured", "ok"]
    cell = result.sample(2).cells["context_recall"]
    assert cell.cause_kind == "input_too_long"
    assert f"1,200-token context window of the llama.cpp server at {judge.base_url}" in (
        cell.cause or ""
    )
    assert "s002" not in [sample_id_of(r) for r in asked]  # not sent: nothing paid
    budgets = {r.body["max_tokens"] for r in asked}
    assert budgets and max(budgets) < judge.max_tokens  # fitted, not the default
    servers = read_manifest(tmp_path / "run").servers
    assert servers[judge.base_url]["context"] == window


def test_a_reply_cut_where_the_context_window_left_no_more_room_is_not_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A budget the context window cut cannot grow: asking again with twice the judge's budget
    sends the same fitted one. The cause names the budget sent, not the judge's."""
    from helpers import handle, rows

    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    with FakeOpenAI(handle, llama_cpp_slots=1, context_window=800) as server:
        server.script(Fault.truncated())
        judge = Judge("m", base_url=server.base_url, cache=False, mode="json_schema")
        result = evaluate(rows(1), ["context_recall"], llm=judge, probe=True, progress=False)
        [sent] = [r.body["max_tokens"] for r in server.chat_requests]
    assert sent < judge.max_tokens
    cell = result.sample(0).cells["context_recall"]
    assert cell.cause_kind == "truncated"
    assert f"the context window had no room beside the prompt past {sent} tokens" in (
        cell.cause or ""
    )


def test_unprobed_a_reply_the_server_stopped_before_its_budget_is_asked_again_once() -> None:
    """Unprobed, the judge knows no context window: a reply llama-server stopped where its
    context was full, with fewer tokens than max_tokens, looks like one a proxy cut. It is
    asked again once with twice the budget (issue 41: a cut reply is not always a full window),
    and the cause says where the reply stopped."""
    from helpers import handle, rows

    window = 2000
    data = _long_row(rows(1), 0, tokens=1400)
    with FakeOpenAI(handle, llama_cpp_slots=1, context_window=window) as server:
        judge = make_judge(server)
        result = evaluate(data, ["context_recall"], llm=judge, probe=False, progress=False)
        first, second = server.chat_requests
    assert (first.body["max_tokens"], second.body["max_tokens"]) == (1024, 2048)
    room = window - estimate_tokens(first.prompt_chars)
    assert 0 < room < judge.max_tokens
    cell = result.sample(0).cells["context_recall"]
    assert cell.cause_kind == "truncated"
    assert (
        f"the endpoint stopped it after {room} tokens (max_tokens=2048) even after raising it "
        "from 1024" in (cell.cause or "")
    )


@pytest.mark.parametrize("probe", [True, False])
def test_a_reply_cut_below_its_budget_with_room_in_the_window_is_asked_again(
    probe: bool,
) -> None:
    """A reply cut at 40 of its 1,024 tokens (a proxy, a dropped stream) beside a short prompt,
    on a llama.cpp server whose /props reports 8,192 tokens (probed), or on an endpoint whose
    window is not known: asked again with twice the budget, and measured (before: called a
    full context window at once, and the cell lost; issue 41)."""
    from helpers import handle, rows

    with FakeOpenAI(handle, llama_cpp_slots=1, context_window=8192) as server:
        server.script(Fault.truncated(completion_tokens=40))
        judge = make_judge(server)
        result = evaluate(rows(1), ["context_recall"], llm=judge, probe=probe, progress=False)
        budgets = [r.body["max_tokens"] for r in server.chat_requests]
    assert result.statuses("context_recall") == ["ok"]
    assert budgets[:2] == [1024, 2048]


def test_a_reply_whose_prompt_and_tokens_fill_the_reported_window_is_not_asked_again() -> None:
    """The server's counts say the prompt and the reply fill the 8,192 tokens its /props
    reports: a larger budget would stop at the same place. One request, and the cause."""
    from helpers import rows

    with FakeOpenAI(llama_cpp_slots=1, context_window=8192) as server:
        cut = Reply.text('{"classifications": [', finish_reason="length")
        server.script(dataclasses.replace(cut, prompt_tokens=7400, completion_tokens=790))
        judge = make_judge(server)
        result = evaluate(rows(1), ["context_recall"], llm=judge, probe=True, progress=False)
        assert len(server.chat_requests) == 1
    cell = result.sample(0).cells["context_recall"]
    assert cell.cause_kind == "truncated"
    assert "the context window had no room beside the prompt past 790 tokens" in (cell.cause or "")


def test_the_window_a_vllm_model_list_gives_tells_a_reply_that_filled_it() -> None:
    """vLLM's model list gives each model's max_model_len. Probed, a reply whose prompt and
    tokens fill it is not asked again: a larger budget cannot fit (before: the window was not
    known, and the reply was asked again in vain)."""
    from helpers import rows

    with FakeOpenAI(models=["m"], context_window=8192, list_window=True) as server:
        cut = Reply.text('{"classifications": [', finish_reason="length")
        server.script(dataclasses.replace(cut, prompt_tokens=7400, completion_tokens=790))
        judge = make_judge(server)
        result = evaluate(rows(1), ["context_recall"], llm=judge, probe=True, progress=False)
        assert len(server.chat_requests) == 1
    cell = result.sample(0).cells["context_recall"]
    assert "the context window had no room beside the prompt past 790 tokens" in (cell.cause or "")


def test_unprobed_a_prompt_over_a_llama_cpp_server_s_context_fails_its_cell_not_the_run() -> None:
    """Without the check before the run the server's 400 ("exceeds the available context
    size") is that row's, not a refusal of the run: it stopped every row with exit 3."""
    from helpers import handle, rows

    data = _long_row(rows(3), 1, tokens=3000)
    with FakeOpenAI(handle, llama_cpp_slots=1, context_window=2000) as server:
        judge = make_judge(server)
        result = evaluate(data, ["context_recall"], llm=judge, probe=False, progress=False)
    assert result.statuses("context_recall") == ["ok", "not_measured", "ok"]
    cell = result.sample(1).cells["context_recall"]
    assert cell.cause_kind == "input_too_long"
    assert "exceeds the available context size (2000 tokens)" in (cell.cause or "")


def test_other_servers_are_not_asked_for_slots(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from helpers import handle

    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    with FakeOpenAI(handle) as server:
        judge = Judge("m", base_url=server.base_url, cache=False)
        assert _probed_run(server, judge, tmp_path, n_rows=2) == {}
        assert "/props" not in [r.path for r in server.requests]


async def _until(condition: Callable[[], bool], what: str) -> None:
    """Let the loop run until `condition` holds (a bound for a stuck test, not a timing)."""
    deadline = time.monotonic() + 60
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        await asyncio.sleep(0.01)


async def test_a_stopping_run_waits_for_its_requests_in_flight_and_sends_nothing_more() -> None:
    """After a run's graceful stop begins, the requests in flight are waited for, their
    failures are not retried, and a request waiting for a concurrency slot is never sent."""
    release = threading.Event()

    async def hold_then_fail(req: RecordedRequest) -> Fault:
        while not release.is_set():
            await asyncio.sleep(0.01)
        return Fault.status(500)

    with FakeOpenAI(hold_then_fail) as srv:
        judge = make_judge(srv, max_concurrency=2, max_retries=3, mode="json_schema")
        stop = StopSending()
        with run_scope(stop=stop):
            # two requests sent (the server holds them), a third waiting for a slot (the mode
            # given: in "auto" the first request alone would learn it)
            asks = [asyncio.ensure_future(judge.ask(question(i), Verdict)) for i in range(3)]
            await _until(lambda: srv.in_flight == 2 and stop.in_flight == 2, "two sent")
            stopping = asyncio.ensure_future(stop.request())
            await asyncio.sleep(0)
            assert not stopping.done(), "the stop waits for the requests in flight"
            release.set()
            await stopping
            # whichever of the two retries and the third request take the two slots are held
            # back there, the other waits for a slot: none is sent
            await _until(lambda: stop.held_back == 2, "two requests held back")
            assert len(srv.chat_requests) == 2
            for task in asks:
                task.cancel()
            await asyncio.gather(*asks, return_exceptions=True)
        assert (stop.in_flight, stop.held_back) == (0, 0)
