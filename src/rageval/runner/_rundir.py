"""The run directory: manifest, append-only results log, summary, and resuming.

Crash safety comes from the order of writes: the manifest is written (atomically) before any
row is scored; each finished sample is one JSON line, appended and flushed as soon as it is
done, so a process killed at any moment loses at most the rows in flight (and at worst leaves a
torn last line, which a resume cuts off). `summary.json` and `report.html` are written last.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from rageval.report import REPORT_FILE
from rageval.results import (
    MANIFEST_FILE,
    RESULTS_FILE,
    SUMMARY_FILE,
    EvaluationResult,
    SampleRecord,
    iter_records,
)
from rageval.samples import LoadedData


class RunDirError(ValueError):
    """A run directory that cannot be used as asked (occupied, or not the same run)."""


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
        digest.update(_dumps(canonical, sort_keys=True).encode("utf-8"))
        digest.update(b"\n")
    return f"sha256:{digest.hexdigest()}"


def _finite(value: Any) -> Any:
    """JSON has no NaN/Infinity: such numbers (only ever in free-form evidence) become words."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _dumps(obj: Any, *, sort_keys: bool = False) -> str:
    try:
        return json.dumps(
            obj, ensure_ascii=False, allow_nan=False, sort_keys=sort_keys, default=str
        )
    except ValueError:
        return json.dumps(_finite(obj), ensure_ascii=False, sort_keys=sort_keys, default=str)


def json_normal(obj: Any) -> Any:
    """`obj` as it reads back from JSON (tuples become lists, unknown objects strings)."""
    return json.loads(_dumps(obj))


def _write_atomic(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


class RunDir:
    """One run directory; see the module docstring."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.manifest_path = self.path / MANIFEST_FILE
        self.results_path = self.path / RESULTS_FILE
        self._log: IO[bytes] | None = None
        self._size = 0

    # ------------------------------------------------------------------ start
    def create(self, manifest: Mapping[str, Any], *, overwrite: bool = False) -> None:
        """Start a new run here; refuses a directory that already holds one, unless told to
        `overwrite` it (then the old run's files go, and nothing else in the directory)."""
        if overwrite:
            for name in (MANIFEST_FILE, RESULTS_FILE, SUMMARY_FILE, REPORT_FILE):
                (self.path / name).unlink(missing_ok=True)
        self.check_vacant()
        self.path.mkdir(parents=True, exist_ok=True)
        _write_atomic(self.manifest_path, _dumps(manifest) + "\n")

    def check_vacant(self) -> None:
        """RunDirError if a run is here already."""
        if self.manifest_path.exists() or self.results_path.exists():
            raise RunDirError(
                f"{self.path} already holds a run; resume it (resume=True / --resume {self.path}),"
                " replace it (overwrite=True / --overwrite) or choose another directory"
            )

    def check_same_run(self, manifest: Mapping[str, Any]) -> dict[str, Any]:
        """The stored manifest, if `manifest` describes the same run; else RunDirError."""
        if not self.manifest_path.exists():
            raise RunDirError(f"cannot resume {self.path}: it holds no run (no {MANIFEST_FILE})")
        stored: dict[str, Any] = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        _check_same_run(self.path, stored, manifest)
        return stored

    def resume(
        self, manifest: Mapping[str, Any], ids: Sequence[str]
    ) -> list[tuple[int, SampleRecord]]:
        """Check that `manifest` describes the same run as the one stored here and return its
        finished samples as (byte offset in the log, record), the last record of each row."""
        stored = self.check_same_run(manifest)
        records: dict[int, tuple[int, SampleRecord]] = {}
        good_end = 0
        if self.results_path.exists():
            try:
                for start, end, obj in iter_records(self.results_path):
                    record = SampleRecord.from_json(obj, parse_inputs=False)
                    good_end = end
                    if not 0 <= record.row < len(ids) or ids[record.row] != record.id:
                        raise RunDirError(
                            f"cannot resume {self.path}: {RESULTS_FILE} has a record for row "
                            f"{record.row} with id {record.id!r} that is not in the data"
                        )
                    records[record.row] = (start, record)
            except (ValueError, KeyError, TypeError) as e:
                if isinstance(e, RunDirError):
                    raise
                raise RunDirError(
                    f"cannot resume {self.path}: {RESULTS_FILE} is damaged ({e})"
                ) from e
            # A torn final write must go before new lines are appended after it.
            if self.results_path.stat().st_size > good_end:
                with self.results_path.open("r+b") as fh:
                    fh.truncate(good_end)
        resumed = [*stored.get("resumed_at", []), manifest["created_at"]]
        _write_atomic(self.manifest_path, _dumps({**stored, "resumed_at": resumed}) + "\n")
        return sorted(records.values(), key=lambda item: item[1].row)

    # ------------------------------------------------------------------ results log
    def append(self, record: SampleRecord) -> int:
        """Append one finished sample, flushed to the OS at once; its byte offset."""
        if self._log is None:
            self._log = self.results_path.open("ab")
            self._size = self._log.seek(0, os.SEEK_END)
        data = (_dumps(record.to_json()) + "\n").encode("utf-8")
        offset = self._size
        self._log.write(data)
        self._log.flush()
        self._size += len(data)
        return offset

    def close(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    # ------------------------------------------------------------------ finish
    def write_summary(self, result: EvaluationResult) -> None:
        _write_atomic(
            self.path / SUMMARY_FILE, _dumps(result.summary_json(), sort_keys=False) + "\n"
        )

    def write_report(self) -> Path:
        from rageval.report import write_report

        return write_report(self.path)


def _metric_specs(manifest: Mapping[str, Any]) -> list[tuple[str, str]]:
    return sorted(
        (m["name"], _dumps(m.get("params") or {}, sort_keys=True))
        for m in manifest.get("metrics", [])
    )


def _check_same_run(path: Path, stored: Mapping[str, Any], now: Mapping[str, Any]) -> None:
    head = f"cannot resume {path}:"
    old_fp = (stored.get("data") or {}).get("fingerprint")
    new_fp = now["data"]["fingerprint"]
    if old_fp != new_fp:
        raise RunDirError(
            f"{head} the data is not the same as that run's (fingerprint {new_fp}, the run has "
            f"{old_fp}); pass the same data, column map and file"
        )
    if _metric_specs(stored) != _metric_specs(now):

        def show(m: Mapping[str, Any]) -> str:
            return ", ".join(f"{n}{'' if p == '{}' else p}" for n, p in _metric_specs(m))

        raise RunDirError(
            f"{head} the metrics differ: the run has [{show(stored)}], now [{show(now)}]"
        )
    for key, what in (("judge", "judge model"), ("embeddings", "embeddings")):
        field = "model" if key == "judge" else "name"
        old = (stored.get(key) or {}).get(field)
        new = (now.get(key) or {}).get(field)
        if old != new:
            raise RunDirError(f"{head} the {what} differs: the run used {old!r}, now {new!r}")
