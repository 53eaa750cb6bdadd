"""Writes the run directories of earlier run-log formats that tests/test_runlog.py reads.

tests/data/runlog_format1/ was produced by the rageval of commit 8e64c28 (the last one before
the run log had a ``format_version``), tests/data/runlog_format2/ by that of commit c0cc867
(format 2, before human labels and repeats), tests/data/runlog_format3/ by that of commit
33bfb27 (format 3, before cached tokens and batches), against the project's own test server,
with:

    mkdir /tmp/rageval-OLD && git archive COMMIT src | tar -x -C /tmp/rageval-OLD
    PYTHONPATH=/tmp/rageval-OLD/src python tests/data/make_runlog.py OUT_DIR

then OUT_DIR's manifest.json, results.jsonl and summary.json copied there. Five samples, three
metrics: faithfulness (not measured on s002: the judge never answers it validly), answer_accuracy
and token_f1 (skipped on s003, which has no reference); a priced model, so costs are known.
The tests resume such a run with :func:`rows` and :func:`judge_reply`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rageval.judge import Judge
from rageval.runner import evaluate
from rageval.testing import FakeOpenAI, RecordedRequest, Reply

try:  # the commits these runs were made with kept the synthetic judge in the package
    from rageval.testing.synthetic_judge import handle
except ImportError:  # now it is benchmark tooling: benchmarks/synthetic_judge.py
    from synthetic_judge import handle


def rows() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(5):
        row: dict[str, Any] = {
            "id": f"s{i:03d}",
            "user_input": f"What does sample s{i:03d} say about the sky?",
            "response": f"Sample s{i:03d} says the sky is blue. The moon is made of cheese {i}.",
            "retrieved_contexts": [f"Sample s{i:03d} says the sky is blue on clear days."],
            "reference": f"Sample s{i:03d} says the sky is blue.",
        }
        if i == 3:
            del row["reference"]
        out.append(row)
    return out


def judge_reply(request: RecordedRequest) -> Any:
    text = " ".join(str(m.get("content")) for m in request.messages)
    if "s002" in text and "verdicts" in str(request.schema):
        return Reply.json({"verdicts": []})  # never covers the statement ids
    return handle(request)


def main(out: Path) -> None:
    with FakeOpenAI(judge_reply) as server:
        judge = Judge("gpt-4o-mini", base_url=server.base_url, api_key="sk-test", cache=False)
        evaluate(
            rows(),
            ["faithfulness", "answer_accuracy", "token_f1"],
            llm=judge,
            on_invalid="skip",
            run_dir=out,
            progress=False,
        )


if __name__ == "__main__":
    main(Path(sys.argv[1]))
