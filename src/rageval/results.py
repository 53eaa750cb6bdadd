"""The outcome of an evaluation: one cell per (sample, metric), aggregates, usage.

Every cell has a status: `ok` (a value), `not_measured` (the metric could not be computed:
the cause and its kind say why) or `skipped` (the metric was not run on this sample: the cause
says why). Aggregates are over measured cells only and always report how many were not
measured or skipped; a missing value is never counted as 0 and never silently dropped.

The records and aggregates are the run log's models (:mod:`rageval.log`): a finished sample is
a :class:`~rageval.log.SampleLine`, a cell a :class:`~rageval.log.Cell`, an aggregate a
:class:`~rageval.log.MetricSummary`. Large runs keep values, statuses, causes and reasons in
memory, column by column; the evidence (statements, verdicts, ratings...) of a run with a run
directory stays in its `results.jsonl` and is read back when asked for (`sample()`, `cells()`).

Human labels (`evaluate(human_labels=...)`): a label column of the data paired with a metric
adds the PPI++ mean of the label to that metric's summary, the metric's values on every row
rectified by the labelled rows. Repeats (`evaluate(repeats=K)`): a cell scored K times keeps its
scores, and the summary says how much of the interval the judge's own noise makes.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from rageval._extras import require
from rageval.errors import CauseKind
from rageval.labels import parse_label
from rageval.log import (
    EMBEDDINGS_USAGE,
    RESULTS_FILE,
    SHARED_USAGE,
    UNFINISHED_USAGE,
    Cell,
    Inputs,
    JudgeNoiseSummary,
    MetricSummary,
    MetricTally,
    PanelVote,
    PPISummary,
    RepeatedScores,
    SampleLine,
    Summary,
    Usage,
    build_summary,
    flip_summary,
    panel_summary,
    pass_threshold,
    read_line_at,
    read_lines,
    read_manifest,
    read_summary,
    sum_usage,
)
from rageval.metrics.base import CellStatus
from rageval.metrics.evidence import Evidence, FreeformEvidence
from rageval.samples import ROW_FIELDS, Conversation, Sample
from rageval.stats import MetricComparison, PPIComparison, compare

if TYPE_CHECKING:
    import pandas as pd

    from rageval.stats import PPIEstimate

__all__ = [
    "EMBEDDINGS_USAGE",
    "SHARED_USAGE",
    "Cell",
    "EvaluationResult",
    "MetricComparison",
    "MetricSummary",
    "PPIComparison",
    "SampleRecord",
    "compare",
    "load_run",
]

#: a finished sample, as the run log stores it (the name this module has always used)
SampleRecord = SampleLine
#: the evidence key of a value on the metric's own scale (rubric_score's 1..5), shown by
#: to_pandas() as the column <metric>_raw
RAW_SCORE = "raw_score"

#: columns of the summary table, in the terminal and in notebooks
SUMMARY_COLUMNS = (
    "metric",
    "mean",
    "95% CI",
    "n",
    "not measured",
    "skipped",
    "requests",
    "tokens",
    "cost",
)


class _Column:
    """One metric's cells, by row, without their evidence."""

    __slots__ = (
        "causes",
        "kinds",
        "panel",
        "raws",
        "reasons",
        "repeats",
        "statuses",
        "usage",
        "values",
    )

    def __init__(self, n: int) -> None:
        self.values: list[float | None] = [None] * n
        self.statuses: list[CellStatus | None] = [None] * n  # None: row not finished
        self.causes: list[str | None] = [None] * n
        self.kinds: list[CauseKind | None] = [None] * n
        #: the value on the metric's own scale, for metrics that have one (evidence raw_score)
        self.raws: list[float | None] = [None] * n
        self.reasons: list[str | None] = [None] * n
        self.usage: list[Usage | None] = [None] * n
        #: row -> the scores of a cell scored several times (evaluate(repeats=K))
        self.repeats: dict[int, RepeatedScores] = {}
        #: row -> each judge's result of a cell of a run judged by a panel
        self.panel: dict[int, dict[str, PanelVote]] = {}


