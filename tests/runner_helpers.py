"""Data and request tracing for runner tests; the judge is `rageval.testing.synthetic_judge`.

Every prompt a metric sends for a sample names that sample's id (it is in the question and in
the first context), so a test can tell from the server's log which samples were asked about.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from rageval.testing import RecordedRequest
from rageval.testing.synthetic_judge import handle

__all__ = ["handle", "rows", "sample_id_of", "user_text", "write_jsonl"]


def rows(n: int) -> list[dict[str, Any]]:
    """`n` distinct samples; a response sentence the contexts support and one they do not."""
    return [
        {
            "id": f"s{i:03d}",
            "user_input": f"What does sample s{i:03d} say about the sky?",
            "response": f"Sample s{i:03d} says the sky is blue. The moon is made of cheese {i}.",
            "retrieved_contexts": [
                f"Sample s{i:03d} says the sky is blue on clear days.",
                "Water boils at one hundred degrees.",
            ],
            "reference": f"Sample s{i:03d} says the sky is blue.",
        }
        for i in range(n)
    ]


def write_jsonl(path: Path, data: list[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for row in data:
            fh.write(json.dumps(row) + "\n")


def user_text(req: RecordedRequest) -> str:
    return next(str(m["content"]) for m in req.messages if m.get("role") == "user")


def sample_id_of(req: RecordedRequest) -> str | None:
    found = re.search(r"sample (s\d{3})", user_text(req), re.IGNORECASE)
    return found.group(1) if found else None
