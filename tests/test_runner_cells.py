"""Finished cells kept across runs (rageval.runner._cells): a re-run costs no judge work, and
anything a cell's value depends on makes it a miss."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import EIGHT, handle, rows, sample_id_of
from rageval._client._cache import shared_cache
from rageval.embeddings import LocalEmbeddings
from rageval.judge import Judge, Usage
from rageval.runner import evaluate
from rageval.runner._cells import _source_digest
from rageval.testing import FAKE_API_KEY, FakeOpenAI, Reply

METRICS = ["faithfulness", "context_recall", "answer_accuracy"]


def judge(server: FakeOpenAI, **kw: Any) -> Judge:
    return Judge("test-model", base_url=server.base_url, api_key=FAKE_API_KEY, **kw)


def values(result: Any) -> dict[str, list[float | None]]:
    return {m: result[m] for m in METRICS}


def test_a_rerun_sends_nothing_and_gives_the_same_results(server: FakeOpenAI) -> None:
    first = evaluate(rows(4), METRICS, llm=judge(server), progress=False)
    sent = len(server.chat_requests)
    assert sent > 0 and first.usage.cache_hits == 0
    again = evaluate(rows(4), METRICS, llm=judge(server), progress=False)
    assert len(server.chat_requests) == sent
    assert values(again) == values(first)
    for sid in ("s000", "s003"):
        assert again.sample(sid).cells["faithfulness"].evidence == (
            first.sample(sid).cells["faithfulness"].evidence
        )
        # each kept cell books the requests computing it took (answer_accuracy's two
        # templates: 2) as answered from the cache
        for m in METRICS:
            took = first.sample(sid).cells[m].usage.requests
            assert again.sample(sid).cells[m].usage.cache_hits == took > 0
    # and the statements the kept cells were computed from, which nothing extracts again
    assert again.usage.cache_hits == first.usage.requests == sent
    assert f"({sent} judge calls answered from the cache)" in again.summary_table()
    assert shared_cache().stats()["entries"]["records"] == 4 * len(METRICS)


def test_a_rerun_of_every_judge_metric_reports_the_requests_the_first_run_sent(
    server: FakeOpenAI,
) -> None:
    # n generations in one request (answer_relevancy), two templates (answer_accuracy...),
    # the response's and the reference's statements (answer_correctness)
    first = evaluate(rows(3), list(EIGHT), llm=judge(server), progress=False)
    sent = len(server.chat_requests)
    assert first.usage.requests == sent and first.usage.cache_hits == 0
    again = evaluate(rows(3), list(EIGHT), llm=judge(server), progress=False)
    assert len(server.chat_requests) == sent
    assert again.usage.cache_hits == sent and again.usage.requests == 0
    assert again.summary_model().shared_usage == {
        tag: Usage(cache_hits=u.requests) for tag, u in first.summary_model().shared_usage.items()
    }
    assert f"({sent} judge calls answered from the cache)" in again.summary_table()


def test_a_rerun_on_an_endpoint_that_ignores_n_reports_calls_not_requests() -> None:
    # answer_relevancy asks its 3 questions as one call of n=3; llama.cpp and Ollama answer
    # one generation per request, so each call took 3 requests: the re-run saved 3 calls
    # (9 requests), and its summary says which it counts
    with FakeOpenAI(handle, ignore_n=True) as server:
        first = evaluate(rows(3), ["answer_relevancy"], llm=judge(server), progress=False)
        assert first.usage.requests == len(server.chat_requests) == 9
        again = evaluate(rows(3), ["answer_relevancy"], llm=judge(server), progress=False)
        assert len(server.chat_requests) == 9
    assert again.usage.cache_hits == 3 and again.usage.requests == 0
    assert "(3 judge calls answered from the cache)" in again.summary_table()


def test_a_rerun_embeds_nothing_again(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    """semantic_similarity asks no judge: its cells are kept in the run's judge's cache, so a
    re-run of the default metrics does not embed every text again with the local model (nor
    does answer_relevancy, whose kept cells hold their cosines)."""
    embedded: list[str] = []
    compute = LocalEmbeddings._embed_batches

    def counted(self: LocalEmbeddings, batches: list[list[str]]) -> Any:
        embedded.extend(text for batch in batches for text in batch)
        return compute(self, batches)

    monkeypatch.setattr(LocalEmbeddings, "_embed_batches", counted)
    first = evaluate(rows(4), llm=judge(server), progress=False)
    assert "semantic_similarity" in first.metrics and embedded
    embedded.clear()
    again = evaluate(rows(4), llm=judge(server), progress=False)  # new embeddings, new memory
    assert embedded == []
    for metric in first.metrics:
        assert again[metric] == first[metric]


def test_a_new_row_a_changed_sample_or_other_settings_are_computed(server: FakeOpenAI) -> None:
    evaluate(rows(3), ["faithfulness"], llm=judge(server), progress=False)
    asked = {sample_id_of(r) for r in server.chat_requests}
    assert asked == {"s000", "s001", "s002"}

    def asked_after(run: Any) -> set[str | None]:
        before = len(server.chat_requests)
        run()
        return {sample_id_of(r) for r in server.chat_requests[before:]}

    changed = rows(4)
    changed[1]["response"] += " Clouds are white."
    assert asked_after(
        lambda: evaluate(changed, ["faithfulness"], llm=judge(server), progress=False)
    ) == {"s001", "s003"}
    # another temperature is another judge: nothing kept applies
    assert asked_after(
        lambda: evaluate(
            rows(3), ["faithfulness"], llm=judge(server, temperature=0.5), progress=False
        )
    ) == {"s000", "s001", "s002"}


def test_metric_parameters_are_part_of_the_key(server: FakeOpenAI) -> None:
    from rageval.metrics.base import create_metric

    plain = create_metric("answer_correctness")
    weighted = create_metric("answer_correctness", {"weights": [1.0, 0.0]})
    assert plain.params() != weighted.params()
    first = evaluate(rows(2), [plain], llm=judge(server), progress=False)
    second = evaluate(rows(2), [weighted], llm=judge(server), progress=False)
    # computed again (its judge calls come from the request cache) and kept on its own
    assert second["answer_correctness"] != first["answer_correctness"]
    assert shared_cache().stats()["entries"]["records"] == 4


def test_cells_that_failed_are_not_kept() -> None:
    broken = {"s001"}

    def flaky(req: Any) -> Any:
        if sample_id_of(req) in broken:
            return Reply.text("not json at all")
        return handle(req)

    with FakeOpenAI(flaky) as srv:
        first = evaluate(rows(3), ["answer_accuracy"], llm=judge(srv, max_reasks=0), progress=False)
        assert first.statuses("answer_accuracy") == ["ok", "not_measured", "ok"]
        assert shared_cache().stats()["entries"]["records"] == 2
        broken.clear()
        before = len(srv.chat_requests)
        again = evaluate(rows(3), ["answer_accuracy"], llm=judge(srv, max_reasks=0), progress=False)
        assert {sample_id_of(r) for r in srv.chat_requests[before:]} == {"s001"}
    assert again.statuses("answer_accuracy") == ["ok", "ok", "ok"]


def test_a_judge_without_cache_keeps_nothing(server: FakeOpenAI, rageval_cache_dir: Path) -> None:
    metrics = [*METRICS, "token_f1"]  # nor the cells of a metric that asks no judge
    evaluate(rows(2), metrics, llm=judge(server, cache=False), progress=False)
    sent = len(server.chat_requests)
    evaluate(rows(2), metrics, llm=judge(server, cache=False), progress=False)
    assert len(server.chat_requests) == 2 * sent
    assert not rageval_cache_dir.exists()


def test_the_code_digest_changes_with_any_source_file(tmp_path: Path) -> None:
    (tmp_path / "metrics").mkdir()
    prompt = tmp_path / "metrics" / "some_metric.py"
    prompt.write_text('PROMPT = "Judge the answer."\n')
    (tmp_path / "notes.txt").write_text("not code")
    before = _source_digest(tmp_path)
    (tmp_path / "notes.txt").write_text("still not code")
    assert _source_digest(tmp_path) == before
    prompt.write_text('PROMPT = "Judge the answer strictly."\n')
    assert _source_digest(tmp_path) != before


_CUSTOM = """
from typing import ClassVar
from pydantic import BaseModel
from rageval.metrics.base import Metric, MetricResult

