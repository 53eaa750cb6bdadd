"""Settings from rageval.toml / [tool.rageval] and -p: names, errors, precedence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers import handle, rows, write_jsonl
from rageval._config import ConfigError, _price_table, find_config, load_settings, parse_params
from rageval.cli import main
from rageval.judge import Judge, ModelPrice
from rageval.runner._runconfig import made
from rageval.runner._stored import stored_judge
from rageval.testing import FAKE_API_KEY, FakeOpenAI


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    for name in ("RAGEVAL_LLM", "RAGEVAL_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with FakeOpenAI(handle) as s:
        yield s


def test_the_nearest_config_file_is_found(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.rageval]\nmetrics = ["token_f1"]\n')
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert find_config(deep) == tmp_path / "pyproject.toml"
    assert load_settings(start=deep).metrics == ["token_f1"]
    (tmp_path / "a" / "rageval.toml").write_text('metrics = ["rouge_l"]\n')
    assert find_config(deep) == tmp_path / "a" / "rageval.toml"
    # a pyproject.toml without a [tool.rageval] table is not a config file
    (deep / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert find_config(deep) == tmp_path / "a" / "rageval.toml"


def test_typos_and_secrets_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "rageval.toml"
    path.write_text('metric = ["token_f1"]\n')
    with pytest.raises(ConfigError, match=r"rageval.toml: metric: Extra inputs"):
        load_settings(path)
    path.write_text('[judge]\nmodel = "m"\ntemprature = 0.2\n')
    with pytest.raises(ConfigError, match=r"\[judge\] temprature: not a Judge setting") as err:
        load_settings(path)
    assert "temperature" in str(err.value)  # the known names are listed
    path.write_text('[judge]\napi_key = "sk-secret"\n')
    with pytest.raises(ConfigError, match="api_key_env"):
        load_settings(path)
    path.write_text("[judge\n")
    with pytest.raises(ConfigError, match="cannot read the config file"):
        load_settings(path)


def test_params_from_the_command_line_are_typed() -> None:
    got = parse_params(
        [
            "answer_correctness.weights=[0.5, 0.5]",
            "answer_correctness.beta=2",
            "semantic_similarity.threshold=0.7",
            'rubric_score.rubrics.score1_description="Wrong."',
            "answer_relevance.prompt=Rate it plainly",
        ]
    )
    assert got == {
        "answer_correctness": {"weights": [0.5, 0.5], "beta": 2},
        "semantic_similarity": {"threshold": 0.7},
        "rubric_score": {"rubrics": {"score1_description": "Wrong."}},
        "answer_relevance": {"prompt": "Rate it plainly"},
    }
    for bad in ("weights=1", "answer_correctness.beta", ".x=1"):
        with pytest.raises(ConfigError, match=r"METRIC\.PARAM=VALUE"):
            parse_params([bad])


def _manifest(run: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((run / "manifest.json").read_text())
    return manifest


#: the guidance parameters of answer_correctness (GuidedMetric), at their defaults
GUIDANCE_DEFAULTS: dict[str, Any] = {
    "instructions": None,
    "examples": [],
    "reasons": True,
    "threshold": None,
}

CONFIG = """
metrics = ["faithfulness", "answer_correctness"]
fail_under = {{ faithfulness = 0.1 }}

[judge]
model = "file-model"
base_url = "{base_url}"
timeout = 33
temperature = 0.5
max_concurrency = 5
requests_per_minute = 6000
prices = {{ "file-model" = [1.0, 2.0] }}

