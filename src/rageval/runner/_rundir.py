"""The run directory: manifest, append-only results log, summary, and resuming.

The files and their schema are :mod:`rageval.log`'s; this module decides when each is written.
Crash safety comes from the order of writes: the manifest is written (atomically) before any
row is scored; each finished sample is one JSON line, appended and flushed as soon as it is
done, so a process killed at any moment loses at most the rows in flight (and at worst leaves a
torn last line, which a resume cuts off). `summary.json` and `report.html` are written last.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rageval.errors import RunDirError
from rageval.judge import JudgeSpec
from rageval.log import (
    BATCHES_FILE,
    FORMAT_VERSION,
    MANIFEST_FILE,
    RESULTS_FILE,
    RESUMABLE_FORMAT,
    ROWS_FILE,
    SUMMARY_FILE,
    Manifest,
    MetricSpec,
    ResultsWriter,
    RunLogError,
    SampleLine,
    Summary,
    plain_json,
    read_lines,
    read_manifest,
    write_atomic,
    write_text_atomic,
    written_format,
)
from rageval.metrics.base import Metric, create_metric, metric_class
from rageval.report import REPORT_FILE
from rageval.samples import LoadedData


def data_fingerprint(loaded: LoadedData) -> str:
    """sha256 over the canonical form of every row (rows with problems with them too)."""
    problems: dict[int, list[str]] = {}
    for p in loaded.problems:
        if p.row is not None:
            problems.setdefault(p.row, []).append(str(p))
    digest = hashlib.sha256()
    for i, sample in enumerate(loaded.samples):
        canonical: Any = {} if sample is None else sample.model_dump(mode="json", exclude_none=True)
        if sample is None or i in problems:
            canonical = {**canonical, "invalid": problems.get(i, [])}
        digest.update(plain_json(canonical, sort_keys=True).encode("utf-8"))
        digest.update(b"\n")
    return f"sha256:{digest.hexdigest()}"


def json_normal(obj: Any) -> Any:
    """`obj` as it reads back from JSON (tuples become lists, unknown objects strings)."""
    return json.loads(plain_json(obj))


class RunDir:
    """One run directory; see the module docstring."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.manifest_path = self.path / MANIFEST_FILE
        self.results_path = self.path / RESULTS_FILE
        self._log = ResultsWriter(self.results_path)

    # ------------------------------------------------------------------ start
    def create(
        self, manifest: Manifest, *, overwrite: bool = False, rows_json: str | None = None
    ) -> None:
        """Start a new run here; refuses a directory that already holds one, unless told to
        `overwrite` it (then the old run's files go, and nothing else in the directory).
        `rows_json`: the copy of data given in memory that the manifest names, written first."""
        if overwrite:
            run_files = (MANIFEST_FILE, RESULTS_FILE, SUMMARY_FILE, REPORT_FILE, BATCHES_FILE)
            for name in (*run_files, ROWS_FILE):
                (self.path / name).unlink(missing_ok=True)
        self.check_vacant()
        self.path.mkdir(parents=True, exist_ok=True)
        if rows_json is not None:
            write_text_atomic(self.path / ROWS_FILE, rows_json)
        write_atomic(self.manifest_path, manifest)

    def check_vacant(self) -> None:
        """RunDirError if a run is here already."""
        if self.manifest_path.exists() or self.results_path.exists():
            raise RunDirError(
                f"{self.path} already holds a run; resume it (resume=True / --resume {self.path}),"
                " replace it (overwrite=True / --overwrite) or choose another directory"
            )

    def check_same_run(self, manifest: Manifest) -> Manifest:
        """The stored manifest, if `manifest` describes the same run; else RunDirError."""
        stored = resumable_manifest(self.path)
        _check_same_run(self.path, stored, manifest)
        return stored

    def finished_samples(self, ids: Sequence[str]) -> list[tuple[int, SampleLine]]:
        """The finished samples of the run stored here (checked to be the same run:
        :meth:`check_same_run`) as (byte offset in the log, line), the last line of each row.
        Call :meth:`resume` before the run goes on."""
        head = f"cannot resume {self.path}:"
        lines: dict[int, tuple[int, SampleLine]] = {}
        good_end = 0
        if self.results_path.exists():
            try:
                for entry in read_lines(self.results_path):
                    line = entry.line
                    good_end = entry.end
                    if not 0 <= line.row < len(ids) or ids[line.row] != line.id:
                        raise RunDirError(
                            f"{head} {RESULTS_FILE} has a record for row {line.row} with id "
                            f"{line.id!r} that is not in the data"
                        )
                    lines[line.row] = (entry.start, line)
            except RunLogError as e:
                raise RunDirError(f"{head} {RESULTS_FILE} is damaged ({e})") from e
            # A torn final write must go before new lines are appended after it.
            if self.results_path.stat().st_size > good_end:
                with self.results_path.open("r+b") as fh:
                    fh.truncate(good_end)
        return sorted(lines.values(), key=lambda item: item[1].row)

    def resume(self, stored: Manifest, manifest: Manifest) -> None:
        """Record in the `stored` manifest (as :meth:`check_same_run` returned it) that this
        session (`manifest`) resumes the run."""
        resumed = [*stored.resumed_at, manifest.created_at]
        # human labels change no cell, only the summary: the resumed run takes the ones it is
        # given; the manifest is rewritten in this rageval's format (an older one it resumes
        # means what this format means by default)
        update = {
            "resumed_at": resumed,
            "human_labels": manifest.human_labels,
            "format_version": FORMAT_VERSION,
            # batched in any of its sessions: batches.jsonl holds what they uploaded
            "batch": stored.batch or manifest.batch,
            # how this session drove a llama.cpp server, if its probe found one
            "servers": manifest.servers or stored.servers,
            "batch_settings": manifest.batch_settings or stored.batch_settings,
            # how this session executed (its budget, engine...): what the next resume takes
            "run_config": manifest.run_config or stored.run_config,
        }
        write_atomic(self.manifest_path, stored.model_copy(update=update))

    # ------------------------------------------------------------------ results log
    def append(self, line: SampleLine) -> int:
        """Append one finished sample, flushed to the OS at once; its byte offset."""
        return self._log.append(line)

    def close(self) -> None:
        self._log.close()

    # ------------------------------------------------------------------ finish
    def write_summary(self, summary: Summary) -> None:
        write_atomic(self.path / SUMMARY_FILE, summary)

    def write_report(self) -> Path:
        from rageval.report import write_report

        return write_report(self.path)


