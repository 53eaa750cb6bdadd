"""`rageval label`: the labels file (appended, synced, one writer, a cut line left out), the
plan (which rows, with what probability), the session (label, skip, undo, a stale page) and
the server (127.0.0.1 only, the token, the Host), in process; then the command as a process:
a label survives ``kill -9``, reopening continues, a second server on the same file is
refused (exit 6) and nothing is lost or doubled."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from helpers import (
    BINARY_GRADES,
    BINARY_LABELS,
    PPI_GRADES,
    PPI_LABELS,
    grader,
    labelled_rows,
    write_jsonl,
)
from rageval.cli import main
from rageval.labelling import (
    LabellingRows,
    LabellingServer,
    LabelsFile,
    LabelsFileInUseError,
    PlanRecord,
    RowView,
    Scale,
    Session,
    make_plan,
    read_label_values,
    read_records,
    read_rows,
)
from rageval.labelling._file import PlannedRow
from rageval.labelling._rows import MetricView
from rageval.labelling._session import shared
from rageval.results import load_run
from rageval.samples import InvalidDataError
from rageval.stats import active_ppi_mean
from rageval.testing import FAKE_API_KEY, FakeOpenAI

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "rag_sample.jsonl"


def _rows(scores: list[float | None]) -> LabellingRows:
    views = [
        RowView(
            f"r{i}", i, f"question {i}", [f"context {i}"], f"answer {i}", None,
            {"faithfulness": MetricView(s, "ok" if s is not None else "not_measured")},
        )
        for i, s in enumerate(scores)
    ]  # fmt: skip
    return LabellingRows("memory", views, ["faithfulness"])


def _session(tmp_path: Path, labels: LabelsFile, **plan: Any) -> Session:
    rows = _rows([0.5, 0.9, 0.1, 1.0, 0.0, 0.6])
    made = make_plan(rows, **{"order": "file", "column": "human", "metric": "faithfulness",
                              "budget": 3, "seed": 0, **plan})  # fmt: skip
    labels.append(made)
    return Session(rows, labels, made, annotator="ann", scale=Scale((0.0, 1.0)))


def test_the_plan_in_file_order_chooses_every_row() -> None:
    plan = make_plan(_rows([0.5, 0.9, 0.1]), order="file", column="h", metric=None, budget=1,
                     seed=0)  # fmt: skip
    assert [(r.id, r.probability, r.chosen) for r in plan.rows] == [
        ("r0", 1.0, True), ("r1", 1.0, True), ("r2", 1.0, True),
    ]  # fmt: skip


def test_the_uncertain_plan_records_probabilities_that_follow_the_judge() -> None:
    rows = _rows([0.5, 1.0, 0.0, 0.5, None, 0.9])
    plan = make_plan(rows, order="uncertain", column="h", metric="faithfulness", budget=2, seed=3)
    p = {r.id: r.probability for r in plan.rows}
    # uncertainty √(p(1-p)): 0.5 -> 0.5, 1 and 0 -> 0, 0.9 -> 0.3, missing -> the largest (0.5);
    # shape 0.7/6 + 0.3·u/1.8 (the uniform share 0.7), times the budget 2
    for row_id, u in (("r0", 0.5), ("r1", 0.0), ("r2", 0.0), ("r4", 0.5), ("r5", 0.3)):
        assert p[row_id] == pytest.approx(2 * (0.7 / 6 + 0.3 * u / 1.8)), row_id
    assert sorted(p) == [f"r{i}" for i in range(6)]
    again = make_plan(rows, order="uncertain", column="h", metric="faithfulness", budget=2, seed=3)
    assert again.rows == plan.rows  # the seed fixes order and choices
    with pytest.raises(ValueError, match="needs a judge metric"):
        make_plan(rows, order="uncertain", column="h", metric=None, budget=2, seed=3)


def test_label_skip_undo_and_the_next_row(tmp_path: Path) -> None:
    with LabelsFile.open(tmp_path / "l.jsonl") as labels:
        session = _session(tmp_path, labels)
        assert session.state()["row"]["id"] == "r0"
        session.label("r0", 1.0, "clear")
        session.skip("r1")
        assert session.state()["row"]["id"] == "r2"
        session.undo()  # takes back the skip
        state = session.state()
        assert state["row"]["id"] == "r1" and state["done"] == 1
        assert state["last"] == {"id": "r0", "value": 1.0}
        with pytest.raises(ValueError, match="not on the scale"):
            session.label("r1", 2.0, None)
    records = read_records(tmp_path / "l.jsonl")
    assert [r.kind for r in records] == ["plan", "label", "skip", "undo"]
    label = records[1]
    assert label.model_dump(exclude={"time"}) == {
        "kind": "label", "id": "r0", "column": "human", "value": 1.0, "annotator": "ann",
        "probability": 1.0, "note": "clear",
    }  # fmt: skip
    assert read_label_values(tmp_path / "l.jsonl") == {"human": {"r0": (1.0, 1.0)}}


def test_statistics_weigh_the_labels(tmp_path: Path) -> None:
    with LabelsFile.open(tmp_path / "l.jsonl") as labels:
        session = _session(tmp_path, labels)
        for row_id, value in (("r0", 1.0), ("r1", 1.0), ("r2", 0.0)):
            session.label(row_id, value, None)
        stats = session.state()["statistics"]
    # every π = 1, rows r0-r2 visited: a = y = [1, 1, 0], b = f = [0.5, 0.9, 0.1]; over all
    # six judge values f̄ = 3.1/6, s²(f) = 0.828333/5; s(a, b) = 0.2, s²(b) = 0.16;
    # λ = 0.2 / (0.16 + (3/6)·s²(f)), θ̂ = λ·f̄ + mean(a) − λ·mean(b)
    var_f = 0.8283333333 / 5
    lam = 0.2 / (0.16 + 0.5 * var_f)
    assert stats["labelled_rows"] == 3
    assert stats["ppi"]["lam"] == pytest.approx(lam)
    assert stats["ppi"]["mean"] == pytest.approx(lam * 3.1 / 6 + 2 / 3 - lam * 0.5)
    # judge >= 0.5 as 1: (1,1), (1,1), (0,0) -> κ = 1
    assert stats["judge_kappa"]["value"] == pytest.approx(1.0)
    assert stats["annotators"] is None


def test_two_annotators_share_the_overlap_and_get_a_kappa(tmp_path: Path) -> None:
    rows = _rows([0.5, 0.9, 0.1, 1.0, 0.0, 0.6])
    with LabelsFile.open(tmp_path / "l.jsonl") as labels:
        plan = make_plan(rows, order="file", column="h", metric=None, budget=6, seed=0,
                         overlap=1.0)  # fmt: skip
        labels.append(plan)
        ann = Session(rows, labels, plan, annotator="ann", scale=Scale((0.0, 1.0)))
        bob = Session(rows, labels, plan, annotator="bob", scale=Scale((0.0, 1.0)))
        for row_id, a, b in (("r0", 1, 1), ("r1", 1, 0), ("r2", 0, 0), ("r3", 0, 0)):
            ann.label(row_id, a, None)
            assert bob.state()["row"]["id"] == row_id  # overlap 1: bob labels it too
            bob.label(row_id, b, None)
        people = ann.state()["statistics"]["annotators"]
    # (1,1), (1,0), (0,0), (0,0): agreement 3/4, chance 0.5·0.25 + 0.5·0.75 = 0.5 -> κ = 0.5
    assert people["pair"] == ["ann", "bob"] and people["rows"] == 4
    assert people["kappa"]["value"] == pytest.approx(0.5)
    assert read_label_values(tmp_path / "l.jsonl")["h"]["r1"] == (1.0, 1.0)  # ann's: the first


def test_without_overlap_a_row_labelled_by_one_annotator_is_not_offered_to_another(
    tmp_path: Path,
) -> None:
    rows = _rows([0.5, 0.9])
    with LabelsFile.open(tmp_path / "l.jsonl") as labels:
        plan = make_plan(rows, order="file", column="h", metric=None, budget=2, seed=0)
        labels.append(plan)
        Session(rows, labels, plan, annotator="ann", scale=Scale((0.0, 1.0))).label("r0", 1, None)
        bob = Session(rows, labels, plan, annotator="bob", scale=Scale((0.0, 1.0)))
        assert bob.state()["row"]["id"] == "r1"
    assert shared("r0", 1.0) and not shared("r0", 0.0)


def test_a_line_cut_short_is_left_out_and_the_next_record_starts_a_line(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    with LabelsFile.open(path) as labels:
        _session(tmp_path, labels)
    with path.open("ab") as f:
        f.write(b'{"kind":"label","id":"r0"')  # a writer killed mid-line
    assert [r.kind for r in read_records(path)] == ["plan"]
    with LabelsFile.open(path) as labels:
        session = Session(_rows([0.5] * 6), labels, read_records(path)[0],  # type: ignore[arg-type]
                          annotator="ann", scale=Scale((0.0, 1.0)))  # fmt: skip
        session.label("r0", 0.0, None)
    assert [r.kind for r in read_records(path)] == ["plan", "label"]


def test_a_second_writer_of_the_labels_file_is_refused(tmp_path: Path) -> None:
    refused: list[BaseException] = []

    def second() -> None:  # another thread: the lock's table refuses it as another process
        try:
            with LabelsFile.open(tmp_path / "l.jsonl"):
                pass
        except LabelsFileInUseError as e:
            refused.append(e)

    with LabelsFile.open(tmp_path / "l.jsonl"):
        thread = threading.Thread(target=second)
        thread.start()
        thread.join(10)
    assert len(refused) == 1 and "another `rageval label`" in str(refused[0])
    with LabelsFile.open(tmp_path / "l.jsonl"):  # given up on the way out
        pass


def test_rows_of_a_run_directory_carry_the_metrics(tmp_path: Path) -> None:
    rows = read_rows(Path(__file__).parent / "data" / "runlog_format3")
    assert rows.metrics == ["faithfulness", "answer_accuracy", "token_f1"]
    first = rows.rows[0].payload()
    assert first["id"] == "s000" and first["metrics"]["faithfulness"]["value"] == 0.5
    assert first["metrics"]["faithfulness"]["evidence"]["data"]["statements"][0]["id"] == "s1"


# ---------------------------------------------------------------------------- the server


def _request(url: str, *, token: str | None = None, body: Any = None,
             host: str | None = None) -> tuple[int, Any]:  # fmt: skip
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["X-Rageval-Token"] = token
    if host is not None:
        headers["Host"] = host
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as response:
            raw = response.read()
            status = response.status
    except urllib.error.HTTPError as e:
        raw, status = e.read(), e.code
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode()


@contextmanager
def _served(tmp_path: Path) -> Iterator[LabellingServer]:
    with LabelsFile.open(tmp_path / "l.jsonl") as labels:
        server = LabellingServer(_session(tmp_path, labels))
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server
        finally:
            server.shutdown()
            server.server_close()
            thread.join(5)


def test_the_server_listens_on_loopback_and_wants_its_token(tmp_path: Path) -> None:
    with _served(tmp_path) as server:
        assert server.server_address[0] == "127.0.0.1"
        base = f"http://127.0.0.1:{server.server_port}"
        assert _request(f"{base}/")[0] == 403
        assert _request(f"{base}/?token=wrong")[0] == 403
        assert _request(f"{base}/api/state", token="wrong")[0] == 403
        status, page = _request(server.url)
        assert status == 200 and "Content-Security-Policy" in page
        # another Host (a page elsewhere reaching the port by DNS rebinding): refused
        assert _request(server.url, host="evil.example:80")[0] == 403
        # a POST with the token in the address only (a form on another site could): refused
        action = {"action": "label", "id": "r0", "value": 1}
        assert _request(f"{base}/api/action?token={server.token}", body=action)[0] == 403
        assert not any(r.kind == "label" for r in read_records(tmp_path / "l.jsonl"))


def test_the_server_labels_and_refuses_a_stale_page(tmp_path: Path) -> None:
    with _served(tmp_path) as server:
        url = f"http://127.0.0.1:{server.server_port}/api/action"
        status, state = _request(url, token=server.token,
                                 body={"action": "label", "id": "r0", "value": 1})  # fmt: skip
        assert status == 200 and state["row"]["id"] == "r1"
        # the same key press sent twice: the second names a row no longer next
        status, state = _request(url, token=server.token,
                                 body={"action": "label", "id": "r0", "value": 1})  # fmt: skip
        assert status == 409 and state["row"]["id"] == "r1"
        status, state = _request(url, token=server.token,
                                 body={"action": "label", "id": "r1", "value": 7})  # fmt: skip
        assert status == 400 and "not on the scale" in state["error"]
        assert _request(url, token=server.token, body={"action": "fly"})[0] == 400
    labels = [r for r in read_records(tmp_path / "l.jsonl") if r.kind == "label"]
    assert [(r.id, r.value) for r in labels] == [("r0", 1.0)]  # nothing doubled


# ---------------------------------------------------------------------- the command


@contextmanager
def _label_server(data: Path, *extra: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``rageval label DATA --annotator ann *extra`` in a child: the process and the URL it
    prints; the child is killed on the way out if it still runs."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "rageval", "label", str(data), "--annotator", "ann", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith("open: "):
                yield proc, line.split("open: ", 1)[1].strip()
                return
            if not line and proc.poll() is not None:
                break
        proc.kill()
        raise AssertionError(f"no URL printed: {proc.stderr.read() if proc.stderr else ''}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _label_next(url: str, value: int) -> str:
    base, token = url.split("/?token=")
    _, state = _request(f"{base}/api/state", token=token)
    row_id: str = state["row"]["id"]
    status, _ = _request(f"{base}/api/action", token=token,
                         body={"action": "label", "id": row_id, "value": value})  # fmt: skip
    assert status == 200
    return row_id


def test_a_label_survives_kill_9_and_a_second_server_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    shutil.copy(EXAMPLE, data)
    labels_file = tmp_path / "data.jsonl.labels.jsonl"
    with _label_server(data) as (proc, url):
        first = _label_next(url, 1)
        second = subprocess.run(
            [sys.executable, "-m", "rageval", "label", str(data)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert second.returncode == 6, second.stderr
        assert "being written by another `rageval label`" in second.stderr
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert read_label_values(labels_file) == {"human": {first: (1.0, 1.0)}}
    with _label_server(data) as (proc, url):  # reopened: the same plan, the next row
        base, token = url.split("/?token=")
        _, state = _request(f"{base}/api/state", token=token)
        assert state["done"] == 1 and state["row"]["id"] != first
        second_id = _label_next(url, 0)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
    assert read_label_values(labels_file) == {"human": {first: (1.0, 1.0), second_id: (0.0, 1.0)}}
    plans = [r for r in read_records(labels_file) if r.kind == "plan"]
    assert len(plans) == 1 and plans[0].order == "random"  # a data file: no judge to go by


# ------------------------------------------------------------ the labels file beside the data


def _without_labels(rows: list[dict[str, Any]], path: Path) -> Path:
    """`rows` written to `path` without their ``human`` column (the labels go to a labels
    file)."""
    write_jsonl(path, [{k: v for k, v in r.items() if k != "human"} for r in rows])
    return path


def _graded(*args: str | Path) -> int:
    """``rageval *args``, judged by the tests' grader (``--llm m`` on a fake server); its exit
    code."""
    with FakeOpenAI(grader) as server:
        return main([*map(str, args), "--llm", "m", "--base-url", server.base_url, "-q"])


def test_calibrate_reads_the_labels_file_beside_the_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The rows and labels of test_calibrate's κ-gate test, the labels from a labels file:
    the same κ (0.400)."""
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    rows = labelled_rows(BINARY_GRADES, BINARY_LABELS)
    data = _without_labels(rows, tmp_path / "data.jsonl")
    read = read_rows(data)
    with LabelsFile.open(tmp_path / "l.jsonl") as labels:
        plan = make_plan(read, order="file", column="human", metric=None, budget=10, seed=0)
        labels.append(plan)
        session = Session(read, labels, plan, annotator="ann", scale=Scale((0.0, 1.0)))
        for row in rows:
            session.label(row["id"], 1.0 if row["human"] == "yes" else 0.0, None)
        # a second person on four rows, after ann: ann 1 1 0 0, bob 1 0 0 0 -> agreement 3/4,
        # chance 0.5·0.25 + 0.5·0.75 = 0.5, κ = 0.5; calibrate uses ann's labels (the first)
        bob = Session(read, labels, plan, annotator="bob", scale=Scale((0.0, 1.0)))
        for row_id, value in (("r4", 1.0), ("r5", 0.0), ("r6", 0.0), ("r7", 0.0)):
            bob.label(row_id, value, None)
    code = _graded("calibrate", data, "--labels-file", tmp_path / "l.jsonl",
                   "--labels", "human=answer_accuracy", "-o", tmp_path / "run")  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "labels from" in err and "human (10 rows)" in err
    assert "the annotators ann and bob agree with each other at Cohen's κ 0.500" in err
    assert "on 4 rows" in err
    assert "Cohen's κ          0.400" in out


