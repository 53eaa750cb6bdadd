"""The files of a run directory as pydantic models: one schema for the writers and the readers.

Format versions (``format_version`` in ``manifest.json``, ``summary.json`` and on every line of
``results.jsonl``):

* **1** -- written by rageval before the run log had a version (no ``format_version`` key).
  Read as it is: cells carry no ``cause_kind`` (grouped as ``unknown``), and the summary's
  ``causes`` (``"not measured: <cause>" -> count``) becomes ``failures`` of kind ``unknown``.
  A run of format 1 can be read, reported and compared, not resumed.
* **2** -- each cell without a value has a ``cause_kind``; each line carries the usage of the
  remote embeddings it paid for (``embeddings_usage``), so that the usage of a run is the sum of
  its lines, interrupted or not; the summary groups cells without a value by metric, status and
  kind (``failures``) with a few example causes and sample ids.
* **3** -- human labels and judge noise (``evaluate(human_labels=, repeats=)``).
  The manifest says which label column rectifies which metric (``human_labels``) and how many
  times each judge cell was scored (``repeats``); a cell scored several times keeps its scores
  (``repeats``, left out of the line otherwise); a metric's summary gives the PPI++ mean of each
  label column (``ppi``) and, with repeats, the share of the interval due to the judge's own
  noise (``judge_noise``). A calibration run adds ``calibration.json``
  (:class:`~rageval.log.CalibrationReport`). A metric that reports under a name of its own
  (a customised ContextEvaluation) carries the registry name that re-creates it
  (``registered_name``). Everything format 3 adds is optional and its
  absence means what format 2 meant (no labels, one scoring per cell), so a run of format 2
  reads as it is and can be resumed (the resumed run's manifest is then of format 3).
* **4** -- cost control. Every usage block counts ``cached_tokens`` (prompt
  tokens the provider served from its prompt cache, priced at the cached-input rate); a run in
  batch mode keeps ``batches.jsonl`` (:class:`BatchEvent`: the batches it uploaded and the
  request behind each line, so that a resumed run re-attaches to a batch in flight); the
  manifest says whether the run was batched, and how (``batch``, ``batch_settings``). All of
  it is optional and its absence means what format 3 meant (no cached tokens, online
  requests), so a run of format 2 or 3 reads as it is and can be resumed. Optional too, and
  written only when they say something: a metric's ``ci_undefined`` in the summary (why it has
  a mean and no interval: one value, or values all equal) and the manifest's
  ``metrics_left_out`` (the default selection's metrics the data could not feed, with why).
* **5** -- a sample's ``reference`` may be a list of acceptable answers
  (:attr:`rageval.samples.Sample.references`). A run of format 4 reads as it is and can be
  resumed.
* **6** -- the manifest's ``judge`` is a :class:`~rageval.judge.JudgeSpec`
  (:class:`JudgeInfo`), which names the judge's ``backend`` (``"anthropic"`` for Anthropic's
  Messages API) and its ``api_key_env``. A judge of an earlier format lacks them: it is an
  OpenAI-compatible one, whose key variable ``api_key_from`` names, so a run of format 5 reads
  as it is and can be resumed. (A rageval of format 5 would take an Anthropic judge for an
  OpenAI-compatible one: it refuses the run as newer.)
* **7** -- a line's inputs may be a conversation
  (:class:`rageval.samples.Conversation`: ``turns``, ``reference_tool_calls``,
  ``reference_goal`` in place of the single-turn fields). A run of format 5 or 6 reads as it is
  and can be resumed.
* **8** -- a cell's evidence is typed (:mod:`rageval.metrics.evidence`): an object
  with a ``kind`` (``"verdicts"``, ``"ratings"``, ``"questions"``, ``"per_turn"``,
  ``"tool_calls"``, ...) whose fields that kind declares, or ``{"kind": "free", "data": {...}}``
  for a metric's free-form evidence. The evidence dict of a cell of format 7 and earlier is read
  as free-form evidence holding that dict (whatever keys it has, a ``kind`` among them), so such
  a run reads, reports and compares as it is and can be resumed. A conversation may carry
  ``reference_topics`` (topic_adherence's).
* **9** -- this rageval: judge panels and flip rates. The manifest of a run judged by a panel
  names its judges (``panel``: :class:`PanelJudge`); a judge metric's cell then carries each
  judge's own result (``panel``: judge name -> :class:`PanelVote`) and its value is their
  mean; a metric's summary gives the judges' agreement (``panel``: :class:`PanelSummary`,
  Krippendorff's α) and, with repeats, how often a cell's pass/fail flips across its scorings
  (``flips``: :class:`FlipSummary`); ``calibration.json`` adds each judge's own agreement
  with the labels (``judge_agreements``). All optional, absent meaning one judge: a run of format 8
  reads as it is and can be resumed. A cell's evidence says how the judge's verdicts and
  ratings behind it were scored (``scoring``: ``"probabilities"``, ``"sampled"`` or
  ``"sampled-fallback"``, with ``scoring_why``), a verdict its ``probability`` and a rating
  template its ``expected`` rating and its ``distributions`` (each rating's probability) where
  they were read from the token log-probabilities (docs/judge-probabilities.md); absent in a
  run of format 8, which reads as it is (so does a format 9 line without ``distributions``,
  written before they were kept: format 9 is unreleased and gained them in place).

A file of a later format is refused with a message that says so (:class:`RunLogError`).

The NaN rule: a cell's value is a finite number or absent (None), never NaN. JSON has no NaN,
so a non-finite number inside free-form evidence is written as the string ``"NaN"``,
``"Infinity"`` or ``"-Infinity"`` (``ser_json_inf_nan="strings"``), by these models alone.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FiniteFloat,
    SerializerFunctionWrapHandler,
    computed_field,
    field_validator,
    model_serializer,
    model_validator,
)

from rageval._client._usage import Usage
from rageval.errors import CauseKind, RagevalError
from rageval.judge._spec import JudgeSpec
from rageval.metrics.base import MetricResult
from rageval.metrics.evidence import FreeformEvidence, StoredEvidence
from rageval.samples import ROW_FIELDS, Sample, ToolCall, Turn, sample_of

#: the format this rageval writes; it reads every format from 1 up to this one
FORMAT_VERSION = 9
#: the last format whose cells' evidence is an untyped dict (read as free-form evidence)
UNTYPED_EVIDENCE_FORMAT = 7
#: the oldest format a run can be resumed from (format 1 lines lack what a summary needs now)
RESUMABLE_FORMAT = 2
#: the kind under which cells whose log does not say (format 1) are grouped
UNKNOWN_KIND: CauseKind = "unknown"


class RunLogError(RagevalError, ValueError):
    """A run log that cannot be read: a damaged line, or a format this rageval does not know."""


class _LogModel(BaseModel):
    # extra keys are kept and shown (the report's configuration panel and detail view)
    model_config = ConfigDict(extra="allow", ser_json_inf_nan="strings")


class _Versioned(_LogModel):
    format_version: int = FORMAT_VERSION

    @field_validator("format_version")
    @classmethod
    def _known_format(cls, version: int) -> int:
        if version > FORMAT_VERSION:
            raise ValueError(
                f"written by a newer rageval (run log format {version}; this rageval reads "
                f"formats 1 to {FORMAT_VERSION}): upgrade rageval (pip install -U rageval)"
            )
        if version < 1:
            raise ValueError(f"format_version must be >= 1, got {version}")
        return version


# ---------------------------------------------------------------------------- manifest.json


class MetricSpec(_LogModel):
    #: what the metric reports under (the cells' key)
    name: str
    #: constructor parameters: with the registry name they re-create the metric
    #: (``create_metric(spec.registered_name or spec.name, spec.params)``)
    params: dict[str, Any] = Field(default_factory=dict)
    #: how to find the metric's class again, when its name does not: ``"module:ClassName"``
    #: for a metric defined outside rageval (importable, not ``__main__``), else the registry
    #: name of the class when the metric reports under a name of its own (a customised
    #: ContextEvaluation); written only then
    registered_name: str | None = Field(default=None, exclude_if=lambda v: v is None)
    #: the metric's own judge, when it is not the run's
    judge: dict[str, Any] | None = None
    #: constructor arguments that cannot be recorded faithfully (a lambda...), with why: the
    #: run cannot be resumed (written only when there are some)
    uncaptured: dict[str, str] = Field(default_factory=dict, exclude_if=lambda v: not v)
    #: for a metric of the user's own (`registered_name` ``"module:ClassName"``), the directory
    #: its module was imported from (the ``sys.path`` entry), so that a run resumed from
    #: another directory imports it again; written only then
    import_root: str | None = Field(default=None, exclude_if=lambda v: v is None)


class JudgeInfo(JudgeSpec):
    """What ``Judge.describe()`` says (never the key): the judge's :class:`JudgeSpec` (a
    manifest of an earlier rageval lacks some of its settings, which take their defaults; one
    from before backends is an OpenAI-compatible judge's, one from before ``scoring`` scored
    by sampled values: :meth:`JudgeSpec.described_settings`), and beside it where the key and the
    cache came from and what is known of the model, kept as written."""

    model_config = ConfigDict(frozen=False, extra="allow", ser_json_inf_nan="strings")

    #: every endpoint of the model when the rows were spread over several (None: one)
    base_urls: list[str] | None = None
    #: the model's price the run's cost and budget used, USD per million tokens by
    #: :class:`~rageval.judge.ModelPrice`'s fields (None: unknown, or a run of an earlier
    #: rageval); a resume prices with it unless given another
    price: dict[str, float] | None = None

    @model_validator(mode="before")
    @classmethod
    def _unset_is_default(cls, data: Any) -> Any:
        # a manifest may say null for a setting it did not know (the spec's default applies),
        # or leave out the scoring (sampled then), as JudgeSpec.of_described reads it
        if isinstance(data, Mapping):
            return JudgeSpec.described_settings(data)
        return data


class EmbeddingsInfo(_LogModel):
    name: str
    #: the endpoint of remote embeddings
    base_url: str | None = None
    #: the request cache of remote embeddings: its directory, or False for none (not written
    #: for the local model; a manifest without it resumes with the default cache)
    cache: str | bool | None = Field(default=None, exclude_if=lambda v: v is None)


class DataInfo(_LogModel):
    source: str | None = None
    #: the data file, absolute: `--resume DIR` alone reads it again
    path: str | None = None
    #: for data given in memory (a list, a DataFrame...): the copy of its rows the run
    #: directory keeps, a file name in it, which `--resume DIR` alone reads (written only then)
    rows_file: str | None = Field(default=None, exclude_if=lambda v: v is None)
    column_map: dict[str, str] | None = None
    fingerprint: str | None = None
    n_rows: int | None = None
    #: the run's language for rows without a language column (None: each row's, or detected)
    language: str | None = Field(default=None, exclude_if=lambda v: v is None)


class HumanLabels(_LogModel):
    """A column of human labels in the data and the metric whose mean it rectifies (PPI++)."""

    column: str
    metric: str


class PanelJudge(_LogModel):
    """One judge of a panel (format 9): the name its values are kept under, and its settings."""

    name: str
    judge: JudgeInfo


class Manifest(_Versioned):
    """``manifest.json``: what was run, on what, by which rageval; written before any row."""

    rageval_version: str
    created_at: str
    resumed_at: list[str] = Field(default_factory=list)
    metrics: list[MetricSpec] = Field(default_factory=list)
    judge: JudgeInfo | None = None
    embeddings: EmbeddingsInfo | None = None
    data: DataInfo = Field(default_factory=DataInfo)
    on_invalid: str | None = None
    #: label columns whose human labels rectify a metric's mean; they change no cell, so a
    #: resumed run takes the ones it is given
    human_labels: list[HumanLabels] = Field(default_factory=list)
    #: how many times each judge cell is scored (its value is the mean of the scores); a run
    #: is resumed only with the same count
    repeats: int = Field(default=1, ge=1)
    #: where the rows were scored: "local" or "ray" (None: a log from before it was recorded)
    engine: str | None = None
    #: whether judge requests went through the endpoint's Batch API (``batches.jsonl``), and
    #: how (poll interval, settle time, sizes: a resumed run keeps them)
    batch: bool = False
    batch_settings: dict[str, Any] | None = None
    #: metrics of the default selection (none named) that the data could not feed, each with
    #: why (the fields no row has); written only when there are some
    metrics_left_out: dict[str, str] = Field(default_factory=dict, exclude_if=lambda v: not v)
    #: what the run's probe learnt of a judge endpoint and how the run drove it, by base URL:
    #: a llama.cpp server's slots, and the concurrency and timeout used with it
    servers: dict[str, dict[str, Any]] = Field(default_factory=dict, exclude_if=lambda v: not v)
    #: the judges of a panel, in order (``judge`` is the first of them); written only for a
    #: run judged by a panel
    panel: list[PanelJudge] = Field(default_factory=list, exclude_if=lambda v: not v)
    #: how the run was executed, whole: its RunConfig as ``RunConfig.record()`` states it
    #: (run directory, resume, engine, budget, batch, endpoint check, progress, human labels,
    #: observers by class, cache); absent in a log from before it was recorded
    run_config: dict[str, Any] = Field(default_factory=dict, exclude_if=lambda v: not v)


# ---------------------------------------------------------------------------- results.jsonl


class Inputs(_LogModel):
    """The sample's fields (its id is on the line): a single-turn sample's, or a
    conversation's (format 7)."""

    user_input: str | None = None
    response: str | None = None
    retrieved_contexts: list[str] | None = None
    reference: str | list[str] | None = None
    reference_contexts: list[str] | None = None
    turns: list[Turn] | None = None
    reference_tool_calls: list[ToolCall] | None = None
    reference_goal: str | None = None
    reference_topics: list[str] | None = None
    #: the retrieval metrics' ids (format 9 on): ranked, and relevant or graded
    retrieved_context_ids: list[str] | None = None
    reference_context_ids: list[str] | dict[str, int] | None = None
    metadata: dict[str, Any] | None = None

    @model_serializer(mode="wrap")
    def _present_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a field the sample does not have is left out, not written as null
        return {k: v for k, v in handler(self).items() if v is not None}

    @classmethod
    def of(cls, sample: Sample | None) -> Inputs:
        if sample is None:
            return cls()
        fields = {f: getattr(sample, f, None) for f in ROW_FIELDS}
        return cls(**fields, metadata=sample.metadata or None)