def resumable_manifest(path: Path) -> Manifest:
    """The manifest of the run in `path`, which this rageval can continue; else RunDirError
    (no run there, an unreadable manifest, or an older format: older runs are read, reported
    and compared, never continued)."""
    try:
        stored = read_manifest(path)
    except FileNotFoundError:
        raise RunDirError(f"cannot resume {path}: it holds no run (no {MANIFEST_FILE})") from None
    except RunLogError as e:
        raise RunDirError(f"cannot resume {path}: {e}") from None
    if written_format(stored) < RESUMABLE_FORMAT:
        raise RunDirError(
            f"cannot resume {path}: it was written by an older rageval (run log format "
            f"{written_format(stored)}; this rageval writes format {FORMAT_VERSION}). It can "
            f"still be read (load_run, rageval report, rageval compare); to finish it, start "
            f"a new run in another directory"
        )
    return stored


def _metric_specs(manifest: Manifest) -> list[tuple[str, str]]:
    return sorted((m.name, plain_json(_full_params(m), sort_keys=True)) for m in manifest.metrics)


def _full_params(spec: MetricSpec) -> dict[str, Any]:
    """A metric's recorded parameters with the defaults of those added since the run was
    started (a manifest written before a metric took `threshold` records none: it ran
    without one), so that such a run still resumes; as recorded when the metric cannot be
    built from them here."""
    try:
        return {**stored_metric(spec.registered_name or spec.name, spec.params).params(),
                **spec.params}  # fmt: skip
    except (KeyError, TypeError, ValueError):
        return dict(spec.params)


