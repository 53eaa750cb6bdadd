"""rageval align: the configuration of a judge metric chosen on training rows, and the
agreement before and after on held-out rows.

The judge is the project's test server with a scripted rule per kind of row, so that each
search step has a known effect: an answer people accept although it names the answer vaguely
(VAGUE) is rated right only under the lenient guidelines; one that needs thinking (TRICKY) only
when the judge reasons first; a wrong answer the judge likes (ODD) only until examples show
people's standard; a half-right answer people reject (HALF) is rated 2, which the default
threshold 0.5 counts as right and a higher threshold does not.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

import pytest

from calibration_helpers import FOLDERS, write_public_sets
from helpers import handle, judge_for, user_text, write_jsonl
from rageval import align
from rageval._config import load_settings, parse_params
from rageval.calibration import read_align
from rageval.cli import main
from rageval.log import toml_value
from rageval.runner import RunConfigError
from rageval.runner._align import stratified_split
from rageval.samples import InvalidDataError
from rageval.stats import cohen_kappa
from rageval.testing import FAKE_API_KEY, FakeOpenAI, RecordedRequest, Reply

#: each kind of row: people's label, and the judge's rating by default
KINDS = {"RIGHT": 1, "VAGUE": 1, "TRICKY": 1, "WRONG": 0, "HALF": 0, "ODD": 0}
_KIND = re.compile(r"\b(RIGHT|VAGUE|TRICKY|WRONG|HALF|ODD)\b")


def rating_of(kind: str, *, lenient: bool, examples: bool, reasons: bool) -> int:
    """The scripted judge's rating of a row of `kind` under what its prompt holds."""
    return {
        "RIGHT": 4,
        "WRONG": 0,
        "HALF": 2,
        "VAGUE": 4 if lenient else 0,
        "TRICKY": 4 if reasons else 0,
        "ODD": 0 if examples else 4,
    }[kind]


def scripted(req: RecordedRequest) -> Reply:
    text = user_text(req)
    kind = _KIND.findall(text)[-1]  # the sample's data comes last, after any example
    reasons = req.schema is not None and "reason" in req.schema["properties"]
    rating = rating_of(
        kind,
        lenient="less specifically" in text,
        examples="Examples people judged" in text,
        reasons=reasons,
    )
    return Reply.json(
        {"reason": "thought about it", "rating": rating} if reasons else {"rating": rating}
    )


def rows(per_kind: int = 8) -> list[dict[str, Any]]:
    return [
        {
            "id": f"{kind.lower()}-{i}",
            "user_input": f"question {i} about {kind}?",
            "response": f"answer {i} {kind}",
            "reference": f"reference {i}",
            "human": KINDS[kind],
        }
        for kind in KINDS
        for i in range(per_kind)
    ]


def kind_of(row_id: str) -> str:
    return row_id.split("-")[0].upper()


def expected_kappa(ids: list[str], cut: float, **prompt: bool) -> float:
    """Cohen's κ on rows `ids` of the judge's verdicts (both templates give the same rating, so
    the score is rating / 4) at threshold `cut`, worked from the script."""
    human = [float(KINDS[kind_of(i)]) for i in ids]
    verdicts = [float(rating_of(kind_of(i), **prompt) / 4 >= cut) for i in ids]
    kappa = cohen_kappa(human, verdicts, levels=[0.0, 1.0])
    assert kappa is not None
    return kappa


NOTHING = {"lenient": False, "examples": False, "reasons": False}


