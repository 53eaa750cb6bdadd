"""The `rageval` command line: evaluate, gates, exit codes, compare, metrics, cache, report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import handle, rows, run_cli, run_cli_in_child, write_jsonl
from rageval.results import load_run
from rageval.testing import FAKE_API_KEY, FakeOpenAI
from synthetic_data import make_conversation

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "rag_sample.jsonl"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    with FakeOpenAI(handle) as s:
        yield s


def test_help_and_version_work_without_heavy_imports() -> None:
    code = (
        "import sys; from rageval.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('openai', 'numpy', 'pydantic', 'pandas') if m in sys.modules]\n"
        "print('HEAVY', heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "evaluate" in out.stdout and "HEAVY []" in out.stdout
    version = subprocess.run(
        [sys.executable, "-m", "rageval", "--version"], capture_output=True, text=True, check=True
    )
    assert version.stdout.startswith("rageval ")


def test_every_argument_of_every_command_says_what_it_is() -> None:
    """`rageval COMMAND --help` explains each argument: report's DIR, compare's DIR_A/DIR_B and
    cache's action were listed bare."""
    import argparse

    from rageval.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    bare = [
        f"{name} {action.dest}"
        for name, command in commands.choices.items()
        for action in command._actions
        if not action.help and not isinstance(action, argparse._HelpAction)
    ]
    assert bare == []


