"""Judge panels (evaluate(llm=Panel(...)), --llm repeated, [[judges]]) and the flip rate of
repeats: two scripted judges on two test servers, every number worked by hand."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers import grader, labelled_rows, make_judge, user_text, write_jsonl
from rageval import calibrate, estimate, evaluate
from rageval.cli import main
from rageval.judge import Judge
from rageval.log import read_calibration
from rageval.results import load_run
from rageval.runner import Panel, RunConfigError, RunDirError
from rageval.testing import FAKE_API_KEY, FakeOpenAI, RecordedRequest, Reply
from test_ppi_and_repeats import Sequenced, level_rows, repeated


def strict_grader(req: RecordedRequest) -> Reply:
    """The second judge: rates a GRADE4 response 4 and anything else 0."""
    return Reply.json({"rating": 4 if "GRADE4" in user_text(req) else 0})


# judge a (grader): values 1, .5, .5, 0; judge b (strict_grader): 1, 0, 0, 0.
# cells: their means 1, .25, .25, 0. Krippendorff's alpha (interval), by hand: within-unit
# Σ_{i≠j}(vi−vj)²/(m−1) = 0, .5, .5, 0 -> 1; the 8 pooled values have Σv = 3, Σv² = 2.5:
# 2·(8·2.5 − 3²) = 22 ordered pairs' squared differences; alpha = 1 − 7·1/22 = 15/22.
GRADES = [4, 2, 2, 0]
ALPHA = 15 / 22


def rows() -> list[dict[str, Any]]:
    return labelled_rows(GRADES, [None] * 4)


def test_a_panel_scores_each_judge_cell_with_every_judge(tmp_path: Path) -> None:
    with FakeOpenAI(grader) as a, FakeOpenAI(strict_grader) as b:
        panel = Panel({"a": make_judge(a, "model-a"), "b": make_judge(b, "model-b")})
        result = evaluate(
            rows(),
            ["answer_accuracy", "token_f1"],
            panel,
            run_dir=tmp_path / "run",
            progress=False,
        )
        # each judge rates each row with answer_accuracy's two templates; token_f1 asks none
        assert (len(a.chat_requests), len(b.chat_requests)) == (8, 8)
    assert result["answer_accuracy"] == pytest.approx([1, 0.25, 0.25, 0])
    cell = result.sample("r1").cells["answer_accuracy"]
    assert cell.panel is not None and list(cell.panel) == ["a", "b"]
    assert (cell.panel["a"].value, cell.panel["b"].value) == (0.5, 0.0)
    assert result.sample("r1").cells["token_f1"].panel is None  # scored once
    summary = result.summary()
    panel_summary = summary["answer_accuracy"].panel
    assert panel_summary is not None and summary["token_f1"].panel is None
    assert panel_summary.alpha == pytest.approx(ALPHA)
    assert panel_summary.judges == ["a", "b"] and panel_summary.n_units == 4
    assert panel_summary.judge_means == pytest.approx({"a": 0.5, "b": 0.25})
    assert panel_summary.alpha_ci_low is not None and panel_summary.alpha_ci_high is not None
    assert f"answer_accuracy: alpha {ALPHA:.3f}" in str(result)
    frame = result.to_pandas()
    assert list(frame["answer_accuracy[b]"]) == [1.0, 0.0, 0.0, 0.0]
    # the log: the manifest names the judges, each line keeps their votes, the summary alpha
    run = tmp_path / "run"
    manifest = json.loads((run / "manifest.json").read_text())
    assert [(p["name"], p["judge"]["model"]) for p in manifest["panel"]] == [
        ("a", "model-a"),
        ("b", "model-b"),
    ]
    lines = [json.loads(text) for text in (run / "results.jsonl").read_text().splitlines()]
    line = next(line for line in lines if line["id"] == "r1")
    assert line["metrics"]["answer_accuracy"]["panel"]["b"] == {"value": 0.0, "status": "ok"}
    on_disk = json.loads((run / "summary.json").read_text())
    assert on_disk["metrics"]["answer_accuracy"]["panel"]["alpha"] == pytest.approx(ALPHA)
    assert load_run(run).summary()["answer_accuracy"].panel == panel_summary


def test_a_judge_that_measures_nothing_leaves_the_others_value(tmp_path: Path) -> None:
    def broken(req: RecordedRequest) -> Reply:
        return Reply.json({"rating": 3})  # off the scale: never measured

    with FakeOpenAI(grader) as a, FakeOpenAI(broken) as b:
        panel = Panel({"a": make_judge(a, "model-a"), "b": make_judge(b, "model-b")})
        result = evaluate(rows(), ["answer_accuracy"], panel, progress=False)
    assert result["answer_accuracy"] == pytest.approx([1, 0.5, 0.5, 0])
    cell = result.sample("r0").cells["answer_accuracy"]
    assert cell.panel is not None and cell.panel["b"].status == "not_measured"
    assert cell.panel["b"].cause_kind is not None
    summary = result.summary()["answer_accuracy"].panel
    assert summary is not None and summary.alpha is None and summary.n_units == 0


def test_a_second_run_pays_nothing_twice(tmp_path: Path) -> None:
    with FakeOpenAI(grader) as a, FakeOpenAI(strict_grader) as b:

        def panel() -> Panel:
            return Panel(
                {
                    "a": make_judge(a, "model-a", cache=tmp_path / "cache"),
                    "b": make_judge(b, "model-b", cache=tmp_path / "cache"),
                }
            )

        first = evaluate(rows(), ["answer_accuracy"], panel(), progress=False)
        again = evaluate(rows(), ["answer_accuracy"], panel(), progress=False)
        assert (len(a.chat_requests), len(b.chat_requests)) == (8, 8)
    assert again["answer_accuracy"] == first["answer_accuracy"]
    assert again.summary()["answer_accuracy"].panel == first.summary()["answer_accuracy"].panel


def test_resume_takes_the_panel_from_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    run = tmp_path / "run"
    with FakeOpenAI(grader) as a, FakeOpenAI(strict_grader) as b:

        def judge(server: FakeOpenAI, model: str) -> Judge:  # its key from the environment
            return Judge(model, base_url=server.base_url, cache=False)

        panel = Panel({"a": judge(a, "model-a"), "b": judge(b, "model-b")})
        evaluate(rows(), ["answer_accuracy"], panel, run_dir=run, progress=False)
        # as if the run had been stopped before its last row
        lines = (run / "results.jsonl").read_text().splitlines(keepends=True)
        (run / "results.jsonl").write_text("".join(lines[:3]))
        (run / "summary.json").unlink()
        resumed = evaluate(None, run_dir=run, resume=True, progress=False)
        # only the last row is scored again, by both judges
        assert (len(a.chat_requests), len(b.chat_requests)) == (10, 10)
    assert resumed["answer_accuracy"] == pytest.approx([1, 0.25, 0.25, 0])
    summary = resumed.summary()["answer_accuracy"].panel
    assert summary is not None and summary.alpha == pytest.approx(ALPHA)


def test_a_panel_needs_two_named_judges() -> None:
    with FakeOpenAI(grader) as a:
        judge = make_judge(a, "model-a")
        with pytest.raises(RunConfigError, match="two judges or more"):
            Panel([judge])
        with pytest.raises(RunConfigError, match="named twice"):
            Panel([judge, make_judge(a, "model-a")])
        named = Panel([judge, make_judge(a, "model-b")])
        assert named.names == (f"model-a@{a.base_url}", f"model-b@{a.base_url}")


def test_the_flip_rate_of_repeats(tmp_path: Path) -> None:
    # HIGH cells score 1, .5, 1: always a pass (>= .5); LOW cells 0, .5, 0: fail, pass,
    # fail -- a flip. Two of the four cells flip.
    result = repeated(["HIGH", "HIGH", "LOW", "LOW"], run_dir=tmp_path / "run")
    flips = result.summary()["answer_accuracy"].flips
    assert flips is not None and (flips.rate, flips.n_cells, flips.n_flipped) == (0.5, 4, 2)
    assert flips.threshold == 0.5
    assert "answer_accuracy: 0.500 (2 of 4; pass: >= 0.5)" in str(result)
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert on_disk["metrics"]["answer_accuracy"]["flips"]["n_flipped"] == 2


def test_the_flip_rate_reads_the_metrics_threshold(tmp_path: Path) -> None:
    # with threshold .75 the metric's values are 1/0 verdicts: HIGH 1, 0, 1 (flips), LOW
    # 0, 0, 0 (does not)
    result = repeated(["HIGH", "LOW"], metric_params={"answer_accuracy": {"threshold": 0.75}})
    flips = result.summary()["answer_accuracy"].flips
    assert flips is not None and (flips.rate, flips.threshold) == (0.5, 0.75)


def test_a_panel_with_repeats_counts_each_judges_flips() -> None:
    # both judges follow the sequence: per judge, HIGH never flips and LOW flips: 2 of 4
    with FakeOpenAI(Sequenced()) as a, FakeOpenAI(Sequenced()) as b:
        panel = Panel({"a": make_judge(a, "model-a"), "b": make_judge(b, "model-b")})
        result = evaluate(
            level_rows(["HIGH", "LOW"]), ["answer_accuracy"], panel, repeats=3, progress=False
        )
    assert result["answer_accuracy"] == pytest.approx([5 / 6, 1 / 6])
    cell = result.sample("r0").cells["answer_accuracy"]
    assert cell.repeats is None and cell.panel is not None
    assert cell.panel["a"].repeats is not None and cell.panel["a"].repeats.values == [1, 0.5, 1]
    flips = result.summary()["answer_accuracy"].flips
    assert flips is not None and (flips.n_cells, flips.n_flipped) == (4, 2)


def test_the_dry_run_counts_every_judges_requests() -> None:
    with FakeOpenAI(grader) as a, FakeOpenAI(strict_grader) as b:
        metrics = ["answer_accuracy", "token_f1"]
        one = estimate(rows(), metrics, make_judge(a, "model-a"))
        both = estimate(
            rows(), metrics, Panel({"a": make_judge(a, "model-a"), "b": make_judge(b, "model-b")})
        )
        assert not a.chat_requests and not b.chat_requests
    single, panel = one.metrics["answer_accuracy"], both.metrics["answer_accuracy"]
    assert single.requests.estimate == 8  # 4 rows x 2 templates
    assert panel.requests.estimate == 16 and panel.cells == single.cells == 4
    assert both.metrics["token_f1"].requests.estimate == 0


def test_calibrate_gives_each_judges_agreement_and_the_panels(tmp_path: Path) -> None:
    # labels 1, 1, 1, 0; verdicts at .5: judge a 1, 1, 1, 0 (accuracy 1); judge b 1, 0, 0, 0
    # (.5); the panel's means 1, .25, .25, 0: 1, 0, 0, 0 (.5)
    data = labelled_rows(GRADES, [1, 1, 1, 0])
    with FakeOpenAI(grader) as a, FakeOpenAI(strict_grader) as b:
        panel = Panel({"a": make_judge(a, "model-a"), "b": make_judge(b, "model-b")})
        report = calibrate(
            data, {"human": "answer_accuracy"}, panel, run_dir=tmp_path / "run", progress=False
        )
    (mean,) = report.agreements
    assert mean.judge is None and mean.statistics["accuracy"].value == 0.5
    by_judge = {x.judge: x.statistics["accuracy"].value for x in report.judge_agreements}
    assert by_judge == {"a": 1.0, "b": 0.5}
    table = report.table()
    assert "answer_accuracy (the panel's mean) vs human" in table
    assert "answer_accuracy by a vs human" in table
    assert read_calibration(tmp_path / "run") == report


def test_the_command_line_makes_a_panel_of_repeated_llm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    data = tmp_path / "data.jsonl"
    write_jsonl(data, rows())
    with FakeOpenAI(grader) as a, FakeOpenAI(strict_grader) as b:
        code = main(
            [
                "evaluate", str(data), "-m", "answer_accuracy", "-o", str(tmp_path / "run"),
                "--llm", "model-a", "--base-url", a.base_url,
                "--llm", "model-b", "--base-url", b.base_url, "--no-cache", "-q",
            ]
        )  # fmt: skip
        out = capsys.readouterr().out
        assert code == 0, out
        assert (len(a.chat_requests), len(b.chat_requests)) == (8, 8)
        assert f"answer_accuracy: alpha {ALPHA:.3f}" in out
        # three --llm and two --base-url pair no way
        code = main(
            [
                "evaluate", str(data), "-m", "answer_accuracy", "--llm", "x", "--llm", "y",
                "--llm", "z", "--base-url", a.base_url, "--base-url", b.base_url,
            ]
        )  # fmt: skip
        assert code == 2
        assert "one --base-url for all of them or one for each" in capsys.readouterr().err


def test_the_config_file_makes_a_panel_of_its_judges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    monkeypatch.delenv("RAGEVAL_LLM", raising=False)
    data = tmp_path / "data.jsonl"
    write_jsonl(data, rows())
    with FakeOpenAI(grader) as a, FakeOpenAI(strict_grader) as b:
        config = tmp_path / "rageval.toml"
        config.write_text(
            "[judge]\ncache = false\n"
            f'[[judges]]\nname = "lenient"\nmodel = "model-a"\nbase_url = "{a.base_url}"\n'
            f'[[judges]]\nmodel = "model-b"\nbase_url = "{b.base_url}"\n',
            encoding="utf-8",
        )
        code = main(
            [
                "evaluate", str(data), "-m", "answer_accuracy", "-o", str(tmp_path / "run"),
                "--config", str(config), "-q",
            ]
        )  # fmt: skip
        assert code == 0, capsys.readouterr()
        assert (len(a.chat_requests), len(b.chat_requests)) == (8, 8)
        second = f"model-b@{b.base_url}"
    summary = load_run(tmp_path / "run").summary()["answer_accuracy"].panel
    assert summary is not None and summary.judges == ["lenient", second]
    config.write_text('[[judges]]\nbase_url = "http://127.0.0.1:1/v1"\n', encoding="utf-8")
    assert main(["evaluate", str(data), "--config", str(config)]) == 2
    assert "[[judges]] number 1: give its model" in capsys.readouterr().err


def test_resume_refuses_another_panel(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with FakeOpenAI(grader) as a, FakeOpenAI(strict_grader) as b:
        first = Panel({"a": make_judge(a, "model-a"), "b": make_judge(b, "model-b")})
        evaluate(rows(), ["answer_accuracy"], first, run_dir=run, progress=False)
        other = Panel({"a": make_judge(a, "model-a"), "c": make_judge(b, "model-c")})
        with pytest.raises(RunDirError, match=r"the judge panel differs: .*b \(model-b\)"):
            evaluate(rows(), ["answer_accuracy"], other, run_dir=run, resume=True, progress=False)