class RepeatedScores(_LogModel):
    """The scorings of a cell scored several times (``repeats`` > 1); its value is their mean."""

    #: the measured scores, in the order they were made
    values: list[FiniteFloat]
    #: scorings that gave no value (the cell is not measured when none did)
    not_measured: int = 0

    @computed_field  # type: ignore[prop-decorator]
    @property
    def sd(self) -> float | None:
        """The sample standard deviation of the scores (None for fewer than two)."""
        return statistics.stdev(self.values) if len(self.values) >= 2 else None

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data: Any) -> Any:
        # sd is computed (kept out of the extra keys)
        if isinstance(data, Mapping) and "sd" in data:
            return {k: v for k, v in data.items() if k != "sd"}
        return data


class PanelVote(_LogModel):
    """One judge's result on a cell of a panel (format 9): its value (None unless ``ok``),
    why it has none, and its scores when the cell was scored several times."""

    value: FiniteFloat | None = None
    status: Literal["ok", "not_measured", "skipped"]
    cause: str | None = Field(default=None, exclude_if=lambda v: v is None)
    cause_kind: CauseKind | None = Field(default=None, exclude_if=lambda v: v is None)
    repeats: RepeatedScores | None = Field(default=None, exclude_if=lambda v: v is None)

    @classmethod
    def of(cls, result: MetricResult) -> PanelVote:
        """A judge's result on the cell, kept without its evidence (the cell has the first's)."""
        return cls(
            value=result.value,
            status=result.status,
            cause=result.cause,
            cause_kind=result.cause_kind,
            repeats=result.repeats if isinstance(result, Cell) else None,
        )


