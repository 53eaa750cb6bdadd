"""The error root of rageval and the kinds of cause a cell can carry.

Every exception rageval raises on purpose derives from :class:`RagevalError`, so one
``except RagevalError`` catches them all. (The tree below it is documented in
docs/ARCHITECTURE.md.)

A cell that has no value (``not_measured`` or ``skipped``) carries a human-readable ``cause``
and one of the stable :data:`CauseKind` codes below, so that reports and the command line can
group hundreds of failures by kind, and scripts can act on them without parsing prose.
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = ["CAUSE_KINDS", "CauseKind", "RagevalError"]


class RagevalError(Exception):
    """Base class of every error rageval raises on purpose."""


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
]

#: what each kind means, in the words the report and the command line use
CAUSE_KINDS: Final[dict[CauseKind, str]] = {
    "invalid_reply": "the judge's replies never passed validation, re-asks included",
    "truncated": "the judge's reply hit the output token limit, even with a larger budget",
    "input_too_long": "the prompt exceeds the model's context window (not sent, no cost)",
    "transport": "the endpoint kept failing (rate limits, server errors, timeouts, "
    "dropped connections) until the retries ran out",
    "refusal": "the model refused, or the endpoint's content filter withheld the reply",
    "undefined": "the metric has no value for this input (e.g. no statement to check)",
    "metric_error": "the metric raised an unexpected error on this sample",
    "missing_field": "the sample lacks a field the metric needs",
    "invalid_row": "the row could not be read as a sample",
    "no_judge": "the metric needs an LLM judge and none is configured",
}
