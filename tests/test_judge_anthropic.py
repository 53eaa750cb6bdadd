"""The "anthropic" judge backend against the fake of Anthropic's Messages API
(rageval.testing.FakeAnthropic): the wire format, the same scores and the same error handling
as the OpenAI-compatible backend on the same scripted replies, its own cache keys, and the
JudgeSpec that records, resumes and ships it."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from helpers import EIGHT, handle, rows, write_jsonl
from rageval import evaluate
from rageval.cli import main
from rageval.errors import RunConfigError
from rageval.judge import FatalJudgeError, Judge, JudgeCallFailed, JudgeSpec, RequestCache
from rageval.judge._modes import shape_of
from rageval.log import read_manifest
from rageval.runner._stored import read_stored_run
from rageval.runner.engines._ship import ShippedJudge
from rageval.testing import FAKE_API_KEY, FakeAnthropic, FakeOpenAI, Fault, Reply
from rageval.testing.anthropic import MESSAGES_PATH


class Verdict(BaseModel):
    reason: str
    verdict: int


QUESTION = [
    {"role": "system", "content": "You are a careful grader."},
    {"role": "user", "content": "Is the sky blue? Answer with a verdict."},
]


@pytest.fixture
def anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(api_key=FAKE_API_KEY) as server:
        yield server


def claude(server: FakeOpenAI, **kw: Any) -> Judge:
    """A judge on the Messages API of `server` (a FakeAnthropic)."""
    kw.setdefault("cache", False)
    kw.setdefault("api_key", FAKE_API_KEY)
    return Judge("claude-test", backend="anthropic", base_url=server.base_url, **kw)


def openai_judge(server: FakeOpenAI, **kw: Any) -> Judge:
    kw.setdefault("cache", False)
    return Judge("claude-test", base_url=server.base_url, api_key=FAKE_API_KEY, **kw)


# ------------------------------------------------------------------------------- the wire


async def test_a_call_is_a_messages_request_with_one_forced_tool(anthropic: FakeAnthropic) -> None:
    anthropic.script(Reply.json({"reason": "it is", "verdict": 1}, prompt_tokens=100,
                                cached_tokens=40, completion_tokens=7))  # fmt: skip
    reply = await claude(anthropic, seed=3, temperature=0.2).ask(QUESTION, Verdict)
    assert reply.value == Verdict(reason="it is", verdict=1)
    # the prompt is the uncached input, the cache writes and the cache reads together
    usage = reply.usage
    assert (usage.prompt_tokens, usage.cached_tokens, usage.completion_tokens) == (100, 40, 7)
    (sent,) = anthropic.message_requests
    assert sent.headers["x-api-key"] == FAKE_API_KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    body = sent.body
    assert body["system"] == "You are a careful grader."
    assert body["messages"] == [QUESTION[1]]
    assert (body["temperature"], body["max_tokens"]) == (0.2, 1024)
    shape = shape_of(Verdict)
    assert body["tools"] == [
        {"name": shape.name, "description": "Record your answer.", "input_schema": shape.schema}
    ]
    assert body["tool_choice"] == {"type": "tool", "name": shape.name}
    assert "seed" not in body and "n" not in body  # the API has neither


async def test_a_reply_cut_at_max_tokens_is_asked_again_with_a_bigger_budget(
    anthropic: FakeAnthropic,
) -> None:
    anthropic.script(Fault.truncated(), Reply.json({"reason": "r", "verdict": 0}))
    reply = await claude(anthropic, max_tokens=300).ask(QUESTION, Verdict)
    assert reply.value.verdict == 0
    assert [r.body["max_tokens"] for r in anthropic.message_requests] == [300, 600]


async def test_a_reply_in_text_is_read_and_a_bad_one_re_asked(anthropic: FakeAnthropic) -> None:
    anthropic.script(Reply.text("no JSON here"), Reply.text('{"reason": "r", "verdict": 1}'))
    reply = await claude(anthropic).ask(QUESTION, Verdict)
    assert reply.value.verdict == 1 and reply.usage.reasks == 1
    again = anthropic.message_requests[1].body["messages"]
    # the re-ask quotes the bad reply as the assistant's turn; the roles still alternate
    assert [m["role"] for m in again] == ["user", "assistant", "user"]
    assert again[1]["content"] == "no JSON here"


async def test_a_prose_reply_is_re_asked_and_a_broken_body_retried(
    anthropic: FakeAnthropic,
) -> None:
    anthropic.script(
        Fault.garbage("no JSON here"),
        Fault.malformed_http(),
        Reply.json({"reason": "r", "verdict": 1}),
    )
    reply = await claude(anthropic).ask(QUESTION, Verdict)
    assert reply.value.verdict == 1
    assert (reply.usage.requests, reply.usage.reasks, reply.usage.retries) == (3, 1, 1)
    # the prose came as the Messages API's text block, quoted back in the re-ask
    assert anthropic.message_requests[1].body["messages"][1]["content"] == "no JSON here"


async def test_ask_n_asks_once_per_generation(anthropic: FakeAnthropic) -> None:
    judge = claude(anthropic, temperature=1.0)
    replies = await judge.ask_n(QUESTION, Verdict, 3)
    assert len(replies.values) == 3 and len(anthropic.message_requests) == 3
    assert judge.honours_n() is False


def test_the_anthropic_backend_has_one_structured_output_mode() -> None:
    with pytest.raises(ValueError, match="answers through tools"):
        Judge("claude-test", backend="anthropic", mode="json_schema")
    judge = Judge("claude-test", backend="anthropic", mode="tools", api_key="k")
    assert judge.describe()["structured_output"] == judge.structured_mode() == "tools"


def test_its_key_and_endpoint_are_anthropics_own(monkeypatch: pytest.MonkeyPatch) -> None:
    # the OpenAI variables are for OpenAI-compatible endpoints: they do not apply
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    described = Judge("claude-test", backend="anthropic").describe()
    assert described["backend"] == "anthropic"
    assert described["base_url"] == "https://api.anthropic.com/v1"
    assert described["api_key_from"] == described["api_key_env"] == "ANTHROPIC_API_KEY"
    assert "sk-ant-test" not in json.dumps(described)


# ---------------------------------------------------------------- the same as the OpenAI path


def scores(result: Any) -> dict[str, list[Any]]:
    return {m: [result.sample(i).cells[m].value for i in range(len(result))] for m in EIGHT}


def test_the_eight_metrics_score_the_same_through_both_backends() -> None:
    data = rows(3)
    with FakeOpenAI(handle) as openai_server, FakeAnthropic(handle) as anthropic_server:
        through_openai = evaluate(
            data, EIGHT, llm=openai_judge(openai_server), embeddings="local", progress=False
        )
        through_anthropic = evaluate(
            data, EIGHT, llm=claude(anthropic_server), embeddings="local", progress=False
        )
        asked = anthropic_server.message_requests
    assert through_openai.complete and through_anthropic.complete
    assert scores(through_anthropic) == scores(through_openai)
    assert all(v is not None for values in scores(through_openai).values() for v in values)
    assert asked and all(r.body["tool_choice"]["type"] == "tool" for r in asked)


#: (script, what a call then does): the same on both backends
ERROR_CASES = [
    ([Fault.rate_limit(0.01), Reply.json({"reason": "r", "verdict": 1})], "ok"),
    ([Fault.status(529), Reply.json({"reason": "r", "verdict": 1})], "ok"),
    ([Fault.status(500), Fault.status(503), Reply.json({"reason": "r", "verdict": 1})], "ok"),
    ([Fault.drop(), Reply.json({"reason": "r", "verdict": 1})], "ok"),
    ([Fault.status(401)], "fatal"),
    ([Fault.status(400, "prompt is too long: 300000 tokens > 200000 maximum")], "failed"),
    ([Fault.status(400)], "fatal"),
    ([Fault.status(529)] * 3, "failed"),
]


async def outcome(judge: Judge) -> tuple[str, int, int]:
    """What one call did: its outcome, requests and retries."""
    try:
        reply = await judge.ask(QUESTION, Verdict)
    except FatalJudgeError:
        return "fatal", *_sent(judge)
    except JudgeCallFailed as e:
        return f"failed:{e.kind}", *_sent(judge)
    return "ok", reply.usage.requests, reply.usage.retries


def _sent(judge: Judge) -> tuple[int, int]:
    total = judge.usage.total
    return total.requests, total.retries


@pytest.mark.parametrize(("script", "expected"), ERROR_CASES)
async def test_errors_are_retried_or_fatal_as_on_the_openai_path(
    script: list[Reply | Fault], expected: str, fast_backoff: None
) -> None:
    results = []
    for fake, make in ((FakeOpenAI, openai_judge), (FakeAnthropic, claude)):
        with fake() as server:
            server.script(*script)
            # one mode: in "auto" the OpenAI path would take a 400 for a refused mode
            results.append(await outcome(make(server, max_retries=2, mode="tools")))
    assert results[0] == results[1]
    assert results[0][0].split(":")[0] == expected


async def test_a_rejected_key_names_its_variable_and_stops_the_endpoint(
    anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-wrong")
    judge = Judge("claude-test", backend="anthropic", base_url=anthropic.base_url, cache=False)
    with pytest.raises(FatalJudgeError, match=r"API key from ANTHROPIC_API_KEY \(401\)"):
        await judge.ask(QUESTION, Verdict)
    with pytest.raises(FatalJudgeError):
        await judge.ask(QUESTION, Verdict)
    assert len(anthropic.requests) == 1  # the second call was not sent


# ---------------------------------------------------------------------------- the cache


async def test_request_cache_keys_differ_by_backend(
    anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    cache = RequestCache(tmp_path)
    first = await claude(anthropic, cache=cache).ask(QUESTION, Verdict)
    again = await claude(anthropic, cache=cache).ask(QUESTION, Verdict)
    assert not first.cached and again.cached
    # the same endpoint, model, messages and settings through the other backend: not the
    # Anthropic reply from the cache, but a request of its own (which this fake refuses)
    other = Judge("claude-test", base_url=anthropic.base_url, api_key=FAKE_API_KEY,
                  cache=cache, mode="tools")  # fmt: skip
    with pytest.raises(FatalJudgeError):
        await other.ask(QUESTION, Verdict)
    assert anthropic.requests[-1].path == "/v1/chat/completions"


# ------------------------------------------------------------------- one statement of it


def test_the_spec_states_the_judge_and_makes_it_again() -> None:
    judge = Judge("claude-test", backend="anthropic", base_url="http://127.0.0.1:9/v1",
                  api_key="k", temperature=0.5, max_tokens=99, max_prompt_tokens=5000,
                  max_reasks=1, timeout=7.0, max_retries=3, cache=False)  # fmt: skip
    spec = judge.spec
    assert spec.backend == "anthropic" and spec.max_prompt_tokens == 5000
    again = Judge.from_spec(spec, api_key="k", cache=False)
    assert again.spec == spec and again.backend.kind == "anthropic"
    assert {k: v for k, v in judge.describe().items() if k in JudgeSpec.model_fields} == (
        spec.model_dump()
    )
    # a kept cell is a cell of this backend
    assert spec.cell_identity()["backend"] == "anthropic"
    openai_spec = spec.model_copy(update={"backend": "openai"})
    assert openai_spec.cell_identity() != spec.cell_identity()


def test_an_anthropic_judge_ships_to_a_worker_as_itself() -> None:
    judge = Judge("claude-test", backend="anthropic", base_url="http://127.0.0.1:7/v1",
                  api_key="sk-ant-secret", max_prompt_tokens=900, cache=False)  # fmt: skip
    shipped = pickle.loads(pickle.dumps(ShippedJudge.of(judge)))
    rebuilt = shipped.build(max_concurrency=2, cache=None)
    assert rebuilt.backend.kind == "anthropic"
    assert rebuilt.spec.model_copy(update={"max_concurrency": None}) == judge.spec.model_copy(
        update={"max_concurrency": None}
    )
    assert rebuilt._endpoint.target.secret == "sk-ant-secret"


def test_a_run_records_and_resumes_its_anthropic_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_API_KEY)
    run = tmp_path / "run"
    with FakeAnthropic(handle) as server:
        judge = Judge("claude-test", backend="anthropic", base_url=server.base_url,
                      temperature=0.1, cache=False)  # fmt: skip
        evaluate(rows(2), ["faithfulness"], llm=judge, run_dir=run, progress=False)
    info = read_manifest(run).judge
    assert info is not None and info.backend == "anthropic"
    assert info.api_key_env == "ANTHROPIC_API_KEY"
    resumed = read_stored_run(run).make_judge()
    assert isinstance(resumed, Judge)
    assert resumed.spec == judge.spec


def test_a_manifest_from_before_backends_resumes_an_openai_compatible_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    run = tmp_path / "run"
    with FakeOpenAI(handle) as server:
        judge = Judge("gpt-test", base_url=server.base_url, max_tokens=333, seed=4, cache=False)
        evaluate(rows(1), ["faithfulness"], llm=judge, run_dir=run, progress=False)
    path = run / "manifest.json"
    manifest = json.loads(path.read_text())
    # format 5 wrote neither the backend nor the key's variable (api_key_from names it)
    for key in ("backend", "api_key_env"):
        del manifest["judge"][key]
    manifest["format_version"] = 5
    path.write_text(json.dumps(manifest))
    resumed = read_stored_run(run).make_judge()
    assert isinstance(resumed, Judge) and resumed.backend.kind == "openai"
    assert resumed.spec == judge.spec


def test_batch_mode_refuses_an_anthropic_judge_before_any_request(
    anthropic: FakeAnthropic,
) -> None:
    with pytest.raises(RunConfigError, match="Batch API"):
        evaluate(rows(1), ["faithfulness"], llm=claude(anthropic), batch=True, progress=False)
    assert anthropic.message_requests == []


# ---------------------------------------------------------------------------------- CLI


def test_the_cli_judges_with_anthropic_colon_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_API_KEY)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    data = tmp_path / "data.jsonl"
    write_jsonl(data, rows(2))
    run = tmp_path / "run"
    with FakeAnthropic(handle, api_key=FAKE_API_KEY) as server:
        code = main(["evaluate", str(data), "-m", "faithfulness", "--llm",
                     "anthropic:claude-test", "--base-url", server.base_url,
                     "-o", str(run)])  # fmt: skip
        paths = {r.path for r in server.requests}
    assert code == 0
    assert paths == {"/v1/models", MESSAGES_PATH}  # the probe, then the judge's requests
    info = read_manifest(run).judge
    assert info is not None and (info.backend, info.model) == ("anthropic", "claude-test")


def test_the_fake_refuses_what_the_api_refuses(anthropic: FakeAnthropic) -> None:
    import urllib.error
    import urllib.request

    def post(body: dict[str, Any], **headers: str) -> int:
        request = urllib.request.Request(
            anthropic.base_url + "/messages", data=json.dumps(body).encode(),
            headers={"x-api-key": FAKE_API_KEY, "anthropic-version": "2023-06-01", **headers},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return int(response.status)
        except urllib.error.HTTPError as e:
            return int(e.code)

    ok = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    assert post(ok) == 200
    assert post({**ok, "max_tokens": None}) == 400
    assert post({**ok, "messages": [{"role": "system", "content": "hi"}]}) == 400
    assert post({**ok, "n": 2}) == 400
    assert post(ok, **{"x-api-key": "wrong"}) == 401


def test_a_429_for_a_spending_limit_is_fatal_not_retried() -> None:
    from rageval._client._retry import Target, classify
    from rageval._client._transport import _httpx, _status_error

    httpx = _httpx()
    error = {"type": "rate_limit_error", "message": "You have reached your spend limit.",
             "details": {"error_code": "enforced_spend_limit_reached"}}  # fmt: skip
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/messages")
    target = Target("judge", "http://127.0.0.1:9/v1", "claude-test", "ANTHROPIC_API_KEY", None)
    spent = httpx.Response(429, json={"type": "error", "error": error}, request=request)
    assert isinstance(classify(_status_error(spent), target), FatalJudgeError)
    busy = httpx.Response(429, json={"type": "error", "error": {**error, "details": None}},
                          request=request)  # fmt: skip
    assert not isinstance(classify(_status_error(busy), target), FatalJudgeError)
