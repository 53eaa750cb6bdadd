"""Every code block of the documentation site (mkdocs.yml's nav) is run here, or says why not.

Each page's blocks are taken in order, as a reader would type them, in a fresh directory that
holds the files the pages name (``data.jsonl``: the bundled example; ``labelled.jsonl``: a few
rows with a ``human_correct`` label; ``examples/`` and ``docs/examples/`` as in a checkout),
with the judge the project's test server on 127.0.0.1 reached through the environment
(OPENAI_BASE_URL, OPENAI_API_KEY, RAGEVAL_LLM) as a user's would be, and MLflow pointed at a
local file store:

- ``python``: executed as a script would run it (a top-level ``await`` is a SyntaxError), the
  page's blocks in one namespace, which starts with ``data`` (the data file) and ``judge`` (a
  Judge of the test server) for the fragments that use the reader's own;
- ``bash``, ``console``: must be marked, on the line before the fence, ``<!-- run -->`` (run
  with bash in that directory, ``$`` prompts dropped; it must exit 0) or
  ``<!-- not run: REASON -->``;
- ``toml``, ``json``, ``jsonl``: parsed; ``text``: output shown, nothing to run;
- any other language, or none, fails the test: a block cannot be skipped silently.

``<!-- not run: REASON -->`` before a Python block skips it too, with its reason. A page whose
blocks another test runs is named in ``RUN_ELSEWHERE`` with that test, which must exist.
"""

from __future__ import annotations

import inspect
import json
import re
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from helpers import Block, handle, markdown_blocks, run_as_pytest_file, run_shell
from rageval.testing import FAKE_API_KEY, FakeOpenAI

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: pages whose blocks another test runs as written (with what it needs to, said there)
RUN_ELSEWHERE = {
    "writing-metrics.md": "tests/test_docs_writing_metrics.py::test_the_guide_runs_as_written",
    "ci.md": "tests/test_docs_site.py::test_the_pytest_plugin_page_runs_as_a_test",
}
_SHELL = {"bash", "console"}
_DATA = {"toml", "json", "jsonl"}

#: the labelled file the calibration pages name: two metrics' worth of yes/no labels
LABELLED = [
    {"question": q, "answer": a, "ground_truth": g, "human_correct": label}
    for q, a, g, label in [
        ("Who wrote Dune?", "Frank Herbert.", "Frank Herbert", "yes"),
        ("Capital of Australia?", "Sydney", "Canberra", "no"),
        ("Boiling point of water at sea level?", "100 °C", "100 degrees Celsius", "yes"),
        ("Largest planet?", "Saturn", "Jupiter", "no"),
    ]
]


