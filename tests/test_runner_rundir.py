"""The run directory: files, resume after an interruption, refusing a different run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from helpers import make_judge, rows, sample_id_of
from rageval.cli import main
from rageval.log import read_summary
from rageval.report._model import RunData
from rageval.results import load_run
from rageval.runner import RunDirError, evaluate
from rageval.testing import FAKE_API_KEY, FakeOpenAI

METRICS = ["faithfulness", "context_recall", "token_f1"]


def _values(result: Any) -> dict[tuple[str, str], Any]:
    return {
        (sid, m): (result[m][i], result.statuses(m)[i])
        for m in result.metrics
        for i, sid in enumerate(result.ids)
    }


def test_run_directory_files_follow_the_report_models(server: FakeOpenAI, tmp_path: Path) -> None:
    run = tmp_path / "run"
    result = evaluate(rows(4), METRICS, llm=make_judge(server), run_dir=run, progress=False)
    manifest = json.loads((run / "manifest.json").read_text())
    assert [m["name"] for m in manifest["metrics"]] == METRICS
    assert manifest["judge"]["model"] == "test-model"
    assert manifest["judge"]["base_url"] == server.base_url
    assert FAKE_API_KEY not in (run / "manifest.json").read_text()
    assert manifest["data"]["fingerprint"].startswith("sha256:")
    assert manifest["data"]["n_rows"] == 4
    lines = (run / "results.jsonl").read_text().splitlines()
    assert len(lines) == 4
    record = json.loads(lines[0])
    assert set(record) >= {"row", "id", "inputs", "metrics"}
    assert set(record["metrics"]["faithfulness"]) >= {
        "status",
        "value",
        "cause",
        "reason",
        "evidence",
        "usage",
    }
    loaded = RunData.load(run)  # the report's own models accept every file
    assert loaded.summary is not None
    assert loaded.summary.metrics["faithfulness"].n_measured == 4
    assert loaded.summary.usage.requests == result.usage.requests
    assert (run / "report.html").exists()


def test_a_result_read_back_from_disk_matches_the_one_returned(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    result = evaluate(
        rows(4), METRICS, llm=make_judge(server), run_dir=tmp_path / "r", progress=False
    )
    again = load_run(tmp_path / "r")
    assert _values(again) == _values(result)
    assert (
        again.sample("s001").cells["faithfulness"].evidence
        == result.sample("s001").cells["faithfulness"].evidence
    )
    assert again.usage == result.usage


def test_resume_recomputes_only_the_missing_rows_and_tolerates_a_torn_line(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    data = rows(8)
    full = evaluate(
        data, METRICS, llm=make_judge(server), run_dir=tmp_path / "full", progress=False
    )

    run = tmp_path / "cut"
    evaluate(data, METRICS, llm=make_judge(server), run_dir=run, progress=False)
    (run / "summary.json").unlink()
    lines = (run / "results.jsonl").read_bytes().splitlines(keepends=True)
    kept = lines[:5]
    finished = {json.loads(line)["id"] for line in kept}
    # the process "died" while writing the sixth line
    (run / "results.jsonl").write_bytes(b"".join(kept) + lines[5][: len(lines[5]) // 2])

    server.reset()
    resumed = evaluate(
        data, METRICS, llm=make_judge(server), run_dir=run, resume=True, progress=False
    )
    asked_for = {sample_id_of(r) for r in server.chat_requests}
    assert asked_for == {r["id"] for r in data} - finished
    assert _values(resumed) == _values(full)
    assert resumed.complete
    # the log is whole again: every line parses, one per row
    ids = [json.loads(line)["id"] for line in (run / "results.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(r["id"] for r in data)
    assert json.loads((run / "manifest.json").read_text())["resumed_at"]


def test_resuming_a_finished_run_sends_nothing(server: FakeOpenAI, tmp_path: Path) -> None:
    first = evaluate(
        rows(3), METRICS, llm=make_judge(server), run_dir=tmp_path / "r", progress=False
    )
    server.reset()
    again = evaluate(
        rows(3),
        METRICS,
        llm=make_judge(server),
        run_dir=tmp_path / "r",
        resume=True,
        progress=False,
    )
    assert server.requests == []
    assert _values(again) == _values(first)
    assert again.usage == first.usage  # usage of the rows done before comes from the log


def test_a_resumed_run_s_duration_is_all_of_its_time(server: FakeOpenAI, tmp_path: Path) -> None:
    # (issue 42: a resume of a finished run, which sends nothing, wrote 0.0 s as its duration)
    server.latency = 0.3  # each of the first run's requests: the run takes over 0.3 s
    first = evaluate(rows(2), METRICS, llm=make_judge(server), run_dir=tmp_path / "r",
                     progress=False)  # fmt: skip
    assert first.duration_s is not None and first.duration_s > 0.3
    again = evaluate(None, llm=make_judge(server), run_dir=tmp_path / "r", resume=True,
                     progress=False)  # fmt: skip
    assert again.duration_s is not None and again.duration_s >= first.duration_s
    summary = read_summary(tmp_path / "r")
    assert summary is not None and summary.duration_s == again.duration_s


def test_resume_refuses_a_different_run(server: FakeOpenAI, tmp_path: Path) -> None:
    run = tmp_path / "r"
    evaluate(rows(3), METRICS, llm=make_judge(server), run_dir=run, progress=False)
    other = rows(3)
    other[1]["response"] = "changed"
    with pytest.raises(RunDirError, match="data is not the same"):
        evaluate(other, METRICS, llm=make_judge(server), run_dir=run, resume=True, progress=False)
    with pytest.raises(RunDirError, match="metrics differ"):
        evaluate(
            rows(3),
            ["faithfulness"],
            llm=make_judge(server),
            run_dir=run,
            resume=True,
            progress=False,
        )
    with pytest.raises(RunDirError, match="already holds a run"):
        evaluate(rows(3), METRICS, llm=make_judge(server), run_dir=run, progress=False)
    with pytest.raises(RunDirError, match="holds no run"):
        evaluate(rows(3), METRICS, run_dir=tmp_path / "empty", resume=True, progress=False)


def test_a_damaged_log_is_an_error_not_silently_dropped_rows(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    run = tmp_path / "r"
    evaluate(rows(3), ["token_f1"], run_dir=run, progress=False)
    lines = (run / "results.jsonl").read_text().splitlines()
    lines[0] = lines[0][:20]
    (run / "results.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(RunDirError, match="damaged"):
        evaluate(rows(3), ["token_f1"], run_dir=run, resume=True, progress=False)


def test_overwrite_replaces_a_run_and_only_its_files(server: FakeOpenAI, tmp_path: Path) -> None:
    """The README's example re-run in the same notebook cell."""
    run = tmp_path / "run"
    (run / "notes").mkdir(parents=True)
    evaluate(rows(2), ["token_f1"], run_dir=run, progress=False)
    with pytest.raises(RunDirError, match=r"overwrite=True / --overwrite"):
        evaluate(rows(2), ["token_f1"], run_dir=run, progress=False)
    again = evaluate(rows(3), ["token_f1"], run_dir=run, overwrite=True, progress=False)
    assert again.complete and len(again) == 3
    assert len((run / "results.jsonl").read_text().splitlines()) == 3
    assert json.loads((run / "summary.json").read_text())["n_rows"] == 3
    assert len(json.loads((run / "data.json").read_text())) == 3  # the rows given now
    assert (run / "notes").is_dir()
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows(2)))
    evaluate(data, ["token_f1"], run_dir=run, overwrite=True, progress=False)
    assert not (run / "data.json").exists()  # a file's run keeps no copy
    with pytest.raises(ValueError, match="overwrite=True replaces it"):
        evaluate(rows(3), ["token_f1"], run_dir=run, resume=True, overwrite=True)


