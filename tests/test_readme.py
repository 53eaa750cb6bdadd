"""The README's own code, run as written, right after the Quickstart's install.

Every block of the README runs: the Quickstart's second line in .ci/run, the others here. The
Python section's block as a notebook cell, with every module of the optional extras
(pyproject.toml) unimportable, as after the Quickstart's core install; the pytest section's
as a test file pytest runs in a child process; the command line's with bash. A judge they need
is the project's test server, reached through the environment (OPENAI_BASE_URL,
OPENAI_API_KEY, RAGEVAL_LLM) as a user's would be. The documentation site's blocks are run by
tests/test_docs_site.py.
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import handle, markdown_blocks, run_as_pytest_file, run_block, run_shell
from rageval.testing import FAKE_API_KEY, FakeOpenAI

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCKS = markdown_blocks(README)


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


def _only_the_core_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every module of every extra unimportable, as after `pip install .`."""
    for modules in EXTRAS.values():
        for module in modules:
            monkeypatch.setitem(sys.modules, module, None)


@pytest.fixture
def judge_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    with FakeOpenAI(handle) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        yield server


def test_the_python_section_runs_as_written_after_the_quickstart_install(
    judge_env: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _only_the_core_install(monkeypatch)
    (block,) = [b for b in BLOCKS if b.section == "Python"]
    run_block(block.code, page=README, line=block.line, scope={})
    out = capsys.readouterr().out
    assert "faithfulness" in out and "95% CI" in out  # print(result)
    assert "ok " in out  # the first cell's status and reason
    assert len(judge_env.chat_requests) > 0


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


def test_the_pytest_block_runs_as_a_test(judge_env: FakeOpenAI, tmp_path: Path) -> None:
    (code,) = _blocks("pytest", "python")
    run_as_pytest_file(code, tmp_path / "project", env={"RAGEVAL_LLM": "gpt-4o-mini"})
    assert len(judge_env.chat_requests) > 0


def test_the_command_line_block_runs_against_the_environments_judge(
    judge_env: FakeOpenAI, tmp_path: Path
) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    (block,) = [b for b in BLOCKS if b.section == "Command line"]
    run_shell(block.code, where=f"README.md:{block.line}")
    assert (tmp_path / "runs" / "first" / "report.html").exists()
    assert len(judge_env.chat_requests) > 0


def test_every_block_of_the_readme_is_run() -> None:
    """The Quickstart's by .ci/run (its second line) and by hand (the first); the others here."""
    assert [(b.section, b.language) for b in BLOCKS] == [
        ("Quickstart", "bash"),
        ("Command line", "bash"),
        ("Python", "python"),
        ("pytest", "python"),
    ]


def test_the_readme_is_one_screen_of_product_page() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_the_readmes_links_lead_to_files_of_the_repository() -> None:
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t]
    assert len(local) > 20
    assert [t for t in local if not (ROOT / t).exists()] == []


def test_the_quickstart_block_is_two_command_lines() -> None:
    """.ci/run runs the second line: install the dev extras, lint and type-check, then run the
    whole suite (the checks first, so a lint or type error fails CI before the long part)."""
    lines = _blocks("Quickstart", "bash")[0].strip().splitlines()
    assert len(lines) == 2
    assert "rageval evaluate" in lines[0]
    checks = ["ruff check .", "ruff format --check .", "mypy --strict", "python -m pytest"]
    at = [lines[1].find(check) for check in checks]
    assert -1 not in at and at == sorted(at), lines[1]


def test_the_quickstarts_first_line_scores_offline_and_says_how_to_add_a_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its command after the installs (which the test environment has made), on a machine with
    no judge configured: the offline metrics run, the judge metrics are skipped with the hint."""
    line = _blocks("Quickstart", "bash")[0].strip().splitlines()[0]
    command = line.rsplit("&&", 1)[1].strip()
    assert command.startswith("rageval evaluate ")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RAGEVAL_LLM", "RAGEVAL_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAGEVAL_CACHE_DIR", str(tmp_path / "cache"))
    done = run_shell(command, where="README.md, the Quickstart's first line")
    assert "token_f1" in done and "semantic_similarity" in done
    assert "needs an LLM judge and none is configured: set RAGEVAL_LLM" in done