def test_evaluate_the_example_without_a_judge(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAGEVAL_LLM", raising=False)
    code = run_cli("evaluate", EXAMPLE, "-o", tmp_path / "run")
    out, err = capsys.readouterr()
    assert code == 0
    table = out.split("\n\n")[0]
    assert "token_f1" in table and "rouge_l" in table and "faithfulness" in table
    # the default selection: the nine judge metrics of the data's fields, 8 rows each
    assert "no_judge: 72 cells" in out and "faithfulness (8)" in out
    assert "e.g. needs an LLM judge" in out
    assert out.count("RAGEVAL_LLM") == 1  # the hint once, not once per metric
    assert "RAGEVAL_LLM" in out and "OPENAI_BASE_URL" in out
    assert (tmp_path / "run" / "results.jsonl").exists()
    assert "\r" not in err  # no progress line when stderr is not a terminal


def test_judge_metrics_asked_for_without_a_judge_are_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CI that names judge metrics must not pass having measured nothing."""
    monkeypatch.delenv("RAGEVAL_LLM", raising=False)
    code = run_cli(
        "evaluate", EXAMPLE, "-o", tmp_path / "run", "-m", "token_f1,rouge_l", "-m", "faithfulness"
    )
    _, err = capsys.readouterr()
    assert code == 2
    assert "faithfulness needs an LLM judge and none is configured" in err
    assert "RAGEVAL_LLM" in err and "--llm" in err and "token_f1" in err
    assert not (tmp_path / "run").exists()
    # the offline metrics alone run as before
    assert run_cli("evaluate", EXAMPLE, "-o", tmp_path / "ok", "-m", "token_f1,rouge_l") == 0


def test_evaluate_with_a_judge_and_gates(
    server: FakeOpenAI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "data.jsonl"
    write_jsonl(data, rows(4))
    base: list[str | Path] = [
        "evaluate",
        data,
        "--llm",
        "test-model",
        "--base-url",
        server.base_url,
        "-q",
    ]
    code = run_cli(
        *base, "-m", "faithfulness", "-o", tmp_path / "a", "--fail-under", "faithfulness=0.5"
    )
    out, _ = capsys.readouterr()
    assert code == 0, out
    assert "all 1 gate(s) passed" in out
    assert len(server.chat_requests) == 8  # statements + verdicts per sample

    code = run_cli(
        *base,
        "-m",
        "faithfulness,token_f1",
        "-o",
        tmp_path / "b",
        "--fail-under",
        "token_f1=0.99",
        "faithfulness=0.4",
    )
    _, err = capsys.readouterr()
    assert code == 1
    assert "gate failed: token_f1: mean" in err and "faithfulness" not in err


def test_a_gate_on_a_metric_without_measured_values_fails(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAGEVAL_LLM", raising=False)
    # the default selection without a judge: faithfulness is in it, every cell skipped
    code = run_cli("evaluate", EXAMPLE, "-o", tmp_path / "r", "--fail-under", "faithfulness=0.1")
    _, err = capsys.readouterr()
    assert code == 1
    assert "gate failed: faithfulness: no measured value" in err


def _second_row_without_reference(tmp_path: Path) -> Path:
    """Three rows, the second without its reference (context_recall's input), as a file."""
    data = rows(3)
    del data[1]["reference"]
    path = tmp_path / "data.jsonl"
    write_jsonl(path, data)
    return path


def _context_recall(server: FakeOpenAI, data: Path, out: Path, *extra: str) -> int:
    """``rageval evaluate DATA -m context_recall`` judged by `server`, written to `out`."""
    return run_cli(
        "evaluate", data, "-m", "context_recall", "--llm", "m", "--base-url", server.base_url,
        "-o", out, *extra,
    )  # fmt: skip


def test_input_errors_exit_2_with_a_message_and_no_request(
    server: FakeOpenAI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = _second_row_without_reference(tmp_path)
    code = _context_recall(server, path, tmp_path / "r")
    _, err = capsys.readouterr()
    assert code == 2
    assert "line 2, id 's001', field 'reference', metric 'context_recall'" in err
    assert "Traceback" not in err
    assert server.requests == []

    assert run_cli("evaluate", path, "-m", "no_such_metric", "-o", tmp_path / "x") == 2
    assert "unknown metric 'no_such_metric'" in capsys.readouterr().err
    assert run_cli("evaluate", tmp_path / "missing.jsonl", "-o", tmp_path / "y") == 2
    assert "not found" in capsys.readouterr().err
    assert run_cli("evaluate", path, "--llm", "m", "--base-url", "ftp://nowhere") == 2
    assert "base URL" in capsys.readouterr().err
    assert run_cli("evaluate", path, "--embeddings", "cohere") == 2
    assert "embeddings must be" in capsys.readouterr().err
    assert run_cli("evaluate") == 2
    assert "DATA is required" in capsys.readouterr().err


def test_skip_invalid_runs_the_rest(
    server: FakeOpenAI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = _context_recall(
        server, _second_row_without_reference(tmp_path), tmp_path / "r", "--skip-invalid"
    )
    out, _ = capsys.readouterr()
    assert code == 0
    assert "missing_field: 1 cell" in out and "context_recall (1)" in out
    assert "e.g. field 'reference'" in out


def test_a_refused_key_exits_3_at_the_probe_before_any_judge_request(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    path = tmp_path / "data.jsonl"
    write_jsonl(path, rows(5))
    args: list[str | Path] = ["evaluate", path, "-m", "answer_accuracy", "--llm", "m", "--no-cache"]
    with FakeOpenAI(handle, api_key=FAKE_API_KEY) as srv:
        code = run_cli(*args, "--base-url", srv.base_url, "-o", tmp_path / "r")
        _, err = capsys.readouterr()
        assert code == 3
        assert "refused the API key from OPENAI_API_KEY (401)" in err
        assert [r.path for r in srv.requests] == ["/v1/models"]
        assert not (tmp_path / "r").exists()  # nothing started, nothing to resume
        assert "sk-wrong" not in err and "Traceback" not in err

        # without the probe, the run's own first requests meet the refusal
        code = run_cli(*args, "--base-url", srv.base_url, "-o", tmp_path / "r2", "--no-probe")
    _, err = capsys.readouterr()
    assert code == 3
    assert "401" in err or "key" in err.lower()
    assert "--resume" in err and "Traceback" not in err
    assert "sk-wrong" not in err


def _token_f1_run(tmp_path: Path, name: str, responses: list[str]) -> Path:
    data = [
        {"id": f"q{i}", "response": r, "reference": f"the reference answer number {i} is here"}
        for i, r in enumerate(responses)
    ]
    path = tmp_path / f"{name}.jsonl"
    write_jsonl(path, data)
    assert run_cli("evaluate", path, "-m", "token_f1", "-o", tmp_path / name, "-q") == 0
    return tmp_path / name


def test_compare_finds_a_planted_difference_and_none_between_identical_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    n = 30
    weak = [f"the answer {i} is something else entirely" for i in range(n)]
    strong = [f"the reference answer {i} is here" for i in range(n)]
    a = _token_f1_run(tmp_path, "a", weak)
    b = _token_f1_run(tmp_path, "b", strong)
    a2 = _token_f1_run(tmp_path, "a2", weak)
    capsys.readouterr()

    assert run_cli("compare", a, b) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("token_f1"))
    fields = line.split()
    diff, p_value = float(fields[4]), float(fields[-1])
    assert diff > 0.2 and p_value < 0.001
    assert "samples that moved most" in out

    assert run_cli("compare", a, a2) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("token_f1"))
    assert "+0.0000" in line and line.split()[-1] == "1.0000"
    assert "moved most" not in out


def _semantic_similarity_run(tmp_path: Path, name: str, data: list[dict[str, str]]) -> Path:
    path = tmp_path / f"{name}.jsonl"
    write_jsonl(path, data)
    args = ("evaluate", path, "-m", "semantic_similarity", "-o", tmp_path / name, "-q")
    assert run_cli(*args) == 0
    return tmp_path / name


def test_compare_of_two_runs_with_the_same_settings_says_no_difference(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # the local model's vectors: run B embeds the same samples among others (longer texts,
    # another order), so its texts are computed in other batches
    data = [
        {"id": f"q{i}", "response": f"the bridge number {i} opened in {1900 + i}",
         "reference": f"bridge {i} was opened to traffic in the year {1900 + i}"}
        for i in range(16)
    ]  # fmt: skip
    others = [
        {"id": f"x{i}", "response": "a much longer answer about harbours " * (i + 3),
         "reference": "a reference about canals and towers " * (i + 5)}
        for i in range(12)
    ]  # fmt: skip
    a = _semantic_similarity_run(tmp_path, "a", data)
    b = _semantic_similarity_run(tmp_path, "b", [*others[:6], *reversed(data), *others[6:]])
    capsys.readouterr()

    assert run_cli("compare", a, b) == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("semantic_similarity"))
    assert line.split()[1:] == ["16", *line.split()[2:3] * 2, "+0.0000", "[+0.0000,", "+0.0000]",
                                "1.0000"]  # fmt: skip
    assert "no difference in every metric" in out
    assert "moved most" not in out


def test_compare_pairs_conversation_runs_by_conversation(
    server: FakeOpenAI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Run B fixes the reference tool calls of the conversations run A scores below 1: its
    tool_call_f1 rises on exactly those, its turn_faithfulness (same turns) moves nowhere."""
    n = 12
    data = [make_conversation(i) for i in range(n)]
    fixed = [{**c, "reference_tool_calls": [call for t in c["turns"]
                                             for call in t.get("tool_calls", ())]}
             for c in data]  # fmt: skip
    runs = {}
    for name, rows_of_run in (("a", data), ("b", fixed)):
        path = tmp_path / f"{name}.jsonl"
        write_jsonl(path, rows_of_run)
        assert run_cli("evaluate", path, "-m", "tool_call_f1", "-m", "turn_faithfulness",
                       "--llm", "test-model", "--base-url", server.base_url,
                       "-o", tmp_path / name, "-q") == 0  # fmt: skip
        runs[name] = load_run(tmp_path / name)
    below = [i for i, v in enumerate(runs["a"]["tool_call_f1"]) if v is not None and v < 1]
    assert 0 < len(below) < n and runs["b"]["tool_call_f1"] == [1.0] * n
    capsys.readouterr()

    assert run_cli("compare", tmp_path / "a", tmp_path / "b") == 0
    out = capsys.readouterr().out
    assert f"{n} samples matched by id" in out
    f1 = next(ln for ln in out.splitlines() if ln.startswith("tool_call_f1")).split()
    mean_a = sum(v for v in runs["a"]["tool_call_f1"] if v is not None) / n
    assert f1[1] == str(n) and float(f1[2]) == pytest.approx(mean_a, abs=5e-5)
    assert float(f1[4]) == pytest.approx(1 - mean_a, abs=5e-5)
    faithfulness = next(ln for ln in out.splitlines() if ln.startswith("turn_faithfulness"))
    assert faithfulness.split()[1] == str(n) and faithfulness.split()[4] == "+0.0000"
    moved = out.split("tool_call_f1: samples that moved most")[1].split("\n\n")[0]
    movers = {ln.split(":")[0].strip() for ln in moved.strip().splitlines()}
    assert movers and movers <= {data[i]["id"] for i in below}


def test_an_unknown_option_is_refused_with_its_commands_usage_and_the_close_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """argparse refused an option a command does not take with the top-level usage
    (`rageval [-h] [--version] COMMAND ...`), which names none of the command's options."""
    with pytest.raises(SystemExit) as stop:
        run_cli("evaluate", EXAMPLE, "--labels-fle", "labels.jsonl")
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: rageval evaluate ")
    assert "unrecognized arguments: --labels-fle labels.jsonl (did you mean --labels-file?)" in err
    with pytest.raises(SystemExit):
        run_cli("align", EXAMPLE, "--dry-run")
    err = capsys.readouterr().err
    assert err.startswith("usage: rageval align ") and "did you mean" not in err


def test_a_test_set_directory_or_a_damaged_manifest_is_refused_without_a_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`rageval report` and `rageval label` on rageval generate's -o DIR (its manifest is of
    another kind) raised RunLogError with a traceback; compare said 'created_at: Field
    required'."""
    testset = tmp_path / "testset"
    testset.mkdir()
    (testset / "manifest.json").write_text('{"kind": "rageval-generate", "request": {"n": 2}}')
    said = f"{testset} holds a test set that rageval generate wrote (testset.jsonl; its report"
    commands: list[list[str | Path]] = [["report", testset], ["label", testset],
                                         ["compare", testset, testset]]  # fmt: skip
    for command in commands:
        assert run_cli(*command) == 2
        assert said in capsys.readouterr().err
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    (damaged / "manifest.json").write_text("{}")
    assert run_cli("report", damaged) == 2
    assert "manifest.json: rageval_version: Field required" in capsys.readouterr().err


def test_a_parameter_the_metric_does_not_take_names_the_ones_it_does(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """-p token_f1.smoothing=1 said "Metric.__init__() got an unexpected keyword argument"."""
    path = tmp_path / "data.jsonl"
    write_jsonl(path, [{"id": "q1", "response": "an answer", "reference": "an answer"}])
    assert run_cli("evaluate", path, "-m", "token_f1", "-p", "token_f1.smoothing=1", "-q") == 2
    err = capsys.readouterr().err
    assert "token_f1: no parameter 'smoothing'; its parameters: tokenizer (each" in err
    assert "__init__" not in err


def test_compare_names_the_metrics_only_one_run_scored(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A metric of one run only is not compared, and the output says so (it used to vanish);
    two runs with no metric in common are refused naming each run's own."""
    path = tmp_path / "data.jsonl"
    write_jsonl(path, [{"id": f"q{i}", "response": f"answer {i}", "reference": "answer"}
                       for i in range(3)])  # fmt: skip
    for name, metrics in (("a", "token_f1,rouge_l"), ("b", "token_f1"), ("c", "rouge_l")):
        assert run_cli("evaluate", path, "-m", metrics, "-o", tmp_path / name, "-q") == 0
    capsys.readouterr()

    assert run_cli("compare", tmp_path / "a", tmp_path / "b") == 0
    out = capsys.readouterr().out
    assert "not compared, scored by one run only: rouge_l only in A; none only in B" in out
    assert run_cli("compare", tmp_path / "b", tmp_path / "a") == 0
    assert "none only in A; rouge_l only in B" in capsys.readouterr().out
    assert run_cli("compare", tmp_path / "a", tmp_path / "a") == 0
    assert "not compared" not in capsys.readouterr().out

    assert run_cli("compare", tmp_path / "b", tmp_path / "c") == 2
    err = capsys.readouterr().err
    assert "no metric in common (token_f1 only in A; rouge_l only in B)" in err


def test_compare_of_runs_with_no_sample_in_common_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a = _token_f1_run(tmp_path, "a", ["an answer", "another answer"])
    data = [
        {"id": f"other-{i}", "response": "an answer", "reference": "an answer"} for i in range(2)
    ]
    path = tmp_path / "b.jsonl"
    write_jsonl(path, data)
    assert run_cli("evaluate", path, "-m", "token_f1", "-o", tmp_path / "b", "-q") == 0
    capsys.readouterr()

    assert run_cli("compare", a, tmp_path / "b") == 2
    captured = capsys.readouterr()
    assert "no sample id in common" in captured.err
    assert "q0, q1" in captured.err and "other-0, other-1" in captured.err
    assert captured.out == ""


def test_metrics_lists_fields_needs_and_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("metrics") == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("faithfulness"))
    assert "user_input, response, retrieved_contexts" in line and "yes" in line
    line = next(ln for ln in out.splitlines() if ln.startswith("answer_accuracy"))
    assert "max_retries=5" in line
    # a long default is cut to one short line (every line fits a wide terminal)
    line = next(ln for ln in out.splitlines() if ln.startswith("answer_relevance "))
    assert 'response_model="rageval.metrics.answer_relevance:' in line and line.endswith("...")
    assert max(len(ln) for ln in out.splitlines()) < 160
    # the names with a cutoff are listed too (the table has only the bare names)
    assert "with a cutoff K (ndcg_at_10 is ndcg with k = 10): f1_at_K, hit_rate_at_K" in out

    assert run_cli("metrics", "answer_relevance") == 0
    out = capsys.readouterr().out
    assert 'response_model = "rageval.metrics.answer_relevance:RelevanceScore"' in out
    assert "required fields: user_input, response" in out
    assert run_cli("metrics", "rubric") == 2
    assert "did you mean rubric_score" in capsys.readouterr().err


def test_cache_stats_and_clear(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run_cli("cache", "stats", "--cache-dir", tmp_path / "c") == 0
    out = capsys.readouterr().out
    assert "completions: 0 entries" in out
    assert run_cli("cache", "clear", "--cache-dir", tmp_path / "c") == 0
    assert "cleared" in capsys.readouterr().out


def test_report_rebuilds_the_html(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    run = _token_f1_run(tmp_path, "r", ["an answer", "another answer"])
    (run / "report.html").unlink()
    capsys.readouterr()
    assert run_cli("report", run) == 0
    assert (run / "report.html").exists()
    assert run_cli("report", tmp_path / "nothing") == 2


def test_resume_on_the_command_line(
    server: FakeOpenAI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "data.jsonl"
    write_jsonl(path, rows(3))
    args: list[str | Path] = [
        "evaluate",
        path,
        "-m",
        "faithfulness",
        "--llm",
        "m",
        "--base-url",
        server.base_url,
        "-q",
    ]
    assert run_cli(*args, "-o", tmp_path / "r") == 0
    server.reset()
    assert run_cli(*args, "--resume", tmp_path / "r") == 0
    assert server.chat_requests == []
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["metrics"]["faithfulness"]["n_measured"] == 3
    capsys.readouterr()
    assert run_cli(*args, "-o", tmp_path / "other", "--resume", tmp_path / "r") == 2


def test_a_judge_that_always_answers_garbage_fits_on_a_screen(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # every judged cell fails the same way: the summary groups them by kind, with counts and
    # a few examples, instead of a line per cause (on main: no kinds, one block per cause)
    from rageval.testing import GarbageJudge

    path = tmp_path / "data.jsonl"
    write_jsonl(path, rows(40))
    metrics = "faithfulness,answer_correctness,context_precision,context_recall,answer_accuracy"
    with FakeOpenAI(GarbageJudge()) as server:
        code = run_cli(
            "evaluate", path, "-m", metrics, "-m", "context_relevance,response_groundedness",
            "-m", "answer_relevancy", "--llm", "m", "--base-url", server.base_url,
            "-o", tmp_path / "run", "--embeddings", "local",
        )  # fmt: skip
        requests = len(server.chat_requests)
    out, err = capsys.readouterr()
    assert code == 7  # every metric measured nothing: said, and not a pass
    assert err.count("measured nothing: ") == 8
    lines = out.splitlines()
    assert len(lines) <= 40, out  # a screenful
    assert "invalid_reply: 320 cells" in out
    assert out.count("e.g.") <= 2
    # each call stops when its problem comes a third time: the ask and two re-asks, no more
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    for metric in summary["metrics"].values():
        assert metric["n_not_measured"] == 40
        assert [(g["kind"], g["count"]) for g in metric["failures"]] == [("invalid_reply", 40)]
    # per sample: the shared extraction (faithfulness, answer_correctness), context_precision
    # and context_recall: ask + 2 re-asks each; three rating metrics: 2 templates x 3; and
    # answer_relevancy: one n=3 request, then two re-asks per generation, until the first
    # generation fails: the re-asks of the others still unanswered then are cancelled
    assert 40 * (3 * 3 + 3 * 6 + (1 + 2)) <= requests <= 40 * (3 * 3 + 3 * 6 + (1 + 6))


# ---------------------------------------------------------------------- rough edges


def test_options_taking_several_values_never_eat_data(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "mine.jsonl"
    write_jsonl(data, [{"id": "a", "answer_text": "the sky is blue", "gold": "the sky is blue"}])
    code = run_cli(
        "evaluate", "--column-map", "answer_text=response", "gold=reference", data,
        "-m", "token_f1", "-o", tmp_path / "a", "-q",
    )  # fmt: skip
    assert code == 0, capsys.readouterr().err
    code = run_cli(
        "evaluate", "--fail-under", "token_f1=0.5", data, "--column-map",
        "answer_text=response", "gold=reference", "-m", "token_f1", "-o", tmp_path / "b", "-q",
    )  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "all 1 gate(s) passed" in out
    code = run_cli("evaluate", data, "--column-map", "a=response", "extra", "-o", tmp_path / "c")
    assert code == 2 and "unexpected argument(s): extra" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["calibrate", "--labels", "human=faithfulness", "FILE"],
        ["calibrate", "--label-kind", "human=binary", "FILE", "--labels", "human=faithfulness"],
        ["evaluate", "--human-labels", "human=faithfulness", "FILE"],
        ["evaluate", "--column-map", "q=user_input", "a=response", "FILE", "-m", "token_f1"],
    ],
)
def test_no_option_eats_data_in_any_command(argv: list[str]) -> None:
    from rageval.cli import build_parser
    from rageval.cli._shared import positional_data

    assert positional_data(build_parser().parse_args(argv)) == "FILE"


def test_a_wrong_or_reversed_column_map_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "mine.jsonl"
    write_jsonl(data, [{"query": "q?", "response": "r", "reference": "r"}])
    base: list[str | Path] = ["evaluate", data, "-m", "token_f1", "-o", tmp_path / "r"]
    assert run_cli(*base, "--column-map", "user_input=query") == 2
    assert "looks reversed" in capsys.readouterr().err
    assert run_cli(*base, "--column-map", "qeury=user_input") == 2
    assert "the data has no column 'qeury'" in capsys.readouterr().err
    assert run_cli(*base, "--column-map", "query=question_text") == 2
    assert "'question_text' is not a rageval field" in capsys.readouterr().err


def test_small_input_mistakes_get_clear_messages(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert run_cli("evaluate", EXAMPLE, "-m", "", "-o", tmp_path / "r") == 2
    assert "-m/--metric needs a metric name" in capsys.readouterr().err
    assert run_cli("evaluate", tmp_path, "-m", "token_f1") == 2
    assert "is a directory: DATA must be a file" in capsys.readouterr().err


def test_data_from_stdin_is_kept_with_the_run(tmp_path: Path) -> None:
    lines = EXAMPLE.read_bytes()
    done = run_cli_in_child(
        "evaluate", "-", "-m", "token_f1", "-o", tmp_path / "run", "-q", stdin=lines
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "run" / "input.jsonl").read_bytes() == lines
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["data"]["path"] == str((tmp_path / "run" / "input.jsonl").resolve())
    rows_in = [json.loads(x) for x in lines.splitlines() if x.strip()]
    as_json = json.dumps(rows_in).encode()  # a JSON list, told apart by its first byte
    done = run_cli_in_child(
        "evaluate", "-", "-m", "token_f1", "-o", tmp_path / "json", "-q", stdin=as_json
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "json" / "input.json").exists()
    # bad data on stdin leaves nothing behind
    done = run_cli_in_child(
        "evaluate", "-", "-m", "token_f1", "-o", tmp_path / "bad", stdin=b"{not json}\n"
    )
    assert done.returncode == 2 and "line 1: line is not valid JSON" in done.stderr
    assert not (tmp_path / "bad").exists()
    # the error names stdin and the format guessed (it named bad/input.csv, a file of its own)
    done = run_cli_in_child("evaluate", "-", "-o", tmp_path / "bad", stdin=b"a;b\n1;2\n")
    assert done.returncode == 2, done.stderr
    assert "invalid input in stdin (read as csv; --format FORMAT if it is another)" in done.stderr
    assert "input.csv" not in done.stderr and not (tmp_path / "bad").exists()


def test_a_pandas_written_csv_is_accepted(tmp_path: Path) -> None:
    import pandas as pd

    frame = pd.DataFrame([json.loads(x) for x in EXAMPLE.read_text().splitlines() if x.strip()])
    path = tmp_path / "frame.csv"
    frame.to_csv(path)  # index and all: contexts written as Python list reprs
    done = run_cli_in_child("evaluate", path, "-m", "token_f1", "-o", tmp_path / "run", "-q")
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["metrics"]["token_f1"]["n_measured"] == len(frame)
    loaded = [json.loads(x) for x in (tmp_path / "run" / "results.jsonl").read_text().splitlines()]
    by_id = {r["id"]: r["inputs"]["retrieved_contexts"] for r in loaded}
    assert by_id == dict(zip(frame["id"], frame["retrieved_contexts"], strict=True))


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # nothing listens there now


def test_an_unreachable_endpoint_exits_3_after_one_probe(tmp_path: Path) -> None:
    """Nothing listening: one connection attempt, exit 3 (the run's own retries would have
    taken half a minute). A server that accepts and hangs up is no better: one attempt too."""
    import socket
    import threading

    write_jsonl(tmp_path / "d.jsonl", rows(3))
    base: list[str | Path] = ["evaluate", tmp_path / "d.jsonl", "-m", "faithfulness", "--llm", "m"]
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    done = run_cli_in_child(*base, "--base-url", url, "-o", tmp_path / "run")
    err = done.stderr
    assert done.returncode == 3, err
    assert f"could not reach the judge endpoint {url}" in err and "Traceback" not in err
    assert not (tmp_path / "run").exists()

    accepted = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()

        def hang_up() -> None:
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                accepted.append(1)
                conn.close()

        threading.Thread(target=hang_up, daemon=True).start()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        done = run_cli_in_child(*base, "--base-url", url, "-o", tmp_path / "run2")
    err = done.stderr
    assert done.returncode == 3, err
    assert f"could not reach the judge endpoint {url}" in err
    assert len(accepted) == 1


def test_no_key_and_no_base_url_is_a_configuration_error_before_any_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_jsonl(tmp_path / "d.jsonl", rows(2))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("RAGEVAL_BASE_URL", raising=False)
    # the child runs under the network guard: a request to OpenAI would be an error of its own
    done = run_cli_in_child(
        "evaluate", tmp_path / "d.jsonl", "-m", "faithfulness", "--llm", "gpt-4o-mini"
    )
    err = done.stderr
    assert done.returncode == 2, err
    assert "without an API key: set OPENAI_API_KEY" in err and "--base-url" in err
    assert "network guard" not in err and "Traceback" not in err
    # the dry run sends nothing, so it needs no key: the estimate, and a note that the run
    # itself would be refused (a new user prices a run before getting a key)
    done = run_cli_in_child(
        "evaluate", tmp_path / "d.jsonl", "-m", "faithfulness", "--llm", "gpt-4o-mini",
        "--dry-run",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "note: the run itself would be refused: the judge 'gpt-4o-mini'" in done.stdout
    assert "set OPENAI_API_KEY" in done.stdout


def test_a_judge_built_in_python_without_a_key_is_the_same_configuration_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # (issue 42: llm_factory("gpt-4o-mini") with no key probed api.openai.com with a
    # placeholder key and said "could not reach")
    from rageval import estimate, evaluate, llm_factory
    from rageval.errors import RunConfigError
    from rageval.metrics import Faithfulness

    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RAGEVAL_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    judge = llm_factory("gpt-4o-mini")
    with pytest.raises(RunConfigError, match="without an API key: set OPENAI_API_KEY"):
        evaluate(rows(1), ["faithfulness"], llm=judge, progress=False)
    with pytest.raises(RunConfigError, match="without an API key"):  # a metric's own judge
        evaluate(rows(1), [Faithfulness(llm=judge)], progress=False)
    found = estimate(rows(1), [Faithfulness(llm=judge)])  # sends nothing: a note instead
    assert any(n.startswith("the run itself would be refused: ") for n in found.notes)
    # a Claude model named without its provider: where it would go, and how to name it
    with pytest.raises(RunConfigError, match="asked at Anthropic's API as anthropic:claude-x"):
        evaluate(rows(1), ["faithfulness"], llm=llm_factory("claude-x"), progress=False)


def test_a_reader_that_goes_away_is_no_failure(tmp_path: Path) -> None:
    code = "import sys\nfrom rageval.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "evaluate", str(EXAMPLE), "-m", "token_f1", "-q",
         "-o", str(tmp_path / "run"), "--fail-under", "token_f1=0.1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    proc.stdout.close()  # like `| head -0`: every write to stdout meets a closed pipe
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err and b"BrokenPipe" not in err
    assert (tmp_path / "run" / "summary.json").exists()

    # through a real shell pipeline, as in the issue
    done = subprocess.run(
        ["bash", "-c", f'{sys.executable} -c "$0" "$@" | head -1; exit "${{PIPESTATUS[0]}}"',
         code, "evaluate", str(EXAMPLE), "-m", "token_f1", "-q", "-o", str(tmp_path / "r2")],
        capture_output=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode != 1 and b"Traceback" not in done.stderr
    assert done.stdout.decode().startswith("metric")


def _empty_and_partial_runs(tmp_path: Path) -> tuple[Path, Path, Path]:
    full = _token_f1_run(tmp_path, "full", [f"answer {i}" for i in range(4)])
    runs = []
    for name, keep in (("empty", 0), ("partial", 2)):
        run = _token_f1_run(tmp_path, name, [f"answer {i}" for i in range(4)])
        log = run / "results.jsonl"
        log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:keep]))
        (run / "summary.json").unlink()
        runs.append(run)
    return full, runs[0], runs[1]


def test_compare_refuses_empty_and_unfinished_runs(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    full, empty, partial = _empty_and_partial_runs(tmp_path)
    capsys.readouterr()
    assert run_cli("compare", full, empty) == 2
    assert "has no finished rows" in capsys.readouterr().err
    assert run_cli("compare", partial, full) == 2
    err = capsys.readouterr().err
    assert "is unfinished (2 of 4 rows)" in err and f"--resume {partial}" in err
    assert run_cli("compare", full, full) == 0


def test_resume_alone_takes_everything_from_the_run(
    server: FakeOpenAI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "mine.jsonl"
    write_jsonl(data, [{**r, "query": r.pop("user_input")} for r in rows(4)])
    run = tmp_path / "r"
    assert run_cli(
        "evaluate", data, "-m", "faithfulness,token_f1", "--llm", "test-model",
        "--base-url", server.base_url, "--column-map", "query=user_input", "-o", run, "-q",
        "--no-cache",
    ) == 0  # fmt: skip
    finished = run / "results.jsonl"
    finished.write_bytes(b"".join(finished.read_bytes().splitlines(keepends=True)[:1]))
    (run / "summary.json").unlink()
    server.reset()
    capsys.readouterr()

    assert run_cli("evaluate", "--resume", run) == 0, capsys.readouterr().err
    summary = json.loads((run / "summary.json").read_text())
    assert set(summary["metrics"]) == {"faithfulness", "token_f1"}
    assert summary["metrics"]["faithfulness"]["n_measured"] == 4
    assert {r.path for r in server.requests} == {"/v1/models", "/v1/chat/completions"}
    assert len(server.chat_requests) == 3 * 2  # statements + verdicts of the 3 rows left

    # a moved data file: a clear error, and where to pass it
    data.rename(tmp_path / "moved.jsonl")
    finished.write_bytes(b"".join(finished.read_bytes().splitlines(keepends=True)[:1]))
    assert run_cli("evaluate", "--resume", run, "-q") == 2
    err = capsys.readouterr().err
    assert f"its data file {data.resolve()} is gone" in err
    assert f"rageval evaluate DATA --resume {run}" in err
    assert run_cli("evaluate", tmp_path / "moved.jsonl", "--resume", run, "-q") == 0


def test_retries_and_reasks_are_shown_in_the_summary(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fast_backoff: None,
) -> None:
    from rageval.testing import Fault, FaultPlan

    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    write_jsonl(tmp_path / "d.jsonl", rows(6))
    faults = FaultPlan(0.3, [Fault.status(503)], seed=3)
    with FakeOpenAI(handle, faults=faults) as srv:
        code = run_cli(
            "evaluate", tmp_path / "d.jsonl", "-m", "faithfulness", "--llm", "m",
            "--base-url", srv.base_url, "-o", tmp_path / "r", "-q", "--no-cache",
        )  # fmt: skip
    out, _ = capsys.readouterr()
    assert code == 0
    line = next(ln for ln in out.splitlines() if ln.startswith("retried requests:"))
    total, _, each = line.removeprefix("retried requests: ").partition(" (")
    injected = len(faults.injected)
    assert injected > 0 and int(total) == injected, line
    # split by where they were spent: the shared statement extraction and the verdicts
    parts = dict(p.rsplit(" ", 1) for p in each.rstrip(")").split(", "))
    assert set(parts) <= {"faithfulness", "shared:statements"}
    assert sum(int(n) for n in parts.values()) == injected


def test_resume_alone_keeps_the_runs_repeats(
    server: FakeOpenAI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write_jsonl(tmp_path / "d.jsonl", rows(3))
    run = tmp_path / "r"
    assert run_cli(
        "evaluate", tmp_path / "d.jsonl", "-m", "faithfulness", "--llm", "m", "--base-url",
        server.base_url, "--repeats", "2", "-o", run, "-q", "--no-cache",
    ) == 0  # fmt: skip
    log = run / "results.jsonl"
    log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:1]))
    capsys.readouterr()
    assert run_cli("evaluate", "--resume", run, "-q") == 0, capsys.readouterr().err
    assert json.loads((run / "manifest.json").read_text())["repeats"] == 2


def test_the_probe_leaves_a_certificate_it_cannot_check_to_the_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The probe uses the standard library's certificate store, the SDK its own (certifi): a
    TLS server that answered is there, whatever the store says of its certificate; an endpoint
    that refuses the connection is not."""
    import asyncio
    import ssl
    import urllib.error

    from rageval.judge import FatalJudgeError
    from rageval.runner import _probe

    described = {"base_url": "https://judge.example/v1", "api_key_from": "OPENAI_API_KEY"}

    def fails_with(reason: BaseException) -> None:
        def get(url: str, headers: object, timeout: float) -> int:
            raise urllib.error.URLError(reason)

        monkeypatch.setattr(_probe, "_get", get)

    fails_with(ssl.SSLCertVerificationError("unable to get local issuer certificate"))
    asyncio.run(_probe.probe(described, what="judge", key="sk-test"))  # no error: the run decides
    fails_with(ConnectionRefusedError(111, "Connection refused"))
    with pytest.raises(FatalJudgeError, match="could not reach the judge endpoint"):
        asyncio.run(_probe.probe(described, what="judge", key="sk-test"))
