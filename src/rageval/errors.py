"""The error root of rageval and the kinds of cause a cell can carry.

Every exception rageval raises on purpose derives from :class:`RagevalError`, so one
``except RagevalError`` catches them all. An error that used to be a builtin error keeps that
base too (``InvalidDataError`` is still a ``ValueError``), so existing handlers keep working.
The tree, and where each error is raised::

    RagevalError
    ├── InvalidDataError (ValueError)       rageval.samples: input rows a metric cannot score,
    │                                       each named by row, id and field (before any call)
    ├── RunConfigError (ValueError)         rageval.runner: an evaluation that cannot run as
    │                                       asked (unknown metric, bad option)
    ├── RunDirError (ValueError)            rageval.runner: a run directory that cannot be used
    │   │                                   (occupied, another run, not resumable)
    │   └── RunDirInUseError                another process (or another evaluation in this one)
    │                                       is writing the directory now: refused at once,
    │                                       naming the holder (pid, host, start time)
    ├── RunLogError (ValueError)            rageval.log: a run log that cannot be read (damaged
    │                                       line, written by a newer rageval)
    ├── DatasetError (ValueError)           rageval.calibration.datasets: a public labelled
    │                                       dataset missing or not in its expected layout
    ├── JudgeError                          rageval.judge (defined here: rageval._client raises
    │   │                                   them for the judge and remote embeddings alike)
    │   ├── FatalJudgeError                 the endpoint refused for good (key, model, request):
    │   │                                   the run stops
    │   └── JudgeCallFailed                 one call gave no usable reply: its cell is "not
    │                                       measured", with the cause
    ├── BudgetReached                       rageval._client: the next request would pass the
    │                                       run's max_cost; the run stops, resumable
    ├── MissingExtraError (ImportError)     rageval._extras: a feature whose optional extra is
    │                                       not installed (Parquet, to_pandas(), Ray...): the
    │                                       message is one line with the install command
    ├── NoJudgeError (RuntimeError)         rageval.metrics: a judge metric scored without judge
    ├── ModelFilesError (RuntimeError)      rageval.embeddings: the local model's files are
    │                                       missing or not the expected ones
    └── NetworkBlockedError (RuntimeError)  rageval.testing: a connection that would leave the
                                            machine, under the test network guard

(Two more never leave the client layer: its transport's ``BadBody`` and ``RequestNotSent``
are sorted into the errors above by the retry loop.)

A cell that has no value (``not_measured`` or ``skipped``) carries a human-readable ``cause``
and one of the stable :data:`CauseKind` codes below, so that reports and the command line can
group hundreds of failures by kind, and scripts can act on them without parsing prose.
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = [
    "CAUSE_KINDS",
    "BudgetReached",
    "CauseKind",
    "FatalJudgeError",
    "JudgeCallFailed",
    "JudgeError",
    "MissingExtraError",
    "RagevalError",
    "RunDirError",
    "RunDirInUseError",
]


class RagevalError(Exception):
    """Base class of every error rageval raises on purpose."""


# The run directory's errors: raised by the runner (rageval.runner re-exports them), defined
# here with the tree they belong to.


class RunDirError(RagevalError, ValueError):
    """A run directory that cannot be used as asked (occupied, or not the same run)."""


class RunDirInUseError(RunDirError):
    """Another writer holds the run directory: a run, resume or calibration is writing it now.

    One writer per run directory (:mod:`rageval._rundir_lock`): the second is refused at once,
    before it reads the data or sends a request, and writes nothing. ``pid``, ``host`` and
    ``started_at`` (UTC, ISO 8601) name the holder as it wrote itself into the lock file; None
    when it had not written them yet (it was starting at that very moment).
    """

    def __init__(
        self, message: str, *, pid: int | None, host: str | None, started_at: str | None
    ) -> None:
        super().__init__(message)
        self.pid = pid
        self.host = host
        self.started_at = started_at


class MissingExtraError(RagevalError, ImportError):
    """A feature needs an optional extra that is not installed (see :mod:`rageval._extras`).

    ``extra`` is the extra's name (``pip install 'rageval[<extra>]'``); the message is one line
    that names the feature, the missing module and the install command.
    """

    def __init__(self, message: str, *, extra: str) -> None:
        super().__init__(message)
        self.extra = extra


# The errors of a call to a model endpoint live here, at the bottom, because the endpoint
# client (rageval._client) raises them for the judge and for remote embeddings alike; they are
# re-exported by rageval.judge, where users import them from.


class JudgeError(RagevalError):
    """Base class of every error a judge or a remote embeddings endpoint raises."""


class FatalJudgeError(JudgeError):
    """The endpoint refused in a way no retry can fix (bad key, unknown model, invalid request).

    The run must stop: every later call to the same judge raises this again without sending.
    ``status`` is the HTTP status (None when the error was not an HTTP reply) and ``detail`` the
    server's own message, already stripped of the API key.
    """

    def __init__(self, message: str, *, status: int | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail


class JudgeCallFailed(JudgeError):
    """One call could not produce a usable reply (retries or re-asks exhausted, truncation...).

    ``cause`` is a short human-readable reason and ``kind`` its stable code (one of
    :data:`CauseKind`: ``invalid_reply``, ``truncated``, ``input_too_long``, ``transport``,
    ``refusal``); the metric cell becomes "not measured" with both.
    """

    def __init__(self, cause: str, kind: CauseKind) -> None:
        super().__init__(cause)
        self.cause = cause
        self.kind: CauseKind = kind


class BudgetReached(RagevalError):
    """The next request would take the spending of a run past its budget (``max_cost``).

    Raised by the request that did not fit once nothing else was in flight: the run stops
    there, having spent ``spent_usd`` of ``max_cost_usd``; what finished is kept and the run
    can be resumed. ``evaluate()`` attaches what finished as ``result`` (an
    ``EvaluationResult``) before it lets the error go.
    """

    def __init__(self, message: str, *, spent_usd: float, max_cost_usd: float) -> None:
        super().__init__(message)
        self.spent_usd = spent_usd
        self.max_cost_usd = max_cost_usd
        self.result: object | None = None


CauseKind = Literal[
    # not measured: the judge or the embeddings could not give a usable answer
    "invalid_reply",
    "truncated",
    "input_too_long",
    "transport",
    "refusal",
    # not measured: the metric itself
    "undefined",
    "metric_error",
    # skipped: the cell was not run
    "missing_field",
    "invalid_row",
    "no_judge",
    # not recorded: a run log from before cells had a kind, or a metric that gave none
    "unknown",
]

#: what each kind means, in the words the report and the command line use
CAUSE_KINDS: Final[dict[CauseKind, str]] = {
    "invalid_reply": "the judge's replies never passed validation, re-asks included",
    "truncated": "the judge's reply hit the output token limit, even with a larger budget or "
    "in a loop",
    "input_too_long": "the prompt exceeds the model's context window (not sent, no cost)",
    "transport": "the endpoint kept failing (rate limits, server errors, timeouts, "
    "dropped connections) until the retries ran out",
    "refusal": "the model refused, or the endpoint's content filter withheld the reply",
    "undefined": "the metric has no value for this input (e.g. no statement to check)",
    "metric_error": "the metric raised an unexpected error on this sample",
    "missing_field": "the sample lacks a field the metric needs",
    "invalid_row": "the row could not be read as a sample",
    "no_judge": "the metric needs an LLM judge and none is configured",
    "unknown": "not recorded: the run log predates cause kinds, or the metric gave none",
}


class NoJudgeError(RagevalError, RuntimeError):
    """A metric that needs an LLM judge was asked to score without one (``rageval.metrics``
    re-exports it: a cell so raised is skipped with a hint on configuring a judge)."""


class RunConfigError(RagevalError, ValueError):
    """An evaluation asked for something that cannot run (unknown metric, bad option...):
    raised before any request (``rageval.runner`` re-exports it)."""
