"""rageval.calibrate(): labelled rows through the normal evaluation, then their agreement.

The judge is the project's OpenAI-compatible test server: a rule-based handler whose ratings
are known, so every statistic has a hand-computed expected value; and the synthetic judge for
the public datasets end to end (its numbers mean nothing: only that every one is produced).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibration_helpers import FOLDERS, PUBLIC_DATA, write_public_sets
from helpers import (
    BINARY_GRADES,
    BINARY_LABELS,
    grader,
    handle,
    judge_for,
    labelled_rows,
    write_jsonl,
)
from rageval import calibrate
from rageval.calibration import read_calibration
from rageval.calibration.datasets import DATASETS
from rageval.cli import main
from rageval.log import read_manifest
from rageval.runner import RunConfigError
from rageval.samples import InvalidDataError
from rageval.testing import FAKE_API_KEY, FakeOpenAI


def test_binary_agreement_matches_the_hand_worked_numbers(tmp_path: Path) -> None:
    with FakeOpenAI(grader) as server:
        report = calibrate(
            labelled_rows(BINARY_GRADES, BINARY_LABELS),
            labels={"human": "answer_accuracy"},
            llm=judge_for(server),
            run_dir=tmp_path / "run",
            progress=False,
        )
        requests = len(server.chat_requests)
    (a,) = report.agreements
    assert (a.kind, a.metric, a.label_column, a.n_pairs, a.n_without_judge) == (
        "binary", "answer_accuracy", "human", 10, 0,
    )  # fmt: skip
    assert a.confusion is not None and a.confusion.matrix == [[3, 1], [2, 4]]
    stats = a.statistics
    assert stats["cohen_kappa"].value == pytest.approx(0.4)
    assert stats["balanced_accuracy"].value == pytest.approx((3 / 4 + 4 / 6) / 2)
    assert stats["accuracy"].value == pytest.approx(0.7)
    assert stats["auroc"].value == pytest.approx(17 / 24)
    assert a.kappa_statistic == "cohen_kappa" and a.threshold == 0.5
    for s in stats.values():
        assert s.low is not None and s.value is not None and s.high is not None
        assert s.low <= s.value <= s.high
    # the cost of the run: two templates per row, every request counted
    assert requests == 20 and report.usage.requests == 20 and a.usage.requests == 20
    assert report.usage.total_tokens > 0
    # written next to the run, read back equal, and drawn in the report
    on_disk = read_calibration(tmp_path / "run")
    assert on_disk == report
    html = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert '"calibration":{' in html and '"cohen_kappa"' in html


def test_a_second_calibration_costs_no_request(tmp_path: Path) -> None:
    rows = labelled_rows(BINARY_GRADES, BINARY_LABELS)
    with FakeOpenAI(grader) as server:
        first = calibrate(rows, {"human": "answer_accuracy"}, judge_for(server), progress=False)
        sent = len(server.chat_requests)
        again = calibrate(rows, {"human": "answer_accuracy"}, judge_for(server), progress=False)
        assert len(server.chat_requests) == sent
    assert again.usage.requests == 0 and again.usage.cache_hits >= 10
    assert again.agreements[0].statistics == first.agreements[0].statistics


# the ordinal case: labels 0/1/2, the judge's ratings 0/2/4 → scores 0, .5, 1 → levels 0/1/2.
# Pairs (human, judge): (0,0) (0,1) (1,1) (1,2) (2,0) (2,2) (2,2) (0,0) (1,1) (2,2);
# table [[2, 1, 0], [0, 2, 1], [1, 0, 3]], the hand-worked table of test_stats_agreement:
# quadratic κ = 1 − .6/1.38, Cohen's κ: observed .7, chance .3·.3 + .3·.3 + .4·.4 = .34.
ORDINAL_HUMAN = [0, 0, 1, 1, 2, 2, 2, 0, 1, 2]
ORDINAL_GRADES: list[int | str] = [0, 2, 2, 4, 0, 4, 4, 0, 2, 4]


def test_ordinal_agreement_uses_the_weighted_kappa(tmp_path: Path) -> None:
    with FakeOpenAI(grader) as server:
        report = calibrate(
            labelled_rows(ORDINAL_GRADES, ORDINAL_HUMAN),
            {"human": "answer_accuracy"},
            judge_for(server),
            progress=False,
            min_kappa=0.5,
        )
    (a,) = report.agreements
    assert a.kind == "ordinal" and a.levels == [0.0, 1.0, 2.0]
    assert a.confusion is not None and a.confusion.matrix == [[2, 1, 0], [0, 2, 1], [1, 0, 3]]
    assert a.kappa_statistic == "weighted_kappa_quadratic"
    assert a.statistics["weighted_kappa_quadratic"].value == pytest.approx(1 - 0.6 / 1.38)
    assert a.statistics["cohen_kappa"].value == pytest.approx((0.7 - 0.34) / (1 - 0.34))
    assert "auroc" not in a.statistics and "spearman" in a.statistics
    # the gate reads the weighted κ (0.565): it passes 0.5
    assert report.min_kappa == 0.5 and report.gate_failures == []


def test_labels_are_checked_before_any_request(tmp_path: Path) -> None:
    rows = labelled_rows(BINARY_GRADES, BINARY_LABELS)
    rows[3]["human"] = "dunno"
    with FakeOpenAI(grader) as server:
        with pytest.raises(InvalidDataError, match=r"row 3, id 'r3', field 'human'.*'dunno'"):
            calibrate(rows, {"human": "answer_accuracy"}, judge_for(server), progress=False)
        with pytest.raises(InvalidDataError, match="no row has the label column 'verdict'"):
            calibrate(rows, {"verdict": "answer_accuracy"}, judge_for(server), progress=False)
        with pytest.raises(RunConfigError, match=r"unknown metric .answer_accuracies."):
            calibrate(
                labelled_rows(BINARY_GRADES, BINARY_LABELS),
                {"human": "answer_accuracies"},
                judge_for(server),
                progress=False,
            )
        with pytest.raises(RunConfigError, match="continuous"):
            calibrate(
                labelled_rows([4, 0, 2], [0.5, 1.5, 2.25]),
                {"human": "answer_accuracy"},
                judge_for(server),
                min_kappa=0.4,
                progress=False,
            )
        assert server.chat_requests == []


def test_rows_the_judge_could_not_score_are_counted_not_paired(tmp_path: Path) -> None:
    grades: list[int | str] = [*BINARY_GRADES, "BROKEN", "BROKEN"]
    with FakeOpenAI(grader) as server:
        report = calibrate(
            labelled_rows(grades, [*BINARY_LABELS, "yes", "no"]),
            {"human": "answer_accuracy"},
            judge_for(server),
            run_dir=tmp_path / "run",
            progress=False,
        )
    (a,) = report.agreements
    assert (a.n_labelled, a.n_pairs, a.n_without_judge) == (12, 10, 2)
    assert a.statistics["cohen_kappa"].value == pytest.approx(0.4)  # the same 10 pairs
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["metrics"]["answer_accuracy"]["n_not_measured"] == 2


def test_one_label_column_against_two_metrics(tmp_path: Path) -> None:
    rows = labelled_rows(BINARY_GRADES, BINARY_LABELS)
    with FakeOpenAI(grader) as server:
        report = calibrate(
            rows,
            {"human": ["answer_accuracy", "token_f1"]},
            judge_for(server),
            progress=False,
        )
    assert [a.metric for a in report.agreements] == ["answer_accuracy", "token_f1"]
    assert report.agreements[1].usage.requests == 0  # token_f1 asks no judge


# ---------------------------------------------------------------------- the public datasets


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real public files when this machine has them, else synthetic ones in their layout."""
    if PUBLIC_DATA.is_dir():
        return PUBLIC_DATA
    root = tmp_path_factory.mktemp("public-data")
    write_public_sets(root, n=60)  # at least 40 rows kept in each
    return root


