"""No silent loss, no tracebacks, numbers a careful user would not question (issue 22): what
the command line (and evaluate()) says when a metric is left out or measures nothing, when an
optional extra is missing, and how it prints intervals, estimates and gates."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import handle, make_judge, rows, run_cli, sample_id_of, write_jsonl
from rageval import evaluate
from rageval.cli import EXIT_UNMEASURED, main
from rageval.errors import MissingExtraError
from rageval.samples import InvalidDataError
from rageval.testing import FAKE_API_KEY, FakeOpenAI, Fault, GarbageJudge, RecordedRequest


@pytest.fixture(autouse=True)
def no_judge_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGEVAL_LLM", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)


# ---------------------------------------------------------------------- metrics left out


def converted(n: int, question: str = "other question") -> list[dict[str, Any]]:
    """Rows converted from the old names that kept both, `question` differing everywhere."""
    return [{**r, "question": question} for r in rows(n)]


def test_a_field_that_conflicts_on_every_row_is_an_input_error_not_a_lost_metric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    write_jsonl(data, converted(3))
    assert run_cli("evaluate", data, "-o", tmp_path / "run") == 2
    err = capsys.readouterr().err
    # every row, by line, with both names of the field; before any spend or any run directory
    for line in (1, 2, 3):
        assert f"line {line}, id 's00{line - 1}', field 'user_input'" in err
    assert "'user_input' and 'question' both name the field" in err
    assert not (tmp_path / "run").exists()
    # --skip-invalid: the metrics that read it run, their cells skipped with the reason
    assert run_cli("evaluate", data, "-o", tmp_path / "skip", "--skip-invalid", "-q") == 0
    result = json.loads((tmp_path / "skip" / "summary.json").read_text())
    assert result["metrics"]["answer_relevancy"]["n_skipped"] == 3
    assert result["metrics"]["token_f1"]["n_measured"] == 3


def test_when_every_field_conflicts_the_error_names_rows_and_fields() -> None:
    data = [
        {"question": "q", "user_input": "q2", "answer": "a", "response": "a2"},
        {"question": "q", "user_input": "q3", "answer": "a", "response": "a3"},
    ]
    with pytest.raises(InvalidDataError) as caught:
        evaluate(data, progress=False)
    text = str(caught.value)
    assert "no metric to run" not in text
    assert "row 0, field 'question'" in text and "row 1, field 'answer'" in text
    assert "'answer' and 'response' both name the field 'response'" in text


def test_metrics_left_out_of_the_default_selection_are_named_with_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    write_jsonl(data, [{"id": "a", "answer": "Paris", "ground_truth": "Paris is the capital"}])
    assert run_cli("evaluate", data, "-o", tmp_path / "run", "-q") == 0
    err = capsys.readouterr().err
    assert "left out as the data lacks what they need" in err
    assert "-m" in err and "--column-map" in err
    assert "faithfulness" in err and "no row has 'user_input' (or 'question')" in err
    assert "context_recall" in err and "'retrieved_contexts' (or 'contexts')" in err
    assert "token_f1" not in err  # it ran
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    left_out = manifest["metrics_left_out"]
    assert "faithfulness" in left_out and "token_f1" not in left_out
    assert "rubric_score" not in left_out  # opt-in: never part of the default selection
    # Python: on the result, and in the manifest
    result = evaluate(data, run_dir=tmp_path / "py", progress=False)
    assert result.metrics_left_out == left_out
    assert sorted(result.metrics) == ["rouge_l", "semantic_similarity", "token_f1"]
    # the dry run names them too
    assert run_cli("evaluate", data, "--dry-run") == 0
    assert "note: not run: faithfulness (no row has 'user_input' (or 'question')" in (
        capsys.readouterr().out
    )
    # all the fields (the retrieval metrics' document ids too): nothing left out, no manifest key
    ids = {"retrieved_context_ids": ["d1", "d2"], "reference_context_ids": ["d2"]}
    evaluate([{**row, **ids} for row in rows(1)], run_dir=tmp_path / "all", progress=False)
    assert "metrics_left_out" not in json.loads((tmp_path / "all" / "manifest.json").read_text())


def test_no_metric_to_run_lists_the_columns_and_how_to_map_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    write_jsonl(data, [{"query": "q", "output": "a", "gold_answer": "g"}])
    assert run_cli("evaluate", data, "-o", tmp_path / "run") == 2
    err = capsys.readouterr().err
    assert "no metric to run" in err
    assert "its columns: query, output, gold_answer" in err
    assert "--column-map YOURS=FIELD" in err and "column_map=" in err
    assert "'user_input' (or 'question')" in err  # what they could map to
    # the hint works
    code = run_cli(
        "evaluate", data, "-o", tmp_path / "ok", "-q", "--column-map",
        "output=response", "gold_answer=reference",
    )  # fmt: skip
    assert code == 0
    assert "no 'response'" not in err  # the test-set hint is for questions and references


def test_a_test_set_without_answers_is_told_to_answer_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A generated (or ragas) test set has questions and references, no response: "map your
    columns" alone sent a new user looking for a column they do not have."""
    data = tmp_path / "testset.jsonl"
    write_jsonl(data, [{"user_input": "q?", "reference": "r", "reference_contexts": ["c"],
                        "synthesizer_name": "single_hop"}])  # fmt: skip
    assert run_cli("evaluate", data, "-o", tmp_path / "run") == 2
    err = capsys.readouterr().err
    assert "no metric to run" in err
    assert "no 'response': a test set (rageval generate's, ragas' Testset) is scored once" in err


