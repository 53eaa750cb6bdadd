"""The reliability suite's own checks: retry accounting and the invariants of a result.

Its data (``tagged_rows``: every prompt about a row names the row's tag) and the guarded CLI
launcher are in tests/helpers.py, with everything else the test modules share.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from helpers import user_text
from rageval.results import EvaluationResult
from rageval.testing import RecordedRequest

LLM_METRICS = (
    "faithfulness",
    "answer_correctness",
    "context_precision",
    "answer_accuracy",
    "context_relevance",
)


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
            if len(set(measured)) == 1:  # one value, or all equal: no interval, and why
                assert (s.ci_low, s.ci_high) == (None, None) and s.ci_undefined, m
            else:
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