@pytest.mark.parametrize("name", list(DATASETS))
def test_calibrate_each_public_dataset_end_to_end(
    name: str, data_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    out = tmp_path / "run"
    with FakeOpenAI(handle) as server:
        code = main(
            [
                "calibrate", str(data_root / FOLDERS[name]), "--dataset", name, "--limit", "40",
                "--llm", "synthetic", "--base-url", server.base_url, "-o", str(out), "-q",
            ]
        )  # fmt: skip
    assert code == 0
    report = read_calibration(out)
    assert report is not None
    (a,) = report.agreements
    assert a.n_pairs == 40 and a.n_without_judge == 0
    expected = (
        {"spearman", "pearson"}
        if a.kind == "continuous"
        else {"cohen_kappa", "balanced_accuracy", "accuracy", "auroc", "spearman"}
    )
    assert set(a.statistics) == expected
    for stat_name, s in a.statistics.items():
        assert s.value is not None and s.low is not None and s.high is not None, (
            name,
            stat_name,
            s,
        )
    assert (a.confusion is None) == (a.kind == "continuous")
    assert (out / "report.html").exists()


# ---------------------------------------------------------------------- the command line


def _calibrate_cli(server: FakeOpenAI, data: Path, out: Path, *extra: str) -> int:
    return main(
        ["calibrate", str(data), "--llm", "m", "--base-url", server.base_url, "-o", str(out),
         "-q", *extra]
    )  # fmt: skip


def test_the_kappa_gate_has_its_own_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    data = tmp_path / "labelled.jsonl"
    write_jsonl(data, labelled_rows(BINARY_GRADES, BINARY_LABELS))  # κ = 0.4
    labels = ("--labels", "human=answer_accuracy")
    with FakeOpenAI(grader) as server:
        assert _calibrate_cli(server, data, tmp_path / "a", *labels, "--min-kappa", "0.6") == 4
        out, err = capsys.readouterr()
        assert "kappa gate failed: answer_accuracy vs human: Cohen's κ 0.400 < 0.6" in err
        assert "Cohen's κ          0.400" in out and "calibration run: 20 requests" in out
        saved = read_calibration(tmp_path / "a")
        assert saved is not None and saved.min_kappa == 0.6 and len(saved.gate_failures) == 1
        assert _calibrate_cli(server, data, tmp_path / "b", *labels, "--min-kappa", "0.3") == 0
        assert "kappa gate passed" in capsys.readouterr().out
        assert _calibrate_cli(server, data, tmp_path / "c", *labels) == 0


def test_the_config_file_s_on_invalid_applies_to_calibrate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`calibrate` reads the run options of the config file as `evaluate` does (it used to
    ignore its on_invalid and probe): a row without a response is skipped, not an error."""
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rageval.toml").write_text('on_invalid = "skip"\n')
    rows = labelled_rows(BINARY_GRADES, BINARY_LABELS)
    del rows[0]["response"]
    data = tmp_path / "labelled.jsonl"
    write_jsonl(data, rows)
    with FakeOpenAI(grader) as server:
        assert (
            _calibrate_cli(server, data, tmp_path / "a", "--labels", "human=answer_accuracy") == 0
        )
    saved = read_calibration(tmp_path / "a")
    assert saved is not None and saved.agreements[0].n_pairs == 9


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "name the label columns"),
        (("--labels", "human"), "--labels must look like NAME=VALUE"),
        (("--labels", "verdict=answer_accuracy"), "no row has the label column 'verdict'"),
        (("--labels", "human=answer_accuracy", "--limit", "5"), "use it with --dataset"),
        (("--labels", "human=answer_accuracy", "--label-kind", "human=nominal"), "the kind is"),
        (("--labels", "human=answer_accuracy", "--min-kappa", "2"), "between -1 and 1"),
        (("--dataset", "squad"), "unknown dataset 'squad'"),
        (
            ("--labels", "human=answer_accuracy", "-p", "faithfulness.reasons=false"),
            "faithfulness is not a metric of this run",
        ),
        (
            ("--labels", "human=answer_accuracy", "-p", "answer_accuracy.reasons"),
            "METRIC.PARAM=VALUE",
        ),
    ],
)
def test_command_line_mistakes_exit_2_before_any_request(
    args: tuple[str, ...],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    data = tmp_path / "labelled.jsonl"
    write_jsonl(data, labelled_rows(BINARY_GRADES, BINARY_LABELS))
    with FakeOpenAI(grader) as server:
        assert _calibrate_cli(server, data, tmp_path / "run", *args) == 2
        assert server.chat_requests == []
    assert message in capsys.readouterr().err


def test_the_command_line_calibrates_the_metric_as_configured(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (before: -p did not exist and the config file's [params.METRIC] and column map were
    # ignored without a word: the default metric was calibrated instead)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    data = tmp_path / "labelled.jsonl"
    rows = labelled_rows(BINARY_GRADES, BINARY_LABELS)
    write_jsonl(data, [{"query": r.pop("user_input"), **r} for r in rows])
    config = tmp_path / "rageval.toml"
    config.write_text(
        '[column_map]\nquery = "user_input"\n\n'
        "[params.answer_accuracy]\nmax_retries = 1\nreasons = true\n"
    )
    with FakeOpenAI(grader) as server:
        assert _calibrate_cli(server, data, tmp_path / "run", "--labels", "human=answer_accuracy",
                              "--config", str(config), "-p", "answer_accuracy.reasons=false") == 0  # fmt: skip
    (spec,) = read_manifest(tmp_path / "run").metrics
    assert (spec.params["max_retries"], spec.params["reasons"]) == (1, False)  # -p over the file
    saved = read_calibration(tmp_path / "run")
    assert saved is not None and saved.agreements[0].n_pairs == len(BINARY_LABELS)
    assert saved.agreements[0].statistics["cohen_kappa"].value == pytest.approx(0.4)


def test_a_metric_object_with_its_own_settings_is_used_and_two_are_refused(tmp_path: Path) -> None:
    from rageval.metrics import AnswerAccuracy

    rows = labelled_rows(BINARY_GRADES, BINARY_LABELS)
    for row in rows:
        row["other"] = row["human"]
    mine = AnswerAccuracy(max_retries=1)
    with FakeOpenAI(grader) as server:
        report = calibrate(
            rows,
            [("human", "answer_accuracy"), ("other", mine)],
            judge_for(server),
            run_dir=tmp_path / "run",
            progress=False,
        )
        with pytest.raises(RunConfigError, match="two different 'answer_accuracy' metric objects"):
            calibrate(rows, [("human", AnswerAccuracy()), ("other", mine)], judge_for(server))
    specs = read_manifest(tmp_path / "run").metrics
    assert [(m.name, m.params["max_retries"]) for m in specs] == [("answer_accuracy", 1)]
    assert [a.label_column for a in report.agreements] == ["human", "other"]


def test_calibrate_with_the_probe_follows_a_llama_cpp_server_s_slots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rageval.judge import Judge

    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)  # the probe reads the key from there
    with FakeOpenAI(grader, latency=0.05, llama_cpp_slots=1) as server:
        calibrate(
            labelled_rows(BINARY_GRADES, BINARY_LABELS),
            labels={"human": "answer_accuracy"},
            llm=Judge("m", base_url=server.base_url, cache=False),
            run_dir=tmp_path / "run",
            progress=False,
            probe=True,
        )
        assert server.max_in_flight == 1
    (followed,) = read_manifest(tmp_path / "run").servers.values()
    assert (followed["slots"], followed["max_concurrency"]) == (1, 1)