_EMPTY_USAGE = Usage()


class EvaluationResult:
    """Per-sample cells of every metric, their aggregates and the run's usage.

    `result["faithfulness"]` is the list of values by row (None where not measured or
    skipped); `summary()` gives mean, 95% CI and counts per metric; `to_pandas()` one row per
    sample. Rows that a run did not finish (it was stopped) have no cells and are not counted.
    """

    def __init__(
        self,
        metrics: Sequence[str],
        ids: Sequence[str],
        samples: Sequence[Sample | None],
        *,
        run_dir: Path | None = None,
        metric_params: Mapping[str, Mapping[str, Any]] | None = None,
        judge: Mapping[str, Any] | None = None,
        embeddings: str | None = None,
        human_labels: Sequence[tuple[str, str]] = (),
        repeats: int = 1,
        metrics_left_out: Mapping[str, str] | None = None,
    ) -> None:
        if len(ids) != len(samples):
            raise ValueError("ids and samples must have the same length")
        self.metrics = list(metrics)
        self.ids = list(ids)
        self.samples = list(samples)
        self.run_dir = run_dir
        self.metric_params = {k: dict(v) for k, v in (metric_params or {}).items()}
        self.judge = dict(judge) if judge is not None else None
        self.embeddings = embeddings
        #: (label column, metric) pairs whose labels rectify the metric (PPI++ in the summary)
        self.human_labels = [(column, metric) for column, metric in human_labels]
        #: scorings per judge cell (evaluate(repeats=K))
        self.repeats = repeats
        #: metrics of the default selection (none named) that the data could not feed, with
        #: why: named, never silently dropped
        self.metrics_left_out = dict(metrics_left_out or {})
        self.duration_s: float | None = None
        #: what the rows a stopped session had not finished used, in this session and the
        #: earlier ones of a resumed run: paid for, though no line of the log holds it (a
        #: resume finds those answers in the request cache, at no cost)
        self.unfinished_usage = Usage()
        n = len(self.ids)
        self._columns = {m: _Column(n) for m in self.metrics}
        # per row: shared work (statement extraction) and remote embeddings booked on it
        self._shared: list[Usage | None] = [None] * n
        self._embedding_usage: list[Usage | None] = [None] * n
        self._done = [False] * n
        # evidence by row: in memory, or the byte offset of the row's line in results.jsonl
        self._evidence: dict[int, dict[str, Evidence]] = {}
        self._offsets: dict[int, int] = {}
        self._summary: dict[str, MetricSummary] | None = None
        self._row_of = {sid: i for i, sid in enumerate(self.ids)}
        # causes repeat across thousands of cells: keep one copy of each text
        self._strings: dict[str, str] = {}

    def _shared_str(self, text: str) -> str:
        return self._strings.setdefault(text, text)

    # ------------------------------------------------------------------ filling
    def add(self, record: SampleLine, *, offset: int | None = None) -> None:
        """Store a finished sample; with `offset` its evidence stays in the run's results log."""
        row = record.row
        if not 0 <= row < len(self.ids):
            raise ValueError(f"record for row {row} outside 0..{len(self.ids) - 1}")
        for name, cell in record.cells.items():
            col = self._columns.get(name)
            if col is None:
                continue
            col.values[row] = cell.value
            col.statuses[row] = cell.status
            col.causes[row] = None if cell.cause is None else self._shared_str(cell.cause)
            col.kinds[row] = cell.cause_kind
            raw = cell.evidence.get(RAW_SCORE)
            number = isinstance(raw, (int, float)) and not isinstance(raw, bool)
            col.raws[row] = raw if number else None
            col.reasons[row] = cell.reason
            # the empty usage is kept as None, to spare memory; a request or a cache hit
            # settles it without a call comparing every field (one per cell read back)
            u = cell.usage
            col.usage[row] = u if u.requests or u.cache_hits or u != _EMPTY_USAGE else None
            if cell.repeats is None:
                col.repeats.pop(row, None)
            else:
                col.repeats[row] = cell.repeats
            if cell.panel is None:
                col.panel.pop(row, None)
            else:
                col.panel[row] = cell.panel
        self._shared[row] = None if record.shared_usage == _EMPTY_USAGE else record.shared_usage
        self._embedding_usage[row] = record.embeddings_usage
        self._done[row] = True
        if offset is None:
            self._evidence[row] = {n: c.evidence for n, c in record.cells.items() if c.evidence}
            self._offsets.pop(row, None)
        else:
            self._offsets[row] = offset
            self._evidence.pop(row, None)
        self._summary = None

    def _name_row(self, row: int, sample_id: str, sample: Sample | None) -> None:
        """Give `row` its id and sample (a run read back learns them line by line)."""
        if self._row_of.get(self.ids[row]) == row:
            del self._row_of[self.ids[row]]
        self.ids[row] = sample_id
        self._row_of[sample_id] = row
        self.samples[row] = sample

    # ------------------------------------------------------------------ access
    def __len__(self) -> int:
        return len(self.ids)

    @property
    def n_finished(self) -> int:
        return sum(self._done)

    @property
    def complete(self) -> bool:
        return all(self._done)

    def is_finished(self, row: int) -> bool:
        return self._done[row]

    @property
    def unmeasured_metrics(self) -> dict[str, str]:
        """The metrics that ran and measured no cell at all, each with why (its largest group
        of causes): a run that asked for a metric and got not one value of it has no result
        for it. A metric skipped because no judge is configured did not run (the default
        selection lists those metrics as skipped on purpose), whatever its other cells were
        skipped for (rows skipped as invalid). ``rageval evaluate`` exits 7 when there is
        one, unless ``--allow-unmeasured``."""
        found = {}
        for name, s in self.summary().items():
            if s.n_measured or not s.failures or any(g.kind == "no_judge" for g in s.failures):
                continue
            worst = s.failures[0]
            cause = f": {worst.examples[0].cause}" if worst.examples else ""
            found[name] = (
                f"no value in {s.n_cells} {'cell' if s.n_cells == 1 else 'cells'}; "
                f"{worst.count} {worst.status.replace('_', ' ')} ({worst.kind}){cause}"
            )
        return found

    def __getitem__(self, metric: str) -> list[float | None]:
        """The metric's values by row (None where not measured, skipped or not finished)."""
        return list(self._column(metric).values)

    def _column(self, metric: str) -> _Column:
        try:
            return self._columns[metric]
        except KeyError:
            raise KeyError(
                f"no metric {metric!r} in this result; it has {', '.join(self.metrics)}"
            ) from None

    def _row(self, key: int | str) -> int:
        if isinstance(key, str):
            if key not in self._row_of:
                raise KeyError(f"no sample with id {key!r}")
            return self._row_of[key]
        if not -len(self.ids) <= key < len(self.ids):
            raise IndexError(f"row {key} out of range")
        return key % len(self.ids)

    def statuses(self, metric: str) -> list[CellStatus | None]:
        return list(self._column(metric).statuses)

    def sample(self, key: int | str) -> SampleLine:
        """Everything about one sample (by row number or id), evidence included."""
        row = self._row(key)
        if not self._done[row]:
            raise KeyError(f"row {row} was not evaluated (the run did not finish it)")
        evidence = self._evidence_of(row)
        cells = {
            name: self._cell(col, row, evidence.get(name))
            for name, col in self._columns.items()
            if col.statuses[row] is not None
        }
        return SampleLine(
            row=row,
            id=self.ids[row],
            inputs=Inputs.of(self.samples[row]),
            cells=cells,
            shared_usage=self._shared[row] or _EMPTY_USAGE,
            embeddings_usage=self._embedding_usage[row],
        )

    @staticmethod
    def _cell(col: _Column, row: int, evidence: Evidence | None) -> Cell:
        status = col.statuses[row]
        assert status is not None
        return Cell(
            status=status,
            value=col.values[row],
            cause=col.causes[row],
            cause_kind=col.kinds[row],
            reason=col.reasons[row],
            evidence=evidence if evidence is not None else FreeformEvidence(),
            usage=col.usage[row] or _EMPTY_USAGE,
            repeats=col.repeats.get(row),
            panel=col.panel.get(row),
        )

    def label_values(self, column: str) -> list[float | None]:
        """The human labels of `column` (a column of the data) by row; None where a row is not
        labelled or not finished."""
        return [
            parse_label(s.metadata.get(column)) if done and s is not None else None
            for s, done in zip(self.samples, self._done, strict=True)
        ]

    def cells(self, metric: str) -> list[Cell | None]:
        """The metric's cells by row, evidence included (None for rows not finished)."""
        col = self._column(metric)
        on_disk = self._evidence_on_disk(metric)
        out: list[Cell | None] = []
        for row, status in enumerate(col.statuses):
            if status is None:
                out.append(None)
                continue
            in_memory = self._evidence.get(row, {}).get(metric)
            out.append(
                self._cell(col, row, in_memory if in_memory is not None else on_disk.get(row))
            )
        return out

    def _evidence_on_disk(self, metric: str) -> dict[int, Evidence]:
        """Evidence of `metric` for every row kept in the results log, in one pass over it."""
        if not self._offsets or self.run_dir is None:
            return {}
        row_at = {offset: row for row, offset in self._offsets.items()}
        found: dict[int, Evidence] = {}
        for entry in read_lines(self.run_dir / RESULTS_FILE):
            row = row_at.get(entry.start)
            cell = entry.line.cells.get(metric)
            if row is not None and cell is not None:
                found[row] = cell.evidence
        return found

    def _evidence_of(self, row: int) -> Mapping[str, Evidence]:
        if row in self._evidence:
            return self._evidence[row]
        offset = self._offsets.get(row)
        if offset is None or self.run_dir is None:
            return {}
        line = read_line_at(self.run_dir / RESULTS_FILE, offset)
        return {name: cell.evidence for name, cell in line.cells.items()}

    # ------------------------------------------------------------------ aggregates
    def summary(self) -> dict[str, MetricSummary]:
        """Per metric: mean and 95% bootstrap CI of the measured values, and all counts."""
        if self._summary is None:
            self._summary = {m: self._summarise(m) for m in self.metrics}
        return dict(self._summary)

    def _summarise(self, metric: str) -> MetricSummary:
        from rageval.stats import bootstrap_ci

        col = self._columns[metric]
        tally = MetricTally()
        for row, status in enumerate(col.statuses):
            if status is not None:
                tally.add(
                    status,
                    col.values[row],
                    col.causes[row],
                    col.kinds[row],
                    col.usage[row],
                    self.ids[row],
                )
        ci = bootstrap_ci([v for v, s in zip(col.values, col.statuses, strict=True) if s == "ok"])
        return tally.summary(
            mean=ci.mean,
            ci=(ci.low, ci.high, ci.method),
            ci_undefined=ci.undefined,
            ppi=self._ppi(metric, col),
            judge_noise=self._judge_noise(col),
            panel=panel_summary(col.panel[row] for row in sorted(col.panel)),
            flips=flip_summary(_scorings(col), pass_threshold(self.metric_params.get(metric))),
        )

    def _ppi(self, metric: str, col: _Column) -> dict[str, PPISummary]:
        """The PPI++ mean of each label column paired with `metric`."""
        columns = [column for column, m in self.human_labels if m == metric]
        if not columns:
            return {}
        from rageval.stats import ppi_mean

        values = [v if s == "ok" else None for v, s in zip(col.values, col.statuses, strict=True)]
        return {c: _ppi_summary(ppi_mean(self.label_values(c), values)) for c in columns}

    @staticmethod
    def _judge_noise(col: _Column) -> JudgeNoiseSummary | None:
        """How much of the interval the judge's noise makes, from the cells scored repeatedly."""
        if not col.repeats:
            return None
        from rageval.stats import judge_noise

        scored = [col.repeats[row].values for row in sorted(col.repeats)]
        noise = judge_noise(scored)
        if noise is None:
            return None
        return JudgeNoiseSummary.model_validate(noise, from_attributes=True)  # the same fields

    @property
    def embeddings_usage(self) -> Usage:
        """Calls to a remote embeddings endpoint (batches mix samples and metrics, so they are
        not split by metric)."""
        return sum_usage(u for u in self._embedding_usage if u is not None)

    def summary_model(self) -> Summary:
        """The run's summary, as `summary.json` holds it."""
        return build_summary(
            self.summary(),
            shared={
                SHARED_USAGE: sum_usage(u for u in self._shared if u is not None),
                EMBEDDINGS_USAGE: self.embeddings_usage,
                UNFINISHED_USAGE: self.unfinished_usage,
            },
            duration_s=self.duration_s,
            n_rows=len(self.ids),
            n_finished=self.n_finished,
        )

    @property
    def usage_by_metric(self) -> dict[str, Usage]:
        """Usage per metric, plus shared statement extraction and remote embeddings as their
        own entries when there was any."""
        summary = self.summary_model()
        return {
            **{name: s.usage for name, s in summary.metrics.items()},
            **summary.shared_usage,
        }

    @property
    def usage(self) -> Usage:
        """Everything the run paid for (the total of `usage_by_metric`)."""
        return self.summary_model().usage

    def summary_json(self) -> dict[str, Any]:
        """The content of `summary.json`, as plain JSON values."""
        return self.summary_model().model_dump(mode="json")

    # ------------------------------------------------------------------ views
    def to_pandas(self, view: Literal["samples", "turns"] = "samples") -> pd.DataFrame:
        """One row per sample (a conversation is one row, its `turns` a list of dicts): id,
        inputs, and per metric `<metric>` (NaN where not measured),
        `<metric>_status`, `<metric>_reason` (the cause when not measured or skipped) and
        `<metric>_cause_kind` (the kind of that cause); with repeats, `<metric>_sd`: the spread
        (standard deviation) of the cell's scores; for a metric with a raw scale (rubric_score's
        1..5), `<metric>_raw`; judged by a panel, `<metric>[<judge>]`: each judge's value.

        ``view="turns"``: one row per turn of each evaluated conversation (single-turn samples
        have no turns, so none of their rows): `id` (the conversation's), `turn` (its index in
        `turns`), `role`, `content`, and for each metric whose evidence gives per-turn values
        (its ``turns`` list: the per-turn metrics, knowledge_retention) `<metric>`, the turn's
        value (NaN where the turn has none), and `<metric>_reason` (the turn's reason, or why
        it was not scored)."""
        require("pandas", "to_pandas()")
        import pandas as pd

        if view == "turns":
            return self._turns_frame()
        if view != "samples":
            raise ValueError(f"view is 'samples' or 'turns', got {view!r}")

        data: dict[str, list[Any]] = {"id": list(self.ids)}
        for f in ROW_FIELDS:
            # a conversation's turns and tool calls as plain JSON data (lists of dicts)
            values = [_plain(getattr(s, f, None)) for s in self.samples]
            if any(v is not None for v in values):
                data[f] = values
        for name, col in self._columns.items():
            # pandas' own mark for a missing number; the status column says why it is missing
            data[name] = [math.nan if v is None else v for v in col.values]
            data[f"{name}_status"] = list(col.statuses)
            data[f"{name}_reason"] = [
                r if s == "ok" else c
                for s, r, c in zip(col.statuses, col.reasons, col.causes, strict=True)
            ]
            data[f"{name}_cause_kind"] = list(col.kinds)
            if any(r is not None for r in col.raws):
                data[f"{name}_raw"] = [math.nan if r is None else r for r in col.raws]
            if col.repeats:
                data[f"{name}_sd"] = [_sd(col.repeats.get(row)) for row in range(len(self.ids))]
            for judge in dict.fromkeys(j for votes in col.panel.values() for j in votes):
                data[f"{name}[{judge}]"] = [
                    _vote(col.panel.get(row, {}).get(judge)) for row in range(len(self.ids))
                ]
        return pd.DataFrame(data)

    def _turns_frame(self) -> pd.DataFrame:
        """``to_pandas(view="turns")``: one row per turn of each evaluated conversation."""
        import pandas as pd

        records: list[dict[str, Any]] = []
        per_turn: set[str] = set()
        for row, sample in enumerate(self.samples):
            if not isinstance(sample, Conversation) or not self._done[row]:
                continue
            values: dict[str, dict[int, tuple[float, str | None]]] = {}
            for name, evidence in self._evidence_of(row).items():
                scored = evidence.get("turns")
                if not isinstance(scored, list):
                    continue
                found = values.setdefault(name, {})
                for t in evidence.get("not_scored") or ():
                    found[t["turn"]] = (math.nan, t.get("why"))
                for t in scored:
                    found[t["turn"]] = (t["value"], t.get("reason"))
            per_turn.update(values)
            for i, turn in enumerate(sample.turns):
                record: dict[str, Any] = {
                    "id": self.ids[row],
                    "turn": i,
                    "role": turn.role,
                    "content": turn.content,
                }
                for name, found in values.items():
                    record[name], record[f"{name}_reason"] = found.get(i, (math.nan, None))
                records.append(record)
        columns = ["id", "turn", "role", "content"]
        for name in self._columns:
            if name in per_turn:
                columns += [name, f"{name}_reason"]
        return pd.DataFrame(records, columns=columns)

    def summary_table(self) -> str:
        """Plain-text table: metric, mean, 95% CI, counts, requests, tokens, cost."""
        header = SUMMARY_COLUMNS
        summary = self.summary_model()
        rows: list[tuple[str, ...]] = []
        for name, s in summary.metrics.items():
            rows.append(
                (
                    name,
                    _num(s.mean),
                    _ci_cell(s, "-"),
                    str(s.n_measured),
                    str(s.n_not_measured),
                    str(s.n_skipped),
                    *_usage_cells(s.usage),
                )
            )
        for label, usage in summary.shared_usage.items():
            rows.append((label, "", "", "", "", "", *_usage_cells(usage)))
        rows.append(("total", "", "", "", "", "", *_usage_cells(summary.usage)))
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
        lines = []
        for r in [header, *rows]:
            cells = [r[0].ljust(widths[0])] + [
                c.rjust(w) for c, w in zip(r[1:], widths[1:], strict=True)
            ]
            lines.append("  ".join(cells).rstrip())
        lines.insert(1, "-" * len(lines[0]))
        undefined = [
            f"{n} ({s.ci_undefined})" for n, s in summary.metrics.items() if s.ci_undefined
        ]
        if undefined:
            lines.append(f"95% CI undefined: {'; '.join(undefined)}")
        cache_hits = summary.usage.cache_hits
        if cache_hits:
            # a call is one request where the endpoint takes `n` (several generations in one
            # request), one per generation where it does not (llama.cpp, Ollama)
            lines.append(f"({cache_hits} judge calls answered from the cache)")
        lines += _human_and_noise_lines(summary)
        return "\n".join(lines)

    def __repr__(self) -> str:
        done = self.n_finished
        head = f"EvaluationResult({len(self.ids)} samples"
        head += ")" if done == len(self.ids) else f", {done} finished)"
        return f"{head}\n{self.summary_table()}"

    def _repr_html_(self) -> str:
        esc = html.escape
        head = "".join(f"<th>{esc(h)}</th>" for h in SUMMARY_COLUMNS)
        body = []
        for name, s in self.summary().items():
            cells = [
                name,
                _num(s.mean),
                _ci_cell(s, "–") + (f" ({s.ci_undefined})" if s.ci_undefined else ""),
                str(s.n_measured),
                str(s.n_not_measured),
                str(s.n_skipped),
            ]
            cells += list(_usage_cells(s.usage))
            title = "; ".join(f"{c} ({k} rows)" for c, k in s.causes.items())
            body.append(
                f'<tr title="{esc(title)}">'
                + "".join(f"<td>{esc(c)}</td>" for c in cells)
                + "</tr>"
            )
        return (
            f"<div><p>rageval: {len(self.ids)} samples, {self.n_finished} finished</p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
        )


