"""``align.json``: a judge metric aligned with people's labels (``rageval align``).

One file per alignment, in its run directory next to the held-out runs it scored (each a run
directory of its own), versioned with the other files of the run log (format 4, see
:mod:`rageval.log._models`); read by :func:`rageval.log.read_align`. What it chose is also
written as a configuration file the config loader takes (:meth:`AlignReport.toml`), and as
``-p METRIC.PARAM=VALUE`` options (:meth:`AlignReport.param_options`).
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from pydantic import Field, FiniteFloat

from rageval._client._usage import Usage
from rageval.labels import LabelKind
from rageval.log._calibration import (
    STATISTIC_TITLES,
    LabelAgreement,
    LabelledRunReport,
    StatisticResult,
    usage_line,
)
from rageval.log._models import _LogModel


class AlignCandidate(_LogModel):
    """A configuration scored on the training rows during the search."""

    #: the search step that tried it: "as configured", "instructions", "examples", "reasons"
    step: str
    #: what it changes, in words ("instructions: lenient")
    description: str
    #: the metric's parameters it was scored with, but for the examples (`n_examples` of
    #: them; the chosen ones are in :attr:`Alignment.chosen_params`) and the threshold
    params: dict[str, Any]
    n_examples: int = 0
    #: binary labels: the decision threshold that gave it its best κ on these rows
    threshold: FiniteFloat | None = None
    #: its κ (Cohen's for binary labels, weighted for ordinal ones) on the training rows
    kappa: FiniteFloat | None = None
    #: training rows it scored, and of them the rows with a value (the pairs)
    n_rows: int
    n_pairs: int
    #: kept by the search (the best of its step, better than what it started from)
    kept: bool = False
    usage: Usage = Field(default_factory=Usage)


class Alignment(_LogModel):
    """One label column against one metric: the search on the training rows, and the
    agreement before and after on the held-out rows."""

    label_column: str
    metric: str
    kind: LabelKind
    #: the statistic the search maximises: cohen_kappa or weighted_kappa_<weights>
    kappa_statistic: str
    #: the split of the labelled rows (ids): training rows, those of them shown as examples
    #: (not scored during the search), held-out rows
    train_ids: list[str]
    example_ids: list[str]
    heldout_ids: list[str]
    candidates: list[AlignCandidate]
    #: the metric as configured (the starting point), and its decision threshold
    before_params: dict[str, Any]
    before_threshold: FiniteFloat | None = None
    #: the chosen configuration: every parameter, the threshold included
    chosen_params: dict[str, Any]
    #: those of `chosen_params` that differ from the metric's defaults: its [params.METRIC]
    config: dict[str, Any]
    #: the held-out rows: the agreement of the metric as configured, and as chosen
    before: LabelAgreement
    after: LabelAgreement
    #: after − before on the held-out rows both scored, each with a paired bootstrap interval
    change: dict[str, StatisticResult]
    #: every judge call of this alignment (search and held-out runs)
    usage: Usage = Field(default_factory=Usage)

    @property
    def n_train(self) -> int:
        return len(self.train_ids)


class AlignReport(LabelledRunReport):
    """Everything ``rageval align`` chose and measured: one alignment per (label column,
    metric)."""

    #: the share of each label's rows that trains, the seed of the split and of the examples
    split: FiniteFloat
    seed: int
    #: examples drawn from the training labels for the examples step
    shots: int
    #: what the search tried: threshold, instructions, examples, reasons
    search: list[str]
    confidence: FiniteFloat
    interval_method: str
    alignments: list[Alignment]
    #: the whole alignment, shared work and embeddings included
    usage: Usage = Field(default_factory=Usage)

    # ------------------------------------------------------------------ the configuration
    def toml(self) -> str:
        """The chosen configurations as a config file (``[params.METRIC]`` tables) that
        ``rageval evaluate --config`` reads, or that goes into rageval.toml."""
        blocks = [
            "# written by rageval align: the metric configurations it chose (held-out "
            "agreement in align.json)"
        ]
        for a in self.alignments:
            lines = [f"[params.{_key(a.metric)}]"]
            lines += [f"{_key(k)} = {toml_value(v, multiline=True)}" for k, v in a.config.items()]
            if not a.config:
                lines.append("# the metric's defaults agreed best: nothing to set")
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks) + "\n"

    def param_options(self) -> list[str]:
        """The chosen configurations as ``-p METRIC.PARAM=VALUE`` options, quoted for a
        shell."""
        return [
            "-p " + shlex.quote(f"{a.metric}.{k}={toml_value(v)}")
            for a in self.alignments
            for k, v in a.config.items()
        ]

    # ------------------------------------------------------------------ reading
    def table(self) -> str:
        """Plain text: per alignment, the candidates tried on the training rows, what was
        chosen, and the held-out agreement before and after with the paired change."""
        pct = f"{self.confidence:.0%}"
        blocks = []
        for a in self.alignments:
            title = STATISTIC_TITLES[a.kappa_statistic]
            lines = [
                f"{a.metric} vs {a.label_column} ({a.kind} labels): {len(a.train_ids)} training "
                f"rows ({len(a.example_ids)} of them drawn as examples), {len(a.heldout_ids)} "
                "held out",
                f"search on the training rows ({title}):",
            ]
            width = max(len(c.description) for c in a.candidates)
            for c in a.candidates:
                at = "" if c.threshold is None else f" at threshold {c.threshold:g}"
                lines.append(
                    f"  {c.description.ljust(width)}  {_num(c.kappa)}{at}"
                    + (", kept" if c.kept else "")
                )
            lines.append(f"chosen: {_describe(a.config)}")
            lines.append(f"held-out rows ({pct} CI; change: paired bootstrap):")
            rows = [("", "before", "after", "change")]
            for name, change in a.change.items():
                rows.append(
                    (
                        STATISTIC_TITLES.get(name, name),
                        _estimate(a.before.statistics.get(name)),
                        _estimate(a.after.statistics.get(name)),
                        _estimate(change, signed=True),
                    )
                )
            widths = [max(len(r[i]) for r in rows) for i in range(4)]
            lines += ["  " + "  ".join(r[i].ljust(widths[i]) for i in range(4)).rstrip()
                      for r in rows]  # fmt: skip
            u = a.usage
            lines.append(f"  ({u.requests:,} requests, {u.cache_hits:,} from the cache)")
            lost = a.change.get(a.kappa_statistic)
            if lost is not None and lost.value is not None and lost.value < 0:
                lines.append(
                    f"  note: the chosen configuration agrees less with the {len(a.heldout_ids)} "
                    f"held-out labels than the metric as configured ({title} {lost.value:+.3f}): "
                    "keep the metric as it is, or label more rows and align again"
                )
            blocks.append("\n".join(lines))
        blocks.append(usage_line("align", self.usage))
        return "\n\n".join(blocks)


def _num(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.3f}" if signed else f"{value:.3f}"


def _estimate(s: StatisticResult | None, *, signed: bool = False) -> str:
    if s is None:
        return "-"
    if s.value is None:
        return f"- ({s.note})" if s.note else "-"
    ci = (
        ""
        if s.low is None or s.high is None
        else (f" [{_num(s.low, signed=signed)}, {_num(s.high, signed=signed)}]")
    )
    return _num(s.value, signed=signed) + ci


def _describe(config: dict[str, Any]) -> str:
    """A configuration in a line: its parameters, the examples counted, long text cut."""
    if not config:
        return "the metric as configured"
    parts = []
    for key, value in config.items():
        if key == "examples" and isinstance(value, list):
            parts.append(f"examples: {len(value)}")
        elif isinstance(value, str) and len(value) > 60:
            parts.append(f"{key}: {value[:57]!r}...")
        else:
            parts.append(f"{key}: {value!r}")
    return ", ".join(parts)


# ---------------------------------------------------------------------- TOML out

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _string(key)


def _string(text: str) -> str:
    # JSON's string escapes are TOML's basic-string escapes, but for DEL, which TOML forbids raw
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def toml_value(value: Any, *, multiline: bool = False) -> str:
    """`value` (JSON data: no None) as a TOML value: tables inline, and with `multiline` an
    array of tables one per line (an inline table must stay on one line)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        items = [toml_value(v) for v in value]
        if multiline and any(isinstance(v, dict) for v in value):
            return "[\n" + "".join(f"  {item},\n" for item in items) + "]"
        return "[" + ", ".join(items) + "]"
    if isinstance(value, dict):
        pairs = [f"{_key(str(k))} = {toml_value(v)}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(pairs) + " }" if pairs else "{}"
    raise ValueError(f"{value!r} has no TOML form")
