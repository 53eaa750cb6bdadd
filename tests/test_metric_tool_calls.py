"""tool_call_accuracy and tool_call_f1 (issue 25.3): deterministic scores of a conversation's
tool calls against its reference calls, each case computed by hand from the formula in
docs/metrics.md."""

from __future__ import annotations

import itertools
import random
from typing import Any

import pytest

from rageval.metrics import ToolCallAccuracy, ToolCallF1, create_metric
from rageval.metrics.evidence import ToolCallPair
from rageval.metrics.tool_call_accuracy import tool_call_accuracy_score
from rageval.metrics.tool_call_f1 import tool_call_f1_score
from rageval.metrics.tool_calls import best_matching, canonical_json
from rageval.samples import ToolCall


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(name=name, arguments=arguments)


def conversation(made: list[ToolCall], reference: list[ToolCall]) -> dict[str, Any]:
    return {
        "turns": [
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {"role": "assistant", "tool_calls": [c.model_dump() for c in made[:1]]},
            {"role": "tool", "content": "18C"},
            {"role": "assistant", "tool_calls": [c.model_dump() for c in made[1:]]},
            {"role": "assistant", "content": "18C and 25C."},
        ],
        "reference_tool_calls": [c.model_dump() for c in reference],
    }


PARIS, ROME = call("weather", city="Paris", unit="C"), call("weather", city="Rome", unit="C")


def test_json_normalisation_ignores_key_order_and_number_form_only() -> None:
    assert canonical_json({"a": 1, "b": [1.0, {"y": 2, "x": None}]}) == canonical_json(
        {"b": [1, {"x": None, "y": 2.0}], "a": 1.0}
    )
    assert canonical_json(True) != canonical_json(1)  # a boolean is not a number
    assert canonical_json([1, 2]) != canonical_json([2, 1])  # an array's order counts
    assert canonical_json("Paris") != canonical_json("paris")
    assert canonical_json(None) != canonical_json("null")
    # exact values: 2**53 + 1 is not the float nearest to it
    assert canonical_json(2**53 + 1) != canonical_json(float(2**53 + 1))


def test_accuracy_exact_match_in_order_and_in_any_order() -> None:
    swapped = [ROME, PARIS]
    # same calls, same order: 1 either way
    assert tool_call_accuracy_score([PARIS, ROME], [PARIS, ROME]) == 1.0
    # same calls, other order: 0 in order, 1 as multisets
    assert tool_call_accuracy_score(swapped, [PARIS, ROME], ordered=True) == 0.0
    assert tool_call_accuracy_score(swapped, [PARIS, ROME], ordered=False) == 1.0
    # key order and 1 vs 1.0 do not matter
    assert tool_call_accuracy_score([call("f", a=1, b=2)], [call("f", b=2.0, a=1)]) == 1.0
    # one argument differs, a call too many, a call missing, a call twice: 0
    assert tool_call_accuracy_score([call("weather", city="Paris", unit="F")], [PARIS]) == 0.0
    assert tool_call_accuracy_score([PARIS, PARIS], [PARIS], ordered=False) == 0.0
    assert tool_call_accuracy_score([], [PARIS]) == 0.0
    # nothing to call and nothing called
    assert tool_call_accuracy_score([], []) == 1.0


def test_accuracy_metric_says_what_was_missing_and_unexpected() -> None:
    result = ToolCallAccuracy().score(**conversation([PARIS, call("news")], [PARIS, ROME]))
    assert result.value == 0.0
    assert result.evidence["missing"] == ['weather({"city": "Rome", "unit": "C"})']
    assert result.evidence["unexpected"] == ["news({})"]
    swapped = ToolCallAccuracy().score(**conversation([ROME, PARIS], [PARIS, ROME]))
    assert swapped.value == 0.0 and swapped.reason == "the reference calls, made in another order"
    assert (
        ToolCallAccuracy(ordered=False).score(**conversation([ROME, PARIS], [PARIS, ROME])).value
        == 1.0
    )


def test_f1_by_argument_any_order() -> None:
    # made: weather(city=Rome, unit=C), weather(city=Paris, unit=F)
    # reference: weather(city=Paris, unit=C), weather(city=Rome, unit=C)
    # units: each call 1 + 2 arguments = 3, so sum_P u = 6, sum_R u = 6.
    # best pairing in any order: Rome/C-Rome/C shares 3 (name, city, unit),
    # Paris/F-Paris/C shares 2 (name, city): S = 5 (the crossed pairing shares 2 + 1 = 3).
    # P = 5/6, R = 5/6, F1 = 5/6.
    made = [ROME, call("weather", city="Paris", unit="F")]
    scores = tool_call_f1_score(made, [PARIS, ROME])
    assert (scores.shared, scores.made_units, scores.reference_units) == (5, 6, 6)
    assert scores.pairs == [(0, 1, 3), (1, 0, 2)]
    assert scores.precision == scores.recall == pytest.approx(5 / 6)
    assert scores.f1 == pytest.approx(5 / 6)


def test_f1_by_argument_in_order() -> None:
    # made: search(q="rome"), weather(city=Rome, unit=C)
    # reference: weather(city=Rome, unit=C), search(q="rome")
    # units: search 1 + 1 = 2, weather 1 + 2 = 3: sum_P u = sum_R u = 5.
    # in order, only one of the two exact pairs can be kept (they cross): the weather pair
    # shares 3, the search pair 2, so S = 3. P = R = 3/5, F1 = 3/5.
    # in any order both pairs count: S = 5, F1 = 1.
    made = [call("search", q="rome"), ROME]
    reference = [ROME, call("search", q="rome")]
    ordered = tool_call_f1_score(made, reference, ordered=True)
    assert ordered.shared == 3 and ordered.pairs == [(1, 0, 3)]
    assert ordered.f1 == pytest.approx(3 / 5)
    assert tool_call_f1_score(made, reference, ordered=False).f1 == 1.0


