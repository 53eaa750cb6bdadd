"""Errors raised by judges and remote embedding clients."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rageval.errors import CauseKind

__all__ = ["FatalJudgeError", "JudgeCallFailed", "JudgeError"]


class JudgeError(Exception):
    """Base class of every error the judge layer raises."""


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
    :data:`rageval.errors.CauseKind`: ``invalid_reply``, ``truncated``, ``input_too_long``,
    ``transport``, ``refusal``); the metric cell becomes "not measured" with both.
    """

    def __init__(self, cause: str, kind: CauseKind) -> None:
        super().__init__(cause)
        self.cause = cause
        self.kind: CauseKind = kind