def test_a_labels_file_of_other_rows_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    shutil.copy(EXAMPLE, data)
    with LabelsFile.open(tmp_path / "l.jsonl") as labels:
        _session(tmp_path, labels).label("r0", 1.0, None)  # rows r0...: not the data's q1...
    code = main(["calibrate", str(data), "--labels-file", str(tmp_path / "l.jsonl"),
                 "--labels", "human=faithfulness"])  # fmt: skip
    assert code == 2
    assert "labels rows the data" in capsys.readouterr().err


def test_a_run_directory_is_labelled_in_uncertain_order_by_default(tmp_path: Path) -> None:
    run = tmp_path / "run"
    shutil.copytree(Path(__file__).parent / "data" / "runlog_format3", run)
    with _label_server(run, "--budget", "2") as (proc, url):
        base, token = url.split("/?token=")
        _, state = _request(f"{base}/api/state", token=token)
        assert (state["order"], state["metric"], state["column"]) == (
            "uncertain", "faithfulness", "human_faithfulness",
        )  # fmt: skip
        chosen = state["chosen"]
        assert (state["row"] is None) == (chosen == 0)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
    plan = read_records(run / "labels.jsonl")[0]
    # every faithfulness value is 0.5: the same uncertainty, so 2 of 5 rows' worth each
    assert plan.kind == "plan" and [r.probability for r in plan.rows] == pytest.approx([0.4] * 5)
    assert sum(r.chosen for r in plan.rows) == chosen