def test_resume_with_only_the_run_directory(
    server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    from rageval.judge import Judge

    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows(4)))
    run = tmp_path / "run"
    judge = Judge("test-model", base_url=server.base_url, max_concurrency=3, cache=False)
    first = evaluate(data, METRICS, llm=judge, run_dir=run, on_invalid="skip", progress=False)
    log = run / "results.jsonl"
    # lines are written in the order samples finish, not row order
    kept = log.read_bytes().splitlines(keepends=True)[:2]
    log.write_bytes(b"".join(kept))
    server.reset()

    result = evaluate(None, run_dir=run, resume=True, progress=False)
    assert result.metrics == METRICS and result.complete
    assert _values(result) == _values(first)
    asked = {sample_id_of(r) for r in server.chat_requests}
    assert asked == {f"s{i:03d}" for i in range(4)} - {json.loads(line)["id"] for line in kept}
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["on_invalid"] == "skip" and manifest["judge"]["max_concurrency"] == 3
    assert manifest["data"]["path"] == str(data.resolve())

    # a key given in Python is not in the run directory: the judge must be given again
    other = tmp_path / "other"
    evaluate(data, ["faithfulness"], llm=make_judge(server), run_dir=other, progress=False)
    (other / "results.jsonl").write_bytes(b"")
    with pytest.raises(RunDirError, match="pass the judge again"):
        evaluate(None, run_dir=other, resume=True, progress=False)
    resumed = evaluate(None, llm=make_judge(server), run_dir=other, resume=True, progress=False)
    assert resumed.complete


