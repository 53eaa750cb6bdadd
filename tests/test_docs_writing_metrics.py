"""docs/writing-metrics.md runs as written: its Python blocks are executed in order, in one
namespace, against a FakeOpenAI on 127.0.0.1 (the one change: the real endpoint the guide
shows becomes the test server's), then every ``test_*`` function the guide defines is run."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers import markdown_blocks, run_block
from rageval.metrics import base
from rageval.testing import FAKE_API_KEY, FakeOpenAI, RandomJudge

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "writing-metrics.md"
README = GUIDE.parents[1] / "README.md"
#: the endpoint the guide shows; the only text the test replaces
REAL_ENDPOINT = "https://api.openai.com/v1"


def blocks() -> list[tuple[int, str]]:
    """(first line number in the guide, code) of every Python block."""
    return [(b.line, b.code) for b in markdown_blocks(GUIDE) if b.language == "python"]


def test_the_two_example_metrics_are_short_and_use_only_public_api() -> None:
    llm_metric, plain_metric = blocks()[:2]
    for _, code in (llm_metric, plain_metric):
        assert len(code.rstrip("\n").split("\n")) < 30
    for _, code in blocks():
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.ImportFrom):
                assert node.module is not None
                assert not any(p.startswith("_") for p in node.module.split(".")), node.module
                assert not any(a.name.startswith("_") for a in node.names), node.module
    assert "class ContextUtilization(Metric)" in llm_metric[1] and "judge_items" in llm_metric[1]
    assert "class ReferenceInContexts(Metric)" in plain_metric[1]
    assert "needs_llm" not in plain_metric[1]


def test_the_guide_runs_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    # the guide registers its metrics: on a copy of the registry, so no other test sees them
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)  # the guide reads the key from there
    namespace: dict[str, Any] = {"__name__": "writing_metrics_guide"}
    with FakeOpenAI(RandomJudge(seed=13)) as server:
        replaced = 0
        for line, code in blocks():
            replaced += code.count(REAL_ENDPOINT)
            code = code.replace(REAL_ENDPOINT, server.base_url)
            run_block(code, page=GUIDE, line=line, scope=namespace)
        asked = len(server.chat_requests)
    assert replaced == 1
    # "Using them": all three metrics measured by the judge the guide configured
    result = namespace["result"]
    for metric in ("context_utilization", "reference_in_contexts", "faithfulness"):
        assert [c.status for c in result.cells(metric)] == ["ok"], metric
    assert result["reference_in_contexts"] == [1.0]  # "paris" is in the first context
    assert namespace["one"].measured
    assert asked >= 4  # two verdict requests, the statements and their verdicts
    assert namespace["ReferenceInContexts"](case_sensitive=True).params() == {
        "case_sensitive": True
    }
    # "Testing a metric": the guide's own tests
    tests: list[Callable[[], None]] = [
        f for name, f in namespace.items() if name.startswith("test_") and callable(f)
    ]
    assert len(tests) == 4
    for test in tests:
        test()


def test_the_readme_links_the_guide() -> None:
    assert "(docs/writing-metrics.md)" in README.read_text()
