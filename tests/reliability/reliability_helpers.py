"""Shared by the reliability tests: traceable data, a guarded CLI launcher, result invariants.

Every row carries a unique tag (``T000``, ``T001``...) in its question, response, contexts and
reference, so every judge prompt about a row names it and the server's records can be traced
back to rows.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rageval.results import EvaluationResult
from rageval.testing import RecordedRequest

LLM_METRICS = (
    "faithfulness",
    "answer_correctness",
    "context_precision",
    "answer_accuracy",
    "context_relevance",
)
_TAG = re.compile(r"\bT(\d{3})\b")
_TOPICS = ("harbour", "bridge", "library", "railway", "museum", "tower", "canal")

# The CLI in a child process, under the same network guard as this test session.
_GUARDED_CLI = (
    "import sys\n"
    "from rageval.testing import install_network_guard\n"
    "install_network_guard()\n"
    "from rageval.cli import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def tag(i: int) -> str:
    return f"T{i:03d}"


def rows(n: int, start: int = 0) -> list[dict[str, Any]]:
    """`n` distinct samples whose judge verdicts differ (some claims are unsupported)."""
    out = []
    for i in range(start, start + n):
        t, topic, year = tag(i), _TOPICS[i % len(_TOPICS)], 1900 + i
        out.append(
            {
                "id": f"s-{t}",
                "user_input": f"When did the {topic} of {t} open?",
                "response": " ".join(
                    [
                        f"The {topic} of {t} opened in {year}.",
                        f"The {topic} of {t} has {i % 5 + 2} entrances.",
                        f"Its architect was named {topic.title()}son.",
                    ][: 1 + i % 3]
                ),
                "retrieved_contexts": [
                    f"Records of {t}: the {topic} opened in {year}.",
                    f"The {topic} of {t} has {i % 5 + 2} entrances.",
                    f"Weather in {t} is usually mild." if i % 3 else "",
                ][: 2 + i % 2],
                "reference": f"The {topic} of {t} opened in {year}.",
            }
        )
    return out


def write_jsonl(path: Path, data: Iterable[Mapping[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in data), encoding="utf-8")


def user_text(req: RecordedRequest) -> str:
    """The first user message: the prompt of the logical ask (re-asks are appended after it)."""
    return next((str(m.get("content")) for m in req.messages if m.get("role") == "user"), "")


def tags_of(req: RecordedRequest) -> set[str]:
    return {f"T{d}" for d in _TAG.findall(user_text(req))}


def run_cli(
    *args: str | Path, env: Mapping[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _GUARDED_CLI, *map(str, args)],
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def cli_command(*args: str | Path) -> list[str]:
    return [sys.executable, "-c", _GUARDED_CLI, *map(str, args)]


# ---------------------------------------------------------------------- retry accounting
def logical_asks(
    requests: Sequence[RecordedRequest],
) -> dict[tuple[str, str], list[RecordedRequest]]:
    """Requests grouped by logical ask: the same prompt for the same response schema."""
    groups: dict[tuple[str, str], list[RecordedRequest]] = defaultdict(list)
    for r in requests:
        groups[(user_text(r), json.dumps(r.schema, sort_keys=True))].append(r)
    return groups


def assert_retry_bounds(
    requests: Sequence[RecordedRequest], *, max_retries: int, max_reasks: int
) -> None:
    """Each send (one conversation state at one token budget) is tried at most 1 + max_retries
    times; each ask re-asks at most max_reasks times and grows its budget at most once."""
    for (prompt, _), group in logical_asks(requests).items():
        sends = Counter((len(r.messages), r.body.get("max_tokens")) for r in group)
        worst = max(sends.values())
        assert worst <= 1 + max_retries, f"{worst} tries of one send for: {prompt[:120]}"
        reasks = {sum(m.get("role") == "user" for m in r.messages) - 1 for r in group}
        assert max(reasks) <= max_reasks, f"{max(reasks)} re-asks for: {prompt[:120]}"
        budgets = {r.body.get("max_tokens") for r in group}
        assert len(budgets) <= 2, f"budget grown more than once for: {prompt[:120]}"
        assert len(sends) <= max_reasks + 2
        assert len(group) <= (1 + max_retries) * (max_reasks + 2)


# ---------------------------------------------------------------------- result invariants
def non_finite(obj: Any, path: str = "") -> list[str]:
    """Paths of every NaN/inf float (or the string "NaN") anywhere inside `obj`."""
    found: list[str] = []
    bad_float = isinstance(obj, float) and not math.isfinite(obj)
    if bad_float or (isinstance(obj, str) and obj in ("NaN", "Infinity", "-Infinity")):
        found.append(path or "<root>")
    elif isinstance(obj, Mapping):
        for k, v in obj.items():
            found += non_finite(v, f"{path}.{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            found += non_finite(v, f"{path}[{i}]")
    return found


def check_invariants(result: EvaluationResult, metrics: Sequence[str], n: int) -> None:
    """Every cell is a finite value or an explained absence; counts and tables agree."""
    assert result.complete and len(result) == n
    summary = result.summary()
    total: Counter[str | None] = Counter()
    for m in metrics:
        statuses = result.statuses(m)
        values = result[m]
        cells = result.cells(m)
        for row, (status, value, cell) in enumerate(zip(statuses, values, cells, strict=True)):
            assert cell is not None and cell.status == status
            where = f"{m} row {row}"
            if status == "ok":
                assert isinstance(value, float) and math.isfinite(value), where
                assert cell.cause is None, where
            else:
                assert status in ("not_measured", "skipped"), where
                assert value is None, where
                assert cell.cause, f"{where}: {status} without a cause"
                assert cell.cause_kind, f"{where}: {status} without a cause kind"
            assert non_finite(dict(cell.evidence)) == [], where
            assert non_finite(cell.usage.to_dict()) == [], where
        s = summary[m]
        counts = Counter(statuses)
        assert (s.n_measured, s.n_not_measured, s.n_skipped) == (
            counts["ok"],
            counts["not_measured"],
            counts["skipped"],
        ), m
        assert s.n_measured + s.n_not_measured + s.n_skipped == s.n_cells == n, m
        # every cell without a value is in exactly one group of its status and kind
        assert sum(g.count for g in s.failures) == s.n_not_measured + s.n_skipped, m
        for status in ("not_measured", "skipped"):
            by_kind = Counter(
                c.cause_kind or "unknown" for c in cells if c is not None and c.status == status
            )
            groups = {g.kind: g.count for g in s.failures if g.status == status}
            assert groups == dict(by_kind), (m, status)
        assert all(0 < len(g.examples) <= 3 for g in s.failures), m
        measured = [v for v in values if v is not None]
        if measured:
            assert s.mean is not None and math.isclose(s.mean, sum(measured) / len(measured))
            assert s.ci_low is not None and s.ci_high is not None
            assert s.ci_low <= s.mean <= s.ci_high
        else:
            assert s.mean is None
        total.update(counts)
    assert sum(total.values()) == n * len(metrics)
    # summary.json is strict JSON (no NaN), and the numbers in it are the same counts
    text = json.dumps(result.summary_json(), allow_nan=False)
    assert non_finite(json.loads(text)) == []
    # to_pandas: NaN exactly where a cell has no value, statuses everywhere
    frame = result.to_pandas()
    for m in metrics:
        assert list(frame[f"{m}_status"]) == result.statuses(m)
        nan_rows = [i for i, v in enumerate(frame[m]) if math.isnan(v)]
        assert nan_rows == [i for i, s in enumerate(result.statuses(m)) if s != "ok"]
        for i, status in enumerate(result.statuses(m)):
            if status != "ok":
                assert frame[f"{m}_reason"][i], f"{m} row {i}: no cause in to_pandas"
        # (pandas 3 shows None as NaN in a column that also holds strings)
        kinds = [
            None if isinstance(k, float) and math.isnan(k) else k for k in frame[f"{m}_cause_kind"]
        ]
        assert kinds == [c.cause_kind if c is not None else None for c in result.cells(m)]
    numeric = frame.select_dtypes("number").drop(columns=list(metrics))
    assert not numeric.isna().any().any()
