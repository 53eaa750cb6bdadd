"""The endpoint client's settings objects and the one module that reads the environment:
the judge and remote embeddings take the same objects and find the same endpoint."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from rageval import _env
from rageval.embeddings.openai import OpenAIEmbeddings
from rageval.judge import Judge, Limits, RetryPolicy
from rageval.runner import embeddings_from_spec, judge_from_env
from rageval.testing import FAKE_API_KEY, FakeOpenAI, Fault, Reply


class Verdict(BaseModel):
    verdict: int


def test_judge_honours_rageval_base_url_like_evaluate(monkeypatch: pytest.MonkeyPatch) -> None:
    # the bug this fixes: Judge("m") used to ignore RAGEVAL_BASE_URL, evaluate(llm="m") did not
    monkeypatch.setenv("RAGEVAL_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8/v1")
    assert Judge("m").base_url == "http://127.0.0.1:9/v1"
    from_env = judge_from_env("m")
    assert from_env is not None and from_env.base_url == "http://127.0.0.1:9/v1"
    assert OpenAIEmbeddings("e").base_url == "http://127.0.0.1:9/v1"
    assert getattr(embeddings_from_spec("openai:e"), "base_url", None) == "http://127.0.0.1:9/v1"
    # an explicit argument wins over both
    assert Judge("m", base_url="http://127.0.0.1:7/v1").base_url == "http://127.0.0.1:7/v1"


def test_openai_base_url_then_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Judge("m").base_url == _env.DEFAULT_BASE_URL
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:8/v1/")
    assert Judge("m").base_url == "http://127.0.0.1:8/v1"
    monkeypatch.setenv("RAGEVAL_BASE_URL", "")  # set but empty: as if unset
    assert Judge("m").base_url == "http://127.0.0.1:8/v1"


def test_judge_model_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert judge_from_env() is None
    # a key: OpenAI's endpoint without one is a configuration error (tests/test_cli.py)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    monkeypatch.setenv("RAGEVAL_LLM", "env-model")
    judge = judge_from_env()
    assert judge is not None and judge.model == "env-model"
    named = judge_from_env("named")
    assert named is not None and named.model == "named"


def test_shorthands_and_objects_describe_the_same_settings() -> None:
    url = "http://127.0.0.1:6/v1"
    flat = Judge("m", base_url=url, max_retries=2, timeout=5, requests_per_minute=600)
    objects = Judge(
        "m",
        base_url=url,
        retry=RetryPolicy(max_retries=2, timeout=5),
        limits=Limits(max_concurrency=16, requests_per_minute=600),
    )
    assert flat.describe() == objects.describe()
    described = flat.describe()
    assert (described["max_retries"], described["timeout"]) == (2, 5.0)
    assert (described["max_concurrency"], described["requests_per_minute"]) == (16, 600.0)


def test_defaults_of_the_judge_and_the_embeddings() -> None:
    judge = Judge("m", base_url="http://127.0.0.1:5/v1")
    # a timeout nobody chose is described as none (60 s, or a followed llama.cpp server's)
    assert (judge.describe()["max_retries"], judge.describe()["timeout"]) == (6, None)
    assert judge.endpoint.timeout == 60.0
    assert judge.describe()["max_concurrency"] == 16
    # the embeddings client states no concurrency of its own: the judge's setting stands
    # (the limiter lives as long as a client of its endpoint: keep the judge)
    other = Judge("m", base_url="http://127.0.0.1:4/v1", max_concurrency=3)
    emb = OpenAIEmbeddings("e", base_url="http://127.0.0.1:4/v1")
    assert emb.describe()["max_concurrency"] == other.describe()["max_concurrency"] == 3


def test_one_limits_object_for_judge_and_embeddings() -> None:
    limits = Limits(max_concurrency=2, tokens_per_minute=10_000)
    url = "http://127.0.0.1:3/v1"
    judge = Judge("m", base_url=url, limits=limits)
    emb = OpenAIEmbeddings("e", base_url=url, limits=limits)
    assert judge._endpoint.limiter is emb._endpoint.limiter
    assert judge._endpoint.limiter.max_concurrency == 2
    assert judge._endpoint.limiter.tokens_per_minute == 10_000


def test_a_rate_is_recorded_as_it_was_given() -> None:
    # 1000 / 60 * 60 is 1000.0000000000001 in floating point: the manifest must say 1000
    judge = Judge("m", base_url="http://127.0.0.1:2/v1", tokens_per_minute=1000)
    judge._endpoint.limiter.tighten(Limits(requests_per_minute=7))
    described = judge.describe()
    assert (described["tokens_per_minute"], described["requests_per_minute"]) == (1000, 7)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"limits": Limits(max_concurrency=2), "max_concurrency": 3},
            "limits= or max_concurrency=",
        ),
        ({"retry": RetryPolicy(), "timeout": 3}, "retry= or timeout="),
        ({"limits": RetryPolicy()}, "limits must be a Limits"),
        ({"max_concurrency": 0}, "max_concurrency must be >= 1"),
        ({"max_retries": -1}, "max_retries must be >= 0"),
        ({"timeout": 0}, "timeout must be > 0"),
        ({"requests_per_minute": float("nan")}, "requests_per_minute must be a finite number"),
    ],
)
def test_bad_settings_are_refused_by_name(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        Judge("m", base_url="http://127.0.0.1:2/v1", **kwargs)  # type: ignore[arg-type]
    with pytest.raises((ValueError, TypeError), match=message):
        OpenAIEmbeddings("e", base_url="http://127.0.0.1:2/v1", **kwargs)  # type: ignore[arg-type]


async def test_a_retry_policy_bounds_the_attempts(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Fault.status(500), Fault.status(500), Reply.json({"verdict": 1}))
    judge = Judge(
        "m",
        base_url=fake_openai.base_url,
        api_key=FAKE_API_KEY,
        cache=False,
        retry=RetryPolicy(max_retries=1, timeout=10),
    )
    from rageval.judge import JudgeCallFailed

    with pytest.raises(JudgeCallFailed, match="failed 2 times"):
        await judge.ask([{"role": "user", "content": "q"}], Verdict)
    assert len(fake_openai.chat_requests) == 2


def test_the_key_never_appears_in_settings_or_endpoint() -> None:
    judge = Judge("m", base_url="http://127.0.0.1:1/v1", api_key="sk-secret-123456")
    assert "sk-secret-123456" not in repr(vars(judge._endpoint))
    assert "sk-secret-123456" not in repr(judge.describe())
