"""RunConfig: how a run executes, one object that evaluate, calibrate and align take alike.
`rageval align` takes every run option `evaluate` does (--max-cost, --batch, --observer,
--engine), and a budget stops the whole alignment at it, as it stops an evaluation; the
Python keywords make the same RunConfig; the manifest records it whole."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest

from helpers import grader, labelled_rows, write_jsonl
from rageval import aevaluate, align, calibrate, evaluate
from rageval.cli import main
from rageval.errors import BudgetReached, RunConfigError, RunDirInUseError
from rageval.judge import Judge
from rageval.log import read_manifest
from rageval.observers import RunEnd, RunObserver
from rageval.runner import RunConfig
from rageval.testing import FAKE_API_KEY, FakeOpenAI, RecordedRequest

# gpt-4o-mini's list prices, USD per token (the built-in table's)
INPUT, OUTPUT = 0.15 / 1e6, 0.60 / 1e6
LABELS = {"human": "answer_accuracy"}


def labelled() -> list[dict[str, Any]]:
    """16 rows, half labelled right (the judge rates them 4) and half wrong (0)."""
    return labelled_rows([4, 0] * 8, ["yes", "no"] * 8)


def judge(server: FakeOpenAI) -> Judge:
    return Judge("gpt-4o-mini", base_url=server.base_url, api_key=FAKE_API_KEY, cache=False)


def worst_case(request: RecordedRequest) -> float:
    """The most a request could cost: its prompt (the characters of everything sent, at 4 per
    token, plus 4 per message) and its whole reply budget."""
    sent = request.prompt_chars + len(request.schema_text)
    prompt = math.ceil(sent / 4) + 4 * len(request.messages)
    return prompt * INPUT + int(request.body["max_tokens"]) * OUTPUT


class RunCosts(RunObserver):
    """What each run an observer is given cost, by its run id."""

    def __init__(self) -> None:
        self.costs: dict[str, float] = {}

    def on_end(self, end: RunEnd) -> None:
        self.costs[end.run_id] = end.result.usage.cost_usd or 0.0


def test_align_spends_one_budget_over_all_its_runs_and_stops_at_it(tmp_path: Path) -> None:
    costs = RunCosts()
    with FakeOpenAI(grader) as server:
        full = align(labelled(), LABELS, llm=judge(server), observers=[costs], progress=False)
        total = full.usage.cost_usd
        assert total is not None and total > 0
        # many runs, each well under half the total: a budget of half the total would stop
        # none of them on its own, only the alignment's one budget over all of them
        assert len(costs.costs) >= 4 and max(costs.costs.values()) < total / 2
        assert sum(costs.costs.values()) == pytest.approx(total)
        budget = total / 2
        server.reset()
        with pytest.raises(BudgetReached) as stopped:
            align(labelled(), LABELS, llm=judge(server), max_cost=budget,
                  run_dir=tmp_path / "half", progress=False)  # fmt: skip
        largest = max(worst_case(r) for r in server.chat_requests)
    spent = stopped.value.spent_usd
    assert stopped.value.max_cost_usd == budget
    assert budget - largest < spent <= budget
    # nothing was written as the alignment's outcome
    assert not (tmp_path / "half" / "align.json").exists()


def test_rageval_align_takes_max_cost_observer_and_engine_and_exits_5_at_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    data = tmp_path / "labelled.jsonl"
    write_jsonl(data, labelled())
    with FakeOpenAI(grader) as server:
        args = ["align", str(data), "--labels", "human=answer_accuracy", "--llm", "gpt-4o-mini",
                "--base-url", server.base_url, "--no-cache", "-q", "--engine", "local",
                "--observer", "otel"]  # fmt: skip
        assert main([*args, "-o", str(tmp_path / "full")]) == 0
        total = json.loads((tmp_path / "full" / "align.json").read_text())["usage"]["cost_usd"]
        capsys.readouterr()
        code = main([*args, "-o", str(tmp_path / "half"), "--max-cost", f"{total / 2:.10f}"])
    assert code == 5
    assert "stopped at the budget" in capsys.readouterr().err
    # the held-out run written before the budget ran out recorded the run options whole
    recorded = [read_manifest(p.parent).run_config for p in tmp_path.glob("full/*/manifest.json")]
    assert recorded and all(r["engine"] == "local" and r["max_cost"] is None for r in recorded)
    assert all(r["observers"] == ["rageval.observers.otel.OpenTelemetryObserver"] for r in recorded)


def test_rageval_align_sends_through_the_batch_api_with_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    data = tmp_path / "labelled.jsonl"
    write_jsonl(data, labelled())
    config = tmp_path / "rageval.toml"
    config.write_text("batch = { poll_interval = 0.02, settle = 0.05 }\n")
    with FakeOpenAI(grader) as server:
        code = main(["align", str(data), "--labels", "human=answer_accuracy", "--llm",
                     "gpt-4o-mini", "--base-url", server.base_url, "--no-cache", "-q",
                     "--batch", "--config", str(config), "--search", "threshold",
                     "-o", str(tmp_path / "run")])  # fmt: skip
        paths = [r.path for r in server.requests]
    assert code == 0
    assert "/v1/batches" in paths and "/v1/chat/completions" not in paths
    for manifest in (tmp_path / "run").glob("*/manifest.json"):
        stored = read_manifest(manifest.parent)
        assert stored.batch and stored.run_config["batch"]["poll_interval"] == 0.02


def test_the_keywords_make_the_run_config_and_the_manifest_records_it(tmp_path: Path) -> None:
    costs = RunCosts()
    graded = labelled_rows([4, 0], ["yes", "no"])  # GRADE<n> in each response: the grader rates it
    with FakeOpenAI(grader) as server:
        by_keywords = evaluate(graded, ["answer_accuracy"], llm=judge(server),
                               run_dir=tmp_path / "a", max_cost=1.0, observers=[costs],
                               progress=False)  # fmt: skip
        config = RunConfig(run_dir=tmp_path / "b", max_cost=1.0, observers=(costs,),
                           progress=False)  # fmt: skip
        whole = evaluate(graded, ["answer_accuracy"], llm=judge(server), config=config)
        with pytest.raises(RunConfigError, match="run_dir given beside config="):
            evaluate(graded, ["answer_accuracy"], llm=judge(server), config=config,
                     run_dir=tmp_path / "c")  # fmt: skip
    assert by_keywords["answer_accuracy"] == whole["answer_accuracy"] == [1.0, 0.0]
    assert len(costs.costs) == 2
    a, b = (read_manifest(tmp_path / d).run_config for d in ("a", "b"))
    assert {k: v for k, v in a.items() if k != "run_dir"} == {
        k: v for k, v in b.items() if k != "run_dir"
    }
    assert b == {
        "run_dir": str(tmp_path / "b"),
        "resume": False,
        "overwrite": False,
        "engine": "local",
        "ray_address": None,
        "ray_actors": None,
        "max_cost": 1.0,
        "batch": None,
        "probe": True,
        "progress": False,
        "human_labels": None,
        "observers": ["test_runconfig.RunCosts"],
        "cache": True,
    }


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"engine": "spark"}, "engine must be one of local, ray"),
        ({"resume": True}, "resume=True needs the run_dir"),
        ({"run_dir": "x", "resume": True, "overwrite": True}, "overwrite=True replaces it"),
        ({"max_cost": 0}, "max_cost must be a positive number"),
        ({"max_cost": True}, "max_cost must be a positive number"),
        ({"ray_actors": 2}, "need engine='ray'"),
        ({"observers": ["mlflow"]}, "RunObserver objects"),
    ],
)
def test_a_run_config_that_cannot_run_is_refused_when_made(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(RunConfigError, match=message):
        RunConfig(**fields)


def test_calibrate_takes_the_run_config_and_its_budget(tmp_path: Path) -> None:
    with FakeOpenAI(grader) as server:
        whole = calibrate(labelled(), LABELS, llm=judge(server), progress=False)
        assert whole.usage.cost_usd is not None
        budget = whole.usage.cost_usd / 3
        with pytest.raises(BudgetReached) as stopped:
            calibrate(labelled(), LABELS, llm=judge(server),
                      config=RunConfig(run_dir=tmp_path / "run", max_cost=budget,
                                       progress=False))  # fmt: skip
    assert stopped.value.spent_usd <= budget
    assert read_manifest(tmp_path / "run").run_config["max_cost"] == budget


async def test_the_run_dir_of_a_config_is_held_for_the_run_as_the_keyword_is(
    tmp_path: Path,
) -> None:
    config = RunConfig(run_dir=tmp_path / "run", progress=False)
    graded = labelled_rows([4, 0], ["yes", "no"])  # GRADE<n> in each response: the grader rates it
    with FakeOpenAI(grader, latency=0.2) as server:
        first = asyncio.create_task(
            aevaluate(graded, ["answer_accuracy"], llm=judge(server), config=config)
        )
        await asyncio.sleep(0.1)  # the first run holds the directory, waiting on the judge
        with pytest.raises(RunDirInUseError):
            await aevaluate(graded, ["answer_accuracy"], llm=judge(server), config=config)
        result = await first
    assert result.complete
    assert result["answer_accuracy"] == [1.0, 0.0]


def test_rageval_calibrate_takes_the_run_options_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    data = tmp_path / "labelled.jsonl"
    write_jsonl(data, labelled())
    with FakeOpenAI(grader) as server:
        args = ["calibrate", str(data), "--labels", "human=answer_accuracy", "--llm",
                "gpt-4o-mini", "--base-url", server.base_url, "--no-cache", "-q",
                "--observer", "otel", "--engine", "local"]  # fmt: skip
        assert main([*args, "-o", str(tmp_path / "full")]) == 0
        total = read_manifest(tmp_path / "full").run_config
        assert total["observers"] == ["rageval.observers.otel.OpenTelemetryObserver"]
        capsys.readouterr()
        code = main([*args, "-o", str(tmp_path / "tiny"), "--max-cost", "0.0000001"])
    assert code == 5
    assert "stopped at the budget" in capsys.readouterr().err
