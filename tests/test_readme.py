"""The README's own code, run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers import handle
from rageval.testing import FAKE_API_KEY, FakeOpenAI

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")


def _blocks(section: str, language: str) -> list[str]:
    body = README.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{language}\n(.*?)```", body, re.DOTALL)


def test_the_quickstart_block_is_two_command_lines() -> None:
    """.ci/run runs the second line: install the dev extras, lint and type-check, then run the
    whole suite (the checks first, so a lint or type error fails CI before the long part)."""
    lines = _blocks("Quickstart", "bash")[0].strip().splitlines()
    assert len(lines) == 2
    assert "rageval evaluate" in lines[0]
    checks = ["ruff check .", "ruff format --check .", "mypy --strict", "python -m pytest"]
    at = [lines[1].find(check) for check in checks]
    assert -1 not in at and at == sorted(at), lines[1]


def test_the_python_example_runs_twice_in_one_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As a notebook cell run again: the second run replaces the first one's directory."""
    code = _blocks("Python", "python")[0]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    with FakeOpenAI(handle) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        for _ in range(2):
            scope: dict[str, object] = {}
            exec(compile(code, "README.md", "exec"), scope)
            df = scope["df"]
            assert len(df) == 1  # type: ignore[arg-type]
    assert (tmp_path / "runs" / "first" / "summary.json").exists()
    assert len((tmp_path / "runs" / "first" / "results.jsonl").read_text().splitlines()) == 1


def test_the_config_file_example_is_valid(tmp_path: Path) -> None:
    from rageval._config import load_settings

    (toml,) = _blocks("Command line", "toml")
    (tmp_path / "rageval.toml").write_text(toml, encoding="utf-8")
    settings = load_settings(start=tmp_path)
    assert settings.judge["model"] == "llama3.1" and settings.params["answer_correctness"]
