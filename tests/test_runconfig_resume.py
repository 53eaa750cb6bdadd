"""A resumed run's RunConfig: what is not given again is the run's own, as its manifest records
it (rageval.runner._runconfig.resumed); what is given wins for the session and is the run's from
then on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import rageval
from helpers import grader, labelled_rows, write_jsonl
from rageval import evaluate
from rageval.cli import main
from rageval.judge import Judge, JudgeSpec
from rageval.log import read_manifest
from rageval.testing import FAKE_API_KEY, FakeOpenAI


def _models_requests(server: FakeOpenAI) -> int:
    return sum(r.path.endswith("/models") for r in server.requests)


def test_a_resumed_run_keeps_its_budget_probe_and_cache_unless_given_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    data = tmp_path / "rows.jsonl"
    write_jsonl(data, labelled_rows([4, 0, 2] * 3, [""] * 9))
    # output tokens free: a request's worst case is about its prompt, so a third of the run's
    # cost stops it after a few rows
    price = ["--price", "gpt-4o-mini=0.15,0"]
    base = ["--metric", "answer_accuracy", "-q", *price]
    with FakeOpenAI(grader) as server:
        full = tmp_path / "full"
        assert main(["evaluate", str(data), *base, "--llm", "gpt-4o-mini", "--base-url",
                     server.base_url, "--no-cache", "-o", str(full)]) == 0  # fmt: skip
        cost = evaluate_cost(full)
        budget = f"{cost / 3:.10f}"
        run = tmp_path / "run"
        first = ["evaluate", str(data), *base, "--llm", "gpt-4o-mini", "--base-url",
                 server.base_url, "--no-cache", "--no-probe", "--max-cost", budget,
                 "-o", str(run)]  # fmt: skip
        server.reset()
        assert main(first) == 5
        assert _models_requests(server) == 0
        done = finished(run)
        assert 0 < done < 9
        judge = read_manifest(run).judge
        assert judge is not None and judge.price == {"input": 0.15, "output": 0.0}
        # no flag: the run's budget at the run's price again (it stops again), no probe, no
        # cache
        server.reset()
        assert main(["evaluate", "--resume", str(run), "-q"]) == 5
        assert _models_requests(server) == 0
        assert done < finished(run) < 9
        stored = read_manifest(run).run_config
        assert stored["max_cost"] == float(budget)
        assert stored["probe"] is False and stored["cache"] is False
        # given again, a flag wins: no budget now, the probe on; the run finishes
        server.reset()
        assert main(["evaluate", "--resume", str(run), "-q", "--max-cost", "none", "--probe"]) == 0
        assert _models_requests(server) == 1
    assert finished(run) == 9
    stored = read_manifest(run).run_config
    assert stored["max_cost"] is None and stored["probe"] is True and stored["cache"] is False
    capsys.readouterr()


def evaluate_cost(run_dir: Path) -> float:
    from rageval.log import read_summary

    summary = read_summary(run_dir)
    assert summary is not None
    cost = summary.usage.cost_usd
    assert cost is not None and cost > 0
    return cost


def finished(run_dir: Path) -> int:
    return len((run_dir / "results.jsonl").read_text().splitlines())


def test_evaluate_resumed_with_no_keywords_keeps_the_runs_human_labels_and_budget(
    tmp_path: Path,
) -> None:
    data = labelled_rows([4, 0, 4, 0], [1.0, "", 0.0, ""])
    with FakeOpenAI(grader) as server:
        judge = Judge("gpt-4o-mini", base_url=server.base_url, api_key=FAKE_API_KEY, cache=False)
        evaluate(data, ["answer_accuracy"], llm=judge, run_dir=tmp_path / "run", max_cost=1.0,
                 human_labels={"human": "answer_accuracy"}, probe=False,
                 progress=False)  # fmt: skip
        again = evaluate(data, ["answer_accuracy"], llm=judge, run_dir=tmp_path / "run",
                         resume=True, progress=False)  # fmt: skip
    stored = read_manifest(tmp_path / "run")
    assert stored.run_config["max_cost"] == 1.0
    assert stored.run_config["human_labels"] == [["human", "answer_accuracy"]]
    assert stored.run_config["probe"] is False and stored.run_config["resume"] is True
    assert [(h.column, h.metric) for h in stored.human_labels] == [("human", "answer_accuracy")]
    assert again.complete


def _resolve(argv: list[str], stored: Path | None = None) -> tuple[Any, Any]:
    from rageval.cli import build_parser
    from rageval.cli._shared import command_settings, resolve_run
    from rageval.runner._stored import read_stored_run

    args = build_parser().parse_args(argv)
    return resolve_run(
        args,
        settings=command_settings(args),
        stored=read_stored_run(stored) if stored is not None else None,
        run_dir=stored or Path("out"),
        observe=False,
    )


def test_one_resolver_yields_the_run_config_and_the_judge_spec_layer_by_layer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    monkeypatch.setenv("RAGEVAL_BASE_URL", "http://127.0.0.1:9/env/v1")
    (tmp_path / "rageval.toml").write_text(
        "max_cost = 5.0\nprobe = false\n[judge]\nmodel = 'file-model'\n"
        "base_url = 'http://127.0.0.1:9/file/v1'\ntemperature = 0.3\n"
        "requests_per_minute = 600\n[judge.retry]\nmax_retries = 2\ntimeout = 9\n"
    )
    # the flags over the environment over the config file over the defaults
    config, judges = _resolve(["evaluate", "d.jsonl", "--concurrency", "3", "--max-cost", "2",
                               "--judge-scoring", "sampled"])  # fmt: skip
    assert (config.max_cost, config.probe, config.engine) == (2.0, False, "local")
    assert config.cache is True
    (choice,) = judges.choices
    assert choice.spec == JudgeSpec(
        model="file-model",
        base_url="http://127.0.0.1:9/env/v1",
        temperature=0.3,
        requests_per_minute=600,
        max_retries=2,
        timeout=9,
        max_concurrency=3,
        scoring="sampled",
    )
    # the judge is made from the spec, nothing else (the key's variable: the backend's default)
    made = judges.make().spec
    assert made == choice.spec.model_copy(update={"api_key_env": "OPENAI_API_KEY"})


def test_a_resumed_run_resolves_to_its_own_judge_spec_with_only_the_flags_given_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with FakeOpenAI(grader) as server:
        judge = Judge("gpt-4o-mini", base_url=server.base_url, api_key_env="MY_KEY",
                      temperature=0.2, seed=4, requests_per_minute=100, cache=False)  # fmt: skip
        monkeypatch.setenv("MY_KEY", FAKE_API_KEY)
        evaluate(labelled_rows([4, 0], ["", ""]), ["answer_accuracy"], llm=judge,
                 run_dir=tmp_path / "run", max_cost=1.0, engine="local", progress=False)  # fmt: skip
    # a config file and an environment that would say otherwise do not apply to a resumed run
    (tmp_path / "rageval.toml").write_text("max_cost = 9.0\n[judge]\nmodel = 'other'\n")
    monkeypatch.setenv("RAGEVAL_LLM", "another")
    config, judges = _resolve(["evaluate", "--resume", str(tmp_path / "run")], tmp_path / "run")
    assert config.resume and config.max_cost == 1.0 and config.cache is True
    (choice,) = judges.choices
    assert choice.spec == judge.spec
    config, judges = _resolve(
        ["evaluate", "--resume", str(tmp_path / "run"), "--concurrency", "2", "--max-cost", "3"],
        tmp_path / "run",
    )
    assert config.max_cost == 3.0
    assert judges.choices[0].spec == judge.spec.model_copy(update={"max_concurrency": 2})


def test_the_judge_settings_of_every_layer_are_read_in_one_place() -> None:
    from rageval.judge import Limits
    from rageval.judge._spec import JudgeChoice

    choice = JudgeChoice.of_layers(
        {"max_concurrency": 2, "scoring": None, "cache": False},
        {"model": "m", "base_url": "http://a/v1", "scoring": "sampled"},
        {"base_url": "http://b/v1", "limits": Limits(requests_per_minute=60, max_concurrency=9)},
    )
    assert choice.cache is False and choice.prices is None
    assert (choice.spec.base_url, choice.spec.scoring) == ("http://a/v1", "sampled")
    assert (choice.spec.max_concurrency, choice.spec.requests_per_minute) == (2, 60)
    with pytest.raises(ValueError, match="colour: not a judge setting"):
        JudgeChoice.of_layers({"model": "m", "colour": "red"})
    with pytest.raises(ValueError, match="temperature"):
        JudgeChoice.of_layers({"model": "m", "temperature": "hot"})


def _two_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data file of two labelled rows, the key in its variable."""
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    data = tmp_path / "rows.jsonl"
    write_jsonl(data, labelled_rows([4, 0], ["", ""]))
    return data


