"""The README's own code, run as written, right after the Quickstart's install.

Every Python block of the README runs here: the Python section's in order in one namespace
(as in a notebook), the pytest plugin's as a test file pytest runs in a child process. A judge
they need is the project's test server, reached through the environment (OPENAI_BASE_URL,
OPENAI_API_KEY, RAGEVAL_LLM) as a user's would be. The Quickstart installs the core package
only: every module of the optional extras (pyproject.toml) is made unimportable, except those
of an extra a ``pip install 'rageval[EXTRA]'`` block of the README installs before the block.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import handle, markdown_blocks, run_block
from rageval.testing import FAKE_API_KEY, FakeOpenAI

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCKS = markdown_blocks(README)
_INSTALLS_EXTRA = re.compile(r"pip install '(?:rageval|\.)\[(\w+)\]'")


def _blocks(section: str, language: str) -> list[str]:
    return [b.code for b in BLOCKS if b.section == section and b.language == language]


def _extra_modules() -> dict[str, set[str]]:
    """extra -> the top-level modules it installs, from pyproject.toml (dev is not an extra
    users install)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = project["project"]["optional-dependencies"]
    return {
        extra: {re.split(r"[\[<>=;! ]", req, maxsplit=1)[0].replace("-", "_") for req in reqs}
        for extra, reqs in extras.items()
        if extra != "dev"
    }


EXTRAS = _extra_modules()


#: the extras' modules this process had imported before a test hid them
_HIDDEN: dict[str, object] = {}


def _only_the_core_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every module of every extra unimportable, as after `pip install .`."""
    for modules in EXTRAS.values():
        for module in modules:
            _HIDDEN[module] = sys.modules.get(module)
            monkeypatch.setitem(sys.modules, module, None)


def _install(extra: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `pip install 'rageval[extra]'` adds: its modules importable again."""
    for module in EXTRAS[extra]:
        if _HIDDEN.get(module) is not None:
            monkeypatch.setitem(sys.modules, module, _HIDDEN[module])
        else:
            monkeypatch.delitem(sys.modules, module)


@pytest.fixture
def judge_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    with FakeOpenAI(handle) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        yield server


def _resumes(code: str) -> bool:
    return "resume=True" in code


