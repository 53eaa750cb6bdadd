"""Reply budgets: how many tokens a judge's reply may take.

A request's budget is fitted beside its prompt in the context window (a known model's, or the
one a llama.cpp server reports); a prompt that leaves too little room is not sent. A reply cut
at its budget is asked again once with a larger one, unless a larger one cannot help: the reply
ends in a loop, or the context window, not the budget, cut it (its prompt and reply fill the
window the endpoint reports, or a known model's).
"""

from __future__ import annotations

import re

from rageval.errors import JudgeCallFailed
from rageval.judge._backend import Completion
from rageval.judge._modes import loops

__all__ = [
    "CONTEXT_WINDOWS",
    "MAX_GROWN_BUDGET",
    "MIN_REPLY_TOKENS",
    "WINDOW_SLACK",
    "context_window",
    "cut_short",
    "fit_budget",
    "grown_budget",
    "window_cut",
]

# A reply cut off at max_tokens is asked again once with twice the budget, up to this many.
MAX_GROWN_BUDGET = 16_384
# A reply needs at least this much room: a prompt that leaves less is not sent.
MIN_REPLY_TOKENS = 256
# A prompt and reply this close to the context window fill it: llama-server stops a reply a
# token or so before its slot's n_ctx, and counts the prompt its own way.
WINDOW_SLACK = 8

#: context windows (prompt + reply, in tokens) of common models, by family name; a dated
#: snapshot ("gpt-4o-mini-2024-07-18") has its family's. Other models: ``max_prompt_tokens``.
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "o1": 200_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
}
_SNAPSHOT_SUFFIX = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def context_window(model: str) -> int | None:
    """The context window of ``model`` (prompt and reply together), if it is a known one."""
    found = CONTEXT_WINDOWS.get(model)
    return found if found is not None else CONTEXT_WINDOWS.get(_SNAPSHOT_SUFFIX.sub("", model))


def fit_budget(
    prompt_tokens: int, budget: int, max_prompt_tokens: int | None, window: int | None, where: str
) -> int:
    """The reply budget that fits beside a prompt of `prompt_tokens` in the context `window` of
    `where` (a model, a server; None: unknown), or JudgeCallFailed(input_too_long) when the
    prompt is over `max_prompt_tokens` or leaves no room for a reply: then nothing is sent and
    nothing is paid."""
    if max_prompt_tokens is not None and prompt_tokens > max_prompt_tokens:
        raise JudgeCallFailed(
            f"the prompt is about {prompt_tokens:,} tokens, over max_prompt_tokens="
            f"{max_prompt_tokens:,}: not sent",
            "input_too_long",
        )
    if window is None or prompt_tokens + budget <= window:
        return budget
    room = window - prompt_tokens
    if room < min(budget, MIN_REPLY_TOKENS):
        raise JudgeCallFailed(
            f"the prompt is about {prompt_tokens:,} tokens, too long for the "
            f"{window:,}-token context window of {where}: not sent",
            "input_too_long",
        )
    return room


def grown_budget(budget: int) -> int:
    """The reply budget a reply cut at `budget` is asked again with: twice as much, up to
    :data:`MAX_GROWN_BUDGET` (a budget already above it is not raised)."""
    return min(budget * 2, max(MAX_GROWN_BUDGET, budget))


def window_cut(reply: Completion, budget: int, window: int | None) -> bool:
    """Whether the context `window` of the endpoint (None: not known), not `budget`, cut
    `reply`: it was sent with less because the window left no more room beside its prompt, or
    its prompt and reply, as the server counted them, fill the window (llama-server stops
    where its context is full, whatever ``max_tokens`` says). A larger budget would be cut at
    the same place. A reply cut below its budget with room left in the window, or in a window
    not known, is not: a proxy or a dropped stream may have cut it, and it is asked again."""
    if window is None:
        return False
    if (reply.max_tokens or budget) < budget:
        return True
    used = reply.prompt_tokens + reply.completion_tokens
    return reply.counted and used >= window - WINDOW_SLACK


def cut_short(reply: Completion, budget: int, window: int | None) -> bool:
    """Whether `reply`, asked with `budget`, was cut at its token limit in a way a larger
    budget may complete: it does not end in a loop, and the context `window` (None: not
    known) did not cut it."""
    cut = reply.finish_reason == "length" and not reply.refusal
    return cut and not window_cut(reply, budget, window) and not loops(reply.text)