[params.answer_correctness]
weights = [0.5, 0.5]
beta = 2.0
"""


def test_precedence_command_line_then_environment_then_file(
    server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rageval.toml").write_text(CONFIG.format(base_url=server.base_url))
    write_jsonl(tmp_path / "d.jsonl", rows(2))
    base = ["evaluate", "d.jsonl", "-q", "--no-cache"]

    # the file alone: its metrics, judge settings, prices, metric parameters and gates
    assert main([*base, "-o", "a"]) == 0
    m = _manifest(tmp_path / "a")
    assert [x["name"] for x in m["metrics"]] == ["faithfulness", "answer_correctness"]
    assert m["metrics"][1]["params"] == {
        "weights": [0.5, 0.5], "beta": 2.0, **GUIDANCE_DEFAULTS
    }  # fmt: skip
    judge = m["judge"]
    assert (judge["model"], judge["base_url"], judge["timeout"]) == (
        "file-model",
        server.base_url,
        33.0,
    )
    assert (judge["temperature"], judge["max_concurrency"], judge["requests_per_minute"]) == (
        0.5,
        5,
        6000,
    )
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["usage"]["cost_usd"] > 0  # priced by the file's table

    # the environment beats the file
    monkeypatch.setenv("RAGEVAL_LLM", "env-model")
    assert main([*base, "-o", "b"]) == 0
    assert _manifest(tmp_path / "b")["judge"]["model"] == "env-model"

    # the command line beats both; -p beats [params] key by key
    code = main(
        [*base, "-o", "c", "--llm", "cli-model", "--concurrency", "2",
         "-p", "answer_correctness.beta=3", "-m", "answer_correctness"]
    )  # fmt: skip
    assert code == 0
    m = _manifest(tmp_path / "c")
    assert (m["judge"]["model"], m["judge"]["max_concurrency"]) == ("cli-model", 2)
    assert [x["name"] for x in m["metrics"]] == ["answer_correctness"]
    assert m["metrics"][0]["params"] == {"weights": [0.5, 0.5], "beta": 3, **GUIDANCE_DEFAULTS}

    # the file's gate applies; the command line's wins for the same metric
    assert main([*base, "-o", "d", "--fail-under", "faithfulness=0.99"]) == 1


def test_bad_settings_are_usage_errors(
    server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "d.jsonl", rows(2))
    base = ["evaluate", "d.jsonl", "-q", "-m", "token_f1"]
    assert main([*base, "-p", "token_f2.x=1"]) == 2
    assert "unknown metric 'token_f2'" in capsys.readouterr().err
    assert main([*base, "-p", "answer_correctness.beta=2"]) == 2
    assert "answer_correctness is not a metric of this run" in capsys.readouterr().err
    # a dry run refuses what the run would refuse (it once estimated the run regardless)
    assert main([*base, "--dry-run", "-p", "answer_correctness.beta=2"]) == 2
    assert "answer_correctness is not a metric of this run" in capsys.readouterr().err
    assert main([*base, "-p", "token_f1.smoothing=1"]) == 2
    err = capsys.readouterr().err
    assert "token_f1: " in err and "smoothing" in err
    # with no -m, a -p is checked even for a metric the data then leaves out (here: no
    # 'retrieved_contexts'), once run with a typo and exit 0
    write_jsonl(tmp_path / "n.jsonl", [{"user_input": "q", "response": "r"}])
    default = ["evaluate", "n.jsonl", "-q", "--llm", "judge-model"]
    for param, words in (
        ("faithfulness.mdoe=checker", "faithfulness: no parameter 'mdoe'; its parameters: mode"),
        ("faithfulness.mode=checkr", "mode must be one of"),
        ("rubric_score.rubrics={}", "not in the default selection: name it with -m rubric_score"),
    ):
        assert main([*default, "-p", param, "--dry-run"]) == 2
        assert words in capsys.readouterr().err
    # built with the config file's parameters under the command line's: the checker given
    # here is valid with the file's mode (built alone, it would be refused: mode statements)
    (tmp_path / "rageval.toml").write_text("[params.faithfulness]\nmode = 'checker'\n")
    assert main([*default, "-p", "faithfulness.checker.model=m2", "--dry-run"]) == 0
    capsys.readouterr()
    (tmp_path / "rageval.toml").write_text("[judge]\nmodle = 'x'\n")
    assert main(base) == 2
    assert "not a Judge setting" in capsys.readouterr().err
    assert main([*base, "--config", str(tmp_path / "missing.toml")]) == 2
    assert "config file not found" in capsys.readouterr().err
    # an empty endpoint URL (`--base-url "$URL"` with URL unset): read as "not given", the
    # requests would go to OpenAI with the OpenAI key of the environment
    with pytest.raises(SystemExit) as exit_:
        main([*base, "--llm", "m", "--base-url", ""])
    assert exit_.value.code == 2
    assert "--base-url: the URL is empty" in capsys.readouterr().err
    (tmp_path / "rageval.toml").write_text("[judge]\nbase_url = ' '\n")
    assert main([*base, "--llm", "m"]) == 2
    assert "[judge]: base_url is empty" in capsys.readouterr().err
    with pytest.raises(ValueError, match="base_url is empty"):
        Judge("m", base_url="", api_key="sk-x")
    assert server.requests == []


def test_the_judge_settings_objects_as_tables(
    server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "d.jsonl", rows(2))
    (tmp_path / "rageval.toml").write_text(
        f'[judge]\nmodel = "m"\nbase_url = "{server.base_url}"\n'
        "[judge.limits]\nrequests_per_minute = 1200\n[judge.retry]\ntimeout = 12.5\n"
    )
    assert main(["evaluate", "d.jsonl", "-m", "faithfulness", "-o", "r", "-q"]) == 0
    judge = _manifest(tmp_path / "r")["judge"]
    assert (judge["requests_per_minute"], judge["timeout"]) == (1200, 12.5)

    (tmp_path / "rageval.toml").write_text(
        f'[judge]\nmodel = "m"\nbase_url = "{server.base_url}"\n[judge.retry]\ntimeout = -1\n'
    )
    assert main(["evaluate", "d.jsonl", "-m", "faithfulness", "-o", "r2", "-q"]) == 2
    assert "rageval.toml: [judge]: timeout must be > 0" in capsys.readouterr().err


def test_a_price_in_the_file_may_be_a_table_of_its_rates() -> None:
    table = _price_table({"a": [1, 2], "b": {"input": 1, "output": 2, "cached_input": 0.5}})
    assert table.price("a") == ModelPrice(1.0, 2.0)
    assert table.price("b") == ModelPrice(1.0, 2.0, cached_input=0.5)
    with pytest.raises(ValueError, match="prices must map a model"):
        _price_table({"c": {"inputs": 1}})


def test_every_judge_setting_a_manifest_records_is_restored_on_resume() -> None:
    judge = Judge(
        "m", base_url="http://127.0.0.1:9/v1", max_prompt_tokens=1000, max_reasks=1, seed=7
    )
    spec = stored_judge(judge.describe()).spec
    assert (spec.max_prompt_tokens, spec.max_reasks, spec.seed) == (1000, 1, 7)
    again = made(stored_judge(judge.describe())).describe()
    assert {k: v for k, v in again.items() if k != "cache"} == {
        k: v for k, v in judge.describe().items() if k != "cache"
    }