def site_pages() -> list[str]:
    """The pages of mkdocs.yml's nav, relative to docs/, in nav order."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, str):
            found.append(node)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            for value in node.values():
                walk(value)

    walk(config["nav"])
    return found


def excluded_pages() -> set[str]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    return {line.strip() for line in config.get("exclude_docs", "").splitlines() if line.strip()}


@pytest.fixture
def reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """A reader's fresh directory and environment, the judge being the test server."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(ROOT / "examples" / "rag_sample.jsonl", tmp_path / "data.jsonl")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    # the files the pages' examples read, where a reader in a checkout finds them
    if (DOCS / "examples").is_dir():
        shutil.copytree(DOCS / "examples", tmp_path / "docs" / "examples")
    (tmp_path / "labelled.jsonl").write_text(
        "".join(json.dumps(row) + "\n" for row in LABELLED), encoding="utf-8"
    )
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    monkeypatch.setenv("RAGEVAL_LLM", "gpt-4o-mini")
    monkeypatch.setenv("RAGEVAL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    with FakeOpenAI(handle) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        yield server


def _run_shell(block: Block, where: str) -> None:
    exit = re.match(r"run: exit (\d+)", block.mark or "")
    code = block.code
    if block.language == "console":  # the commands are the lines after a "$ " prompt
        code = "".join(line[2:] + "\n" for line in code.splitlines() if line.startswith("$ "))
    run_shell(code, where=where, exit=int(exit.group(1)) if exit else 0)


def run_page(page: Path, *, python: bool = True) -> dict[str, int]:
    """Run (or parse, or skip as marked) every block of `page`; what was done, counted.
    `python=False` leaves the Python blocks to the test that runs them (``RUN_ELSEWHERE``)."""
    from rageval import llm_factory

    scope: dict[str, Any] = {
        "__name__": f"docs_{page.stem.replace('-', '_')}",
        "data": "data.jsonl",
        "judge": llm_factory("gpt-4o-mini"),
    }
    done = {"ran": 0, "parsed": 0, "not run": 0, "shown": 0, "elsewhere": 0}
    for block in markdown_blocks(page):
        where = f"{page.name}:{block.line}"
        if block.mark and block.mark.startswith("not run"):
            done["not run"] += 1
        elif block.language == "python" and not python:
            done["elsewhere"] += 1
        elif block.language == "python":
            # as a script runs it: a top-level await is a SyntaxError here, as it is there
            exec(compile("\n" * (block.line - 1) + block.code, str(page), "exec"), scope)
            done["ran"] += 1
        elif block.language in _SHELL:
            assert block.mark and block.mark.startswith("run"), (
                f"{where}: mark a {block.language} block <!-- run --> or <!-- not run: REASON -->"
            )
            _run_shell(block, where)
            done["ran"] += 1
        elif block.language in _DATA:
            _parse(block)
            done["parsed"] += 1
        elif block.language == "text":
            done["shown"] += 1
        else:
            pytest.fail(f"{where}: a block in {block.language or 'no language'}: nothing runs it")
    return done


def _parse(block: Block) -> None:
    if block.language == "toml":
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover - Python 3.10
            import tomli as tomllib

        tomllib.loads(block.code)
    elif block.language == "json":
        json.loads(block.code)
    else:
        for line in block.code.splitlines():
            json.loads(line)


RUN_HERE = [p for p in site_pages() if p not in RUN_ELSEWHERE]


@pytest.mark.parametrize("name", RUN_HERE)
def test_every_block_of_the_page_runs(name: str, reader: FakeOpenAI) -> None:
    done = run_page(DOCS / name)
    assert sum(done.values()) == len(markdown_blocks(DOCS / name))


def test_every_page_of_docs_is_on_the_site_or_excluded() -> None:
    on_site = set(site_pages())
    excluded = excluded_pages()
    for page in DOCS.rglob("*.md"):
        name = page.relative_to(DOCS).as_posix()
        assert name in on_site or any(name.startswith(e.rstrip("/")) for e in excluded), name
    assert all((DOCS / name).exists() for name in on_site)


@pytest.mark.parametrize("name", sorted(RUN_ELSEWHERE))
def test_the_pages_run_elsewhere_are_run_there_and_their_other_blocks_here(
    name: str, reader: FakeOpenAI
) -> None:
    path, function = RUN_ELSEWHERE[name].split("::")
    assert f"def {function}(" in (ROOT / path).read_text(encoding="utf-8")
    done = run_page(DOCS / name, python=False)
    assert done["elsewhere"] > 0 and sum(done.values()) == len(markdown_blocks(DOCS / name))


def test_a_block_nothing_runs_fails_its_page(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```\nrageval evaluate data.jsonl\n```\n", encoding="utf-8")
    with pytest.raises(pytest.fail.Exception, match="no language"):
        run_page(page)
    page.write_text("# A page\n\n```bash\nrageval evaluate data.jsonl\n```\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="mark a bash block"):
        run_page(page)
    page.write_text(
        "# A page\n\n<!-- not run: needs the reader's own key -->\n```bash\nfalse\n```\n",
        encoding="utf-8",
    )
    assert run_page(page)["not run"] == 1


def test_the_getting_started_quickstart_is_the_readmes() -> None:
    readme = next(b for b in markdown_blocks(ROOT / "README.md") if b.section == "Quickstart")
    copy = next(b for b in markdown_blocks(DOCS / "getting-started.md") if b.language == "bash")
    assert copy.code == readme.code


def test_the_pytest_plugin_page_runs_as_a_test(reader: FakeOpenAI, tmp_path: Path) -> None:
    blocks = markdown_blocks(DOCS / "ci.md")
    assert [b.language for b in blocks] == ["python"]
    run_as_pytest_file(blocks[0].code, tmp_path / "project", env={"RAGEVAL_LLM": "gpt-4o-mini"})
    assert len(reader.chat_requests) > 0


#: ragas' public names (0.3 and 0.4: its metrics, their base classes, data classes, columns and
#: calls), each of which the "Coming from ragas" page must map
RAGAS_NAMES = """
Faithfulness faithfulness FaithfulnesswithHHEM AnswerRelevancy ResponseRelevancy
answer_relevancy AnswerSimilarity SemanticSimilarity answer_similarity AnswerCorrectness
answer_correctness FactualCorrectness ContextPrecision LLMContextPrecisionWithReference
context_precision LLMContextPrecisionWithoutReference ContextUtilization
NonLLMContextPrecisionWithReference IDBasedContextPrecision ContextRecall LLMContextRecall
context_recall NonLLMContextRecall IDBasedContextRecall ContextEntityRecall
context_entity_recall NoiseSensitivity ContextRelevance AnswerAccuracy ResponseGroundedness
RubricsScore InstanceRubrics AspectCritic SimpleCriteriaScore RougeScore BleuScore ChrfScore
ExactMatch StringPresence NonLLMStringSimilarity DistanceMeasure SummarizationScore
summarization_score MultiModalFaithfulness MultiModalRelevance DataCompyScore
LLMSQLEquivalence ToolCallAccuracy ToolCallF1 AgentGoalAccuracyWithReference
AgentGoalAccuracyWithoutReference TopicAdherenceScore
Metric MetricWithLLM MetricWithEmbeddings SingleTurnMetric MultiTurnMetric BaseMetric LLMMetric
DiscreteMetric NumericMetric RankingMetric discrete_metric numeric_metric ranking_metric
MetricResult MetricType MetricOutputType
SingleTurnSample MultiTurnSample HumanMessage AIMessage ToolMessage ToolCall EvaluationDataset
Dataset DataTable user_input response retrieved_contexts reference reference_contexts
retrieved_context_ids reference_context_ids multi_responses rubrics persona_name query_style
query_length reference_tool_calls reference_topics question answer contexts ground_truth
ground_truths
evaluate aevaluate column_map raise_exceptions show_progress batch_size RunConfig llm_factory
LangchainLLMWrapper LlamaIndexLLMWrapper embedding_factory OpenAIEmbeddings
HuggingFaceEmbeddings LangchainEmbeddingsWrapper single_turn_ascore ascore score to_pandas
""".split()  # noqa: SIM905  (120 names read better as lines of words)


def _ragas_map() -> list[tuple[set[str], set[str]]]:
    """(ragas names, rageval names) of each row of the page's tables."""
    rows = []
    text = (DOCS / "coming-from-ragas.md").read_text(encoding="utf-8")
    for line in text.splitlines():
        cells = line.split("|")
        if len(cells) < 4 or cells[1].strip() in ("ragas", "---"):
            continue
        # `metric.ascore(**fields)` names ascore: the object before the dot is the reader's
        names = [
            {n.rsplit(".", 1)[-1] for n in re.findall(r"`([\w.]+)[^`]*`", cell)}
            for cell in cells[1:3]
        ]
        rows.append((names[0], names[1]))
    return rows


def _exists_in_rageval(name: str) -> bool:
    import rageval
    import rageval.metrics
    from rageval import Conversation, EvaluationResult, Sample
    from rageval.metrics import Metric, metric_class
    from rageval.samples import FIELD_ALIASES

    fields = {*Sample.model_fields, *Conversation.model_fields, *FIELD_ALIASES}
    fields |= {*inspect.signature(rageval.aevaluate).parameters, *Metric.__annotations__}
    # evaluate's keyword options, some typed in a TypedDict (**options): as its docstring names them
    fields |= set(re.findall(r"`(\w+)`", inspect.getdoc(rageval.aevaluate) or ""))
    owners = (rageval, rageval.metrics, EvaluationResult, Metric)
    if name in fields or any(hasattr(owner, name) for owner in owners):
        return True
    try:
        metric_class(name)
    except KeyError:
        return False
    return True


def test_the_ragas_page_maps_every_ragas_name_to_a_rageval_name_that_exists() -> None:
    rows = _ragas_map()
    mapped = set().union(*(theirs for theirs, _ in rows))
    assert [n for n in RAGAS_NAMES if n not in mapped] == []
    ours = set().union(*(mine for _, mine in rows))
    assert len(ours) > 40
    assert sorted(n for n in ours if not _exists_in_rageval(n)) == []


def _hook(name: str) -> Any:
    """One of the site's MkDocs hooks (docs/hooks/NAME.py), imported from its file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        f"docs_hook_{name}", DOCS / "hooks" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_api_reference_documents_every_public_name_once() -> None:
    import rageval

    pages = _hook("reference").names_by_page(DOCS / "reference")
    assert set(pages) == {"running.md", "data.md", "judges.md", "metrics.md"}
    documented = [name for names in pages.values() for name in names]
    assert sorted(documented) == sorted(n for n in rageval.__all__ if n != "__version__")
    assert "load_samples" in pages["data.md"] and "Faithfulness" in pages["metrics.md"]
    # the synchronous forms are shown as such, not as an attribute and the call making it
    forms = _hook("reference").synchronous_forms()
    assert {name: coroutine for name, (coroutine, _) in forms.items()} == {
        "evaluate": "aevaluate",
        "calibrate": "acalibrate",
        "align": "aalign",
        "pairwise": "apairwise",
    }
    block = _hook("reference").block("evaluate", forms)
    assert "[`aevaluate`](#rageval.aevaluate)" in block and "worker thread" in block


def test_links_to_repository_files_lead_to_their_page_or_become_their_path() -> None:
    rewrite = _hook("repo_links").rewrite
    page = (
        "Numbers: [RESULTS](../benchmarks/RESULTS.md#speed), [code](../src/rageval/cli), "
        "[m](metrics.md)."
    )
    assert rewrite(page, "cost.md") == (
        "Numbers: [RESULTS](results.md), code (`src/rageval/cli` in the repository), "
        "[m](metrics.md)."
    )
    assert rewrite("[home](../../README.md)", "reference/data.md") == "[home](../index.md)"
    # on the page that stands for the file, the link is its path
    assert rewrite("[all](../benchmarks/RESULTS.md)", "results.md") == (
        "all (`benchmarks/RESULTS.md` in the repository)"
    )