def stored_metric(name: str, params: Mapping[str, Any]) -> Metric:
    """The metric a manifest records as `name` with `params`. A parameter the metric took
    after the run was recorded has the value the run used, where the metric class names it
    in ``earlier_params`` (a rating metric's ``value="expected"``), else today's default."""
    earlier: Mapping[str, Any] = getattr(metric_class(name), "earlier_params", {})
    return create_metric(name, {**earlier, **params})


def _check_same_run(path: Path, stored: Manifest, now: Manifest) -> None:
    head = f"cannot resume {path}:"
    old_fp = stored.data.fingerprint
    new_fp = now.data.fingerprint
    if old_fp != new_fp:
        raise RunDirError(
            f"{head} the data is not the same as that run's (fingerprint {new_fp}, the run has "
            f"{old_fp}); pass the same data, column map and file"
        )
    for manifest in (stored, now):
        for spec in manifest.metrics:
            if spec.uncaptured:
                why = "; ".join(f"{k}: {v}" for k, v in spec.uncaptured.items())
                raise RunDirError(
                    f"{head} metric {spec.name}'s configuration cannot be recorded ({why}), "
                    "so the run cannot be checked to be the same; start a new run"
                )
    if _metric_specs(stored) != _metric_specs(now):

        def show(m: Manifest) -> str:
            return ", ".join(f"{n}{'' if p == '{}' else p}" for n, p in _metric_specs(m))

        raise RunDirError(
            f"{head} the metrics differ: the run has [{show(stored)}], now [{show(now)}]"
        )
    if stored.repeats != now.repeats:
        raise RunDirError(
            f"{head} the run scored each cell {stored.repeats} time(s), now {now.repeats}"
        )
    for what, old, new in (
        ("judge panel", _panel(stored), _panel(now)),
        ("embeddings", _embeddings_name(stored), _embeddings_name(now)),
    ):
        if old != new:
            raise RunDirError(f"{head} the {what} differs: the run used {old!r}, now {new!r}")
    old_judges, new_judges = _judge_cells(stored), _judge_cells(now)
    for role in sorted(old_judges.keys() | new_judges.keys()):
        old_cells = old_judges.get(role, {"model": None})
        new_cells = new_judges.get(role, {"model": None})
        for name in sorted(old_cells.keys() | new_cells.keys(), key=lambda n: (n != "model", n)):
            if old_cells.get(name) != new_cells.get(name):
                raise RunDirError(
                    f"{head} the {role} {name} differs: the run used {old_cells.get(name)!r}, "
                    f"now {new_cells.get(name)!r} (its cells would mix the two); resume with the "
                    "run's own, or start a new run"
                )


def _judge_cells(manifest: Manifest) -> dict[str, dict[str, Any]]:
    """The settings that change the replies of each of the run's judges
    (:meth:`JudgeSpec.cell_identity`), by the judge's role; the endpoint aside, as a resumed
    run may go on at another endpoint of the same model (``--resume DIR --base-url URL``)."""
    judges: dict[str, JudgeSpec] = {}
    if manifest.judge is not None:
        judges["judge"] = manifest.judge
    judges |= {f"panel judge {p.name}": p.judge for p in manifest.panel}
    judges |= {
        f"{m.name} judge": JudgeSpec.of_described(m.judge) for m in manifest.metrics if m.judge
    }
    return {
        role: {k: v for k, v in spec.cell_identity().items() if k != "base_url"}
        for role, spec in judges.items()
    }


def _panel(manifest: Manifest) -> str | None:
    """A panel's judges as ``name (model)``, None without a panel."""
    return ", ".join(f"{p.name} ({p.judge.model})" for p in manifest.panel) or None


def _embeddings_name(manifest: Manifest) -> str | None:
    return manifest.embeddings.name if manifest.embeddings is not None else None
