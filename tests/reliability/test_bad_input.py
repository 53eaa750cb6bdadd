"""A corpus of bad inputs: each gets a clear error naming row and field before any judge
request (or is accepted with documented behaviour), through the Python API and the CLI, and
never costs a finished run its results.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers import handle as synthetic_answer, run_cli_in_child, tagged_rows, tags_of, write_jsonl
from rageval.cli import main
from rageval.embeddings.openai import OpenAIEmbeddings
from rageval.judge import Judge
from rageval.results import EvaluationResult, load_run
from rageval.runner import RunConfigError, RunDirError, aevaluate, evaluate
from rageval.samples import InvalidDataError, load_samples
from rageval.testing import FAKE_API_KEY, FakeOpenAI, Fault, RecordedRequest, Reply

METRICS = ["faithfulness", "context_precision"]  # user_input, response, contexts, reference


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    with FakeOpenAI(synthetic_answer) as srv:
        yield srv


def judge(server: FakeOpenAI) -> Judge:
    return Judge("judge-model", base_url=server.base_url, api_key=FAKE_API_KEY, cache=False)


# ---------------------------------------------------------------------- building the corpus
def _jsonl(*objs: Any) -> bytes:
    return b"".join(
        (o if isinstance(o, bytes) else json.dumps(o).encode("utf-8")) + b"\n" for o in objs
    )


def _with(i: int, **changes: Any) -> dict[str, Any]:
    row = tagged_rows(1, start=i)[0]
    for key, value in changes.items():
        if value is _DROP:
            row.pop(key)
        else:
            row[key] = value
    return row


_DROP = object()
GOOD = tagged_rows(3)


def _csv(records: list[dict[str, Any]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["id", "user_input", "response", "retrieved_contexts", "reference"])
    for r in records:
        writer.writerow(
            [r["id"], r["user_input"], r["response"], r["retrieved_contexts"], r["reference"]]
        )
    return out.getvalue().encode("utf-8")


def _csv_row(r: dict[str, Any], contexts: str) -> dict[str, Any]:
    return {**r, "retrieved_contexts": contexts}


@dataclass(frozen=True)
class Bad:
    """One bad input file and what its error must say."""

    suffix: str
    content: bytes
    row: int | None  # None: a problem with the whole input
    field: str | None
    words: str = ""  # the message must also contain this

    def write(self, folder: Path, name: str) -> Path:
        path = folder / f"{name}{self.suffix}"
        path.write_bytes(self.content)
        return path


def _good_csv_rows() -> list[dict[str, Any]]:
    return [_csv_row(r, json.dumps(r["retrieved_contexts"])) for r in GOOD]


CORPUS: dict[str, Bad] = {
    "missing_question": Bad(".jsonl", _jsonl(GOOD[0], _with(1, user_input=_DROP)), 1, "user_input", "missing"),
    "missing_response": Bad(".jsonl", _jsonl(_with(0, response=_DROP)), 0, "response", "missing"),
    "missing_contexts": Bad(".jsonl", _jsonl(*GOOD[:2], _with(2, retrieved_contexts=_DROP)), 2, "retrieved_contexts", "missing"),
    "missing_reference": Bad(".jsonl", _jsonl(_with(0, reference=_DROP), GOOD[1]), 0, "reference", "missing"),
    "null_response": Bad(".jsonl", _jsonl(GOOD[0], _with(1, response=None)), 1, "response", "missing"),
    "legacy_names_with_a_gap": Bad(".jsonl", _jsonl({"question": "q?", "answer": "a.", "contexts": ["c"]}), 0, "reference", "missing"),
    "response_is_a_number": Bad(".jsonl", _jsonl(_with(0, response=42)), 0, "response", "string"),
    "question_is_a_list": Bad(".jsonl", _jsonl(GOOD[0], _with(1, user_input=["a", "b"])), 1, "user_input", "string"),
    "response_is_an_object": Bad(".jsonl", _jsonl(_with(0, response={"text": "nested"})), 0, "response", "string"),
    "contexts_as_a_string": Bad(".jsonl", _jsonl(GOOD[0], _with(1, retrieved_contexts="one context")), 1, "retrieved_contexts", "list of strings"),
    "contexts_hold_numbers": Bad(".jsonl", _jsonl(_with(0, retrieved_contexts=["ok", 7])), 0, "retrieved_contexts.1", "string"),
    "contexts_hold_null": Bad(".jsonl", _jsonl(_with(0, retrieved_contexts=[None])), 0, "retrieved_contexts.0", "string"),
    "contexts_as_an_object": Bad(".jsonl", _jsonl(_with(0, retrieved_contexts={"a": "b"})), 0, "retrieved_contexts", "list"),
    "nested_contexts": Bad(".jsonl", _jsonl(_with(0, retrieved_contexts=[["deep"]])), 0, "retrieved_contexts.0", "string"),
    "id_is_a_boolean": Bad(".jsonl", _jsonl(_with(0, id=True)), 0, "id", "string"),
    "duplicate_ids": Bad(".jsonl", _jsonl(GOOD[0], GOOD[1], _with(2, id=GOOD[0]["id"])), 2, "id", "duplicate id"),
    "metadata_not_an_object": Bad(".jsonl", _jsonl(_with(0, metadata="x")), 0, "metadata", "dictionary"),
    "nan_literal": Bad(".jsonl", b'{"user_input": NaN, "response": "r", "retrieved_contexts": ["c"], "reference": "x"}\n', 0, "user_input", "missing"),
    "infinity_literal": Bad(".jsonl", _jsonl(GOOD[0]) + b'{"user_input": "q", "response": Infinity, "retrieved_contexts": ["c"], "reference": "x"}\n', 1, "response", "string"),
    "lone_surrogate": Bad(".jsonl", _jsonl(GOOD[0]) + b'{"user_input": "q", "response": "a \\ud800 b", "retrieved_contexts": ["c"], "reference": "x"}\n', 1, "response", "lone surrogate ('\\ud800')"),
    "lone_surrogate_in_a_context": Bad(".json", json.dumps([_with(0, retrieved_contexts=["ok", "\udcff"])]).encode(), 0, "retrieved_contexts", "lone surrogate"),
    "lone_surrogate_in_another_column": Bad(".jsonl", _jsonl(_with(0, note="\udcff")), 0, "metadata", "its column 'note' holds a lone surrogate"),
    "non_utf8_line": Bad(".jsonl", _jsonl(GOOD[0], b'{"user_input": "caf\xe9", "response": "r"}'), 1, None, "UTF-8"),
    "invalid_json_line": Bad(".jsonl", _jsonl(GOOD[0], b'{"user_input": "q", "response": '), 1, None, "not valid JSON (Expecting value at column 33)"),
    "nested_too_deeply": Bad(".jsonl", _jsonl(GOOD[0]) + b'{"user_input": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n", 1, None, "nested too deeply"),
    "json_nested_too_deeply": Bad(".json", b"[" * 100_000 + b"]" * 100_000, None, None, "nested too deeply"),
    "array_line": Bad(".jsonl", _jsonl(["q", "a"]), 0, None, "expected an object"),
    "scalar_line": Bad(".jsonl", _jsonl(GOOD[0], GOOD[1], "just text"), 2, None, "expected an object"),
    "json_not_a_list": Bad(".json", b"42", None, None, "expected a list of objects"),
    "json_a_string": Bad(".json", b'"samples"', None, None, "expected a list of objects"),
    "json_item_not_an_object": Bad(".json", json.dumps([GOOD[0], [1, 2]]).encode(), 1, None, "expected an object"),
    "json_ragged_columns": Bad(".json", json.dumps({"user_input": ["a", "b"], "response": ["x"]}).encode(), None, None, "different lengths"),
    "json_columns_not_lists": Bad(".json", b'{"user_input": ["q"], "response": 7}', None, None, "'response' hold no list"),
    "json_rows_under_another_key": Bad(".json", json.dumps({"data": GOOD, "version": 2}).encode(), None, None, "the rows seem to be under 'data': give that list itself"),
    "json_one_row_as_columns": Bad(".json", json.dumps(GOOD[0]).encode(), None, None, "list of one row: [row]"),
    "json_empty_file": Bad(".json", b"", None, None, "not valid"),
    "json_non_utf8": Bad(".json", b'[{"user_input": "\xff"}]', None, None, "UTF-8"),
    "json_truncated": Bad(".json", json.dumps(GOOD).encode()[:-40], None, None, "not valid"),
    "csv_broken_context_cell": Bad(".csv", _csv([_good_csv_rows()[0], _csv_row(GOOD[1], '["first", "second"')]), 1, "retrieved_contexts", "JSON list"),
    "csv_context_not_json": Bad(".csv", _csv([_csv_row(GOOD[0], "first; second")]), 0, "retrieved_contexts", "JSON list"),
    "csv_context_is_an_object": Bad(".csv", _csv([_csv_row(GOOD[0], '{"a": 1}')]), 0, "retrieved_contexts", "list"),
    "csv_extra_cells": Bad(".csv", _csv(_good_csv_rows()[:1]) + b"s-X,q,r,\"[]\",ref,surplus\n", 1, None, "more cells than the header"),
    "csv_column_twice": Bad(".csv", b"user_input,response,user_input\nq,r,q2\n", None, None, "line 1: the header names column(s) 'user_input' more than once"),
    "csv_semicolons": Bad(".csv", b"user_input;response;reference\nq;r;x\n", None, None, "line 1: the header is one column, 'user_input;response;reference': this file's cells are separated by ';'"),
    "csv_quote_never_closed": Bad(".csv", _csv(_good_csv_rows()[:1]) + b'x,"q,r,[],ref\n', None, None, "line 3: not valid CSV (unexpected end of data: a quoted cell is never closed)"),
    "csv_text_after_a_quote": Bad(".csv", _csv(_good_csv_rows()[:1]) + b'x,"q" said,r,"[]",ref\n', None, None, "line 3: not valid CSV (',' expected after '\"': a quote opens"),
    "csv_context_nested_too_deeply": Bad(".csv", _csv([_csv_row(GOOD[0], "[" * 60_000 + "]" * 60_000)]), 0, "retrieved_contexts", "JSON list"),
    "csv_non_utf8": Bad(".csv", b"user_input,response\ncaf\xe9,r\n", None, None, "UTF-8"),
    "unsupported_suffix": Bad(".txt", b"question: what?\n", None, None, "unsupported file type"),
}  # fmt: skip


def assert_names_the_problem(message: str, case: Bad) -> None:
    if case.row is not None:
        # line-based files name the 1-based line (a CSV's first is its header); others the row
        line = {".jsonl": case.row + 1, ".csv": case.row + 2}.get(case.suffix)
        assert (f"row {case.row}" if line is None else f"line {line}") in message, message
    if case.field is not None:
        assert f"field '{case.field}'" in message, message
    assert case.words in message, message


def test_the_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 30


@pytest.mark.parametrize("name", list(CORPUS))
def test_python_api_names_row_and_field_before_any_request(
    name: str, server: FakeOpenAI, tmp_path: Path
) -> None:
    case = CORPUS[name]
    path = case.write(tmp_path, name)
    with pytest.raises(InvalidDataError) as info:
        evaluate(path, METRICS, llm=judge(server), run_dir=tmp_path / "run", progress=False)
    assert_names_the_problem(str(info.value), case)
    assert f"invalid input in {path}" in str(info.value)
    if case.row is not None:
        assert any(p.row == case.row for p in info.value.problems)
    assert server.requests == []
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("name", list(CORPUS))
def test_cli_exits_2_naming_row_and_field_without_a_traceback(
    name: str, server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = CORPUS[name]
    path = case.write(tmp_path, name)
    run = tmp_path / "run"
    args = ["evaluate", str(path), "-m", ",".join(METRICS), "--llm", "judge-model"]
    code = main([*args, "--base-url", server.base_url, "-o", str(run), "-q"])
    out, err = capsys.readouterr()
    assert code == 2
    assert_names_the_problem(err, case)
    assert "Traceback" not in err and out == ""
    assert server.requests == []
    assert not run.exists()


def test_cli_in_a_real_process(server: FakeOpenAI, tmp_path: Path) -> None:
    """The same through `python -m rageval`-like child processes: exit code, stderr, no stack."""
    env = {"PATH": "/usr/bin:/bin", "OPENAI_API_KEY": FAKE_API_KEY}
    for name in ("non_utf8_line", "contexts_as_a_string"):
        case = CORPUS[name]
        path = case.write(tmp_path, name)
        done = run_cli_in_child(
            "evaluate", path, "-m", ",".join(METRICS), "--llm", "judge-model",
            "--base-url", server.base_url, "-o", tmp_path / name, "-q", env=env,
        )  # fmt: skip
        assert done.returncode == 2, done.stderr
        assert_names_the_problem(done.stderr, case)
        assert "Traceback" not in done.stderr
    assert server.requests == []


# ---------------------------------------------------------------------- other entry points
def test_unknown_metric_names_fail_before_any_request(
    server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(RunConfigError, match=r"unknown metric 'faithfullness' \(did you mean"):
        evaluate(GOOD, ["faithfullness"], llm=judge(server), progress=False)
    path = tmp_path / "data.jsonl"
    write_jsonl(path, GOOD)
    code = main(["evaluate", str(path), "-m", "context_precison", "-o", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "unknown metric 'context_precison'" in err and "Traceback" not in err
    assert server.requests == [] and not (tmp_path / "r").exists()


def test_a_missing_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(FileNotFoundError):
        evaluate(tmp_path / "nope.jsonl", METRICS, progress=False)
    assert main(["evaluate", str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "r")]) == 2
    assert "not found" in capsys.readouterr().err


def test_objects_through_the_python_api(server: FakeOpenAI) -> None:
    import pandas as pd

    frame = pd.DataFrame(GOOD)
    frame.loc[1, "user_input"] = math.nan  # an empty cell of a required column
    cases: list[tuple[Any, int | None, str | None, str]] = [
        (frame, 1, "user_input", "missing"),
        ([GOOD[0], "a bare string"], 1, None, "expected a mapping"),
        ({"user_input": ["a", "b"], "response": ["x"]}, None, None, "different lengths"),
        ({"user_input": "ab", "response": "cd"}, None, None, "'user_input', 'response' hold no"),
        ({"user_input": ["ab"], "response": "c"}, None, None, "'response' hold no list"),
        (
            [GOOD[0], {**GOOD[1], "retrieved_contexts": ("a", 3)}],
            1,
            "retrieved_contexts.1",
            "string",
        ),
    ]
    for data, row, field, words in cases:
        with pytest.raises(InvalidDataError) as info:
            evaluate(data, METRICS, llm=judge(server), progress=False)
        assert_names_the_problem(str(info.value), Bad("", b"", row, field, words))
    assert server.requests == []


def test_nan_in_a_column_no_metric_needs_is_accepted(server: FakeOpenAI) -> None:
    import pandas as pd

    frame = pd.DataFrame(GOOD)
    frame.loc[0, "reference"] = math.nan
    result = evaluate(frame, ["faithfulness"], llm=judge(server), progress=False)
    assert result.statuses("faithfulness") == ["ok"] * 3
    assert result.samples[0] is not None and result.samples[0].reference is None


# ---------------------------------------------------------------------- documented acceptance
async def test_empty_strings_and_lists_are_valid_input_with_defined_scores(
    server: FakeOpenAI,
) -> None:
    data = [
        {
            "id": "blank",
            "user_input": "",
            "response": "",
            "retrieved_contexts": [],
            "reference": "",
        },
        {**GOOD[0], "retrieved_contexts": []},
        {**GOOD[1], "retrieved_contexts": ["", "  "]},
    ]
    metrics = ["faithfulness", "context_precision", "context_relevance", "answer_correctness"]
    embed = OpenAIEmbeddings("e", base_url=server.base_url, api_key=FAKE_API_KEY, cache=False)
    llm = judge(server)
    try:
        result = await aevaluate(data, metrics, llm=llm, embeddings=embed, progress=False)
    finally:  # their connections belong to this test's loop
        await llm.aclose()
        await embed.aclose()
    blank = result.sample("blank").cells
    assert blank["faithfulness"].status == "not_measured"
    assert "no factual statement" in (blank["faithfulness"].cause or "")
    assert blank["context_precision"].status == "not_measured"
    assert "reference is empty" in (blank["context_precision"].cause or "")
    # a blank question: nothing for the contexts to be relevant to
    assert blank["context_relevance"].status == "not_measured"
    assert blank["context_relevance"].cause_kind == "undefined"
    assert blank["answer_correctness"].status == "not_measured"
    for row in (1, 2):  # no usable context: both context metrics are 0 without asking
        cells = result.sample(row).cells
        assert (cells["context_precision"].value, cells["context_relevance"].value) == (0.0, 0.0)
        assert cells["answer_correctness"].status == "ok"
        assert cells["faithfulness"].status == "ok" and cells["faithfulness"].value == 0.0
    asked = [r for r in server.chat_requests if "<contexts>" in r.messages[-1]["content"]
             or "<passages>" in r.messages[-1]["content"]]  # fmt: skip
    assert all(tags_of(r) <= {"T000", "T001"} for r in asked)
    assert not any("blank" in json.dumps(r.body) for r in server.chat_requests)
    for m in metrics:
        assert all(v is None or math.isfinite(v) for v in result[m])


def test_unknown_columns_are_kept_as_metadata(server: FakeOpenAI, tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    write_jsonl(
        path, [{**r, "trace_id": f"tr-{i}", "latency_ms": 120 + i} for i, r in enumerate(GOOD)]
    )
    result = evaluate(
        path, ["faithfulness"], llm=judge(server), run_dir=tmp_path / "run", progress=False
    )
    assert result.statuses("faithfulness") == ["ok"] * 3
    assert [s.metadata for s in result.samples if s] == [
        {"trace_id": f"tr-{i}", "latency_ms": 120 + i} for i in range(3)
    ]
    stored = load_run(tmp_path / "run")
    assert stored.samples[2] is not None and stored.samples[2].metadata["trace_id"] == "tr-2"
    # metadata is the user's, not material for the judge
    assert not any("tr-1" in json.dumps(r.body) for r in server.chat_requests)


def _refuse_long_prompts(req: RecordedRequest) -> Reply | Fault:
    if req.prompt_chars > 1_000_000:
        return Fault.status(400, "This model's maximum context length is 128000 tokens.")
    return synthetic_answer(req)


def test_a_10mb_answer_is_not_measured_by_a_model_that_refuses_it_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    huge = "The harbour is large. " * 480_000  # ~10 MB
    data = [GOOD[0], {**GOOD[1], "response": huge}, GOOD[2]]
    path = tmp_path / "data.jsonl"
    write_jsonl(path, data)
    assert path.stat().st_size > 10_000_000
    with FakeOpenAI(_refuse_long_prompts) as srv:
        result = evaluate(path, METRICS, llm=judge(srv), progress=False)
        assert srv.handler_errors == []
    assert result.statuses("faithfulness") == ["ok", "not_measured", "ok"]
    cause = _cause(result, "faithfulness", 1)
    assert "prompt too long" in cause and "128000" in cause
    assert result.statuses("context_precision") == ["ok"] * 3  # the response is not in its prompt


def test_a_csv_cell_holding_a_whole_document_is_read(tmp_path: Path) -> None:
    """A cell over 131,072 characters (Python csv's default limit) was refused: 'field larger
    than field limit'; a JSONL line has no such limit."""
    document = "The harbour of T000 opened in 1900. " * 10_000  # 360,000 characters
    path = tmp_path / "long.csv"
    path.write_bytes(_csv([_csv_row(GOOD[0], json.dumps([document]))]))
    loaded = load_samples(path)
    assert loaded.problems == []
    [sample] = loaded.samples
    assert sample is not None and sample.retrieved_contexts == [document]


def test_thousands_of_contexts_are_judged_in_requests_of_a_hundred(server: FakeOpenAI) -> None:
    # 3,000 verdicts do not fit in any model's reply: 100 contexts per request, each request
    # with a reply budget for its 100 verdicts
    contexts = [f"Passage {k} of T000 about the harbour." for k in range(3000)]
    data = [{**GOOD[0], "retrieved_contexts": contexts}]
    result = evaluate(data, ["context_precision"], llm=judge(server), progress=False)
    cell = result.cells("context_precision")[0]
    assert cell is not None and cell.status == "ok" and cell.value is not None
    assert [c.id for c in cell.evidence["verdicts"]] == [f"c{k}" for k in range(1, 3001)]
    assert len(server.chat_requests) == 30
    assert all(
        r.schema is not None and len(r.schema["required"]) == 100 for r in server.chat_requests
    )


def _cause(result: EvaluationResult, metric: str, row: int) -> str:
    cell = result.cells(metric)[row]
    assert cell is not None and cell.cause is not None
    return cell.cause


def test_skip_invalid_scores_the_good_rows_and_never_asks_about_the_bad_ones(
    server: FakeOpenAI,
) -> None:
    data = [GOOD[0], {**GOOD[1], "retrieved_contexts": "flat"}, GOOD[2], _with(3, reference=None)]
    result = evaluate(data, METRICS, llm=judge(server), on_invalid="skip", progress=False)
    assert result.statuses("faithfulness") == ["ok", "skipped", "ok", "ok"]
    assert result.statuses("context_precision") == ["ok", "skipped", "ok", "skipped"]
    assert "retrieved_contexts" in _cause(result, "faithfulness", 1)
    assert "'reference'" in _cause(result, "context_precision", 3)
    asked = {t for r in server.chat_requests for t in tags_of(r)}
    assert "T001" not in asked and {"T000", "T002", "T003"} <= asked


# ---------------------------------------------------------------------- nothing finished is lost
def _snapshot(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(run.iterdir()) if p.is_file()}


@pytest.fixture
def interrupted_run(server: FakeOpenAI, tmp_path: Path) -> tuple[Path, Path]:
    """A run directory of 4 rows of which 2 are finished, as a killed run leaves it."""
    data = tmp_path / "data.jsonl"
    write_jsonl(data, tagged_rows(4))
    run = tmp_path / "run"
    evaluate(data, METRICS, llm=judge(server), run_dir=run, progress=False)
    log = run / "results.jsonl"
    log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:2]))
    (run / "summary.json").unlink()
    (run / "report.html").unlink(missing_ok=True)
    server.reset()
    return data, run