def _ppi_summary(e: PPIEstimate) -> PPISummary:
    return PPISummary(
        mean=e.mean,
        ci_low=e.low,
        ci_high=e.high,
        labelled_mean=e.classical_mean,
        labelled_ci_low=e.classical_low,
        labelled_ci_high=e.classical_high,
        lam=e.lam,
        n_labelled=e.n_labelled,
        n_unlabelled=e.n_unlabelled,
        n_labelled_without_judge=e.n_labelled_without_judge,
        confidence=e.confidence,
        method=e.method,
    )


def _sd(scores: RepeatedScores | None) -> float:
    """The spread of a cell's scores; NaN (pandas' empty) for fewer than two."""
    sd = scores.sd if scores is not None else None
    return math.nan if sd is None else sd


def _vote(vote: PanelVote | None) -> float:
    """A judge's value of a panel's cell; NaN where it has none."""
    return vote.value if vote is not None and vote.value is not None else math.nan


def _scorings(col: _Column) -> list[list[float]]:
    """Every series of scores of one cell by one judge: each cell's repeats, or in a panel
    each judge's (the flip rate's input)."""
    series = [scores.values for scores in col.repeats.values()]
    for votes in col.panel.values():
        series.extend(v.repeats.values for v in votes.values() if v.repeats is not None)
    return series