def test_evaluate_reads_human_labels_from_the_labels_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """tests/helpers.py's PPI rows, the labels of four rows from a labels file: the PPI++ mean
    worked by hand there, θ̂ = 0.5 + 0.125·λ with λ = (1/6) / (1/6 + 0.2291667)."""
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    data = _without_labels(labelled_rows(PPI_GRADES, PPI_LABELS), tmp_path / "data.jsonl")
    read = read_rows(data)
    with LabelsFile.open(tmp_path / "l.jsonl") as labels:
        plan = make_plan(read, order="file", column="human", metric=None, budget=8, seed=0)
        labels.append(plan)
        session = Session(read, labels, plan, annotator="ann", scale=Scale((0.0, 1.0)))
        for row_id, value in (("r0", 1.0), ("r1", 0.0), ("r2", 1.0), ("r3", 0.0)):
            session.label(row_id, value, None)
    code = _graded("evaluate", data, "--labels-file", tmp_path / "l.jsonl", "-m",
                   "answer_accuracy", "--human-labels", "human=answer_accuracy",
                   "-o", tmp_path / "run")  # fmt: skip
    assert code == 0, capsys.readouterr().err
    ppi = load_run(tmp_path / "run").summary()["answer_accuracy"].ppi["human"]
    lam = (1 / 6) / (1 / 6 + 0.2291666667)
    assert ppi.lam == pytest.approx(lam) and ppi.mean == pytest.approx(0.5 + 0.125 * lam)
    assert ppi.n_labelled == 4