# the README's "## Python" data: ragas' legacy names
README_ROWS = [
    {
        "question": "When was the first Super Bowl?",
        "answer": "The first Super Bowl was held on January 15, 1967.",
        "contexts": ["Super Bowl I was played on January 15, 1967, in Los Angeles."],
        "ground_truth": "January 15, 1967",
    }
]


def test_resume_alone_of_data_given_in_memory_reads_the_copy_the_run_kept(
    server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the README promises for its own list of dicts: evaluate(None, run_dir=...,
    resume=True) continues the run with the data it was given."""
    from rageval.judge import Judge

    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    data = README_ROWS + rows(3)
    run = tmp_path / "run"
    judge = Judge("test-model", base_url=server.base_url, cache=False)
    first = evaluate(data, METRICS, llm=judge, run_dir=run, progress=False)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["data"]["path"] is None and manifest["data"]["rows_file"] == "data.json"
    log = run / "results.jsonl"
    log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:1]))
    (run / "summary.json").unlink()

    result = evaluate(None, run_dir=run, resume=True, progress=False)
    assert result.complete and _values(result) == _values(first)
    # and from the command line
    log.write_bytes(b"".join(log.read_bytes().splitlines(keepends=True)[:2]))
    assert main(["evaluate", "--resume", str(run), "-q"]) == 0
    assert load_run(run).complete and _values(load_run(run)) == _values(first)

    (run / "data.json").unlink()
    with pytest.raises(RunDirError, match=r"copy of its data \(list given in memory\) is gone"):
        evaluate(None, run_dir=run, resume=True, progress=False)


def test_the_copy_of_a_dataframe_gives_back_the_same_samples(
    server: FakeOpenAI, tmp_path: Path
) -> None:
    """Empty cells (NaN), numpy arrays and numbers, dates and NaN in extra columns, a column
    map and a row that cannot be read (skipped): the copy loads as the same data (the resume's
    fingerprint check would refuse it otherwise)."""
    import datetime

    import numpy as np
    import pandas as pd

    frame = pd.DataFrame(
        {
            "qid": np.array([7, 8, 9], dtype=np.int64),
            "user_input": ["q1", "q2", "q3"],
            "response": ["a one", "a two", "a three"],
            "retrieved_contexts": [np.array(["c1", "c2"]), np.array(["c3"]), "not a list"],
            "reference": ["a one", np.nan, "a three"],
            "asked_on": [datetime.datetime(2024, 5, 1, 12, 30)] * 3,
            "score": [0.5, np.nan, np.float32(1.5)],
        }
    )
    run = tmp_path / "run"
    first = evaluate(frame, ["token_f1", "rouge_l", "context_precision"],
                     llm=make_judge(server), column_map={"qid": "id"}, on_invalid="skip",
                     run_dir=run, progress=False)  # fmt: skip
    assert first.statuses("context_precision") == ["ok", "skipped", "skipped"]
    log = run / "results.jsonl"
    log.write_bytes(b"")
    result = evaluate(None, llm=make_judge(server), run_dir=run, resume=True, progress=False)
    assert result.complete and _values(result) == _values(first)
    assert result.ids == ["7", "8", "9"]
