"""What the tool-call metrics share (tool_call_accuracy and tool_call_f1, one module each): how
two tool calls are compared, and the matching of a conversation's calls with the reference's.
Deterministic: no judge, no embeddings, pure Python (docs/metrics.md).

The calls compared are the assistant's, in the order of its turns
(:attr:`rageval.samples.Conversation.tool_calls`), against the conversation's
`reference_tool_calls`. What a tool returned is not compared: it is the tool's doing, not the
assistant's choice.

Two calls are the same call when their names are equal (exactly, case included) and their
arguments are equal after JSON normalisation (:func:`canonical_json`):

* an object's key order does not matter (``{"a": 1, "b": 2}`` is ``{"b": 2, "a": 1}``);
* numbers are equal by value: ``1`` is ``1.0`` (``true`` is not ``1``: booleans are their own
  type);
* an array's order matters, texts are compared exactly (no case folding, no trimming), and
  ``null`` is a value (an argument given as null is not an argument left out).

At the level of arguments, a call counts as units: its name, and each of its top-level
arguments (a nested object or array is one argument, equal when all of it is equal).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from rageval.metrics.base import Metric
from rageval.samples import Conversation, Sample, ToolCall

#: how much two calls agree (0 when they cannot be paired)
Agreement = Callable[[ToolCall, ToolCall], int]


def canonical_json(value: Any) -> Hashable:
    """`value` (JSON data) in a form where equal means equal after normalisation: object keys
    sorted, numbers by exact value (``1`` equals ``1.0``; a boolean stays a boolean)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value).__name__, value)
    if isinstance(value, (int, float)):
        return ("number", Fraction(value))
    if isinstance(value, (list, tuple)):
        return ("array", tuple(canonical_json(v) for v in value))
    if isinstance(value, Mapping):
        return ("object", tuple(sorted((str(k), canonical_json(v)) for k, v in value.items())))
    raise TypeError(f"not JSON data: a {type(value).__name__}")


def canonical_call(call: ToolCall) -> Hashable:
    """A call as its name and normalised arguments: equal for the same call."""
    return (call.name, canonical_json(call.arguments))


def call_text(call: ToolCall) -> str:
    """A call as evidence shows it: ``get_weather({"city": "Paris"})`` (keys sorted)."""
    return call.text


def argument_units(call: ToolCall) -> int:
    """What a call counts at the level of arguments: its name and each argument."""
    return 1 + len(call.arguments)


def argument_agreement(predicted: ToolCall, reference: ToolCall) -> int:
    """The units two calls share: 0 for calls of different tools, else 1 (the name) plus each
    argument both give with equal values."""
    if predicted.name != reference.name:
        return 0
    same = sum(
        1
        for key, value in predicted.arguments.items()
        if key in reference.arguments
        and canonical_json(value) == canonical_json(reference.arguments[key])
    )
    return 1 + same


def call_agreement(predicted: ToolCall, reference: ToolCall) -> int:
    """1 when two calls are the same call (exact match: name and normalised arguments)."""
    return int(canonical_call(predicted) == canonical_call(reference))


def best_matching(
    predicted: Sequence[ToolCall],
    reference: Sequence[ToolCall],
    agreement: Agreement,
    *,
    ordered: bool,
) -> list[tuple[int, int, int]]:
    """The pairing of predicted with reference calls (each call in at most one pair) that
    shares the most: ``(predicted index, reference index, agreement)`` for each pair with a
    positive agreement, in order of the predicted calls. `ordered`: the pairs keep the order
    of both lists (a weighted longest common subsequence), else any pairing (an optimal
    assignment). Of several best pairings, the same one is always chosen."""
    weights = [[agreement(p, r) for r in reference] for p in predicted]
    if not predicted or not reference:
        return []
    pairs = _aligned(weights) if ordered else _assigned(weights)
    return [(i, j, weights[i][j]) for i, j in sorted(pairs) if weights[i][j] > 0]


def _aligned(weights: list[list[int]]) -> list[tuple[int, int]]:
    """The order-keeping pairing of largest total weight (dynamic programming)."""
    n, m = len(weights), len(weights[0])
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            w = weights[i - 1][j - 1]
            best[i][j] = max(best[i - 1][j], best[i][j - 1], best[i - 1][j - 1] + w if w else 0)
    pairs = []
    i, j = n, m
    while i and j:
        w = weights[i - 1][j - 1]
        if w and best[i][j] == best[i - 1][j - 1] + w:
            pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif best[i][j] == best[i - 1][j]:
            i -= 1
        else:
            j -= 1
    return pairs[::-1]


def _assigned(weights: list[list[int]]) -> list[tuple[int, int]]:
    """The pairing of largest total weight in any order: the Hungarian algorithm (Kuhn-Munkres,
    in its O(n²m) form with potentials) on the negated weights, rows the shorter side."""
    if len(weights) > len(weights[0]):
        return [(i, j) for j, i in _assigned([list(col) for col in zip(*weights, strict=True)])]
    n, m = len(weights), len(weights[0])
    inf = float("inf")
    u, v = [0.0] * (n + 1), [0.0] * (m + 1)
    row_of = [0] * (m + 1)  # 1-based row assigned to each column; column 0 is a sentinel
    way = [0] * (m + 1)
    for i in range(1, n + 1):
        row_of[0], j0 = i, 0
        min_v, used = [inf] * (m + 1), [False] * (m + 1)
        while True:
            used[j0] = True
            i0, delta, j1 = row_of[j0], inf, 0
            for j in range(1, m + 1):
                if not used[j]:
                    reduced = -weights[i0 - 1][j - 1] - u[i0] - v[j]
                    if reduced < min_v[j]:
                        min_v[j], way[j] = reduced, j0
                    if min_v[j] < delta:
                        delta, j1 = min_v[j], j
            for j in range(m + 1):
                if used[j]:
                    u[row_of[j]] += delta
                    v[j] -= delta
                else:
                    min_v[j] -= delta
            j0 = j1
            if row_of[j0] == 0:
                break
        while j0:
            j1 = way[j0]
            row_of[j0] = row_of[j1]
            j0 = j1
    return [(row_of[j] - 1, j - 1) for j in range(1, m + 1) if row_of[j]]


class ToolCallMetric(Metric):
    """What the tool-call metrics share: they score conversations against their reference
    tool calls, with regard to the calls' order (`ordered`) or without."""

    required_fields = ("turns", "reference_tool_calls")
    value_range = (0.0, 1.0)

    def __init__(self, *, ordered: bool, **kw: Any) -> None:
        super().__init__(**kw)
        if not isinstance(ordered, bool):
            raise ValueError(f"ordered must be True or False, got {ordered!r}")
        self.ordered = ordered

    @staticmethod
    def calls(sample: Sample) -> tuple[list[ToolCall], list[ToolCall]]:
        """The calls the assistant made and the reference's (the sample is a conversation
        with reference calls: :meth:`input_problems` let it through)."""
        if not isinstance(sample, Conversation) or sample.reference_tool_calls is None:
            raise TypeError("a tool-call metric scores a conversation with reference_tool_calls")
        return sample.tool_calls, list(sample.reference_tool_calls)