def test_resuming_with_bad_input_keeps_every_finished_row(
    server: FakeOpenAI, interrupted_run: tuple[Path, Path], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    data, run = interrupted_run
    before = _snapshot(run)
    bad = tmp_path / "bad.jsonl"
    write_jsonl(
        bad, [*tagged_rows(3), {**tagged_rows(1, start=3)[0], "retrieved_contexts": "flat"}]
    )
    different = tmp_path / "different.jsonl"
    write_jsonl(different, [*tagged_rows(3), tagged_rows(1, start=7)[0]])

    with pytest.raises(InvalidDataError, match=r"line 4, .*field 'retrieved_contexts'"):
        evaluate(bad, METRICS, llm=judge(server), run_dir=run, resume=True, progress=False)
    with pytest.raises(RunDirError, match="data is not the same"):
        evaluate(different, METRICS, llm=judge(server), run_dir=run, resume=True, progress=False)
    for source, flag in ((bad, "--resume"), (bad, "-o"), (different, "--resume")):
        args = ["evaluate", str(source), "-m", ",".join(METRICS), "--llm", "judge-model"]
        code = main([*args, "--base-url", server.base_url, flag, str(run), "-q"])
        err = capsys.readouterr().err
        assert code == 2 and "Traceback" not in err, err
    assert server.requests == []
    assert _snapshot(run) == before

    # the good data still resumes the run, asking only about the rows not yet finished
    result = evaluate(data, METRICS, llm=judge(server), run_dir=run, resume=True, progress=False)
    assert result.complete
    kept = {
        json.loads(line)["id"].removeprefix("s-") for line in before["results.jsonl"].splitlines()
    }
    asked = {t for r in server.chat_requests for t in tags_of(r)}
    assert len(kept) == 2 and asked == {"T000", "T001", "T002", "T003"} - kept
    assert run.joinpath("results.jsonl").read_bytes().startswith(before["results.jsonl"])


# ---------------------------------------------------------------------- fixed findings
def test_a_none_row_in_a_list_is_an_error(server: FakeOpenAI) -> None:
    with pytest.raises(InvalidDataError, match="row 1"):
        evaluate([GOOD[0], None], METRICS, llm=judge(server), progress=False)
    assert server.requests == []


def test_a_byte_order_mark_is_accepted_as_in_csv(server: FakeOpenAI, tmp_path: Path) -> None:
    for suffix, body in ((".jsonl", _jsonl(*GOOD)), (".json", json.dumps(GOOD).encode())):
        path = tmp_path / f"bom{suffix}"
        path.write_bytes(b"\xef\xbb\xbf" + body)
        result = evaluate(path, ["faithfulness"], llm=judge(server), progress=False)
        assert result.statuses("faithfulness") == ["ok"] * 3


def test_an_empty_file_is_an_error(
    server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_bytes(b"")
    code = main(["evaluate", str(path), "-m", "token_f1", "-o", str(tmp_path / "r"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "no rows" in err and "Traceback" not in err


def test_data_of_an_unsupported_type_gets_a_clear_message(server: FakeOpenAI) -> None:
    for data in (42, None):
        with pytest.raises(InvalidDataError, match=type(data).__name__):
            evaluate(data, METRICS, llm=judge(server), progress=False)


def test_trec_files_with_bytes_that_are_not_utf8_name_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels, run = tmp_path / "qrels.txt", tmp_path / "run.txt"
    qrels.write_bytes(b"\xef\xbb\xbfq1 0 d1 1\nq1 0 caf\xe9 1\n")  # a BOM is fine, Latin-1 is not
    run.write_bytes(b"q1 Q0 d1 1 2.0 bm25\n")
    args = ["evaluate", "--qrels", str(qrels), "--run", str(run), "-o", str(tmp_path / "r")]
    assert main([*args, "-q"]) == 2
    err = capsys.readouterr().err
    assert "qrels.txt: line 2: not valid UTF-8" in err and "Traceback" not in err
    assert main([*args[:2], str(tmp_path), *args[3:]]) == 2
    assert "qrels file is a directory" in capsys.readouterr().err


def test_a_dataframe_read_from_a_csv_with_list_cells_says_how_to_read_them(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    """pandas.read_csv keeps a list cell as its text: the error says so and how to fix it."""
    import pandas as pd

    path = tmp_path / "ragas.csv"
    path.write_bytes(_csv(_good_csv_rows()))
    assert (
        evaluate(path, METRICS, llm=judge(server), progress=False).statuses("faithfulness")
        == ["ok"] * 3
    )
    asked = len(server.requests)  # by the CSV file's run
    with pytest.raises(InvalidDataError) as info:
        evaluate(pd.read_csv(path), METRICS, llm=judge(server), progress=False)
    assert "row 0, id 's-T000', field 'retrieved_contexts'" in str(info.value)
    assert "a list written as text" in str(info.value) and "CSV file itself" in str(info.value)
    assert asked > 0 and len(server.requests) == asked  # none for the DataFrame


def test_a_missing_local_model_stops_a_judge_metric_that_embeds_before_any_request(
    server: FakeOpenAI,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Its cells used to fail one by one (metric_error) after their judge calls were paid."""
    monkeypatch.setenv("RAGEVAL_MINILM_DIR", str(tmp_path))  # no model files there
    with pytest.raises(RunConfigError, match="answer_correctness embeds with the local model"):
        evaluate(GOOD, ["faithfulness", "answer_correctness"], llm=judge(server), progress=False)
    path = tmp_path / "data.jsonl"
    write_jsonl(path, GOOD)
    args = ["evaluate", str(path), "-m", "answer_relevancy", "--llm", "judge-model", "-q"]
    assert main([*args, "--base-url", server.base_url, "-o", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "model.safetensors" in err and "Traceback" not in err
    assert server.requests == [] and not (tmp_path / "r").exists()
    # a metric that only embeds costs nothing: its cells say why they have no value
    result = evaluate(GOOD, ["semantic_similarity"], progress=False)
    assert result.statuses("semantic_similarity") == ["not_measured"] * 3


def test_arguments_of_the_wrong_type_get_a_clear_message(server: FakeOpenAI) -> None:
    """Each was an AttributeError or "'int' object is not iterable" from deep inside."""
    cases: list[tuple[dict[str, Any], type[Exception], str]] = [
        ({"llm": 123}, RunConfigError, "llm must be a Judge, a model name, a Panel or a non"),
        ({"embeddings": 3}, RunConfigError, "embeddings must be an Embeddings object"),
        ({"column_map": ["a"]}, ValueError, "column_map must be a dict"),
    ]
    for kwargs, error, words in cases:
        with pytest.raises(error, match=words):
            evaluate(GOOD, ["faithfulness", "semantic_similarity"], progress=False, **kwargs)
    assert server.requests == []