def test_align_keeps_what_makes_the_judge_agree_and_reports_held_out_kappa(tmp_path: Path) -> None:
    run = tmp_path / "align"
    with FakeOpenAI(scripted) as server:
        report = align(rows(), {"human": "answer_accuracy"}, judge_for(server), run_dir=run,
                       progress=False)  # fmt: skip
    (a,) = report.alignments
    assert (a.metric, a.label_column, a.kind, a.kappa_statistic) == (
        "answer_accuracy", "human", "binary", "cohen_kappa",
    )  # fmt: skip
    # the split: half of each label's 24 rows train, the rest is held out
    assert len(a.train_ids) == len(a.heldout_ids) == 24
    assert not set(a.train_ids) & set(a.heldout_ids)
    assert sum(KINDS[kind_of(i)] for i in a.train_ids) == 12
    # four examples, two per label, the rows the configured judge got wrong first
    assert len(a.example_ids) == 4 and set(a.example_ids) <= set(a.train_ids)
    assert {kind_of(i) for i in a.example_ids} <= {"VAGUE", "TRICKY", "ODD"}
    assert sum(KINDS[kind_of(i)] for i in a.example_ids) == 2
    # every step tried, the better variant kept at each, scored on the training rows that
    # are not examples, each at its best threshold
    selection = [i for i in a.train_ids if i not in a.example_ids]
    found = [(c.description, c.kept, c.threshold, c.kappa) for c in a.candidates]
    assert found == [
        ("as configured", False, 0.75, pytest.approx(expected_kappa(selection, 0.75, **NOTHING))),
        ("instructions: lenient", True, 0.75,
         pytest.approx(expected_kappa(selection, 0.75, **{**NOTHING, "lenient": True}))),
        ("instructions: strict", False, 0.75,
         pytest.approx(expected_kappa(selection, 0.75, **NOTHING))),
        ("examples: 4 from the training labels", True, 0.75,
         pytest.approx(expected_kappa(selection, 0.75, lenient=True, examples=True,
                                      reasons=False))),
        ("reasons: on", True, 0.75, 1.0),
    ]  # fmt: skip
    assert all(c.n_rows == 20 == c.n_pairs for c in a.candidates)
    # what was chosen: every parameter, and the configuration that differs from the defaults
    config = a.config
    assert set(config) == {"instructions", "examples", "reasons", "threshold"}
    assert "less specifically" in config["instructions"]
    assert config["reasons"] is True and config["threshold"] == 0.75
    assert [e["response"] for e in config["examples"]] == [
        f"answer {i.split('-')[1]} {kind_of(i)}" for i in a.example_ids
    ]
    assert a.chosen_params == {**config, "max_retries": 5, "value": "pass_probability"}
    # held out: the metric as configured (threshold 0.5) and as chosen, each with an interval
    heldout = a.heldout_ids
    before, after = a.before.statistics, a.after.statistics
    assert before["cohen_kappa"].value == pytest.approx(expected_kappa(heldout, 0.5, **NOTHING))
    assert after["cohen_kappa"].value == 1.0 and after["balanced_accuracy"].value == 1.0
    assert a.before.threshold == 0.5 and a.after.threshold == 0.75
    for stats in (before, after):
        for name in ("cohen_kappa", "balanced_accuracy", "auroc"):
            s = stats[name]
            assert s.low is not None and s.high is not None and s.value is not None
            assert s.low <= s.value <= s.high
    change = a.change["cohen_kappa"]
    assert change.value == pytest.approx(1.0 - expected_kappa(heldout, 0.5, **NOTHING))
    assert change.low is not None and change.low > 0  # the gain is beyond the noise
    assert set(a.change) == {"cohen_kappa", "balanced_accuracy", "auroc"}
    # written: align.json read back equal, the config file, both held-out runs
    assert read_align(run) == report
    assert (run / "answer_accuracy-before" / "manifest.json").exists()
    after_manifest = json.loads((run / "answer_accuracy-after" / "manifest.json").read_text())
    assert after_manifest["metrics"][0]["params"]["examples"] == config["examples"]
    table = report.table()
    assert "instructions: lenient" in table and "+" in table and "held-out rows" in table
    assert "note:" not in table
    # a choice that agrees less on the held-out rows is said so (align printed it as any other)
    lost = change.model_copy(update={"value": -0.25})
    worse = a.model_copy(update={"change": {**a.change, "cohen_kappa": lost}})
    table = report.model_copy(update={"alignments": [worse]}).table()
    assert (
        "note: the chosen configuration agrees less with the 24 held-out labels than the "
        "metric as configured (Cohen's κ -0.250): keep the metric as it is" in table
    )


def test_the_chosen_configuration_is_what_evaluate_and_the_config_file_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "align"
    with FakeOpenAI(scripted) as server:
        report = align(rows(), {"human": "answer_accuracy"}, judge_for(server), run_dir=run,
                       progress=False)  # fmt: skip
        (a,) = report.alignments
        # aligned.toml is a config file; the -p options say the same
        settings = load_settings(run / "aligned.toml")
        assert settings.params == {"answer_accuracy": a.config}
        options = shlex.split(" ".join(report.param_options()))
        assert parse_params(options[1::2]) == {"answer_accuracy": a.config}
        # evaluate with it: the manifest records the configuration, the values are verdicts
        monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
        data = tmp_path / "heldout.jsonl"
        write_jsonl(data, [r for r in rows() if r["id"] in a.heldout_ids])
        out = tmp_path / "evaluated"
        code = main(["evaluate", str(data), "-m", "answer_accuracy", "--llm", "test-model",
                     "--base-url", server.base_url, "--config", str(run / "aligned.toml"),
                     "-o", str(out), "-q"])  # fmt: skip
    assert code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["metrics"][0]["params"] == a.chosen_params
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    verdicts = {x["id"]: x["metrics"]["answer_accuracy"]["value"] for x in lines}
    assert verdicts == {i: float(KINDS[kind_of(i)]) for i in a.heldout_ids}  # κ 1 as reported


