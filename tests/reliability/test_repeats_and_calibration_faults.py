"""--repeats and calibrate under a judge that answers at random and an endpoint that fails.

The judge picks any rating 0–4 (only 0/2/4 are on answer_accuracy's scale: the others are
re-asked) and 30% of the requests meet a transport fault (500, 429, dropped connection).
Whatever happens, every cell ends `ok` with a finite value that is the mean of its measured
repeats, or `not_measured` with a cause; every request sent is booked in the usage; and a
calibration still writes its file, counting the labelled rows the judge could not score.
"""

from __future__ import annotations

import json
import math
import random
import threading
from pathlib import Path

from rageval import calibrate, evaluate
from rageval.calibration import read_calibration
from rageval.judge import Judge
from rageval.testing import FakeOpenAI, Fault, FaultPlan, RecordedRequest, Reply

N = 16


class RandomRatings:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.lock = threading.Lock()

    def __call__(self, req: RecordedRequest) -> Reply:
        with self.lock:
            return Reply.json({"rating": self.rng.choice([0, 1, 2, 3, 4])})


def _rows() -> list[dict[str, object]]:
    return [
        {
            "id": f"r{i}",
            "user_input": f"question {i}?",
            "response": f"answer {i}",
            "reference": f"reference {i}",
            "human": i % 2,
        }
        for i in range(N)
    ]


def _server(seed: int) -> FakeOpenAI:
    faults = FaultPlan(0.3, [Fault.status(500), Fault.rate_limit(0.0), Fault.drop()], seed=seed)
    return FakeOpenAI(RandomRatings(seed), faults=faults)


def _judge(server: FakeOpenAI) -> Judge:
    return Judge("m", base_url=server.base_url, api_key="sk-test", max_retries=2, cache=False)


def test_repeats_under_random_replies_and_faults(fast_backoff: None, tmp_path: Path) -> None:
    with _server(1) as server:
        result = evaluate(
            _rows(),
            ["answer_accuracy"],
            _judge(server),
            repeats=3,
            human_labels={"human": "answer_accuracy"},
            run_dir=tmp_path / "run",
            progress=False,
        )
        sent = len(server.chat_requests)
    statuses = result.statuses("answer_accuracy")
    assert set(statuses) <= {"ok", "not_measured"}
    for row, status in enumerate(statuses):
        cell = result.sample(row).cells["answer_accuracy"]
        repeats = cell.repeats
        assert repeats is not None and len(repeats.values) + repeats.not_measured == 3
        if status == "ok":
            assert cell.value is not None and math.isfinite(cell.value)
            assert cell.value == sum(repeats.values) / len(repeats.values)
        else:
            assert cell.cause and repeats.values == []
    assert result.usage.requests == sent  # every request, retries and re-asks too, is booked
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())["metrics"]
    assert summary["answer_accuracy"]["judge_noise"]["repeats"] == 3
    assert summary["answer_accuracy"]["ppi"]["human"]["n_labelled"] == statuses.count("ok")


def test_calibration_under_random_replies_and_faults(fast_backoff: None, tmp_path: Path) -> None:
    with _server(2) as server:
        report = calibrate(
            _rows(),
            {"human": "answer_accuracy"},
            _judge(server),
            run_dir=tmp_path / "run",
            progress=False,
        )
        sent = len(server.chat_requests)
    (a,) = report.agreements
    assert a.n_pairs + a.n_without_judge == N
    assert report.usage.requests == sent
    assert read_calibration(tmp_path / "run") == report