class Cell(MetricResult):
    """One metric on one sample, as logged: the metric's result, the kind of its cause (for a
    cell without a value), the usage of the requests it made and, for a cell scored several
    times, its scores."""

    model_config = ConfigDict(ser_json_inf_nan="strings")
    # a line of format 1 has cells without a kind (read as "unknown")
    kind_required: ClassVar[bool] = False

    #: told apart by its ``kind`` alone (no Python callback per cell: see StoredEvidence)
    evidence: StoredEvidence = Field(default_factory=FreeformEvidence)
    cause_kind: CauseKind | None = None
    usage: Usage = Field(default_factory=Usage)
    #: written only for a cell scored several times
    repeats: RepeatedScores | None = Field(default=None, exclude_if=lambda v: v is None)
    #: written only for a judge metric's cell of a run judged by a panel: each judge's result
    #: by judge name (the value is the mean of the measured ones)
    panel: dict[str, PanelVote] | None = Field(default=None, exclude_if=lambda v: v is None)

    @classmethod
    def of(cls, result: MetricResult, usage: Usage) -> Cell:
        """`result` with its usage; the kind the metric gave its cause is kept."""
        fields = dict(result)
        fields["usage"] = usage
        return cls(**fields)


class SampleLine(_Versioned):
    """One line of ``results.jsonl``: a finished sample and a cell per metric."""

    model_config = ConfigDict(populate_by_name=True)

    row: int
    id: str
    inputs: Inputs = Field(default_factory=Inputs)
    #: by metric name (the key in the file is "metrics")
    cells: dict[str, Cell] = Field(
        default_factory=dict, validation_alias="metrics", serialization_alias="metrics"
    )
    #: this sample's share of work done once for several metrics (statement extraction)
    shared_usage: Usage = Field(default_factory=Usage)
    #: remote embedding requests paid for since the line before (their batches mix samples,
    #: so they are booked on the line written next); None when there were none
    embeddings_usage: Usage | None = None
    #: the run that scored it, as its observers are told (``RunStart.run_id``); not written to
    #: the log (a resumed directory holds the lines of several runs)
    run_id: str | None = Field(default=None, exclude=True)

    @property
    def usage(self) -> Usage:
        """Everything this line paid for: its cells, its shared work, its embeddings."""
        total = sum((c.usage for c in self.cells.values()), self.shared_usage)
        return total if self.embeddings_usage is None else total + self.embeddings_usage

    @classmethod
    def from_json(cls, raw: bytes) -> SampleLine:
        """A line as written: one of this format is validated straight from its JSON (a model
        validator, which needs the line as Python objects first, made reading a log of 1,000
        rows twice as slow); one of format 7 and earlier, or without its version in front,
        has its evidence dicts read as free-form first (:class:`_UntypedEvidenceLine`)."""
        if raw.startswith(_VERSION_FIRST):
            digits = raw[len(_VERSION_FIRST) :].split(b",", 1)[0]
            if digits.isdigit() and int(digits) > UNTYPED_EVIDENCE_FORMAT:
                return cls.model_validate_json(raw)
        return _UntypedEvidenceLine.model_validate_json(raw)

    def sample(self) -> Sample:
        """The sample again, as the run read it (a Conversation for a conversation's line)."""
        return sample_of({**self.inputs.model_dump(exclude_none=True), "id": self.id})