def _interval(low: float | None, high: float | None) -> str:
    return "-" if low is None or high is None else f"[{low:.3f}, {high:.3f}]"


def _describe_ppi(metric: str, column: str, p: PPISummary) -> str:
    head = f"{metric} <- {column}: "
    if p.mean is None or p.lam is None or p.labelled_mean is None:
        return head + f"no estimate ({p.n_labelled} rows with a label and a judge value)"
    text = (
        f"{head}{p.mean:.3f} {_interval(p.ci_low, p.ci_high)} from {p.n_labelled:,} labelled + "
        f"{p.n_unlabelled:,} judge-only rows, λ {p.lam:.2f}; labelled rows alone "
        f"{p.labelled_mean:.3f} {_interval(p.labelled_ci_low, p.labelled_ci_high)}"
    )
    if p.n_labelled_without_judge:
        text += f" ({p.n_labelled_without_judge} labelled rows without a judge value left out)"
    return text


def _describe_noise(metric: str, n: JudgeNoiseSummary) -> str:
    return (
        f"{metric}: {n.repeats} scores per cell, mean spread (SD) {n.mean_cell_sd:.3f}; "
        f"judge noise is {n.noise_variance_share:.0%} of the variance of the mean, "
        f"{n.ci_width_share:.0%} of its CI width"
    )


