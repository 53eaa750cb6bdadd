"""The run log: the files of a run directory as a product, with a versioned schema.

A run directory holds ``manifest.json`` (:class:`Manifest`: what was run, written before any
row), ``results.jsonl`` (one :class:`SampleLine` per finished sample, appended as it finishes)
and ``summary.json`` (:class:`Summary`, written at the end), plus ``report.html`` and, for
data given in memory, ``data.json`` (a copy of its rows, for a resume); a calibration run adds
``calibration.json`` (:class:`CalibrationReport`), an alignment ``align.json``
(:class:`AlignReport`). The models here are the
one schema the runner writes and the runner (resume), ``load_run``, the report, ``compare`` and
``calibrate`` read; every file carries a ``format_version`` (see :mod:`rageval.log._models` for
the formats and the NaN rule). Reading: :func:`read_manifest`, :func:`read_lines` (a torn last
line is left out), :func:`read_line_at`, :func:`read_summary`, :func:`read_calibration`,
:func:`read_align`.
Writing: :class:`ResultsWriter`, :func:`write_atomic`, :func:`write_text_atomic`.
"""

from rageval._client._usage import Usage, sum_usage
from rageval.log._align import AlignCandidate, Alignment, AlignReport, toml_value
from rageval.log._calibration import (
    STATISTIC_TITLES,
    CalibrationReport,
    Confusion,
    LabelAgreement,
    StatisticResult,
)
from rageval.log._io import (
    ALIGN_FILE,
    ALIGNED_CONFIG_FILE,
    BATCHES_FILE,
    CALIBRATION_FILE,
    MANIFEST_FILE,
    RESULTS_FILE,
    ROWS_FILE,
    SUMMARY_FILE,
    LogEntry,
    ResultsWriter,
    append_batch_event,
    model_json,
    plain_json,
    read_align,
    read_batch_events,
    read_calibration,
    read_line_at,
    read_lines,
    read_manifest,
    read_summary,
    write_atomic,
    write_text_atomic,
    written_format,
)
from rageval.log._models import (
    FORMAT_VERSION,
    RESUMABLE_FORMAT,
    BatchEvent,
    CauseExample,
    Cell,
    DataInfo,
    EmbeddingsInfo,
    FailureGroup,
    HumanLabels,
    Inputs,
    JudgeInfo,
    JudgeNoiseSummary,
    Manifest,
    MetricSpec,
    MetricSummary,
    PPISummary,
    RepeatedScores,
    RunLogError,
    SampleLine,
    Summary,
)
from rageval.log._summary import (
    EMBEDDINGS_USAGE,
    SHARED_USAGE,
    FailureTally,
    MetricTally,
    RunTally,
    build_summary,
)

__all__ = [
    "ALIGNED_CONFIG_FILE",
    "ALIGN_FILE",
    "BATCHES_FILE",
    "CALIBRATION_FILE",
    "EMBEDDINGS_USAGE",
    "FORMAT_VERSION",
    "MANIFEST_FILE",
    "RESULTS_FILE",
    "RESUMABLE_FORMAT",
    "ROWS_FILE",
    "SHARED_USAGE",
    "STATISTIC_TITLES",
    "SUMMARY_FILE",
    "AlignCandidate",
    "AlignReport",
    "Alignment",
    "BatchEvent",
    "CalibrationReport",
    "CauseExample",
    "Cell",
    "Confusion",
    "DataInfo",
    "EmbeddingsInfo",
    "FailureGroup",
    "FailureTally",
    "HumanLabels",
    "Inputs",
    "JudgeInfo",
    "JudgeNoiseSummary",
    "LabelAgreement",
    "LogEntry",
    "Manifest",
    "MetricSpec",
    "MetricSummary",
    "MetricTally",
    "PPISummary",
    "RepeatedScores",
    "ResultsWriter",
    "RunLogError",
    "RunTally",
    "SampleLine",
    "StatisticResult",
    "Summary",
    "Usage",
    "append_batch_event",
    "build_summary",
    "model_json",
    "plain_json",
    "read_align",
    "read_batch_events",
    "read_calibration",
    "read_line_at",
    "read_lines",
    "read_manifest",
    "read_summary",
    "sum_usage",
    "toml_value",
    "write_atomic",
    "write_text_atomic",
    "written_format",
]