def test_calibrate_weighs_rows_chosen_with_unequal_probabilities(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows r0-r4 had probability 1/2 (r0, r2, r4 chosen), r5-r9 probability 1. Judge (grade/4
    >= 0.5) and labels of the chosen rows, weighted 1/π: (1,1) r0 r2 -> 4, (1,0) r4 r5 -> 3,
    (0,1) r6 -> 1, (0,0) r7-r9 -> 3; agreement 7/11, chance (7·5 + 4·6)/121 = 59/121, κ =
    18/62. Unweighted (the run's own, on the 8 rows as a uniform sample): κ = 0.25."""
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    rows = labelled_rows(BINARY_GRADES, BINARY_LABELS)
    data = _without_labels(rows, tmp_path / "data.jsonl")
    plan = PlanRecord(
        order="uncertain", column="human", metric="answer_accuracy", seed=0, budget=8,
        rows=[PlannedRow(id=f"r{i}", probability=0.5 if i < 5 else 1.0,
                         chosen=i not in (1, 3)) for i in range(10)],
        time="2026-12-07T00:00:00+00:00",
    )  # fmt: skip
    with LabelsFile.open(tmp_path / "l.jsonl") as labels:
        labels.append(plan)
        session = Session(read_rows(data), labels, plan, annotator="ann", scale=Scale((0.0, 1.0)))
        for i, row in enumerate(rows):
            if i not in (1, 3):
                session.label(row["id"], 1.0 if row["human"] == "yes" else 0.0, None)
    code = _graded("calibrate", data, "--labels-file", tmp_path / "l.jsonl",
                   "--labels", "human=answer_accuracy", "-o", tmp_path / "run")  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Cohen's κ          0.250" in out
    assert "chosen where the judge was least certain" in err
    weighted = next(line for line in out.splitlines() if "weighted for the rows'" in line)
    assert weighted.startswith("answer_accuracy <- human")
    assert f"Cohen's κ {18 / 62:.3f} [" in weighted
    y = [1.0, None, 1.0, None, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    f = [g / 4 for g in BINARY_GRADES]  # type: ignore[operator]
    ppi = active_ppi_mean(y, f, [0.5] * 5 + [1.0] * 5)
    assert ppi.mean is not None and f"PPI mean {ppi.mean:.3f} [" in weighted
    # evaluate --human-labels prints the same weighted line under its summary
    code = _graded("evaluate", data, "--labels-file", tmp_path / "l.jsonl", "-m",
                   "answer_accuracy", "--human-labels", "human=answer_accuracy",
                   "-o", tmp_path / "ev")  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 0, err
    assert weighted in out.splitlines()


def test_reopening_with_another_plan_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    shutil.copy(EXAMPLE, data)
    rows = read_rows(data)
    with LabelsFile.open(tmp_path / "l.jsonl") as labels:
        labels.append(make_plan(rows, order="random", column="human", metric=None, budget=8,
                                seed=0))  # fmt: skip
    args = ["label", str(data), "--labels-file", str(tmp_path / "l.jsonl")]
    assert main([*args, "--order", "file"]) == 2
    assert "--order file (the plan's: random)" in capsys.readouterr().err
    assert main([*args, "--order", "uncertain"]) == 2  # the same message, the option differs
    assert main(["label", str(data), "--metric", "faithfulness"]) == 2
    err = capsys.readouterr().err
    assert f"--metric faithfulness: {data} holds no metric values (a data file)" in err
    assert f"rageval evaluate {data} -m faithfulness -o DIR) and label DIR" in err
    run = Path(__file__).parent / "data" / "runlog_format3"
    assert main(["label", str(run), "--metric", "context_recall"]) == 2
    err = capsys.readouterr().err
    assert "--metric context_recall: the run scored faithfulness, answer_accuracy, token_f1" in err
    assert main(["label", str(data), "--scale", "1"]) == 2
    assert "--scale needs at least two values" in capsys.readouterr().err


def test_a_data_file_with_a_row_that_cannot_be_read_is_refused_naming_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Such a row was left out of the labelling unseen (and one whose contexts were no list
    shown without them); now refused as evaluate refuses it, before any server starts."""
    good = {"user_input": "q", "response": "r", "retrieved_contexts": ["c"]}
    for bad, problem in (
        ('{"user_input": "q2", "response":', "line 2: line is not valid JSON"),
        (json.dumps({**good, "retrieved_contexts": "c"}), "line 2, field 'retrieved_contexts'"),
    ):
        data = tmp_path / "data.jsonl"
        data.write_text(json.dumps(good) + "\n" + bad + "\n")
        with pytest.raises(InvalidDataError, match=problem):
            read_rows(data)
        assert main(["label", str(data)]) == 2
        err = capsys.readouterr().err
        assert f"invalid input in {data}: {problem}" in err and "Traceback" not in err
        assert not (tmp_path / "data.jsonl.labels.jsonl").exists()


def test_two_annotators_share_one_server(tmp_path: Path) -> None:
    with _served(tmp_path) as server:
        base = f"http://127.0.0.1:{server.server_port}"

        def act(annotator: str | None, body: dict[str, Any]) -> tuple[int, Any]:
            query = f"?annotator={annotator}" if annotator else ""
            return _request(f"{base}/api/action{query}", token=server.token, body=body)

        status, state = act(None, {"action": "label", "id": "r0", "value": 1})
        assert status == 200 and state["annotator"] == "ann"
        _, bob = _request(f"{base}/api/state?annotator=bob", token=server.token)
        assert bob["annotator"] == "bob" and bob["row"]["id"] == "r1"  # r0 is ann's (no overlap)
        status, bob = act("bob", {"action": "label", "id": "r1", "value": 0})
        assert status == 200 and bob["row"]["id"] == "r2" and bob["done"] == 1
        _, ann = _request(f"{base}/api/state", token=server.token)
        assert ann["row"]["id"] == "r2" and ann["done"] == 1
        status, refused = act("bad%20name", {"action": "undo"})
        assert status == 400 and "annotator" in refused["error"]
    labels = [r for r in read_records(tmp_path / "l.jsonl") if r.kind == "label"]
    assert [(r.id, r.annotator) for r in labels] == [("r0", "ann"), ("r1", "bob")]
