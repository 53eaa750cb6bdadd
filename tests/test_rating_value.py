"""A rating metric's `value`: "expected" or "pass_probability" (metrics/_rating_value.py).

Every expected number is worked out by hand in the comment above it."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from helpers import judge_for, make_judge, route
from rageval.errors import RunDirError
from rageval.metrics import AnswerAccuracy, ContextRelevance, ResponseGroundedness, create_metric
from rageval.metrics._rating_value import RatingValue, combine_ratings, pass_probability
from rageval.runner import evaluate
from rageval.runner._rundir import stored_metric
from rageval.samples import SingleTurnSample
from rageval.testing import FakeOpenAI, Reply
from rageval.testing.records import ScriptedToken

T1, T2 = ("reference", "candidate"), ("gold", "proposed")
SAMPLE = SingleTurnSample(user_input="q?", response="a.", reference="b.")


def scripted(sampled: int, probabilities: dict[int, float]) -> Reply:
    """``{"rating": sampled}`` with the ratings' probabilities at the rating's token."""
    alternatives = {str(r): math.log(p) for r, p in probabilities.items()}
    tokens: list[ScriptedToken] = [
        ('{"rating": ', 0.0),
        (str(sampled), alternatives[str(sampled)], alternatives),
        ("}", 0.0),
    ]
    return Reply.json({"rating": sampled}, logprobs=tokens)


def test_pass_probability_adds_up_the_sums_that_reach_the_middle() -> None:
    # 0/2/4, two templates: pass when r1 + r2 >= 4.
    # {4: .5, 2: .3, 0: .2} and {2: .6, 0: .4}: (4, 2) .30 + (4, 0) .20 + (2, 2) .18 = 0.68
    two = [{4: 0.5, 2: 0.3, 0: 0.2}, {2: 0.6, 0: 0.4}]
    assert pass_probability(two, 4) == pytest.approx(0.68)
    # a rating exactly at the middle passes: (2, 2) alone is 1.0
    assert pass_probability([{2: 1.0}, {2: 1.0}], 4) == 1.0
    # 0/1/2, three templates: pass when the sum >= 3. Each {2: .5, 1: .2, 0: .3}:
    # P(sum <= 2) = P(0,0,0) .027 + 3 x P(one 1) .2 x .09 = .054 + 3 x P(one 2) .5 x .09 = .135
    #   + 3 x P(two 1s) .04 x .3 = .036 -> .252; pass 1 - .252 = 0.748
    three = [{2: 0.5, 1: 0.2, 0: 0.3}] * 3
    assert pass_probability(three, 2) == pytest.approx(0.748)
    # one template: P(r >= 1) on 0/1/2
    assert pass_probability([{2: 0.5, 1: 0.2, 0: 0.3}], 2) == pytest.approx(0.7)


def test_combining_the_templates() -> None:
    dist = {4: 0.6, 2: 0.3, 0: 0.1}  # expected 3.0

    def combine(value: RatingValue, ratings: Sequence[int | None],
                expected: Sequence[float | None], distributions: Sequence[dict[int, float] | None],
                probabilities: bool = True) -> float | None:  # fmt: skip
        return combine_ratings(
            value, ratings, expected, distributions, 4, by_probabilities=probabilities
        )

    # expected: (3.0 + 2 written, no distribution) / 2 / 4 = 0.625
    assert combine("expected", [4, 2], [3.0, None], [dist, None]) == 0.625
    # pass_probability: the template without a distribution gives its 2 for sure:
    # P(r1 + 2 >= 4) = P(r1 >= 2) = 0.9
    assert combine("pass_probability", [4, 2], [3.0, None], [dist, None]) == pytest.approx(0.9)
    # a template with no valid rating is left out: P(r1 >= 2) = 0.9 again
    assert combine("pass_probability", [4, None], [3.0, None], [dist, None]) == pytest.approx(0.9)
    # scored by probabilities, no distribution read in this cell: point masses all the same,
    # as when one was read ({4: 1.0} and 0 written): 4 + 0 >= 4 passes for sure -> 1.0; (2, 0):
    # 2 < 4 -> 0.0; (4, 2) -> 1.0 (the mean rating would say 0.5, 0.25, 0.75)
    for ratings, passing in (([4, 0], 1.0), ([2, 0], 0.0), ([4, 2], 1.0)):
        assert combine("pass_probability", ratings, [None, None], [None, None]) == passing
        assert combine("pass_probability", ratings, [None, None], [{ratings[0]: 1.0}, None]) == (
            passing
        )
    # sampled scoring (no distribution anywhere): both readings are the mean rating, (4 + 2) / 8
    for value in ("expected", "pass_probability"):
        assert combine(value, [4, 2], [None, None], [None, None], probabilities=False) == 0.75
    assert combine("pass_probability", [4, 0], [None, None], [None, None], False) == 0.5
    assert combine("pass_probability", [None, None], [None, None], [None, None]) is None


def test_the_value_is_a_recorded_parameter_that_keys_the_cells() -> None:
    assert AnswerAccuracy().params()["value"] == "pass_probability"
    assert AnswerAccuracy(value="expected").params()["value"] == "expected"
    assert ContextRelevance().params()["value"] == "expected"
    identity = AnswerAccuracy().config_identity()
    assert identity is not None
    assert identity != AnswerAccuracy(value="expected").config_identity()
    with pytest.raises(ValueError, match="value must be one of expected, pass_probability"):
        AnswerAccuracy(value="mean")


async def test_a_template_without_log_probabilities_counts_its_rating_for_sure(
    fake_openai: FakeOpenAI,
) -> None:
    # template 1 read by probability {4: .6, 2: .3, 0: .1}; template 2 sampled 2 (its reply has
    # no log-probabilities) -> P(r1 + 2 >= 4) = .6 + .3 = 0.9
    fake_openai.handler = route(
        (T1, scripted(4, {4: 0.6, 2: 0.3, 0: 0.1})), (T2, Reply.json({"rating": 2}))
    )
    metric = AnswerAccuracy(llm=judge_for(fake_openai, scoring="probabilities"))
    result = await metric.single_turn_ascore(SAMPLE)
    assert result.value == pytest.approx(0.9)
    assert result.evidence["distributions"] == {
        "template_1": pytest.approx({4: 0.6, 2: 0.3, 0: 0.1}),
        "template_2": None,
    }


@pytest.mark.parametrize(("scoring", "value"), [("probabilities", 1.0), ("sampled", 0.5)])
async def test_with_no_log_probabilities_read_the_judges_scoring_decides(
    fake_openai: FakeOpenAI, scoring: Any, value: float
) -> None:
    # written 4 and 0, neither reply with log-probabilities: scored by probabilities, each a
    # point mass, 4 + 0 >= 4 -> 1.0; sampled, the mean (4 + 0) / 8 = 0.5
    fake_openai.handler = route((T1, Reply.json({"rating": 4})), (T2, Reply.json({"rating": 0})))
    metric = AnswerAccuracy(llm=judge_for(fake_openai, scoring=scoring))
    result = await metric.single_turn_ascore(SAMPLE)
    assert result.value == value
    assert "distributions" not in result.evidence


ROWS = [{"user_input": f"q{i}?", "response": "a.", "reference": "b."} for i in range(2)]


def _replies(server: FakeOpenAI) -> None:
    # template 1 sampled 4, {4: .6, 2: .3, 0: .1}; template 2 sampled 2, {2: .5, 0: .5}:
    # "expected" (3.0 + 1.0) / 8 = 0.5; "pass_probability" .6 + .15 = 0.75 (as above)
    server.handler = route(
        (T1, scripted(4, {4: 0.6, 2: 0.3, 0: 0.1})), (T2, scripted(2, {2: 0.5, 0: 0.5}))
    )


def test_a_run_recorded_without_value_resumes_as_expected(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    _replies(fake_openai)
    judge = make_judge(fake_openai, scoring="probabilities")
    run = tmp_path / "run"
    expected = {"answer_accuracy": {"value": "expected"}}
    evaluate(ROWS, ["answer_accuracy"], llm=judge, run_dir=str(run), metric_params=expected,
             progress=False)  # fmt: skip
    # as a run recorded before the parameter: no `value` in its manifest, killed after a row
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["metrics"][0]["params"]["value"]
    (run / "manifest.json").write_text(json.dumps(manifest))
    first_line = (run / "results.jsonl").read_text().splitlines(keepends=True)[0]
    (run / "results.jsonl").write_text(first_line)
    # re-made from the manifest: the reading the run used, not today's default
    assert stored_metric("answer_accuracy", {}).params()["value"] == "expected"
    # today's default would read its cells another way: refused, naming both
    with pytest.raises(RunDirError, match=r'"value":"expected".*"value":"pass_probability"'):
        evaluate(ROWS, ["answer_accuracy"], llm=judge, run_dir=str(run), resume=True,
                 progress=False)  # fmt: skip
    resumed = evaluate(ROWS, ["answer_accuracy"], llm=judge, run_dir=str(run), resume=True,
                       progress=False, metric_params=expected)  # fmt: skip
    assert list(resumed["answer_accuracy"]) == [pytest.approx(0.5)] * 2  # both read "expected"


def test_checker_mode_of_response_groundedness_refuses_a_value_it_would_not_read() -> None:
    with pytest.raises(ValueError, match=r"value='pass_probability'.*mode='checker'"):
        create_metric("response_groundedness", {"mode": "checker", "value": "pass_probability"})
    # the default reading (given or not) is the same metric; mode "ratings" reads either
    assert ResponseGroundedness(mode="checker", value="expected").params() == (
        ResponseGroundedness(mode="checker").params()
    )
    assert ResponseGroundedness(value="pass_probability").value == "pass_probability"