def test_the_python_section_runs_as_written_after_the_quickstart_install(
    judge_env: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _only_the_core_install(monkeypatch)
    scope: dict[str, object] = {}
    ran = installed = 0
    for block in BLOCKS:
        if block.section != "Python":
            continue
        if block.language == "bash":
            for extra in _INSTALLS_EXTRA.findall(block.code):
                _install(extra, monkeypatch)
                installed += 1
        elif block.language == "python" and not _resumes(block.code):  # see the test below
            run_block(block.code, page=README, line=block.line, scope=scope)
            ran += 1
    assert (ran, installed) == (3, 1)
    assert len(scope["df"]) == 1  # type: ignore[arg-type]  # to_pandas(), pandas installed
    out = capsys.readouterr().out
    assert "faithfulness" in out and "95% CI" in out  # print(result)
    assert "ok " in out  # the first cell's status and reason
    value = scope["result"]  # the single-metric block's
    assert value.status == "ok"  # type: ignore[attr-defined]
    assert len(judge_env.chat_requests) > 0


def test_to_pandas_is_the_one_block_that_needs_its_extra(
    judge_env: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the README's `pip install 'rageval[pandas]'`, its block stops with the
    install command (so the extra's install is the one the README shows)."""
    from rageval.errors import MissingExtraError

    _only_the_core_install(monkeypatch)
    first, *_ = _blocks("Python", "python")
    scope: dict[str, object] = {}
    exec(compile(first, "README.md", "exec"), scope)
    pandas_block = next(b for b in _blocks("Python", "python") if "to_pandas()" in b)
    with pytest.raises(MissingExtraError, match=r"pip install 'rageval\[pandas\]'"):
        exec(compile(pandas_block, "README.md", "exec"), scope)


def test_the_resume_block_continues_the_first_run(
    judge_env: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    _only_the_core_install(monkeypatch)
    first, *rest = _blocks("Python", "python")
    (resume,) = [b for b in rest if _resumes(b)]
    scope: dict[str, object] = {}
    exec(compile(first, "README.md", "exec"), scope)
    before = scope["result"]
    sent = len(judge_env.chat_requests)
    exec(compile(resume, "README.md", "exec"), scope)
    after = scope["result"]
    assert after is not before
    assert after["faithfulness"] == before["faithfulness"]  # type: ignore[index]
    assert len(judge_env.chat_requests) == sent  # nothing left to do, nothing sent


def test_the_python_example_runs_twice_in_one_session(judge_env: FakeOpenAI) -> None:
    """As a notebook cell run again: the second run replaces the first one's directory."""
    code = _blocks("Python", "python")[0]
    for _ in range(2):
        scope: dict[str, object] = {}
        exec(compile(code, "README.md", "exec"), scope)
        assert len(scope["result"]) == 1  # type: ignore[arg-type]
    run = Path("runs") / "first"
    assert (run / "summary.json").exists()
    assert len((run / "results.jsonl").read_text().splitlines()) == 1


#: the user's RAG system the pytest plugin's block imports (its one line that is not rageval)
MY_RAG = """
DOCS = {
    "When was the first Super Bowl?": "Super Bowl I was played on January 15, 1967.",
    "Where was the first Super Bowl played?": "Super Bowl I was played in Los Angeles.",
}
QUESTIONS = list(DOCS)


def retrieve(question):
    return [DOCS[question]]


def answer(question):
    return DOCS[question]
"""


def test_the_pytest_plugin_block_runs_as_a_test(judge_env: FakeOpenAI, tmp_path: Path) -> None:
    (code,) = _blocks("CI: the pytest plugin", "python")
    project = tmp_path / "project"
    project.mkdir()
    (project / "my_rag.py").write_text(MY_RAG, encoding="utf-8")
    (project / "test_rag.py").write_text(code, encoding="utf-8")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "RAGEVAL_")) and k != "COV_CORE_SOURCE"
    }
    env.update(RAGEVAL_LLM="gpt-4o-mini", RAGEVAL_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    assert len(judge_env.chat_requests) > 0


def test_the_observers_block_logs_the_run_to_mlflow(
    judge_env: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With its two extras installed (as its comments say) and a tracking URI in the
    environment (a local MLflow file store standing in for the user's tracking server)."""
    from mlflow.tracking import MlflowClient

    (code,) = _blocks("Observers: MLflow, OpenTelemetry, your own", "python")
    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    scope: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), scope)
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("rag-nightly")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.status == "FINISHED"
    mean = scope["result"].summary_model().metrics["faithfulness"].mean  # type: ignore[attr-defined]
    assert run.data.metrics["faithfulness.mean"] == mean


def test_the_conversation_block_runs_offline_after_the_quickstart_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # no judge, no network: the tool-call metrics are deterministic
    monkeypatch.chdir(tmp_path)
    _only_the_core_install(monkeypatch)
    (block,) = [
        b for b in BLOCKS if b.section == "Conversations and tool calls" and b.language == "python"
    ]
    run_block(block.code, page=README, line=block.line, scope={})
    assert 'weather({"city": "Paris", "unit": "C"})' in capsys.readouterr().out


def test_the_traces_block_runs_offline_after_the_quickstart_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # the loader needs nothing beyond the core; tool_call_f1 needs no judge
    monkeypatch.chdir(tmp_path)
    _only_the_core_install(monkeypatch)
    (block,) = [b for b in BLOCKS if b.section == "Traces" and b.language == "python"]
    run_block(block.code, page=README, line=block.line, scope={})
    assert "Weather in Paris? ['Paris is in France.'] 18C in Paris." in capsys.readouterr().out


def test_every_python_block_of_the_readme_is_run_here() -> None:
    sections = {b.section for b in BLOCKS if b.language == "python"}
    assert sections == {
        "Python",
        "CI: the pytest plugin",
        "Observers: MLflow, OpenTelemetry, your own",
        "Conversations and tool calls",
        "Traces",
    }


def test_the_quickstart_block_is_two_command_lines() -> None:
    """.ci/run runs the second line: install the dev extras, lint and type-check, then run the
    whole suite (the checks first, so a lint or type error fails CI before the long part)."""
    lines = _blocks("Quickstart", "bash")[0].strip().splitlines()
    assert len(lines) == 2
    assert "rageval evaluate" in lines[0]
    checks = ["ruff check .", "ruff format --check .", "mypy --strict", "python -m pytest"]
    at = [lines[1].find(check) for check in checks]
    assert -1 not in at and at == sorted(at), lines[1]


def test_the_config_file_example_is_valid(tmp_path: Path) -> None:
    from rageval._config import load_settings

    (toml,) = _blocks("Command line", "toml")
    (tmp_path / "rageval.toml").write_text(toml, encoding="utf-8")
    settings = load_settings(start=tmp_path)
    assert settings.judge["model"] == "llama3.1" and settings.params["answer_correctness"]