def test_a_flag_that_would_change_the_scored_cells_is_refused_on_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _two_rows(tmp_path, monkeypatch)
    run = str(tmp_path / "run")
    with FakeOpenAI(grader) as server:
        assert main(["evaluate", str(data), "-m", "answer_accuracy", "--llm", "gpt-4o-mini",
                     "--base-url", server.base_url, "--no-cache", "-q", "-o", run]) == 0  # fmt: skip
        capsys.readouterr()
        assert main(["evaluate", "--resume", run, "--judge-scoring", "sampled", "-q"]) == 2
        assert "the judge scoring differs: the run used 'auto', now 'sampled'" in (
            capsys.readouterr().err
        )
        assert main(["evaluate", "--resume", run, "--llm", "gpt-4o", "-q"]) == 2
        assert "the judge model differs" in capsys.readouterr().err
        # the same scoring again, or a limit, changes no cell: the run goes on
        assert main(["evaluate", "--resume", run, "--judge-scoring", "auto", "-q",
                     "--concurrency", "2"]) == 0  # fmt: skip


def test_python_resume_refuses_a_judge_setting_that_changes_cells_as_the_cli_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rageval.errors import RunDirError

    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    rows = labelled_rows([4, 0], ["", ""])
    run = tmp_path / "run"
    with FakeOpenAI(grader) as server:

        def judge(**settings: Any) -> Judge:
            return Judge("gpt-4o-mini", base_url=server.base_url, cache=False, **settings)

        keywords: dict[str, Any] = {"run_dir": run, "engine": "local", "progress": False}
        evaluate(rows, ["answer_accuracy"], llm=judge(), **keywords)
        for setting, message in (
            ({"scoring": "sampled"}, "the judge scoring differs: the run used 'auto'"),
            ({"temperature": 0.5}, "the judge temperature differs: the run used 0.0, now 0.5"),
        ):
            with pytest.raises(RunDirError, match=message):
                evaluate(rows, ["answer_accuracy"], llm=judge(**setting), resume=True, **keywords)
        # a limit, or another endpoint of the same model, changes no cell
        with FakeOpenAI(grader) as other:
            other_judge = Judge("gpt-4o-mini", base_url=other.base_url, cache=False,
                                max_concurrency=2)  # fmt: skip
            result = evaluate(rows, ["answer_accuracy"], llm=other_judge, resume=True, **keywords)
    assert result.n_finished == 2