def _human_and_noise_lines(summary: Summary) -> list[str]:
    """The summary table's lines on human labels (PPI++) and judge noise, if any."""
    metrics = summary.metrics.items()
    ppi = [_describe_ppi(m, c, p) for m, s in metrics for c, p in s.ppi.items()]
    noise = [_describe_noise(m, s.judge_noise) for m, s in metrics if s.judge_noise is not None]
    lines = []
    if ppi:
        lines += ["", "human labels: the mean label, PPI++ (judge rectified by the labels):"]
        lines += [f"  {line}" for line in ppi]
    if noise:
        lines += ["", "judge noise (each cell scored several times, its value their mean):"]
        lines += [f"  {line}" for line in noise]
    panel = [(m, s.panel) for m, s in metrics if s.panel is not None]
    if panel:
        lines += ["", "judge panel: agreement between the judges, Krippendorff's alpha (interval):"]
        lines += [
            f"  {m}: alpha {_num(p.alpha)} {_interval(p.alpha_ci_low, p.alpha_ci_high)} over "
            f"{p.n_units} rows{f' ({p.note})' if p.note else ''}; means "
            + ", ".join(f"{j} {_num(v)}" for j, v in p.judge_means.items())
            for m, p in panel
        ]
    flips = [(m, s.flips) for m, s in metrics if s.flips is not None]
    if flips:
        lines += ["", "flip rate: cells whose pass/fail changes across repeats:"]
        lines += [
            f"  {m}: {_num(f.rate)} ({f.n_flipped} of {f.n_cells}; pass: >= {f.threshold:g})"
            for m, f in flips
        ]
    return lines


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _usage_cells(usage: Usage) -> tuple[str, str, str]:
    if usage.cost_usd is None:
        cost = "unknown"
    elif usage.requests == 0 and usage.cost_usd == 0:
        cost = "-"
    else:
        cost = f"${usage.cost_usd:.4f}"
    return f"{usage.requests:,}", f"{usage.total_tokens:,}", cost