def _freeform_cell(cell: Any) -> Any:
    """A cell of format 7 or earlier, its evidence dict read as free-form evidence."""
    if isinstance(cell, Mapping) and isinstance(cell.get("evidence"), Mapping):
        return {**cell, "evidence": FreeformEvidence.of(cell["evidence"])}
    return cell


#: how every line this rageval writes starts (the version is the first field of the model)
_VERSION_FIRST = b'{"format_version":'


class _UntypedEvidenceLine(SampleLine):
    """A line of format 7 or earlier (or one whose version is not in front): the same line,
    its cells' evidence dicts read as free-form evidence."""

    @model_validator(mode="before")
    @classmethod
    def _untyped_evidence(cls, data: Any) -> Any:
        # before format 8 a cell's evidence was a plain dict: free-form, whatever its keys (a
        # "kind" key among them was the metric's own, not a typed kind)
        if not isinstance(data, Mapping) or data.get("format_version", 1) > UNTYPED_EVIDENCE_FORMAT:
            return data
        cells = data.get("metrics", data.get("cells"))
        if not isinstance(cells, Mapping):
            return data
        key = "metrics" if "metrics" in data else "cells"
        return {**data, key: {name: _freeform_cell(cell) for name, cell in cells.items()}}


# ---------------------------------------------------------------------------- batches.jsonl