def test_python_calibrate_resumed_with_no_keywords_keeps_the_runs_budget_and_probe(
    tmp_path: Path,
) -> None:
    from rageval import calibrate

    rows = labelled_rows([4, 0, 4, 0], [1.0, 0.0, 1.0, 0.0])
    run = tmp_path / "run"
    with FakeOpenAI(grader) as server:
        judge = Judge("gpt-4o-mini", base_url=server.base_url, api_key=FAKE_API_KEY, cache=False)
        labels = {"human": "answer_accuracy"}
        calibrate(rows, labels, judge, run_dir=run, max_cost=1.0, probe=False, progress=False)
        calibrate(rows, labels, judge, run_dir=run, resume=True, progress=False)
    stored = read_manifest(run).run_config
    assert stored["resume"] is True
    assert stored["max_cost"] == 1.0 and stored["probe"] is False


def test_a_run_from_before_scoring_resumes_as_sampled_from_python_and_the_cli(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from rageval.errors import RunDirError

    rows = str(_two_rows(tmp_path, monkeypatch))
    run = tmp_path / "run"
    with FakeOpenAI(grader) as server:

        def judge(scoring: Any) -> Judge:
            return Judge("gpt-4o-mini", base_url=server.base_url, cache=False, scoring=scoring)

        keywords: dict[str, Any] = {"run_dir": run, "engine": "local", "progress": False}
        evaluate(rows, ["answer_accuracy"], llm=judge("sampled"), **keywords)
        # the manifest as a rageval from before the scoring setting wrote it
        manifest = json.loads((run / "manifest.json").read_text())
        del manifest["judge"]["scoring"]
        (run / "manifest.json").write_text(json.dumps(manifest))
        stored = read_manifest(run).judge
        assert stored is not None and stored.scoring == "sampled"
        for scoring in ("auto", "probabilities"):
            with pytest.raises(RunDirError, match=f"the run used 'sampled', now '{scoring}'"):
                evaluate(rows, ["answer_accuracy"], llm=judge(scoring), resume=True, **keywords)
        capsys.readouterr()
        assert main(["evaluate", "--resume", str(run), "--judge-scoring", "auto", "-q"]) == 2
        assert "the run used 'sampled', now 'auto'" in capsys.readouterr().err
        result = evaluate(rows, ["answer_accuracy"], llm=judge("sampled"), resume=True, **keywords)
        assert result.n_finished == 2
        # --resume DIR alone takes the run's judge: sampled
        assert main(["evaluate", "--resume", str(run), "-q"]) == 0
    assert JudgeSpec.of_described({"model": "m"}).scoring == "sampled"


@pytest.mark.parametrize("command", ["calibrate", "align"])
def test_calibrate_and_align_refuse_a_misspelled_run_keyword(command: str) -> None:
    # before any data is read: a typo is not a silently ignored budget
    with pytest.raises(TypeError, match=rf"{command}\(\) got .* 'max_costs' .*'max_cost'"):
        getattr(rageval, command)("no-such-data.jsonl", {"human": "faithfulness"}, max_costs=1)