def test_f1_with_extra_and_missing_arguments() -> None:
    # made: book(hotel="Ritz", nights=2, breakfast=true): u = 4
    # reference: book(hotel="Ritz", nights=2.0, city="Paris"), weather(city="Paris"): u = 4 + 2 = 6
    # book pair shares name, hotel, nights (2 == 2.0): 3; weather is not made.
    # P = 3/4, R = 3/6 = 1/2, F1 = 2 * (3/4)(1/2) / (3/4 + 1/2) = (3/4) / (5/4) = 3/5.
    made = [call("book", hotel="Ritz", nights=2, breakfast=True)]
    reference = [
        call("book", hotel="Ritz", nights=2.0, city="Paris"),
        call("weather", city="Paris"),
    ]
    scores = tool_call_f1_score(made, reference)
    assert (scores.shared, scores.made_units, scores.reference_units) == (3, 4, 6)
    assert scores.precision == 0.75 and scores.recall == 0.5
    assert scores.f1 == pytest.approx(0.6)


def test_f1_by_whole_call() -> None:
    # made: Paris/C, Paris/C, news(); reference: Paris/C, Rome/C. Each call is one unit.
    # only one Paris/C can pair with the one in the reference: S = 1.
    # P = 1/3, R = 1/2, F1 = 2 * (1/3)(1/2) / (1/3 + 1/2) = (1/3) / (5/6) = 2/5.
    scores = tool_call_f1_score([PARIS, PARIS, call("news")], [PARIS, ROME], level="call")
    assert (scores.shared, scores.made_units, scores.reference_units) == (1, 3, 2)
    assert scores.f1 == pytest.approx(0.4)


@pytest.mark.parametrize(
    ("made", "reference", "value"),
    [([], [], 1.0), ([], [PARIS], 0.0), ([PARIS], [], 0.0), ([call("news")], [PARIS], 0.0)],
)
def test_f1_without_calls_on_a_side(
    made: list[ToolCall], reference: list[ToolCall], value: float
) -> None:
    assert tool_call_f1_score(made, reference).f1 == value


def test_the_matching_is_the_best_there_is() -> None:
    # brute force over every pairing on random small cases: the Hungarian assignment (any
    # order) and the alignment (in order) reach the largest total a brute force finds
    rng = random.Random(7)
    names, values = ["a", "b"], [1, 2, "x"]

    def random_call() -> ToolCall:
        keys = rng.sample(["p", "q", "r"], rng.randint(0, 3))
        return call(rng.choice(names), **{k: rng.choice(values) for k in keys})

    def agreement(p: ToolCall, r: ToolCall) -> int:
        if p.name != r.name:
            return 0
        return 1 + sum(1 for k, v in p.arguments.items() if r.arguments.get(k, object()) == v)

    for _ in range(300):
        made = [random_call() for _ in range(rng.randint(0, 5))]
        reference = [random_call() for _ in range(rng.randint(0, 5))]
        for ordered in (False, True):
            best = 0
            for k in range(min(len(made), len(reference)) + 1):
                for rows in itertools.combinations(range(len(made)), k):
                    for cols in itertools.permutations(range(len(reference)), k):
                        if ordered and list(cols) != sorted(cols):
                            continue
                        best = max(
                            best,
                            sum(
                                agreement(made[i], reference[j])
                                for i, j in zip(rows, cols, strict=True)
                            ),
                        )
            pairs = best_matching(made, reference, agreement, ordered=ordered)
            assert sum(a for _, _, a in pairs) == best
            assert len({i for i, _, _ in pairs}) == len({j for _, j, _ in pairs}) == len(pairs)
            if ordered:
                assert [j for _, j, _ in pairs] == sorted(j for _, j, _ in pairs)


def test_the_metrics_score_conversations_and_record_their_parameters() -> None:
    made = [ROME, call("weather", city="Paris", unit="F")]
    result = ToolCallF1().score(**conversation(made, [PARIS, ROME]))
    assert result.value == pytest.approx(5 / 6)
    assert result.evidence["precision"] == pytest.approx(5 / 6)
    assert result.evidence["pairs"][0] == ToolCallPair(
        call='weather({"city": "Rome", "unit": "C"})',
        reference='weather({"city": "Rome", "unit": "C"})',
        shared=3,
    )
    assert ToolCallF1().params() == {"ordered": False, "level": "argument"}
    assert ToolCallAccuracy().params() == {"ordered": True}
    again = create_metric("tool_call_f1", {"ordered": True, "level": "call"})
    assert isinstance(again, ToolCallF1) and again.ordered and again.level == "call"
    with pytest.raises(ValueError, match="level is one of"):
        ToolCallF1(level="name")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ordered must be True or False"):
        ToolCallAccuracy(ordered="yes")  # type: ignore[arg-type]


def test_each_kind_of_metric_refuses_the_other_kind_of_row() -> None:
    from rageval.metrics import Faithfulness

    with pytest.raises(
        ValueError, match=r"this row is a conversation .* faithfulness scores single-turn"
    ):
        Faithfulness().score(**conversation([PARIS], [PARIS]))
    with pytest.raises(
        ValueError, match="single-turn sample and tool_call_f1 scores conversations"
    ):
        ToolCallF1().score(user_input="q", response="a")
