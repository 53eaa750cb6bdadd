"""The errors judges and remote embedding clients raise (defined in :mod:`rageval.errors`)."""

from rageval.errors import FatalJudgeError, JudgeCallFailed, JudgeError

__all__ = ["FatalJudgeError", "JudgeCallFailed", "JudgeError"]