@pytest.mark.parametrize("skip", [[], ["--skip-invalid"]])
def test_a_file_where_no_line_parses_names_the_lines_not_its_columns(
    skip: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # (issue 42: "no metric to run ... (its columns: none ...)", the bad lines unnamed)
    data = tmp_path / "bad.jsonl"
    data.write_text('not json\n{"question": "q", \n')
    assert run_cli("evaluate", data, "-o", tmp_path / "run", "-q", *skip) == 2
    err = capsys.readouterr().err
    assert "line 1: line is not valid JSON" in err and "line 2: line is not valid JSON" in err
    assert "its columns" not in err


# ---------------------------------------------------------------------- metrics unmeasured


def test_a_judge_metric_that_measured_nothing_exits_6_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    write_jsonl(data, rows(3))
    with FakeOpenAI(GarbageJudge()) as server:
        common = ("evaluate", data, "-m", "faithfulness,token_f1", "--llm", "m",
                  "--base-url", server.base_url, "-q")  # fmt: skip
        assert run_cli(*common, "-o", tmp_path / "a") == EXIT_UNMEASURED == 7
        err = capsys.readouterr().err
        assert "measured nothing: faithfulness: no value in 3 cells; 3 not measured" in err
        assert "(invalid_reply)" in err and "--allow-unmeasured" in err
        assert "token_f1" not in err
        assert run_cli(*common, "-o", tmp_path / "b", "--allow-unmeasured") == 0
        assert "measured nothing: faithfulness" in capsys.readouterr().err  # still said
        # a gate that fails wins (exit 1); the unmeasured metric is still named
        assert run_cli(*common, "-o", tmp_path / "c", "--fail-under", "token_f1=1") == 1
        assert "measured nothing: faithfulness" in capsys.readouterr().err
        # Python returns the result: the metrics that measured nothing are named on it
        judge = make_judge(server)
        result = evaluate(rows(2), ["faithfulness", "token_f1"], llm=judge, progress=False)
    assert list(result.unmeasured_metrics) == ["faithfulness"]
    assert "invalid_reply" in result.unmeasured_metrics["faithfulness"]


def test_judge_metrics_skipped_for_want_of_a_judge_are_not_unmeasured(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The Quickstart's run: no judge, the judge metrics listed as skipped, exit 0."""
    data = tmp_path / "data.jsonl"
    write_jsonl(data, rows(2))
    assert run_cli("evaluate", data, "-o", tmp_path / "run", "-q") == 0
    assert "measured nothing" not in capsys.readouterr().err


def test_with_invalid_rows_skipped_judge_metrics_without_a_judge_are_not_unmeasured(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # (issue 42: exit 7, "measured nothing" for each judge metric: its cells were skipped for
    # want of a judge, and on the bad line as an invalid row)
    data = tmp_path / "data.jsonl"
    write_jsonl(data, rows(2))
    data.write_text(data.read_text() + "not json\n")
    assert run_cli("evaluate", data, "--skip-invalid", "-o", tmp_path / "run", "-q") == 0
    assert "measured nothing" not in capsys.readouterr().err


def test_the_exit_codes_are_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--help"], ["evaluate", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        out = capsys.readouterr().out
        assert "exit codes:" in out
        assert "7    a metric that ran measured no cell at all" in out
        assert "2    usage, input or configuration error; an optional extra" in out


# ---------------------------------------------------------------------- missing extras


def test_parquet_without_pyarrow_is_one_line_with_the_install_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import pandas as pd

    data = tmp_path / "x.parquet"
    pd.DataFrame(rows(2)).to_parquet(data)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as after `pip install .`
    for extra in ([], ["--dry-run"]):
        assert run_cli("evaluate", data, "-o", tmp_path / "run", *extra) == 2  # not 1: no gate
        err = capsys.readouterr().err
        assert err == (
            "rageval: reading Parquet needs pyarrow, which is not installed: "
            "pip install 'rageval[parquet]'\n"
        )
    assert not (tmp_path / "run").exists()
    with pytest.raises(MissingExtraError) as caught:
        evaluate(data, progress=False)
    assert isinstance(caught.value, ImportError) and caught.value.extra == "parquet"


def test_every_extra_is_checked_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    from rageval._extras import EXTRAS, require

    for extra, modules in EXTRAS.items():
        monkeypatch.setitem(sys.modules, modules[-1], None)
        with pytest.raises(MissingExtraError, match=rf"pip install 'rageval\[{extra}\]'$"):
            require(extra, "this")
        monkeypatch.undo()


def test_to_pandas_without_pandas_is_the_same_error(monkeypatch: pytest.MonkeyPatch) -> None:
    result = evaluate(rows(1), ["token_f1"], progress=False)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(MissingExtraError, match=r"^to_pandas\(\) needs pandas, which is not"):
        result.to_pandas()


# ---------------------------------------------------------------------- numbers


def test_a_ci_from_one_value_or_equal_values_is_undefined_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    write_jsonl(data, [{"id": "a", "response": "blue sky", "reference": "blue sea"}])
    assert run_cli("evaluate", data, "-m", "token_f1,rouge_l", "-o", tmp_path / "run") == 0
    out = capsys.readouterr().out
    row = next(ln for ln in out.splitlines() if ln.startswith("token_f1"))
    assert "undefined" in row and "[0.500, 0.500]" not in row
    assert "95% CI undefined: token_f1 (one measured value); rouge_l (one measured value)" in out
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())["metrics"]["token_f1"]
    assert (summary["mean"], summary["ci_low"], summary["ci_high"]) == (0.5, None, None)
    assert summary["ci_undefined"] == "one measured value"
    # values that are all equal: the bootstrap has nothing to resample either
    same = evaluate([{"response": "x", "reference": "x"}] * 3, ["token_f1"], progress=False)
    assert same.summary()["token_f1"].ci_undefined == "all 3 measured values are equal"


def test_a_gate_outside_the_metrics_range_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    write_jsonl(data, rows(1))
    for gate, words in (
        ("semantic_similarity=1.5", "semantic_similarity ranges over -1..1, so this gate could "
         "never pass"),
        ("token_f1=-0.1", "token_f1 ranges over 0..1, so this gate could never fail"),
        ("token_f1=80", "--fail-under token_f1=80: token_f1 ranges over 0..1"),
    ):  # fmt: skip
        code = run_cli("evaluate", data, "-m", "token_f1,semantic_similarity", "--fail-under",
                       gate, "-o", tmp_path / "run")  # fmt: skip
        assert code == 2
        assert words in capsys.readouterr().err
        assert not (tmp_path / "run").exists()
    code = run_cli("evaluate", data, "-m", "semantic_similarity", "-q", "--fail-under",
                   "semantic_similarity=-0.5", "-o", tmp_path / "ok")  # fmt: skip
    assert code == 0  # in range, if odd


def test_a_config_file_gate_outside_the_range_is_refused_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "rageval.toml").write_text("fail_under = { token_f1 = 2 }\n")
    data = tmp_path / "data.jsonl"
    write_jsonl(data, rows(1))
    monkeypatch.chdir(tmp_path)
    assert run_cli("evaluate", data, "-m", "token_f1", "-o", tmp_path / "run") == 2
    assert "the config file's fail_under token_f1=2" in capsys.readouterr().err


def test_a_metric_without_parameters_says_none(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("metrics", "knowledge_retention") == 0
    out = capsys.readouterr().out
    assert "parameters: none" in out and "parameters (defaults" not in out
    assert "range: 0..1" in out
    assert run_cli("metrics", "semantic_similarity") == 0
    out = capsys.readouterr().out
    assert "parameters (defaults; set one with -p NAME.PARAM=VALUE):" in out
    assert "threshold = null" in out and "range: -1..1" in out


def test_the_dry_runs_json_has_whole_counts_and_rounded_money(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from rageval import estimate
    from rageval.judge import Judge

    data = tmp_path / "data.jsonl"
    write_jsonl(data, rows(30))
    metrics = ["faithfulness", "context_recall"]
    with FakeOpenAI(handle) as server:
        found = estimate(
            data, metrics, Judge("gpt-4o-mini", base_url=server.base_url, api_key=FAKE_API_KEY)
        )
        assert found.requests.high != round(found.requests.high)  # 10% for re-asks
        code = run_cli("evaluate", data, "-m", ",".join(metrics), "--llm", "gpt-4o-mini",
                       "--base-url", server.base_url, "--dry-run", "--json")  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["requests"]["high"] == round(found.requests.high)
    for part in (out, *out["metrics"].values(), *out["shared"].values()):
        for figure in ("requests", "prompt_tokens", "completion_tokens"):
            assert all(isinstance(v, int) for v in part[figure].values()), (figure, part)
        for v in part["cost_usd"].values():
            assert v == float(f"{v:.6g}") and len(repr(v)) <= 12, v


# ---------------------------------------------------------------------- after a refusal


@pytest.mark.parametrize(
    ("status", "resumable"),
    [(401, True), (400, False)],  # a key is not recorded in the run; a request's settings are
)
def test_a_refused_run_says_what_finished_and_whether_a_resume_can_go_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], status: int, resumable: bool
) -> None:
    # the endpoint refuses for good any sample from s032 on: the first rows finish
    def refuse_late(request: RecordedRequest) -> Any:
        sid = sample_id_of(request)
        return Fault.status(status) if sid is not None and int(sid[1:]) >= 32 else handle(request)

    data, run = tmp_path / "data.jsonl", tmp_path / "run"
    write_jsonl(data, rows(40))
    with FakeOpenAI(refuse_late) as server:
        code = run_cli("evaluate", data, "-m", "faithfulness", "--llm", "m", "--base-url",
                       server.base_url, "--no-probe", "-o", run)  # fmt: skip
    assert code == 3
    said = capsys.readouterr().err
    finished = json.loads((run / "summary.json").read_text())["n_finished"]
    assert 0 < finished <= 32
    assert f"{finished} finished rows are kept in {run}" in said, said
    assert (f"continue with --resume {run}" in said) is resumable, said
    if not resumable:
        assert "--resume would be refused the same way" in said, said


def test_an_endpoint_without_a_batch_api_is_not_sent_back_to_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # resuming keeps batch mode: it would meet the same missing Batch API
    data, run = tmp_path / "data.jsonl", tmp_path / "run"
    write_jsonl(data, rows(2))
    with FakeOpenAI(handle, llama_cpp_slots=1) as server:
        args = ("-m", "faithfulness", "--llm", "m", "--base-url", server.base_url, "--batch")
        assert run_cli("evaluate", data, *args, "-o", run) == 3
        said = capsys.readouterr().err
        assert "has no Batch API" in said and f"--resume {run}" not in said, said
        assert "no row finished" in said and f"-o {run} --overwrite" in said, said
        # as it says: the same command without --batch, reusing the directory
        assert run_cli("evaluate", data, *args[:-1], "-o", run, "--overwrite", "-q") == 0
