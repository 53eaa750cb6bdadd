"""The single-file HTML report of a run directory.

The page is one file that works offline from file://: the stylesheet and script are inlined,
and the run data travels as JSON in a `<script type="application/json">` block, escaped so no
string from the data can close that block. The script builds every element from that JSON with
`textContent` / `createElement` only, so text from the data is never parsed as HTML. A
Content-Security-Policy allows only the page's own script (by hash) and no network access.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rageval.errors import CAUSE_KINDS
from rageval.log import STATISTIC_TITLES, MetricSummary, plain_json
from rageval.report._model import RunData
from rageval.report._page import render_page

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


def render_report(run: RunData) -> str:
    """The report of `run` as one self-contained HTML document."""
    return render_page(
        __package__,
        "report",
        title="rageval report",
        csp="img-src data:; ",
        meta=("generator", "rageval"),
        values={"RUN_DATA": _script_json(_payload(run), samples_json=run.results_json)},
    )


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


def _script_json(payload: dict[str, Any], *, samples_json: Sequence[str] = ()) -> str:
    """`payload` plus a "samples" list (each sample's JSON text, as the log holds it), as JSON
    safe inside a <script> element."""
    text = plain_json(payload)
    records = ",".join(samples_json)
    text = f'{text[:-1]}{"," if payload else ""}"samples":[{records}]}}'
    return _JSON_ESCAPE_RE.sub(lambda m: _JSON_ESCAPES[m.group(0)], text)


def _payload(run: RunData) -> dict[str, Any]:
    """What the page script reads: the run as loaded, and one summary row per metric."""
    specs = {m.name: m.params for m in run.manifest.metrics}
    summary = run.summary
    rows = [
        {
            "name": name,
            "params": specs.get(name, {}),
            **summary.metrics.get(name, MetricSummary()).model_dump(mode="json"),
        }
        for name in run.metric_names()
    ]
    return {
        "manifest": run.manifest.model_dump(mode="json"),
        "metrics": rows,
        "usage": summary.usage.to_dict(),
        "shared_usage": {label: u.to_dict() for label, u in summary.shared_usage.items()},
        "duration_s": summary.duration_s,
        "has_summary": run.has_summary,
        "samples_left_out": run.samples_left_out,
        "cause_kinds": dict(CAUSE_KINDS),
        "calibration": _calibration(run),
        "pairwise": None if run.pairwise is None else run.pairwise.model_dump(mode="json"),
    }


def _calibration(run: RunData) -> dict[str, Any] | None:
    """calibration.json as the page reads it: each statistic with its display title."""
    if run.calibration is None:
        return None
    out = run.calibration.model_dump(mode="json")
    for agreement in out["agreements"]:
        for name, stat in agreement["statistics"].items():
            stat["title"] = STATISTIC_TITLES.get(name, name)
    return out
