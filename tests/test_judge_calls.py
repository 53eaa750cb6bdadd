"""Judge: structured calls, re-asks, truncation, modes, fatal errors — all through the real
openai SDK against FakeOpenAI on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
import pytest
from pydantic import BaseModel

from rageval.judge import FatalJudgeError, Judge, JudgeCallFailed, llm_factory
from rageval.testing import FakeOpenAI, Fault, Reply

KEY = "sk-test-SECRET-1234567890"


class Verdict(BaseModel):
    verdict: int
    reason: str


class Nested(BaseModel):
    label: str
    verdicts: list[Verdict]
    note: str | None = None


def ask_text(text: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": "Judge it."}, {"role": "user", "content": text}]


def make_judge(server: FakeOpenAI, **kw: Any) -> Judge:
    kw.setdefault("api_key", KEY)
    return Judge(kw.pop("model", "m"), base_url=server.base_url, **kw)


async def test_structured_call_returns_validated_instance_and_usage(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.script(
        Reply.json({"verdict": 1, "reason": "ok"}, prompt_tokens=40, completion_tokens=9)
    )
    judge = make_judge(fake_openai, seed=7, temperature=0.3, max_tokens=300)
    reply = await judge.ask(ask_text("q"), Verdict)
    assert reply.value == Verdict(verdict=1, reason="ok")
    assert not reply.cached
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.requests) == (
        40,
        9,
        1,
    )
    [req] = fake_openai.chat_requests
    assert req.mode == "json_schema"
    body = req.body
    assert (body["seed"], body["temperature"], body["max_tokens"]) == (7, 0.3, 300)
    fmt = body["response_format"]["json_schema"]
    assert fmt["strict"] is True
    assert fmt["schema"]["additionalProperties"] is False
    assert fmt["schema"]["required"] == ["verdict", "reason"]


async def test_nested_optional_schema_is_sent_strict(fake_openai: FakeOpenAI) -> None:
    judge = make_judge(fake_openai)
    reply = await judge.ask(ask_text("q"), Nested)
    assert isinstance(reply.value, Nested)
    schema = fake_openai.chat_requests[0].schema
    assert schema is not None
    assert schema["required"] == ["label", "verdicts", "note"]
    assert "default" not in schema["properties"]["note"]
    assert schema["$defs"]["Verdict"]["additionalProperties"] is False


async def test_schema_invalid_reply_is_reasked_with_the_error(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(
        Reply.json({"verdict": "lots", "reason": "x"}), Reply.json({"verdict": 2, "reason": "y"})
    )
    judge = make_judge(fake_openai)
    reply = await judge.ask(ask_text("q"), Verdict)
    assert reply.value.verdict == 2
    assert (reply.usage.requests, reply.usage.reasks) == (2, 1)
    first, second = fake_openai.chat_requests
    assert len(second.messages) == len(first.messages) + 2
    bad, complaint = second.messages[-2:]
    assert bad["role"] == "assistant" and '"lots"' in bad["content"]
    assert complaint["role"] == "user"
    assert "verdict" in complaint["content"] and "integer" in complaint["content"]


async def test_check_failure_is_reasked(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(
        Reply.json({"verdict": 5, "reason": "x"}), Reply.json({"verdict": 1, "reason": "y"})
    )

    def on_scale(v: Verdict) -> None:
        if v.verdict not in (0, 1):
            raise ValueError(f"verdict must be 0 or 1, got {v.verdict}")

    reply = await make_judge(fake_openai).ask(ask_text("q"), Verdict, check=on_scale)
    assert reply.value.verdict == 1
    assert "verdict must be 0 or 1, got 5" in fake_openai.chat_requests[1].messages[-1]["content"]


async def test_reasks_are_bounded(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(*[Reply.text("no json here")] * 2)
    judge = make_judge(fake_openai, max_reasks=1)
    with pytest.raises(JudgeCallFailed) as info:
        await judge.ask(ask_text("q"), Verdict)
    assert "1 re-ask" in info.value.cause and "no valid JSON object" in info.value.cause
    assert len(fake_openai.chat_requests) == 2
    assert judge.usage.total.reasks == 1
    # four different problems: every re-ask the call allows is used
    fake_openai.script(
        Reply.text("still no json"),
        Reply.json({"verdict": "x", "reason": "r"}),
        Reply.json({"verdict": 1}),
        Reply.json({"reason": "r"}),
    )
    with pytest.raises(JudgeCallFailed, match="3 re-ask") as info:
        await judge.ask(ask_text("per call"), Verdict, max_reasks=3)
    assert info.value.kind == "invalid_reply"
    assert len(fake_openai.chat_requests) == 6


async def test_reasks_stop_when_the_same_problem_comes_three_times_in_a_row(
    fake_openai: FakeOpenAI,
) -> None:
    # (once this sent all 1 + 5 requests: a judge that answers garbage was asked 5 more times)
    fake_openai.script(*[Reply.text("no json here")] * 6)
    with pytest.raises(JudgeCallFailed) as info:
        await make_judge(fake_openai).ask(ask_text("q"), Verdict, max_reasks=5)
    assert info.value.kind == "invalid_reply"
    assert "the same problem 3 times in a row" in info.value.cause
    assert len(fake_openai.chat_requests) == 3


async def test_a_problem_met_twice_is_forgiven_once(fake_openai: FakeOpenAI) -> None:
    # a transient fault that also meets the re-ask (30 % faults lost ~0.8 % of calls there,
    # up to 5 % of the cells of conversation metrics that need six calls each)
    fake_openai.script(
        Reply.text("no json here"),
        Reply.text("no json here"),
        Reply.json({"verdict": 1, "reason": "third time"}),
    )
    reply = await make_judge(fake_openai).ask(ask_text("q"), Verdict)
    assert reply.value.reason == "third time"
    assert reply.usage.reasks == 2
    # a different problem in between starts the count again
    fake_openai.script(
        Reply.text("no json here"),
        Reply.text("no json here"),
        Reply.json({"verdict": 1}),
        Reply.text("no json here"),
        Reply.text("no json here"),
        Reply.json({"verdict": 0, "reason": "sixth"}),
    )
    reply = await make_judge(fake_openai).ask(ask_text("other"), Verdict, max_reasks=5)
    assert reply.value.reason == "sixth"


async def test_truncated_reply_gets_a_larger_budget(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Fault.truncated(), Reply.json({"verdict": 1, "reason": "full"}))
    reply = await make_judge(fake_openai, max_tokens=100).ask(ask_text("q"), Verdict)
    assert reply.value.reason == "full"
    assert [r.body["max_tokens"] for r in fake_openai.chat_requests] == [100, 200]


async def test_still_truncated_fails_with_the_token_limit_as_cause(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.script(Fault.truncated(), Fault.truncated())
    with pytest.raises(JudgeCallFailed) as info:
        await make_judge(fake_openai, max_tokens=100).ask(ask_text("q"), Verdict)
    assert "token limit" in info.value.cause and "max_tokens=200" in info.value.cause
    assert info.value.kind == "truncated"
    assert len(fake_openai.chat_requests) == 2


#: how the real judge's runaway replies end: Qwen2.5-Coder-1.5B on llama-server, asked for the
#: statements of a MEMERAG sentence, repeated two of them until max_tokens (cut mid-item)
_LOOP = '"Physics uses mathematical methods to solve problems.", "Physics simplifies situations.", '


async def test_a_reply_that_loops_to_the_token_limit_is_not_asked_again(
    fake_openai: FakeOpenAI,
) -> None:
    # (before: asked again with twice the budget, which at temperature 0 loops twice as long)
    fake_openai.script(Fault.truncated('{"statements": [' + _LOOP * 5 + _LOOP[:30]))
    with pytest.raises(JudgeCallFailed) as info:
        await make_judge(fake_openai, max_tokens=100).ask(ask_text("q"), Verdict)
    assert info.value.kind == "truncated"
    assert "repeated the same text" in info.value.cause and "max_tokens=100" in info.value.cause
    assert len(fake_openai.chat_requests) == 1


@pytest.mark.parametrize(
    "end",
    [
        _LOOP * 2,  # two repeats: could be a list that happens to repeat, not yet a loop
        "ab" * 60,  # three repeats and more, but 120 characters only
        '"s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8", "s9", "s10", "s11", "s12", "s13"',
    ],
)
async def test_a_truncated_reply_that_does_not_loop_gets_a_larger_budget(
    fake_openai: FakeOpenAI, end: str
) -> None:
    fake_openai.script(Fault.truncated('{"statements": ["intro", ' + end), Fault.truncated())
    with pytest.raises(JudgeCallFailed, match="even after raising it"):
        await make_judge(fake_openai, max_tokens=100).ask(ask_text("q"), Verdict)
    assert [r.body["max_tokens"] for r in fake_openai.chat_requests] == [100, 200]


async def test_n_generations_cut_at_the_limit_are_asked_again_in_one_request(
    fake_openai: FakeOpenAI,
) -> None:
    # (before: one request of n=3, then each generation alone with the larger budget: 1 + 3
    # requests, each a new chance to fail)
    fake_openai.script(Fault.truncated(), Reply.json({"verdict": 1, "reason": "full"}))
    judge = make_judge(fake_openai, max_tokens=100)
    replies = await judge.ask_n(ask_text("q"), Verdict, 3, temperature=1.0)
    assert [r.reason for r in replies.values] == ["full"] * 3
    sent = fake_openai.chat_requests
    assert [(r.body["max_tokens"], r.body.get("n")) for r in sent] == [(100, 3), (200, 3)]
    # cut again with the larger budget: not raised a second time
    fake_openai.script(Fault.truncated(), Fault.truncated())
    with pytest.raises(JudgeCallFailed, match=r"max_tokens=200\) even after raising it from 100"):
        await judge.ask_n(ask_text("again"), Verdict, 3, temperature=1.0)
    assert [r.body["max_tokens"] for r in fake_openai.chat_requests[2:]] == [100, 200]


async def test_mode_probe_falls_back_to_tools_and_remembers() -> None:
    with FakeOpenAI(supports=("tools",)) as server:
        judge = make_judge(server, cache=False)
        first = await judge.ask(ask_text("one"), Verdict)
        assert [r.mode for r in server.chat_requests] == ["json_schema", "tools"]
        assert isinstance(first.value, Verdict)
        assert first.usage.requests == 2
        second = await make_judge(server, cache=False).ask(ask_text("two"), Verdict)
        assert [r.mode for r in server.chat_requests] == ["json_schema", "tools", "tools"]
        assert second.usage.requests == 1
        forced = server.chat_requests[-1].body["tool_choice"]
        assert forced == {"type": "function", "function": {"name": "Verdict"}}
        assert judge.describe()["structured_output"] == "tools"


async def test_mode_probe_ends_with_json_in_the_prompt() -> None:
    with FakeOpenAI(supports=()) as server:
        server.script(Reply.text('Here you go:\n```json\n{"verdict": 1, "reason": "r"}\n```'))
        reply = await make_judge(server).ask(ask_text("q"), Verdict)
        assert reply.value == Verdict(verdict=1, reason="r")
        last = server.chat_requests[-1]
        assert [r.mode for r in server.chat_requests] == ["json_schema", "tools", "text"]
        assert '"verdict"' in last.messages[0]["content"]  # the schema, in the system message
        assert last.messages[0]["content"].startswith("Judge it.")


async def test_json_mode_parses_fenced_and_prefixed_replies(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(
        Reply.text('<think>{"scratch": true}</think>\n```json\n{"verdict": 0, "reason": "a"}\n```'),
        Reply.text('Verdict follows. {"verdict": 1, "reason": "b"} Hope that helps.'),
    )
    judge = make_judge(fake_openai, mode="json", cache=False)
    assert (await judge.ask(ask_text("1"), Verdict)).value.reason == "a"
    assert (await judge.ask(ask_text("2"), Verdict)).value.reason == "b"
    assert all(r.mode == "text" for r in fake_openai.chat_requests)


async def test_tools_mode_reads_tool_arguments(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.tool_arguments('{"verdict": 3, "reason": "t"}'))
    reply = await make_judge(fake_openai, mode="tools").ask(ask_text("q"), Verdict)
    assert reply.value.verdict == 3
    assert fake_openai.chat_requests[0].mode == "tools"


async def test_wrong_api_key_is_fatal_and_remembered() -> None:
    with FakeOpenAI(api_key="sk-the-right-one") as server:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("MY_JUDGE_KEY", KEY)
            judge = make_judge(server, api_key=None, api_key_env="MY_JUDGE_KEY", max_concurrency=1)
        calls = [judge.ask(ask_text(str(i)), Verdict) for i in range(10)]
        results = await asyncio.gather(*calls, return_exceptions=True)
        assert all(isinstance(r, FatalJudgeError) for r in results)
        message = str(results[0])
        assert f"judge at {server.base_url} rejected the API key from MY_JUDGE_KEY (401)" in message
        assert len(server.chat_requests) == 1
        with pytest.raises(FatalJudgeError, match="401"):
            await judge.ask(ask_text("later"), Verdict)
        assert len(server.chat_requests) == 1


async def test_missing_api_key_is_named_in_the_error() -> None:
    with FakeOpenAI(api_key="sk-the-right-one") as server:
        judge = Judge("m", base_url=server.base_url)
        with pytest.raises(FatalJudgeError, match=r"OPENAI_API_KEY \(which is not set\)"):
            await judge.ask(ask_text("q"), Verdict)


async def test_unknown_model_is_fatal_with_a_clear_message() -> None:
    with FakeOpenAI(models={"real-model"}) as server:
        judge = make_judge(server, model="no-such-model")
        with pytest.raises(FatalJudgeError) as info:
            await judge.ask(ask_text("q"), Verdict)
        assert f"model 'no-such-model' not found at {server.base_url} (404)" in str(info.value)
        assert info.value.status == 404
        with pytest.raises(FatalJudgeError):
            await judge.ask(ask_text("other"), Verdict)
        assert len(server.chat_requests) == 1


async def test_bad_request_is_fatal_when_not_probing(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Fault.status(400, "temperature out of range"))
    judge = make_judge(fake_openai, mode="json_schema")
    with pytest.raises(FatalJudgeError, match="temperature out of range"):
        await judge.ask(ask_text("q"), Verdict)
    assert len(fake_openai.chat_requests) == 1


async def test_over_long_prompt_fails_the_call_not_the_run(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Fault.status(400, "This model's maximum context length is 8192 tokens."))
    judge = make_judge(fake_openai, mode="json_schema")
    with pytest.raises(JudgeCallFailed, match="prompt too long"):
        await judge.ask(ask_text("huge"), Verdict)
    assert (await judge.ask(ask_text("small"), Verdict)).value is not None


async def test_server_messages_never_carry_the_key(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Fault.status(403, f"key {KEY} may not use this model"))
    with pytest.raises(FatalJudgeError) as info:
        await make_judge(fake_openai).ask(ask_text("q"), Verdict)
    assert KEY not in str(info.value) and "key *** may not" in str(info.value)


async def test_given_async_client_has_sdk_retries_off(fake_openai: FakeOpenAI) -> None:
    client = openai.AsyncOpenAI(base_url=fake_openai.base_url, api_key=KEY)  # SDK default: 2
    fake_openai.script(Fault.status(503))
    judge = llm_factory("m", client=client, max_retries=0)
    with pytest.raises(JudgeCallFailed, match="503"):
        await judge.ask(ask_text("q"), Verdict)
    assert len(fake_openai.chat_requests) == 1
    assert judge.base_url == fake_openai.base_url


async def test_given_sync_client_is_used_asynchronously(fake_openai: FakeOpenAI) -> None:
    client = openai.OpenAI(base_url=fake_openai.base_url + "/", api_key=KEY)
    judge = llm_factory("m", client=client)
    assert judge.base_url == fake_openai.base_url
    assert isinstance((await judge.ask(ask_text("q"), Verdict)).value, Verdict)
    assert fake_openai.chat_requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_client_excludes_base_url_and_key(fake_openai: FakeOpenAI) -> None:
    client = openai.AsyncOpenAI(base_url=fake_openai.base_url, api_key=KEY)
    with pytest.raises(ValueError, match="either client"):
        Judge("m", client=client, api_key="other")
    with pytest.raises(TypeError, match="AsyncOpenAI"):
        Judge("m", client=object())


def test_judge_works_across_event_loops(fake_openai: FakeOpenAI) -> None:
    # evaluate() runs each call on a private loop; one judge must survive many loops.
    judge = make_judge(fake_openai, cache=False, max_concurrency=2)
    for i in range(3):
        assert asyncio.run(judge.ask(ask_text(str(i)), Verdict)).value is not None
    assert len(fake_openai.chat_requests) == 3


def test_repr_and_describe_never_show_the_key(fake_openai: FakeOpenAI) -> None:
    judge = make_judge(fake_openai)
    text = repr(judge) + json.dumps(judge.describe()) + repr(vars(judge))
    text += repr(vars(judge._endpoint))
    assert KEY not in text
    assert judge.describe()["api_key_from"] == "the api_key argument"
    assert judge.describe()["base_url"] == fake_openai.base_url


def test_base_url_is_normalised(fake_openai: FakeOpenAI) -> None:
    judge = Judge("m", base_url="HTTP://LocalHost:8000/v1/", api_key="x")
    assert judge.base_url == "http://localhost:8000/v1"
    with pytest.raises(ValueError, match="http"):
        Judge("m", base_url="localhost:8000/v1", api_key="x")


# ------------------------------------------------------------------ hopeless requests


async def test_a_prompt_over_max_prompt_tokens_is_not_sent(fake_openai: FakeOpenAI) -> None:
    judge = make_judge(fake_openai, max_prompt_tokens=1_000)
    with pytest.raises(JudgeCallFailed) as info:
        await judge.ask(ask_text("x" * 8_000), Verdict)
    assert info.value.kind == "input_too_long" and "not sent" in info.value.cause
    assert fake_openai.chat_requests == []
    assert judge.usage.total.requests == 0
    await judge.ask(ask_text("short"), Verdict)  # the judge still works


async def test_a_prompt_over_a_known_context_window_is_not_sent(fake_openai: FakeOpenAI) -> None:
    # gpt-4o-mini: 128,000 tokens; a 1 MB prompt is ~250,000
    judge = make_judge(fake_openai, model="gpt-4o-mini-2024-07-18")
    with pytest.raises(JudgeCallFailed) as info:
        await judge.ask(ask_text("The harbour is large. " * 48_000), Verdict)
    assert info.value.kind == "input_too_long" and "128,000-token" in info.value.cause
    assert fake_openai.chat_requests == []
    # a prompt that fits, but not with the whole reply budget: the budget shrinks to fit
    await judge.ask(ask_text("y" * 4 * 127_000), Verdict, max_tokens=4_000)
    (request,) = fake_openai.chat_requests
    assert 256 <= request.body["max_tokens"] < 1_024


async def test_a_server_context_length_error_is_input_too_long(fake_openai: FakeOpenAI) -> None:
    fake_openai.context_window = 500
    with pytest.raises(JudgeCallFailed) as info:
        await make_judge(fake_openai, model="some-local-model").ask(ask_text("z" * 4_000), Verdict)
    assert info.value.kind == "input_too_long" and "prompt too long" in info.value.cause
    assert len(fake_openai.chat_requests) == 1  # not retried, not fatal


async def test_transport_failures_after_the_retries_are_kind_transport(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.script(*[Fault.status(503)] * 3)
    with pytest.raises(JudgeCallFailed) as info:
        await make_judge(fake_openai, max_retries=2).ask(ask_text("q"), Verdict)
    assert info.value.kind == "transport"


async def test_refusal_and_content_filter_are_kind_refusal(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.json({"verdict": 1, "reason": "r"}, finish_reason="content_filter"))
    with pytest.raises(JudgeCallFailed) as info:
        await make_judge(fake_openai).ask(ask_text("q"), Verdict)
    assert info.value.kind == "refusal"


async def test_the_call_budget_is_never_below_the_judges_own(fake_openai: FakeOpenAI) -> None:
    judge = make_judge(fake_openai, max_tokens=2_000)
    await judge.ask(ask_text("a"), Verdict, max_tokens=500)
    await judge.ask(ask_text("b"), Verdict, max_tokens=5_000)
    assert [r.body["max_tokens"] for r in fake_openai.chat_requests] == [2_000, 5_000]
