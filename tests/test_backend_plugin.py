"""A judge backend from a package outside rageval (docs/backends.md's worked example, run as
written): registered through the ``rageval.judge_backends`` entry point of a package put on the
path (a module and a dist-info with entry_points.txt in a temporary directory), it judges a run
from Python and from a ``rageval evaluate`` child process against the test server, with the
traits it declares (address, key variable, headers, modes, prices, no Batch API); and the
registry refuses what it cannot use."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import REPO, handle, markdown_blocks, rows, run_cli_in_child, write_jsonl
from rageval import evaluate
from rageval.errors import RunConfigError
from rageval.judge import Judge, _registry, backend_kinds, backend_traits, split_backend
from rageval.log import read_manifest
from rageval.runner._stored import read_stored_run
from rageval.testing import FAKE_API_KEY, FakeOpenAI

GUIDE = REPO / "docs" / "backends.md"
METRICS = ["faithfulness", "answer_accuracy", "context_recall"]


def _module_code() -> str:
    """The guide's module, rageval_acme.py: its first Python block."""
    return next(b.code for b in markdown_blocks(GUIDE) if b.language == "python")


def _entry_point() -> str:
    toml = next(b.code for b in markdown_blocks(GUIDE) if b.language == "toml")
    assert '[project.entry-points."rageval.judge_backends"]' in toml
    return toml.split("]", 1)[1].strip()  # acme = "rageval_acme:TRAITS"


@pytest.fixture
def acme_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The guide's package installed the way pip leaves it: the module and a dist-info with
    its entry point, in a directory on sys.path; the registry as it was afterwards."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "rageval_acme.py").write_text(_module_code())
    info = site / "rageval_acme-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: rageval-acme\nVersion: 0.1\n")
    name, _, value = _entry_point().partition("=")
    (info / "entry_points.txt").write_text(
        f"[rageval.judge_backends]\n{name.strip()} = {value.strip().strip(chr(34))}\n"
    )
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(_registry, "_REGISTRY", dict(_registry._REGISTRY))
    monkeypatch.setenv("ACME_API_KEY", FAKE_API_KEY)
    yield site


def scores(result: Any) -> dict[str, list[float | None]]:
    return {m: [c.value for c in result.cells(m)] for m in METRICS}


def test_the_plugged_backend_judges_a_run_as_the_openai_backend_does(
    acme_package: Path, tmp_path: Path
) -> None:
    assert "acme" not in _registry._REGISTRY  # not loaded until named
    assert "acme" in backend_kinds() and split_backend("acme:acme-judge-1") == (
        "acme",
        "acme-judge-1",
    )
    data = rows(3)
    with FakeOpenAI(handle) as server:
        plugged = Judge("acme-judge-1", backend="acme", base_url=server.base_url, cache=False)
        run = tmp_path / "run"
        through_acme = evaluate(data, METRICS, llm=plugged, run_dir=run, progress=False)
        sent = list(server.chat_requests)
        openai_judge = Judge(
            "acme-judge-1", base_url=server.base_url, api_key=FAKE_API_KEY, cache=False
        )
        through_openai = evaluate(data, METRICS, llm=openai_judge, progress=False)
    assert through_acme.complete
    assert scores(through_acme) == scores(through_openai)
    assert all(v is not None for values in scores(through_acme).values() for v in values)
    # its own header and key variable, its one mode
    assert sent and all(r.headers.get("x-acme-key") == FAKE_API_KEY for r in sent)
    assert all(r.body["response_format"]["type"] == "json_schema" for r in sent)
    assert plugged.describe()["api_key_from"] == "ACME_API_KEY"
    # its price: 0.20 / 0.80 USD per million tokens, the OpenAI judge's model has none
    total = through_acme.usage
    expected = (total.prompt_tokens * 0.20 + total.completion_tokens * 0.80) / 1e6
    assert total.cost_usd is not None and total.cost_usd > 0
    assert total.cost_usd == pytest.approx(expected)
    # recorded and made again on resume
    info = read_manifest(run).judge
    assert info is not None and info.backend == "acme"
    resumed = read_stored_run(run).make_judge()
    assert isinstance(resumed, Judge) and resumed.spec == plugged.spec


def test_the_cli_judges_with_the_plugged_backend_in_a_child_process(
    acme_package: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data.jsonl"
    write_jsonl(data, rows(2))
    run = tmp_path / "run"
    path = os.pathsep.join(filter(None, [str(acme_package), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "ACME_API_KEY": FAKE_API_KEY}
    env.pop("OPENAI_API_KEY", None)
    with FakeOpenAI(handle) as server:
        done = run_cli_in_child(
            "evaluate", data, "-m", "faithfulness", "--llm", "acme:acme-judge-1",
            "--base-url", server.base_url, "-o", run, env=env,
        )  # fmt: skip
        probes = [r for r in server.requests if r.path == "/v1/models"]
        asked = server.chat_requests
    assert done.returncode == 0, done.stderr
    # the endpoint check went out with the backend's own header, then the judge's requests
    assert probes and probes[0].headers.get("x-acme-key") == FAKE_API_KEY
    assert len(asked) >= 2 and all(r.headers.get("x-acme-key") for r in asked)
    info = read_manifest(run).judge
    assert info is not None and (info.backend, info.model) == ("acme", "acme-judge-1")


def test_its_traits_are_what_the_run_reads(acme_package: Path) -> None:
    traits = backend_traits("acme")
    assert (traits.batch_api, traits.logprobs) == (False, False)
    assert backend_traits("openai").batch_api and backend_traits("openai").logprobs
    with FakeOpenAI(handle) as server:
        judge = Judge("acme-judge-1", backend="acme", base_url=server.base_url, cache=False)
        with pytest.raises(RunConfigError, match="Batch API"):
            evaluate(rows(1), ["faithfulness"], llm=judge, batch=True, progress=False)
        assert server.chat_requests == []
    with pytest.raises(ValueError, match="answers through json_schema"):
        Judge("acme-judge-1", backend="acme", mode="tools")
    # without a base URL: its own address, never the OpenAI variables'
    assert Judge("acme-judge-1", backend="acme").base_url == "https://api.acme.example/v1"


def test_an_unknown_backend_names_the_known_ones_and_the_entry_point_group() -> None:
    with pytest.raises(ValueError, match=r"no judge backend 'nope'.*openai, anthropic"):
        Judge("m", backend="nope")
    with pytest.raises(ValueError, match=r"rageval\.judge_backends"):
        backend_traits("nope")
    # a model name with a colon that is no backend stays a model (Ollama's tags)
    assert split_backend("llama3:8b") == (None, "llama3:8b")


def test_a_kind_is_registered_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_registry, "_REGISTRY", dict(_registry._REGISTRY))
    traits = _registry.BackendTraits(kind="twin", make=backend_traits("openai").make)
    assert _registry.register_backend(traits) is traits
    assert _registry.register_backend(traits) is traits  # the same object again: no change
    other = _registry.BackendTraits(kind="twin", make=traits.make, logprobs=True)
    with pytest.raises(ValueError, match="already registered"):
        _registry.register_backend(other)
    assert _registry.register_backend(other, replace=True).logprobs
    with pytest.raises(ValueError, match="structured_modes"):
        _registry.BackendTraits(kind="bad", make=traits.make, structured_modes=("xml",))
    with pytest.raises(ValueError, match="kind"):
        _registry.BackendTraits(kind="a b", make=traits.make)