class Verdict(BaseModel):
    verdict: int

class Custom(Metric):
    name = "custom"
    needs_llm = True
    required_fields: ClassVar[tuple[str, ...]] = ("response",)

    async def measure(self, sample, ctx):
        reply = await ctx.ask([{"role": "user", "content": "PROMPT " + sample.response}], Verdict)
        return MetricResult.ok(SCALE * reply.verdict)
"""


def _load_custom(path: Path, scale: str) -> Any:
    import importlib.util

    path.write_text(_CUSTOM.replace("SCALE", scale))
    spec = importlib.util.spec_from_file_location(f"custom_{scale}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import would
    spec.loader.exec_module(module)
    return module.Custom


@pytest.fixture
def verdict_server() -> Any:
    with FakeOpenAI(lambda req: Reply.json({"verdict": 1})) as s:
        yield s


def test_a_metric_defined_outside_rageval_is_keyed_by_its_source_file(
    verdict_server: FakeOpenAI, tmp_path: Path
) -> None:
    data = [{"response": f"answer {i}"} for i in range(3)]
    llm = judge(verdict_server)
    first = evaluate(data, [_load_custom(tmp_path / "m.py", "1")()], llm=llm, progress=False)
    assert first["custom"] == [1.0, 1.0, 1.0]
    assert shared_cache().stats()["entries"]["records"] == 3
    # same prompts (answered by the request cache), new code: computed again, not reused
    again = evaluate(data, [_load_custom(tmp_path / "m.py", "2")()], llm=llm, progress=False)
    assert again["custom"] == [2.0, 2.0, 2.0]
    assert shared_cache().stats()["entries"]["records"] == 6


def test_a_metric_without_a_source_file_is_never_kept(verdict_server: FakeOpenAI) -> None:
    namespace: dict[str, Any] = {}
    exec(_CUSTOM.replace("SCALE", "1"), namespace)  # like a class typed into a REPL
    custom = namespace["Custom"]()
    result = evaluate([{"response": "a"}], [custom], llm=judge(verdict_server), progress=False)
    assert result["custom"] == [1.0]
    assert shared_cache().stats()["entries"]["records"] == 0


def test_a_cell_that_failed_is_tried_again_on_a_rerun() -> None:
    # what the README promises: a re-run reuses the cells that were measured and sends
    # requests only for the ones that were not (a failed request is never cached)
    failing = {"s001"}

    def flaky(req: Any) -> Any:
        if sample_id_of(req) in failing and req.schema and "SupportedVerdict" in str(req.schema):
            return Reply.text("not json")
        return handle(req)

    with FakeOpenAI(flaky) as srv:
        first = evaluate(rows(3), ["faithfulness"], llm=judge(srv), progress=False)
        assert first.statuses("faithfulness") == ["ok", "not_measured", "ok"]
        before = len(srv.chat_requests)
        failing.clear()  # the endpoint recovered
        again = evaluate(rows(3), ["faithfulness"], llm=judge(srv), progress=False)
        asked = [sample_id_of(r) for r in srv.chat_requests[before:]]
    assert again.statuses("faithfulness") == ["ok", "ok", "ok"]
    assert asked == ["s001"]  # its verdict request; its statements came from the cache
    # two kept cells (a verdict request and the statements each), one cached extraction
    assert again.usage.cache_hits == 2 * 2 + 1