class BatchEvent(_Versioned):
    """One line of ``batches.jsonl`` (a run in batch mode): a file of requests uploaded to an
    endpoint's Batch API (``event="uploaded"``: the endpoint, the API path its lines go to, and
    the request behind each line as custom_id -> request hash), or the batch created from it
    (``event="created"``: its id). Written before and after the batch is created, so that a
    resumed run re-attaches to a batch in flight instead of uploading its requests again."""

    event: Literal["uploaded", "created"]
    file_id: str
    endpoint: str | None = None
    url: str | None = None
    lines: dict[str, str] = Field(default_factory=dict)
    batch_id: str | None = None
    #: the uploaded lines' input tokens, as estimated (what an enqueued-token cap counts)
    tokens: int | None = None


# ---------------------------------------------------------------------------- summary.json


class CauseExample(_LogModel):
    cause: str
    #: cells of the group with exactly this cause
    count: int
    #: the first few of them
    sample_ids: list[str] = Field(default_factory=list)


class FailureGroup(_LogModel):
    """Cells of one metric without a value, of one status and one kind of cause."""

    status: Literal["not_measured", "skipped"]
    kind: CauseKind
    count: int
    #: the most frequent causes of the group
    examples: list[CauseExample] = Field(default_factory=list)


class _MeanWithInterval(_LogModel):
    """A mean and its confidence interval (None: not enough values for one)."""

    mean: FiniteFloat | None = None
    ci_low: FiniteFloat | None = None
    ci_high: FiniteFloat | None = None