def test_the_threshold_alone_is_free_and_a_rerun_costs_nothing(tmp_path: Path) -> None:
    with FakeOpenAI(scripted) as server:
        judge = judge_for(server)
        first = align(rows(), {"human": "answer_accuracy"}, judge, search=["threshold"],
                      progress=False)  # fmt: skip
        sent = len(server.chat_requests)
        again = align(rows(), {"human": "answer_accuracy"}, judge, search=["threshold"],
                      progress=False)  # fmt: skip
        assert len(server.chat_requests) == sent
    (a,) = first.alignments
    assert [c.description for c in a.candidates] == ["as configured"] and a.example_ids == []
    assert a.config == {"threshold": 0.75}
    # the training rows and the held-out rows once each (2 templates); the held-out run as
    # chosen asks what the run as configured asked: answered from the cache
    assert sent == 2 * 48 and first.usage.requests == 2 * 48
    assert again.usage.requests == 0 and again.alignments[0].after == a.after


def test_without_the_threshold_step_the_default_threshold_stays(tmp_path: Path) -> None:
    with FakeOpenAI(scripted) as server:
        report = align(rows(), {"human": "answer_accuracy"}, judge_for(server),
                       search=["instructions"], threshold=0.625, progress=False)  # fmt: skip
    (a,) = report.alignments
    assert {c.threshold for c in a.candidates} == {0.625}
    assert a.before.threshold == 0.625 and a.config["threshold"] == 0.625


def test_examples_take_at_most_half_the_training_rows(tmp_path: Path) -> None:
    with FakeOpenAI(scripted) as server:
        report = align(rows(1), {"human": "answer_accuracy"}, judge_for(server), shots=4,
                       search=["examples"], progress=False)  # fmt: skip
    (a,) = report.alignments
    assert (len(a.train_ids), len(a.heldout_ids), len(a.example_ids)) == (4, 2, 2)
    assert [c.n_rows for c in a.candidates] == [2, 2]


def test_the_split_is_stratified_and_fixed_by_the_seed() -> None:
    labels: list[float | None] = [*[1.0] * 7, *[0.0] * 3, None, 2.0, 2.0]
    labelled = [i for i, v in enumerate(labels) if v is not None]
    train, held = stratified_split(labelled, labels, 0.5, seed=0)
    assert sorted(train + held) == labelled and not set(train) & set(held)
    # half of each label's rows, rounded half up: 4 of 7, 2 of 3, 1 of 2
    assert [sum(labels[i] == v for i in train) for v in (1.0, 0.0, 2.0)] == [4, 2, 1]
    assert stratified_split(labelled, labels, 0.5, seed=0) == (train, held)
    assert stratified_split(labelled, labels, 0.5, seed=1) != (train, held)
    assert train == sorted(train) and held == sorted(held)


def test_ordinal_labels_align_on_the_weighted_kappa(tmp_path: Path) -> None:
    grades = {"RIGHT": 2, "VAGUE": 2, "TRICKY": 2, "WRONG": 0, "HALF": 1, "ODD": 0}
    data = [{**r, "human": grades[kind_of(r["id"])]} for r in rows(6)]
    with FakeOpenAI(scripted) as server:
        report = align(data, {"human": "answer_accuracy"}, judge_for(server), shots=3,
                       search=["threshold", "examples"], progress=False)  # fmt: skip
    (a,) = report.alignments
    assert (a.kind, a.kappa_statistic) == ("ordinal", "weighted_kappa_quadratic")
    assert all(c.threshold is None for c in a.candidates) and "threshold" not in a.config
    # one example per grade, people's grade on the metric's 0..1 scale
    assert sorted(e["label"] for e in a.config["examples"]) == [0.0, 0.5, 1.0]
    assert set(a.change) == {"weighted_kappa_quadratic", "balanced_accuracy", "spearman"}
    assert a.after.kappa is not None and a.before.kappa is not None


def test_faithfulness_aligns_on_a_public_dataset_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    write_public_sets(tmp_path / "data", n=40)
    out = tmp_path / "run"
    with FakeOpenAI(handle) as server:
        code = main(
            ["align", str(tmp_path / "data" / FOLDERS["memerag"]), "--dataset", "memerag",
             "--limit", "24", "--shots", "2", "--llm", "synthetic", "--base-url",
             server.base_url, "--concurrency", "2", "-o", str(out)]
        )  # fmt: skip
    assert code == 0
    captured = capsys.readouterr()
    report = read_align(out)
    assert report is not None
    (a,) = report.alignments
    assert (a.metric, a.label_column) == ("faithfulness", "human_supported")
    assert len(a.train_ids) + len(a.heldout_ids) == 24 and len(a.example_ids) == 2
    assert all(set(e) == {"response", "retrieved_contexts", "label"}
               for e in a.chosen_params["examples"] or [])  # fmt: skip
    assert report.judge is not None and report.judge["max_concurrency"] == 2
    assert "memerag: 24 rows" in captured.out and "faithfulness vs human_supported" in captured.out
    assert f"{out / 'aligned.toml'}" in captured.out
    # a progress line per step, on stderr
    assert "rageval align: faithfulness: trying reasons: off" in captured.err
    assert tomllib.loads((out / "aligned.toml").read_text()).keys() == {"params"}


