"""The single-file HTML report of a run directory.

The page is one file that works offline from file://: the stylesheet and script are inlined,
and the run data travels as JSON in a `<script type="application/json">` block, escaped so no
string from the data can close that block. The script builds every element from that JSON with
`textContent` / `createElement` only, so text from the data is never parsed as HTML. A
Content-Security-Policy allows only the page's own script (by hash) and no network access.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
import statistics
from collections import Counter
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any

from rageval.report._model import MetricSummary, RunData, SampleResult, Usage

__all__ = ["REPORT_FILE", "RunData", "render_report", "write_report"]

REPORT_FILE = "report.html"
#: samples embedded in the page: enough for any table a person pages through, while the
#: browser (and this process) stay within memory on a 100k-row run; the summary covers all rows
MAX_REPORT_SAMPLES = 20_000

# Inside a JSON string these escapes mean the same characters, but the HTML parser no longer
# sees "</script>" or "<!--", and U+2028/2029 cannot break older JS parsers.
_JSON_ESCAPES = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}
_JSON_ESCAPE_RE = re.compile("[<>&\u2028\u2029]")
_PLACEHOLDER_RE = re.compile(r"\{\{([A-Z_]+)\}\}")


def render_report(run: RunData) -> str:
    """The report of `run` as one self-contained HTML document."""
    assets = files(__package__)
    template = assets.joinpath("template.html").read_text(encoding="utf-8")
    script = assets.joinpath("report.js").read_text(encoding="utf-8")
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    values = {
        "STYLE": assets.joinpath("report.css").read_text(encoding="utf-8"),
        "SCRIPT": script,
        "SCRIPT_HASH": f"sha256-{digest}",
        "RUN_DATA": _script_json(_payload(run), samples=run.results),
    }
    # One pass over the template only: text inserted for a placeholder is never rescanned.
    return _PLACEHOLDER_RE.sub(lambda m: values[m.group(1)], template)


def write_report(run_dir: Path, *, max_samples: int = MAX_REPORT_SAMPLES) -> Path:
    """Render the run in `run_dir` to `run_dir/report.html` (replaced atomically); its path.
    The sample table holds the first `max_samples` rows; the summary covers every row."""
    run_dir = Path(run_dir)
    html = render_report(RunData.load(run_dir, max_samples=max_samples))
    target = run_dir / REPORT_FILE
    partial = target.with_name(f".{REPORT_FILE}.{os.getpid()}.tmp")
    partial.write_text(html, encoding="utf-8")
    partial.replace(target)
    return target


def _script_json(payload: dict[str, Any], *, samples: Sequence[SampleResult] = ()) -> str:
    """`payload` plus a "samples" list, as JSON safe inside a <script> element."""
    try:
        text = _dumps(payload)
    except ValueError:  # NaN or Infinity somewhere in free-form evidence: rare, so only then walk
        text = _dumps(_json_safe(payload))
    # The samples are most of the page: pydantic writes each record's JSON itself, several
    # times faster than dumping it to dicts and through json.dumps (it writes NaN as null).
    records = ",".join(r.model_dump_json() for r in samples)
    text = f'{text[:-1]}{"," if payload else ""}"samples":[{records}]}}'
    return _JSON_ESCAPE_RE.sub(lambda m: _JSON_ESCAPES[m.group(0)], text)


def _dumps(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _payload(run: RunData) -> dict[str, Any]:
    """What the page script reads: the run as loaded, plus one summary row per metric."""
    specs = {m.name: m.params for m in run.manifest.metrics}
    summaries = run.summary.metrics if run.summary is not None else {}
    rows = []
    for name in run.metric_names():
        from_summary = name in summaries
        stats = summaries[name] if from_summary else _summarise(name, run.results)
        rows.append(
            {
                "name": name,
                "params": specs.get(name, {}),
                "from_summary": from_summary,
                **stats.model_dump(),
            }
        )
    if run.summary is not None:
        total, shared = run.summary.usage, run.summary.shared_usage
    else:
        shared_total = sum((r.shared_usage for r in run.results), Usage())
        shared = {"shared work": shared_total} if shared_total.requests else {}
        total = sum((c.usage for r in run.results for c in r.metrics.values()), shared_total)
    return {
        "manifest": run.manifest.model_dump(),
        "metrics": rows,
        "usage": total.model_dump(),
        "shared_usage": {label: u.model_dump() for label, u in shared.items()},
        "duration_s": run.summary.duration_s if run.summary is not None else None,
        "has_summary": run.summary is not None,
        "samples_left_out": run.samples_left_out,
        "calibration": _calibration(run),
    }


def _calibration(run: RunData) -> dict[str, Any] | None:
    """calibration.json as the page reads it: each statistic with its display title."""
    if run.calibration is None:
        return None
    from rageval.calibration import STATISTIC_TITLES

    out = run.calibration.model_dump()
    for agreement in out["agreements"]:
        for name, stat in agreement["statistics"].items():
            stat["title"] = STATISTIC_TITLES.get(name, name)
    return out


def _summarise(name: str, results: list[SampleResult]) -> MetricSummary:
    """Counts and plain mean from the finished samples, for a run without its summary (an
    interrupted run); confidence intervals come only from the runner's summary."""
    cells = [r.metrics[name] for r in results if name in r.metrics]
    values = [c.value for c in cells if c.value is not None]
    usage = sum((c.usage for c in cells), Usage())
    causes = Counter(
        f"{c.status.replace('_', ' ')}: {c.cause or 'no cause given'}"
        for c in cells
        if c.status != "ok"
    )
    return MetricSummary(
        mean=statistics.fmean(values) if values else None,
        n_measured=len(values),
        n_not_measured=sum(c.status == "not_measured" for c in cells),
        n_skipped=sum(c.status == "skipped" for c in cells),
        n_cells=len(cells),
        usage=usage,
        causes=dict(causes.most_common()),
    )


def _json_safe(value: Any) -> Any:
    """Evidence is free-form JSON and Python's json reads NaN/Infinity, which JSON.parse rejects;
    such numbers are shown as the words they are rather than dropped."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(v) for v in value]
    return value
