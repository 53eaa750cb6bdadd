"""Reading and writing a run directory's files: the one reader and the writers.

Crash safety comes from the order and the shape of the writes: ``manifest.json`` and
``summary.json`` are replaced atomically (written aside, then renamed); ``results.jsonl`` only
grows, one line per finished sample, appended and flushed at once. A process killed in the
middle of an append leaves at most a torn last line, which every reader leaves out (and a
resume cuts off before appending); a damaged line anywhere else is an error.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any, NamedTuple, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from rageval.log._align import AlignReport
from rageval.log._calibration import CalibrationReport
from rageval.log._models import (
    FORMAT_VERSION,
    BatchEvent,
    Manifest,
    RunLogError,
    SampleLine,
    Summary,
    _Versioned,
)

MANIFEST_FILE = "manifest.json"
RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "summary.json"
CALIBRATION_FILE = "calibration.json"
ALIGN_FILE = "align.json"
#: the configuration rageval align chose, as a config file (``[params.METRIC]``)
ALIGNED_CONFIG_FILE = "aligned.toml"
BATCHES_FILE = "batches.jsonl"
#: the copy of data given in memory (a list, a DataFrame...) a run directory keeps
ROWS_FILE = "data.json"

V = TypeVar("V", bound=_Versioned)


def written_format(model: _Versioned) -> int:
    """The format a file was written in: 1 when it does not say (it predates versions)."""
    return model.format_version if "format_version" in model.model_fields_set else 1


def _as_read(model: V) -> V:
    # a file without a version is of format 1, whatever the model's default says
    if "format_version" in model.model_fields_set:
        return model
    return model.model_copy(update={"format_version": 1})


def _problem(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    message = str(first["msg"]).removeprefix("Value error, ")
    more = f" (and {error.error_count() - 1} more problems)" if error.error_count() > 1 else ""
    return f"{where}: {message}{more}" if where else f"{message}{more}"


def _read_json_file(model: type[V], path: Path) -> V:
    try:
        return _as_read(model.model_validate_json(path.read_bytes()))
    except ValidationError as e:
        raise RunLogError(f"{path}: {_problem(e)}") from None


# ------------------------------------------------------------------------------ readers


def read_manifest(run_dir: str | os.PathLike[str]) -> Manifest:
    """The manifest of `run_dir`; FileNotFoundError when it is not a run directory."""
    path = Path(run_dir) / MANIFEST_FILE
    if not path.exists():
        raise FileNotFoundError(f"{run_dir} is not a rageval run directory (no {MANIFEST_FILE})")
    try:
        return _read_json_file(Manifest, path)
    except RunLogError:
        if _kind(path) != "rageval-generate":
            raise
        raise RunLogError(
            f"{run_dir} holds a test set that rageval generate wrote (testset.jsonl; its report "
            f"is {Path(run_dir) / 'report.md'}), not a scored run"
        ) from None


def _kind(path: Path) -> object:
    """The `kind` a JSON file names (rageval generate's manifest has one), else None."""
    try:
        found = json.loads(path.read_bytes())
    except ValueError:
        return None
    return found.get("kind") if isinstance(found, dict) else None


def read_summary(run_dir: str | os.PathLike[str]) -> Summary | None:
    """The summary of `run_dir`, or None when the run never wrote one (it was killed)."""
    path = Path(run_dir) / SUMMARY_FILE
    return _read_json_file(Summary, path) if path.exists() else None


def read_calibration(run_dir: str | os.PathLike[str]) -> CalibrationReport | None:
    """The agreement with human labels `run_dir` holds, or None when it was no calibration."""
    path = Path(run_dir) / CALIBRATION_FILE
    return _read_json_file(CalibrationReport, path) if path.exists() else None


def read_align(run_dir: str | os.PathLike[str]) -> AlignReport | None:
    """The alignment `run_dir` holds (``rageval align``), or None when it holds none."""
    path = Path(run_dir) / ALIGN_FILE
    return _read_json_file(AlignReport, path) if path.exists() else None


class LogEntry(NamedTuple):
    """A line of ``results.jsonl``: where it starts and ends (bytes), what it says, and its
    JSON text as the file holds it (newline included)."""

    start: int
    end: int
    line: SampleLine
    raw: bytes = b""

    def json_text(self) -> str:
        """The line's JSON as the current format writes it: the file's own text when the line
        is of this format (read, it is already that JSON), else the line written anew."""
        if self.raw and self.line.format_version == FORMAT_VERSION:
            return self.raw.decode("utf-8").rstrip("\n")
        return model_json(self.line)


def read_lines(path: str | os.PathLike[str]) -> Iterator[LogEntry]:
    """Every complete line of a results log, in file order.

    A last line without its newline, or one that is not JSON, is a write the process did not
    finish (it was killed) and is left out. Anything else that does not read -- a broken line
    before the last, a line of another schema or of a newer format -- raises RunLogError.
    """
    path = Path(path)
    with path.open("rb") as fh:
        offset = 0
        number = 0
        broken: tuple[int, int] | None = None  # (line number, byte offset) of a non-JSON line
        for raw in fh:
            number += 1
            if broken is not None:
                raise RunLogError(
                    f"{path}:{broken[0]}: damaged line at byte {broken[1]}: not valid JSON"
                )
            start, offset = offset, offset + len(raw)
            if not raw.strip():
                continue
            if not raw.endswith(b"\n"):
                return  # torn final write
            try:
                line = SampleLine.from_json(raw)
            except ValidationError as e:
                if any(err["type"] == "json_invalid" for err in e.errors()):
                    broken = (number, start)  # torn if it is the last line, else damaged
                    continue
                raise RunLogError(f"{path}:{number}: {_problem(e)}") from None
            yield LogEntry(start, offset, _as_read(line), raw)


def read_line_at(path: str | os.PathLike[str], offset: int) -> SampleLine:
    """The line that starts at byte `offset` (as :func:`read_lines` gave it)."""
    with Path(path).open("rb") as fh:
        fh.seek(offset)
        raw = fh.readline()
    try:
        return _as_read(SampleLine.from_json(raw))
    except ValidationError as e:
        raise RunLogError(f"{path} at byte {offset}: {_problem(e)}") from None


def read_batch_events(run_dir: str | os.PathLike[str]) -> list[BatchEvent]:
    """The events of ``batches.jsonl`` in `run_dir` (none when the run never batched); a
    torn last line (a process killed while writing it) is left out."""
    path = Path(run_dir) / BATCHES_FILE
    if not path.exists():
        return []
    events = []
    lines = path.read_bytes().split(b"\n")
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            events.append(BatchEvent.model_validate_json(raw))
        except ValidationError as e:
            if number == len(lines):  # no newline after it: a torn final write
                break
            raise RunLogError(f"{path}:{number}: {_problem(e)}") from None
    return events


# ------------------------------------------------------------------------------ writers


def append_batch_event(run_dir: str | os.PathLike[str], event: BatchEvent) -> None:
    """Append `event` to ``batches.jsonl`` in `run_dir`, flushed to the OS at once. A torn last
    line (a process killed while writing it) is cut first: written after, it would become a
    damaged line in the middle of the file."""
    with (Path(run_dir) / BATCHES_FILE).open("a+b") as fh:
        end = fh.seek(0, os.SEEK_END)
        if end:
            fh.seek(end - 1)
            if fh.read(1) != b"\n":
                fh.seek(0)
                fh.truncate(fh.read().rfind(b"\n") + 1)
        fh.write((model_json(event) + "\n").encode("utf-8"))
        fh.flush()


def write_atomic(path: Path, model: BaseModel) -> None:
    """Write `model`'s JSON to `path` at once: aside first, then renamed over it."""
    write_text_atomic(path, model_json(model) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` at once: aside first, then renamed over it."""
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def line_json(line: SampleLine) -> bytes:
    """One line of ``results.jsonl``, its newline included."""
    return (model_json(line) + "\n").encode("utf-8")


def model_json(model: BaseModel) -> str:
    """The JSON text of a log model, as the files hold it."""
    try:
        return model.model_dump_json(by_alias=True)
    except PydanticSerializationError:
        # free-form evidence holding an object JSON does not know (rare): written as its text
        return plain_json(model.model_dump(mode="python", by_alias=True))


def plain_json(value: Any, *, sort_keys: bool = False) -> str:
    """The JSON text of plain values by the log's rules: a non-finite number becomes the word
    the models write for it, an object JSON does not know its ``str()``."""
    options: dict[str, Any] = {
        "ensure_ascii": False,
        "sort_keys": sort_keys,
        "separators": (",", ":"),
        "default": str,
    }
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError:  # NaN or Infinity somewhere: rare, so only then walk the value
        return json.dumps(_finite(value), **options)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Mapping):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


class ResultsWriter:
    """Appends lines to a results log, each flushed to the OS at once."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._file: IO[bytes] | None = None
        self._size = 0

    def append(self, line: SampleLine) -> int:
        """Append `line`; the byte offset it starts at."""
        if self._file is None:
            self._file = self.path.open("ab")
            self._size = self._file.seek(0, os.SEEK_END)
        data = line_json(line)
        offset = self._size
        self._file.write(data)
        self._file.flush()
        self._size += len(data)
        return offset

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
