"""The `rageval` command line: evaluate, gates, exit codes, compare, metrics, cache, report."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rageval.cli import main
from rageval.testing import FAKE_API_KEY, FakeOpenAI
from runner_helpers import handle, rows, write_jsonl

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "rag_sample.jsonl"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    with FakeOpenAI(handle) as s:
        yield s


def run_cli(*args: str | Path) -> int:
    return main([str(a) for a in args])


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


def test_evaluate_the_example_without_a_judge(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RAGEVAL_LLM", raising=False)
    code = run_cli(
        "evaluate", EXAMPLE, "-o", tmp_path / "run", "-m", "token_f1,rouge_l", "-m", "faithfulness"
    )
    out, err = capsys.readouterr()
    assert code == 0
    table = out.split("\n\n")[0]
    assert "token_f1" in table and "rouge_l" in table and "faithfulness" in table
    assert "skipped: needs an LLM judge" in out and "faithfulness (8 rows)" in out
    assert out.count("RAGEVAL_LLM") == 1  # the hint once, not once per metric
    assert "RAGEVAL_LLM" in out and "OPENAI_BASE_URL" in out
    assert (tmp_path / "run" / "results.jsonl").exists()
    assert "\r" not in err  # no progress line when stderr is not a terminal


def test_evaluate_with_a_judge_and_gates(
    server: FakeOpenAI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = tmp_path / "data.jsonl"
    write_jsonl(data, rows(4))
    base = ["evaluate", data, "--llm", "test-model", "--base-url", server.base_url, "-q"]
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
    code = run_cli(
        "evaluate",
        EXAMPLE,
        "-m",
        "faithfulness",
        "-o",
        tmp_path / "r",
        "--fail-under",
        "faithfulness=0.1",
    )
    _, err = capsys.readouterr()
    assert code == 1
    assert "gate failed: faithfulness: no measured value" in err


def test_input_errors_exit_2_with_a_message_and_no_request(
    server: FakeOpenAI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = rows(3)
    del data[1]["reference"]
    path = tmp_path / "data.jsonl"
    write_jsonl(path, data)
    code = run_cli(
        "evaluate",
        path,
        "-m",
        "context_recall",
        "--llm",
        "m",
        "--base-url",
        server.base_url,
        "-o",
        tmp_path / "r",
    )
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
    with pytest.raises(SystemExit) as info:
        run_cli("evaluate")
    assert info.value.code == 2


def test_skip_invalid_runs_the_rest(
    server: FakeOpenAI, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = rows(3)
    del data[1]["reference"]
    path = tmp_path / "data.jsonl"
    write_jsonl(path, data)
    code = run_cli(
        "evaluate",
        path,
        "-m",
        "context_recall",
        "--llm",
        "m",
        "--base-url",
        server.base_url,
        "-o",
        tmp_path / "r",
        "--skip-invalid",
    )
    out, _ = capsys.readouterr()
    assert code == 0
    assert "skipped: field 'reference'" in out and "context_recall (1 row)" in out


def test_a_fatal_judge_error_exits_3_with_a_clear_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    path = tmp_path / "data.jsonl"
    write_jsonl(path, rows(5))
    with FakeOpenAI(handle, api_key=FAKE_API_KEY) as srv:
        code = run_cli(
            "evaluate",
            path,
            "-m",
            "answer_accuracy",
            "--llm",
            "m",
            "--base-url",
            srv.base_url,
            "-o",
            tmp_path / "r",
            "--no-cache",
        )
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


def test_metrics_lists_fields_needs_and_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("metrics") == 0
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("faithfulness"))
    assert "user_input, response, retrieved_contexts" in line and "yes" in line
    line = next(ln for ln in out.splitlines() if ln.startswith("answer_accuracy"))
    assert '"max_retries": 5' in line


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
    args = [
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
    assert server.requests == []
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["metrics"]["faithfulness"]["n_measured"] == 3
    capsys.readouterr()
    assert run_cli(*args, "-o", tmp_path / "other", "--resume", tmp_path / "r") == 2