def test_the_command_line_aligns_a_file_with_a_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    data = tmp_path / "labelled.jsonl"
    write_jsonl(data, rows())
    out = tmp_path / "run"
    with FakeOpenAI(scripted) as server:
        args = ["align", str(data), "--labels", "human=answer_accuracy", "--llm", "test-model",
                "--base-url", server.base_url, "--limit", "36", "--seed", "3", "-q"]  # fmt: skip
        assert main([*args, "-o", str(out)]) == 0
        stdout = capsys.readouterr().out
        assert main([*args, "-o", str(out)]) == 2  # the directory holds an alignment
        assert "already holds an alignment" in capsys.readouterr().err
        assert main([*args, "-o", str(out), "--overwrite"]) == 0
    report = read_align(out)
    assert report is not None and report.seed == 3
    (a,) = report.alignments
    assert len(a.train_ids) + len(a.heldout_ids) == 36
    assert "-p 'answer_accuracy.instructions=" in stdout and "aligned.toml" in stdout
    assert "answer_accuracy vs human (binary labels)" in stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--labels", "human=token_f1"], "token_f1 cannot be aligned"),
        (["--labels", "human=answer_accuracies"], "unknown metric"),
        (["--labels", "grade=answer_accuracy"], "continuous"),
        (["--labels", "verdict=answer_accuracy"], "line 3, id 'vague-0', field 'verdict'"),
        (["--labels", "human=answer_accuracy", "human=faithfulness"], "retrieved_contexts"),
        (["--labels", "human=answer_accuracy", "--split", "1"], "between 0 and 1"),
        (["--labels", "human=answer_accuracy", "--search", "temperature"], "steps are"),
        (
            ["--labels", "human=answer_accuracy", "-p", "faithfulness.threshold=1"],
            "not a metric of this run",
        ),
        (
            ["--labels", "human=answer_accuracy", "-p", "answer_accuracy.threshold=2"],
            "threshold must be a number in",
        ),
        (["--labels", "human=answer_accuracy", "--limit", "1"], "at least 2 rows"),
    ],
)
def test_bad_input_is_a_usage_error_before_any_request(
    argv: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    data = [{**r, "grade": 0.3 * i, "verdict": "yes" if i != 2 else "maybe"}
            for i, r in enumerate(rows(2))]  # fmt: skip
    path = tmp_path / "d.jsonl"
    write_jsonl(path, data)
    with FakeOpenAI(scripted) as server:
        try:
            code = main(["align", str(path), "--llm", "m", "--base-url", server.base_url,
                         "-o", str(tmp_path / "run"), *argv])  # fmt: skip
        except SystemExit as e:  # argparse refused an option's value
            code = int(str(e.code))
        assert server.chat_requests == []
    assert code == 2
    assert message in capsys.readouterr().err


def test_the_python_api_refuses_what_it_cannot_align(tmp_path: Path) -> None:
    with FakeOpenAI(scripted) as server:
        judge = judge_for(server)
        with pytest.raises(RunConfigError, match="one label column per metric"):
            align(rows(), [("human", "answer_accuracy"), ("other", "answer_accuracy")], judge)
        with pytest.raises(RunConfigError, match="search steps are"):
            align(rows(), {"human": "answer_accuracy"}, judge, search=["prompt"])
        with pytest.raises(RunConfigError, match="cannot be split"):
            align(rows()[:1], {"human": "answer_accuracy"}, judge, progress=False)
        with pytest.raises(InvalidDataError, match="no row has the label column 'people'"):
            align(rows(), {"people": "answer_accuracy"}, judge)
        assert server.chat_requests == []
    with pytest.raises(RunConfigError, match="align needs a judge"):
        align(rows(), {"human": "answer_accuracy"})


@pytest.mark.parametrize(
    "value",
    ['a "quoted" line\nand a tab\t and \\ and é and \x7f', 0.1 + 0.2, 3, True, [1, "x"],
     [{"a b": "c", "n": 1.5}, {"k": [1, 2]}]],
)  # fmt: skip
def test_toml_values_read_back_as_written(value: Any) -> None:
    for multiline in (False, True):
        assert tomllib.loads(f"v = {toml_value(value, multiline=multiline)}")["v"] == value
