"""The run log as a product: versioned files, one reader, logs of the first format, and the
numbers the summary and the report give (the report's total is summary.json's)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import test_metric_knowledge_retention as retention
import test_metric_topic_adherence as topics
from helpers import embedded_payload, handle, rows, sample_id_of
from rageval.judge import FatalJudgeError, Judge
from rageval.log import (
    FORMAT_VERSION,
    RESULTS_FILE,
    UNFINISHED_USAGE,
    RunLogError,
    SampleLine,
    read_lines,
    read_manifest,
    read_summary,
    written_format,
)
from rageval.metrics.evidence import (
    FreeformEvidence,
    OverlapEvidence,
    RatingEvidence,
    RetentionEvidence,
    TopicEvidence,
    VerdictEvidence,
)
from rageval.report import write_report
from rageval.report._model import RunData
from rageval.results import EvaluationResult, load_run
from rageval.runner import RunDirError, evaluate
from rageval.stats import compare
from rageval.testing import FakeOpenAI, Fault, RecordedRequest, Reply

FORMAT_1 = Path(__file__).parent / "data" / "runlog_format1"
FORMAT_2 = Path(__file__).parent / "data" / "runlog_format2"
FORMAT_3 = Path(__file__).parent / "data" / "runlog_format3"
METRICS = ["faithfulness", "answer_accuracy", "token_f1"]


def judge(server: FakeOpenAI, model: str = "gpt-4o-mini", **kw: Any) -> Judge:
    return Judge(model, base_url=server.base_url, api_key="sk-test", cache=False, **kw)


def copy_of_format_1(tmp_path: Path) -> Path:
    return Path(shutil.copytree(FORMAT_1, tmp_path / "old"))


def report_payload(run: Path) -> Any:
    return embedded_payload(write_report(run).read_text(encoding="utf-8"))


# ------------------------------------------------------------------ versions


def test_every_file_and_every_line_carries_the_format_version(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    evaluate(rows(4), METRICS, llm=judge(server), run_dir=tmp_path / "run", progress=False)
    run = tmp_path / "run"
    for name in ("manifest.json", "summary.json"):
        assert json.loads((run / name).read_text())["format_version"] == FORMAT_VERSION
    lines = (run / RESULTS_FILE).read_text().splitlines()
    assert len(lines) == 4
    assert all(json.loads(line)["format_version"] == FORMAT_VERSION for line in lines)
    assert written_format(read_manifest(run)) == FORMAT_VERSION


def test_a_run_of_the_first_format_loads_reports_and_compares(tmp_path: Path) -> None:
    run = copy_of_format_1(tmp_path)
    assert written_format(read_manifest(run)) == 1
    assert all(written_format(e.line) == 1 for e in read_lines(run / RESULTS_FILE))
    result = load_run(run)
    assert result.metrics == METRICS and result.complete
    assert result.ids == ["s000", "s001", "s002", "s003", "s004"]
    assert result.statuses("faithfulness")[2] == "not_measured"
    assert result.statuses("token_f1")[3] == "skipped"
    cell = result.sample("s002").cells["faithfulness"]
    assert cell.cause_kind is None and "re-ask" in (cell.cause or "")
    assert result.sample(0).cells["faithfulness"].evidence["statements"][0]["verdict"] is True
    # cells of a log that records no kind are grouped as "unknown"
    [group] = result.summary()["faithfulness"].failures
    assert (group.status, group.kind, group.count) == ("not_measured", "unknown", 1)
    assert group.examples[0].sample_ids == ["s002"]
    # the summary it wrote reads too: its causes become failures of kind "unknown"
    stored = read_summary(run)
    assert stored is not None and written_format(stored) == 1
    [skipped] = stored.metrics["token_f1"].failures
    assert (skipped.status, skipped.kind, skipped.count) == ("skipped", "unknown", 1)
    payload = report_payload(run)
    assert payload["has_summary"] is True and len(payload["samples"]) == 5
    # a usage block written before cached tokens were counted reads as none cached
    assert payload["usage"] == {
        **json.loads((run / "summary.json").read_text())["usage"],
        "cached_tokens": 0,
    }
    [faith] = [m for m in payload["metrics"] if m["name"] == "faithfulness"]
    assert faith["failures"][0]["kind"] == "unknown"
    [comparison, *_] = compare(result, load_run(run))
    assert comparison.diff.n_pairs == 4 and comparison.diff.mean_diff == 0


def test_a_run_of_the_first_format_cannot_be_resumed(tmp_path: Path) -> None:
    run = copy_of_format_1(tmp_path)
    before = {p.name: p.read_bytes() for p in run.iterdir()}
    data = json.loads((run / RESULTS_FILE).read_text().splitlines()[0])  # only for the shape
    assert "format_version" not in data
    with pytest.raises(RunDirError, match=r"older rageval \(run log format 1.*new run"):
        evaluate(rows(5), METRICS, run_dir=run, resume=True, progress=False)
    assert {p.name: p.read_bytes() for p in run.iterdir()} == before  # untouched


def make_runlog() -> ModuleType:
    """tests/data/make_runlog.py: the data and the judge the old runs were made with."""
    path = Path(__file__).parent / "data" / "make_runlog.py"
    spec = importlib.util.spec_from_file_location("make_runlog", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _cut_to_three_rows_and_resume(run: Path) -> EvaluationResult:
    """Resume `run` (an older format's) with this rageval, as if it had been killed after three
    rows: the lines it has are kept, the two rows left are scored."""
    log = run / RESULTS_FILE
    log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:3]))
    (run / "summary.json").unlink()
    old = make_runlog()
    with FakeOpenAI(old.judge_reply) as server:
        resumed = evaluate(
            old.rows(),
            METRICS,
            # a judge recorded before the scoring setting scored by sampled values
            llm=judge(server, scoring="sampled"),
            on_invalid="skip",
            run_dir=run,
            resume=True,
            progress=False,
            # a run recorded before rating metrics took `value` read them as "expected"
            metric_params={"answer_accuracy": {"value": "expected"}},
        )
        assert server.chat_requests  # the two rows left were scored
    return resumed


def test_a_run_of_the_second_format_loads_reports_compares_and_resumes(tmp_path: Path) -> None:
    run = Path(shutil.copytree(FORMAT_2, tmp_path / "old"))
    assert written_format(read_manifest(run)) == 2
    # what format 3 adds reads as what format 2 meant: no human labels, one scoring per cell
    result = load_run(run)
    assert result.complete and result.human_labels == [] and result.repeats == 1
    assert result.statuses("faithfulness")[2] == "not_measured"
    assert "re-ask" in (result.sample("s002").cells["faithfulness"].cause or "")
    stored = read_summary(run)
    assert stored is not None and written_format(stored) == 2
    assert stored.metrics["faithfulness"].ppi == {}
    assert stored.metrics["faithfulness"].judge_noise is None
    payload = report_payload(run)
    assert payload["has_summary"] is True and payload["calibration"] is None
    [comparison, *_] = compare(result, load_run(run))
    assert comparison.diff.n_pairs == 4 and comparison.ppi == []
    # an interrupted run of format 2 is finished by this rageval: the lines it has are kept,
    # the new ones and the manifest are of this format
    log = run / RESULTS_FILE
    resumed = _cut_to_three_rows_and_resume(run)
    assert resumed.complete and resumed["token_f1"] == result["token_f1"]
    manifest = read_manifest(run)
    assert written_format(manifest) == FORMAT_VERSION and len(manifest.resumed_at) == 1
    assert [written_format(e.line) for e in read_lines(log)] == [
        2,
        2,
        2,
        FORMAT_VERSION,
        FORMAT_VERSION,
    ]
    assert load_run(run).summary() == resumed.summary()


def test_a_run_of_the_third_format_reads_without_cached_tokens_and_resumes(
    tmp_path: Path,
) -> None:
    run = Path(shutil.copytree(FORMAT_3, tmp_path / "old"))
    assert written_format(read_manifest(run)) == 3
    # what format 4 adds reads as what format 3 meant: no cached tokens, no batches
    result = load_run(run)
    assert result.complete and read_manifest(run).batch is False
    assert result.usage.prompt_tokens > 0 and result.usage.cached_tokens == 0
    stored = read_summary(run)
    assert stored is not None and written_format(stored) == 3
    assert stored.usage.cached_tokens == 0 and stored.usage.cost_usd == result.usage.cost_usd
    log = run / RESULTS_FILE
    resumed = _cut_to_three_rows_and_resume(run)
    assert resumed.complete and resumed["token_f1"] == result["token_f1"]
    assert [written_format(e.line) for e in read_lines(log)] == [
        3,
        3,
        3,
        FORMAT_VERSION,
        FORMAT_VERSION,
    ]
    assert load_run(run).summary() == resumed.summary()


def test_a_newer_format_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    run = copy_of_format_1(tmp_path)
    manifest = json.loads((run / "manifest.json").read_text())
    (run / "manifest.json").write_text(
        json.dumps({**manifest, "format_version": FORMAT_VERSION + 1})
    )
    with pytest.raises(
        RunLogError, match=rf"newer rageval \(run log format {FORMAT_VERSION + 1}.*upgrade"
    ):
        load_run(run)
    (run / "manifest.json").write_text(json.dumps(manifest))
    lines = (run / RESULTS_FILE).read_text().splitlines()
    lines[2] = json.dumps({**json.loads(lines[2]), "format_version": FORMAT_VERSION + 1})
    (run / RESULTS_FILE).write_text("\n".join(lines) + "\n")
    with pytest.raises(RunLogError, match=r"results.jsonl:3: .*newer rageval"):
        load_run(run)


# ------------------------------------------------------------------ the one reader


def test_the_reader_leaves_out_a_torn_last_line_and_refuses_a_damaged_one(
    tmp_path: Path,
) -> None:
    run = copy_of_format_1(tmp_path)
    log = run / RESULTS_FILE
    whole = log.read_bytes()
    lines = whole.splitlines(keepends=True)
    complete = [json.loads(line)["id"] for line in lines[:-1]]
    for torn in (lines[-1][:-1], lines[-1][:50], lines[-1][:50] + b"\n"):
        log.write_bytes(b"".join(lines[:-1]) + torn)
        assert [e.line.id for e in read_lines(log)] == complete
        entries = list(read_lines(log))
        assert entries[-1].end == len(b"".join(lines[:-1]))
    log.write_bytes(lines[0] + lines[1][:40] + b"\n" + b"".join(lines[2:]))
    with pytest.raises(RunLogError, match=r"results.jsonl:2: damaged line"):
        list(read_lines(log))
    with pytest.raises(ValueError):  # RunLogError is still a ValueError
        load_run(run)


def test_a_line_reads_back_as_it_was_written(server: FakeOpenAI, tmp_path: Path) -> None:
    result = evaluate(rows(3), METRICS, llm=judge(server), run_dir=tmp_path / "r", progress=False)
    for entry in read_lines(tmp_path / "r" / RESULTS_FILE):
        again = result.sample(entry.line.id)
        assert entry.line.cells == again.cells
        assert entry.line.inputs == again.inputs
        assert entry.line.sample() == result.samples[entry.line.row]
        assert SampleLine.model_validate_json(entry.line.model_dump_json(by_alias=True)) == (
            entry.line
        )


def test_evidence_is_written_with_its_kind_and_read_back_typed(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    evaluate(rows(2), METRICS, llm=judge(server), run_dir=tmp_path / "r", progress=False)
    raw = json.loads((tmp_path / "r" / RESULTS_FILE).read_text().splitlines()[0])
    written = {name: cell["evidence"] for name, cell in raw["metrics"].items()}
    assert {name: ev["kind"] for name, ev in written.items()} == {
        "faithfulness": "verdicts",
        "answer_accuracy": "ratings",
        "token_f1": "overlap",
    }
    assert written["faithfulness"]["items"] == "statements"
    assert [v["verdict"] for v in written["faithfulness"]["verdicts"]] == [True, False]
    # read back from the log (evidence stays on disk), each cell's evidence is of its kind
    cells = load_run(tmp_path / "r").sample(0).cells
    faithfulness = cells["faithfulness"].evidence
    assert isinstance(faithfulness, VerdictEvidence)
    assert [v.verdict for v in faithfulness.verdicts] == [True, False]
    ratings = cells["answer_accuracy"].evidence
    assert isinstance(ratings, RatingEvidence) and set(ratings.ratings) == {
        "template_1",
        "template_2",
    }
    overlap = cells["token_f1"].evidence
    assert isinstance(overlap, OverlapEvidence) and overlap.counted == "shared_tokens"
    # the report gets the kind with the fields, to draw each kind its own way
    payload = report_payload(tmp_path / "r")
    # (the log holds rows in the order they finished; the report in row order)
    shown = next(s for s in payload["samples"] if s["row"] == raw["row"])
    assert shown["metrics"]["faithfulness"]["evidence"] == written["faithfulness"]


def test_the_conversation_judges_evidence_is_read_back_typed(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    retention.scripted(fake_openai)
    data = [{"id": "c0", "turns": retention.TURNS}]
    evaluate(data, ["knowledge_retention"], llm=judge(fake_openai), run_dir=tmp_path / "kr")
    kept = load_run(tmp_path / "kr").sample(0).cells["knowledge_retention"].evidence
    assert isinstance(kept, RetentionEvidence)
    assert [(t.turn, t.value) for t in kept.turns] == [(3, 1.0), (5, 0.0), (7, 1.0)]
    assert [v.verdict for v in kept.turns[1].facts.verdicts] == [True, False]
    topics.scripted(fake_openai)
    evaluate(
        [topics.conversation()],
        ["topic_adherence"],
        llm=judge(fake_openai),
        run_dir=tmp_path / "ta",
    )
    read = load_run(tmp_path / "ta").sample(0).cells["topic_adherence"].evidence
    assert isinstance(read, TopicEvidence) and read.turns == [0, 2, 4, 6, 8]
    assert [v.verdict for v in read.answered.verdicts] == list(topics.ANSWERED)


def _as_format_7(run: Path, evidence: dict[str, dict[str, Any]]) -> None:
    """Rewrite `run` as rageval of format 7 wrote it: an untyped dict as each cell's evidence."""
    log = run / RESULTS_FILE
    lines = [json.loads(text) for text in log.read_text().splitlines()]
    for line in lines:
        line["format_version"] = 7
        for name, cell in line["metrics"].items():
            cell["evidence"] = evidence[name]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    for name in ("manifest.json", "summary.json"):
        data = json.loads((run / name).read_text())
        (run / name).write_text(json.dumps({**data, "format_version": 7}))


def test_untyped_evidence_of_format_7_reads_as_free_form_and_renders(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    run = tmp_path / "r"
    evaluate(rows(2), METRICS, llm=judge(server), run_dir=run, progress=False)
    old_statements = [{"id": "s1", "text": "The sky is blue.", "verdict": True, "reason": None}]
    _as_format_7(
        run,
        {
            "faithfulness": {"statements": old_statements},
            # a metric's own "kind" key that happens to name a typed kind: still its own data
            "answer_accuracy": {"kind": "ratings", "note": "a user's metric said so"},
            "token_f1": {},
        },
    )
    cells = load_run(run).sample(0).cells
    faithfulness = cells["faithfulness"].evidence
    assert isinstance(faithfulness, FreeformEvidence)
    assert faithfulness["statements"][0]["verdict"] is True
    assert cells["answer_accuracy"].evidence == FreeformEvidence.of(
        {"kind": "ratings", "note": "a user's metric said so"}
    )
    assert not cells["token_f1"].evidence
    # the report shows it as free-form evidence (the page's generic view of its keys)
    shown = report_payload(run)["samples"][0]["metrics"]
    assert shown["faithfulness"]["evidence"] == {
        "kind": "free",
        "data": {"statements": old_statements},
    }
    assert shown["token_f1"]["evidence"] == {"kind": "free"}


# ------------------------------------------------------------------ one total, everywhere


def totals(run: Path) -> tuple[Any, Any]:
    """(the report's total usage, summary.json's)."""
    return report_payload(run)["usage"], json.loads((run / "summary.json").read_text())["usage"]


def test_the_reports_total_is_the_summarys(server: FakeOpenAI, tmp_path: Path) -> None:
    result = evaluate(rows(6), METRICS, llm=judge(server), run_dir=tmp_path / "r", progress=False)
    in_report, in_summary = totals(tmp_path / "r")
    assert in_report == in_summary == result.usage.to_dict()
    assert in_summary["cost_usd"] > 0 and in_summary["reasks"] == result.usage.reasks


def test_unknown_prices_are_unknown_in_the_summary_and_the_report(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    # a model priced nowhere: cost unknown, never a partial sum of the known parts
    partly = judge(server, model="no-such-price")
    result = evaluate(rows(3), METRICS, llm=partly, run_dir=tmp_path / "r", progress=False)
    in_report, in_summary = totals(tmp_path / "r")
    assert in_report == in_summary
    assert in_summary["cost_usd"] is None and in_summary["requests"] > 0
    assert result.summary()["token_f1"].usage.cost_usd == 0  # no request: nothing to price
    assert "unknown" in result.summary_table()


def test_an_interrupted_run_reports_the_total_of_what_finished(tmp_path: Path) -> None:
    # The endpoint refuses for good (401) any sample from s032 on: the first 32 samples (the
    # runner's window) are scored, and the first later sample to start stops the run.
    def refuse_late(request: RecordedRequest) -> Any:
        sid = sample_id_of(request)
        return Fault.status(401) if sid is not None and int(sid[1:]) >= 32 else handle(request)

    with FakeOpenAI(refuse_late) as srv, pytest.raises(FatalJudgeError):
        evaluate(rows(40), METRICS, llm=judge(srv), run_dir=tmp_path / "r", progress=False)
    run = tmp_path / "r"
    summary = read_summary(run)
    assert summary is not None and summary.n_rows == 40 and summary.n_finished is not None
    assert 0 < summary.n_finished <= 32
    in_report, in_summary = totals(run)
    assert in_report == in_summary and in_summary["cost_usd"] > 0
    # the summary is the sum of the finished lines: nothing booked twice, nothing lost
    assert in_summary == load_run(run).usage.to_dict()
    # what the rows begun and not finished used lives in the summary alone (the log has lines
    # of finished rows only): a run killed before it could write its summary loses it, and the
    # report sums the finished lines
    unfinished = summary.shared_usage[UNFINISHED_USAGE]
    assert unfinished.requests > 0
    (run / "summary.json").unlink()
    payload = report_payload(run)
    assert payload["has_summary"] is False
    for field in ("requests", "prompt_tokens", "completion_tokens", "total_tokens"):
        assert payload["usage"][field] == in_summary[field] - getattr(unfinished, field)
    assert unfinished.cost_usd is not None
    assert payload["usage"]["cost_usd"] == pytest.approx(
        in_summary["cost_usd"] - unfinished.cost_usd
    )


def test_the_report_of_a_killed_run_sums_every_row_not_only_those_it_shows(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    evaluate(rows(12), METRICS, llm=judge(server), run_dir=tmp_path / "r", progress=False)
    run = tmp_path / "r"
    want = json.loads((run / "summary.json").read_text())
    (run / "summary.json").unlink()
    data = RunData.load(run, max_samples=5)
    assert data.rows == [0, 1, 2, 3, 4] and data.samples_left_out == 7
    assert data.summary.usage.to_dict() == want["usage"]
    for name in METRICS:
        got = data.summary.metrics[name]
        assert got.n_cells == want["metrics"][name]["n_cells"] == 12
        assert got.usage.to_dict() == want["metrics"][name]["usage"]
        assert got.mean == pytest.approx(want["metrics"][name]["mean"])
        assert got.ci_low is None  # intervals need every value at once


def test_remote_embeddings_are_booked_on_the_lines(server: FakeOpenAI, tmp_path: Path) -> None:
    from rageval.embeddings.openai import OpenAIEmbeddings

    embeddings = OpenAIEmbeddings(
        "text-embedding-3-small", base_url=server.base_url, api_key="sk-test", cache=False
    )
    result = evaluate(
        rows(5),
        ["semantic_similarity"],
        embeddings=embeddings,
        run_dir=tmp_path / "r",
        progress=False,
    )
    lines = [e.line for e in read_lines(tmp_path / "r" / RESULTS_FILE)]
    booked = [line.embeddings_usage for line in lines if line.embeddings_usage is not None]
    assert sum(u.requests for u in booked) == len(server.embedding_requests) > 0
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    spent = summary["shared_usage"]["embeddings"]
    assert spent["requests"] == len(server.embedding_requests)
    assert spent["cost_usd"] > 0 and summary["usage"]["cost_usd"] == spent["cost_usd"]
    assert result.usage_by_metric["embeddings"].requests == spent["requests"]
    assert totals(tmp_path / "r")[0] == summary["usage"]


# ------------------------------------------------------------------ failures by kind


def test_many_failures_of_one_kind_are_one_group_with_a_few_examples(tmp_path: Path) -> None:
    def garbage(request: RecordedRequest) -> Any:
        if "SupportedVerdict" in json.dumps(request.schema):
            return Reply.json({})  # never a valid verdict per statement
        return handle(request)

    with FakeOpenAI(garbage) as srv:
        result = evaluate(
            rows(200),
            ["faithfulness", "token_f1"],
            llm=judge(srv),
            run_dir=tmp_path / "r",
            progress=False,
        )
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    [group] = summary["metrics"]["faithfulness"]["failures"]
    assert group["status"] == "not_measured" and group["count"] == 200
    assert 1 <= len(group["examples"]) <= 3
    assert sum(e["count"] for e in group["examples"]) <= 200
    assert all(len(e["sample_ids"]) <= 3 for e in group["examples"])
    assert group["examples"][0]["sample_ids"][0] in result.ids
    assert summary["metrics"]["token_f1"]["failures"] == []
    assert len(json.dumps(summary)) < 4000  # a handful of lines, not two hundred
    assert result.summary()["faithfulness"].failures[0].count == 200