class PPISummary(_MeanWithInterval):
    """The mean of a human label column by PPI++: the metric's values on every finished row,
    rectified by the rows that carry a label (:func:`rageval.stats.ppi_mean`), next to the
    labelled rows' own mean. The means are None with fewer than two rows that carry both a
    label and a value."""

    labelled_mean: FiniteFloat | None = None
    labelled_ci_low: FiniteFloat | None = None
    labelled_ci_high: FiniteFloat | None = None
    #: λ, the weight power tuning gave the judge (0: the labelled rows alone; 1: classic PPI)
    lam: FiniteFloat | None = None
    #: rows with a label and a value; rows with a value only
    n_labelled: int = 0
    n_unlabelled: int = 0
    #: labelled rows the metric has no value for (not measured, skipped): left out
    n_labelled_without_judge: int = 0
    confidence: FiniteFloat = 0.95
    method: str | None = None


class JudgeNoiseSummary(_LogModel):
    """How much of a metric's interval is the judge's own randomness, from its cells scored
    several times (:func:`rageval.stats.judge_noise`)."""

    #: scorings per cell, and cells with at least two scores
    repeats: int
    n_cells: int
    #: the mean over cells of the standard deviation of their scores
    mean_cell_sd: FiniteFloat
    #: pooled variance of one cell's scores; variance of the cell values across rows
    within_variance: FiniteFloat
    cell_variance: FiniteFloat
    #: share of the variance of the mean due to the judge's noise, and of the CI's width
    noise_variance_share: FiniteFloat
    ci_width_share: FiniteFloat


class PanelSummary(_LogModel):
    """How far the judges of a panel agree on one metric (format 9): Krippendorff's α over the
    rows, the judges as coders (:func:`rageval.stats.krippendorff_alpha`), and each judge's
    own mean."""

    judges: list[str]
    #: "interval" (the values as scores)
    level: str = "interval"
    alpha: FiniteFloat | None = None
    alpha_ci_low: FiniteFloat | None = None
    alpha_ci_high: FiniteFloat | None = None
    #: rows with values from at least two judges
    n_units: int = 0
    confidence: FiniteFloat = 0.95
    method: str | None = None
    #: why there is no α (fewer than two rows, or no variation at all)
    note: str | None = Field(default=None, exclude_if=lambda v: v is None)
    #: each judge's mean over the rows it measured (None: none)
    judge_means: dict[str, FiniteFloat | None] = Field(default_factory=dict)


