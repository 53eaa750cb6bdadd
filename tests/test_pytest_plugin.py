"""The pytest plugin: a test file using `assert_scores`, run by pytest in a child process
against the project's FakeOpenAI, fails when a threshold is not met and passes when it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import handle, rows
from rageval.testing import FAKE_API_KEY, FakeOpenAI
from synthetic_data import make_conversation

CONFTEST = """
from rageval.testing import install_network_guard

install_network_guard()
"""

TESTS = """
import json
from pathlib import Path

import pytest

ROWS = json.loads((Path(__file__).parent / "rows.json").read_text())


def test_met(assert_scores):
    result = assert_scores(ROWS, {"faithfulness": 0.4, "token_f1": 0.1})
    assert result.summary()["faithfulness"].mean == 0.5


def test_not_met(assert_scores):
    assert_scores(ROWS, {"faithfulness": 0.8, "token_f1": 0.1})


@pytest.mark.asyncio
async def test_met_in_an_async_test(assert_scores):
    assert_scores(ROWS[:2], {"faithfulness": 0.5})


def test_the_configured_judge_is_a_fixture(rageval_judge):
    assert rageval_judge is not None and rageval_judge.model == "test-model"
"""


def _project(tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\nasyncio_mode = strict\n", encoding="utf-8")
    (project / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (project / "test_rag.py").write_text(TESTS, encoding="utf-8")
    (project / "rows.json").write_text(json.dumps(rows(4)), encoding="utf-8")
    return project


def _pytest(
    project: Path, *args: str, server: FakeOpenAI | None, tmp_path: Path, key: bool = False
) -> subprocess.CompletedProcess[str]:
    """pytest in `project`; with `server`, the environment configures the judge there (with
    `key` alone, only the API key is in the environment)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "OPENAI_", "RAGEVAL_")) and k != "COV_CORE_SOURCE"
    }
    env["RAGEVAL_CACHE_DIR"] = str(tmp_path / "cache")
    if key or server is not None:
        env["OPENAI_API_KEY"] = FAKE_API_KEY
    if server is not None:
        env.update(
            RAGEVAL_LLM="test-model", OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY=FAKE_API_KEY
        )
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _calls(directory: Path) -> list[dict[str, object]]:
    lines = (directory / "calls.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_a_threshold_not_met_fails_and_shows_the_worst_samples(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    project = _project(tmp_path)
    runs = tmp_path / "runs"
    done = _pytest(project, "--rageval-dir", str(runs), server=server, tmp_path=tmp_path)
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "1 failed, 3 passed" in out
    assert "FAILED test_rag.py::test_not_met" in out
    assert "faithfulness: mean 0.5000 < 0.8 over 4 measured" in out
    # the worst samples, with the judge's reason and the question they answer
    assert "s000: 0.5000 (1 of 2 statements" in out and "What does sample s000 say" in out
    assert "token_f1" not in out.split("FAILED")[0].split("faithfulness: mean")[1]  # met
    assert f"run directory: {runs / 'test_rag.py_test_not_met'}" in out

    calls = {c["test"]: c for c in _calls(runs)}
    assert set(calls) == {
        "test_rag.py::test_met",
        "test_rag.py::test_not_met",
        "test_rag.py::test_met_in_an_async_test",
    }
    assert calls["test_rag.py::test_not_met"]["passed"] is False
    assert calls["test_rag.py::test_met"]["passed"] is True
    for call in calls.values():
        run = Path(str(call["run_dir"]))
        assert (run / "manifest.json").exists() and (run / "report.html").exists()
    # one probe for the session, then only chat requests
    assert [r.path for r in server.requests].count("/v1/models") == 1


def test_thresholds_met_pass(server: FakeOpenAI, tmp_path: Path) -> None:
    project = _project(tmp_path)
    done = _pytest(project, "-k", "not not_met", server=server, tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
    # by default the session's runs go under the rootdir, one directory per session
    (session,) = (project / "rageval-runs").iterdir()
    assert session.name.startswith("pytest-") and len(_calls(session)) == 2


def test_xdist_workers_share_one_session_directory(server: FakeOpenAI, tmp_path: Path) -> None:
    project = _project(tmp_path)
    done = _pytest(project, "-n", "2", "-k", "not not_met", server=server, tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 passed" in done.stdout
    (session,) = (project / "rageval-runs").iterdir()
    calls = _calls(session)
    assert len(calls) == 2 and all(c["passed"] for c in calls)


def test_judge_metrics_without_a_judge_fail_with_the_configuration_hint(
    tmp_path: Path,
) -> None:
    project = _project(tmp_path)
    done = _pytest(project, "-k", "test_met and not async", server=None, tmp_path=tmp_path)
    assert done.returncode == 1
    assert "faithfulness: needs an LLM judge and none is configured" in done.stdout
    assert "RAGEVAL_LLM" in done.stdout


def test_an_unreachable_endpoint_fails_the_test_with_a_clear_message(tmp_path: Path) -> None:
    project = _project(tmp_path)
    with FakeOpenAI(handle) as srv:
        url = srv.base_url
    # the server is gone: nothing listens at `url` any more
    env_server = type("Gone", (), {"base_url": url})()
    done = _pytest(project, "-k", "test_met and not async", server=env_server, tmp_path=tmp_path)
    assert done.returncode == 1
    assert f"could not reach the judge endpoint {url}" in done.stdout
    assert "Traceback" not in done.stdout


def test_bad_rows_fail_the_test_with_the_message_once(server: FakeOpenAI, tmp_path: Path) -> None:
    """It was shown twice, after "no running event loop" and "During handling of the above
    exception, another exception occurred"."""
    project = _project(tmp_path)
    (project / "test_bad.py").write_text(
        "def test_bad_row(assert_scores):\n"
        "    rows = [{'user_input': 'q', 'response': 5, 'retrieved_contexts': ['c']}]\n"
        "    assert_scores(rows, {'faithfulness': 0.8})\n",
        encoding="utf-8",
    )
    # -rN: no short summary, which repeats the message in full where CI is set (not cut there)
    done = _pytest(project, "-rN", "test_bad.py", server=server, tmp_path=tmp_path)
    assert done.returncode == 1
    assert done.stdout.count("row 0, field 'response': Input should be a valid string") == 1
    assert "During handling" not in done.stdout and "no running event loop" not in done.stdout
    assert not [r for r in server.requests if r.path.endswith("/chat/completions")]


def test_the_plugin_costs_sessions_that_do_not_use_it_nothing(tmp_path: Path) -> None:
    project = tmp_path / "plain"
    project.mkdir()
    (project / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (project / "test_plain.py").write_text(
        "import sys\n\n"
        "def test_nothing_heavy_was_imported(pytestconfig):\n"
        "    assert pytestconfig.pluginmanager.hasplugin('rageval')\n"
        "    heavy = [m for m in ('openai', 'numpy', 'pydantic', 'rageval.runner', 'rageval.judge')"
        " if m in sys.modules]\n"
        "    assert heavy == []\n",
        encoding="utf-8",
    )
    done = _pytest(project, "-p", "no:asyncio", server=None, tmp_path=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


CONVERSATION_TESTS = """
import json
from pathlib import Path

CONVERSATIONS = json.loads((Path(__file__).parent / "conversations.json").read_text())


def test_conversations(assert_scores):
    assert_scores(CONVERSATIONS, {"turn_faithfulness": 0.95, "tool_call_f1": 0.5})
"""


def test_conversations_are_gated_and_their_worst_shown_by_their_opening_message(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    project = _project(tmp_path)
    (project / "test_chat.py").write_text(CONVERSATION_TESTS, encoding="utf-8")
    chats = [make_conversation(i) for i in range(4)]
    (project / "conversations.json").write_text(json.dumps(chats), encoding="utf-8")
    runs = tmp_path / "runs"
    done = _pytest(project, "test_chat.py", "--rageval-dir", str(runs), server=server,
                   tmp_path=tmp_path)  # fmt: skip
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "FAILED test_chat.py::test_conversations" in out
    assert "turn_faithfulness: mean" in out and "< 0.95 over 4 measured" in out
    # a conversation stands for its first user message, as in the report
    worst = out.split("turn_faithfulness: mean")[1].splitlines()[1:4]
    assert len(worst) == 3
    for line in worst:
        cid = line.split(":")[0].strip()
        (chat,) = (c for c in chats if c["id"] == cid)
        opening = chat["turns"][0]["content"]
        assert "mean over 5 scored turn(s)" in line, line
        assert opening[:40] in line.split(") <- ")[1], line
    (call,) = _calls(runs)
    assert call["passed"] is False


def test_cells_without_a_value_fail_unless_allowed(tmp_path: Path) -> None:
    from rageval.pytest_plugin import RagevalSession, ScoreGate

    gate = ScoreGate(RagevalSession(tmp_path / "runs"), "tests/test_x.py::test_y")
    data = [
        {"id": "a", "response": "the sky is blue", "reference": "the sky is blue"},
        {"id": "b", "response": "the sky is blue"},  # no reference: token_f1 is skipped
    ]
    with pytest.raises(pytest.fail.Exception) as failed:
        gate(data, {"token_f1": 0.5}, on_invalid="skip")
    message = str(failed.value)
    assert "token_f1: 1 of 2 cells without a value (0 not measured, 1 skipped)" in message
    assert "  b: skipped: field 'reference': missing (required by this metric)" in message
    result = gate(data, {"token_f1": 0.5}, on_invalid="skip", allow_missing=True)
    assert result.summary()["token_f1"].mean == 1.0
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir() if p.is_dir())
    assert runs == ["tests_test_x.py_test_y", "tests_test_x.py_test_y-2"]


def test_the_judge_comes_from_the_config_file_as_for_the_cli(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    project = _project(tmp_path)
    (project / "pyproject.toml").write_text(
        f'[tool.rageval.judge]\nmodel = "test-model"\nbase_url = "{server.base_url}"\n'
        "max_concurrency = 3\n",
        encoding="utf-8",
    )
    done = _pytest(project, "-k", "not not_met", server=None, tmp_path=tmp_path, key=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert {r.model for r in server.chat_requests} == {"test-model"}