def _ci_cell(s: MetricSummary, none: str) -> str:
    """A metric's 95% CI as the tables show it: the interval, "undefined" when the values
    cannot give one (one value, all equal), else `none` (no value at all)."""
    if s.ci_low is not None and s.ci_high is not None:
        return f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"
    return "undefined" if s.ci_undefined else none


# ---------------------------------------------------------------------- run directories


def load_run(run_dir: str | Path) -> EvaluationResult:
    """A run directory read back (finished rows only; evidence stays on disk). Runs written
    by older rageval versions load too (see :mod:`rageval.log`)."""
    run_dir = Path(run_dir)
    manifest = read_manifest(run_dir)
    results_path = run_dir / RESULTS_FILE
    entries = read_lines(results_path) if results_path.exists() else iter(())
    n_rows = manifest.data.n_rows
    if n_rows is None:  # a manifest that does not say: as many rows as the log has
        kept = list(entries)
        n_rows = max((e.line.row for e in kept), default=-1) + 1
        entries = iter(kept)
    result = EvaluationResult(
        [m.name for m in manifest.metrics],
        [f"row-{i}" for i in range(n_rows)],
        [None] * n_rows,
        run_dir=run_dir,
        metric_params={m.name: m.params for m in manifest.metrics},
        judge=manifest.judge.model_dump() if manifest.judge is not None else None,
        embeddings=manifest.embeddings.name if manifest.embeddings is not None else None,
        human_labels=[(h.column, h.metric) for h in manifest.human_labels],
        repeats=manifest.repeats,
        metrics_left_out=manifest.metrics_left_out,
    )
    # line by line: a 100k-row log never holds more than one line's evidence in memory
    for entry in entries:
        line = entry.line
        result.add(line, offset=entry.start)
        result._name_row(line.row, line.id, line.sample())
    summary = read_summary(run_dir)
    if summary is not None:
        result.duration_s = summary.duration_s
        result.unfinished_usage = summary.shared_usage.get(UNFINISHED_USAGE, Usage())
    return result


def _plain(value: Any) -> Any:
    """A sample's field as a DataFrame cell: a list of models (turns, tool calls) as dicts."""
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        return [v.model_dump(mode="json") for v in value]
    return value