class FlipSummary(_LogModel):
    """How often a cell's pass/fail decision flips across its scorings (``repeats`` > 1;
    format 9): pass is a value at or above ``threshold`` (the metric's own ``threshold``
    parameter when it has one, else 0.5). In a panel each judge's scorings count apart."""

    rate: FiniteFloat | None = None
    n_cells: int = 0
    n_flipped: int = 0
    threshold: FiniteFloat = 0.5


class MetricSummary(_MeanWithInterval):
    """Aggregate of one metric: mean and CI over the measured cells, and every count."""

    ci_method: str | None = None
    #: why there is a mean but no interval: one measured value, or values all equal (the
    #: bootstrap has nothing to resample); written only then
    ci_undefined: str | None = Field(default=None, exclude_if=lambda v: v is None)
    n_measured: int = 0
    n_not_measured: int = 0
    n_skipped: int = 0
    usage: Usage = Field(default_factory=Usage)
    #: cells without a value, by status and kind, largest group first
    failures: list[FailureGroup] = Field(default_factory=list)
    #: label column -> the PPI++ mean of its human labels (evaluate(human_labels=...))
    ppi: dict[str, PPISummary] = Field(default_factory=dict)
    #: the judge's own noise in the interval (evaluate(repeats=K) with K > 1)
    judge_noise: JudgeNoiseSummary | None = None
    #: the agreement of a panel's judges (a judge metric of a run judged by a panel)
    panel: PanelSummary | None = Field(default=None, exclude_if=lambda v: v is None)
    #: pass/fail flips across repeats (evaluate(repeats=K) with K > 1)
    flips: FlipSummary | None = Field(default=None, exclude_if=lambda v: v is None)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def n_cells(self) -> int:
        return self.n_measured + self.n_not_measured + self.n_skipped

    @property
    def causes(self) -> dict[str, int]:
        """``"<status>: <cause>" -> cells`` for the example causes of every group (all the
        causes when a group has few; its most frequent ones when it has many)."""
        return {
            f"{group.status.replace('_', ' ')}: {example.cause}": example.count
            for group in self.failures
            for example in group.examples
        }

    @model_validator(mode="before")
    @classmethod
    def _read(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        # n_cells is computed (kept out of the extra keys); format 1 counted
        # "not measured: <cause>" -> cells, of kinds it did not record
        data = {k: v for k, v in data.items() if k != "n_cells"}
        if "failures" not in data and "causes" in data:
            data["failures"] = _failures_of_format_1(data.pop("causes") or {})
        return data


def _failures_of_format_1(causes: Mapping[str, int]) -> list[dict[str, Any]]:
    groups: dict[str, dict[str, Any]] = {}
    for text, count in causes.items():
        head, _, cause = text.partition(": ")
        status = "skipped" if head == "skipped" else "not_measured"
        group = groups.setdefault(
            status, {"status": status, "kind": UNKNOWN_KIND, "count": 0, "examples": []}
        )
        group["count"] += count
        group["examples"].append({"cause": cause or text, "count": count})
    return sorted(groups.values(), key=lambda g: -int(g["count"]))


class Summary(_Versioned):
    """``summary.json``: per metric aggregates, and the usage of the whole run."""

    metrics: dict[str, MetricSummary] = Field(default_factory=dict)
    #: everything the run paid for: cells, shared work and remote embeddings
    usage: Usage = Field(default_factory=Usage)
    #: label (e.g. "shared:statements", "embeddings") -> usage of work no one metric owns
    shared_usage: dict[str, Usage] = Field(default_factory=dict)
    duration_s: FiniteFloat | None = None
    n_rows: int | None = None
    n_finished: int | None = None
