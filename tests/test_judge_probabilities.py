"""Probability-weighted verdicts and ratings (rageval.judge._probabilities): where a choice's
value is among a reply's tokens, which alternatives count for which option, renormalisation,
and the fallbacks; then the judge end to end against the test server's scripted
log-probabilities (one request, cached with its scoring, keyed on the scoring). Every expected
number is worked out by hand in the test."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest
from pydantic import BaseModel

from rageval.judge import Judge, ReplyScoring, TokenLogprob
from rageval.judge._modes import shape_of
from rageval.judge._probabilities import (
    choice_leaves,
    forget_logprobs,
    score_reply,
    value_spans,
)
from rageval.metrics.authoring import rating_model, verdict_model
from rageval.testing import FAKE_API_KEY, FakeOpenAI, Reply
from rageval.testing.records import ScriptedToken

ln = math.log
Leaves = dict[tuple[str, ...], tuple[object, ...]]
RATING = choice_leaves('{"properties":{"rating":{"enum":[0,2,4],"type":"integer"}}}')


def toks(*spec: tuple[str, float] | tuple[str, float, Mapping[str, float]]) -> list[TokenLogprob]:
    """Tokens with their alternatives (the token itself listed among them, as servers do)."""
    out = []
    for one in spec:
        token, logprob = one[0], one[1]
        alternatives = {token: logprob, **(one[2] if len(one) > 2 else {})}
        out.append(TokenLogprob(token, logprob, tuple(alternatives.items())))
    return out


def text_of(tokens: Sequence[TokenLogprob]) -> str:
    return "".join(t.token for t in tokens)


@pytest.fixture(autouse=True)
def _no_endpoint_known() -> Iterator[None]:
    forget_logprobs()
    yield
    forget_logprobs()


# ---------------------------------------------------------------------- the schema's choices


def test_choices_of_verdict_and_rating_models() -> None:
    verdicts = verdict_model("s", 1, 2, "supported", "supported by the contexts")
    leaves = choice_leaves(shape_of(verdicts).schema_json)
    assert leaves == {("s1", "supported"): (True, False), ("s2", "supported"): (True, False)}
    ratings = rating_model((0, 1, 2), reasons=True)
    assert choice_leaves(shape_of(ratings).schema_json) == {("rating",): (0, 1, 2)}


def test_value_spans_of_nested_objects_and_arrays() -> None:
    text = '  {"a": {"b" : true, "c": "x\\"y"}, "d": [1, 2.5], "e": null}'
    spans = value_spans(text)
    assert spans is not None
    assert text[slice(*spans[("a", "b")])] == "true"
    assert text[slice(*spans[("a", "c")])] == '"x\\"y"'
    assert text[slice(*spans[("d", "1")])] == "2.5"
    assert text[slice(*spans[("e",)])] == "null"
    assert value_spans("no object") is None
    assert value_spans('{"a": tru}') is None


# ---------------------------------------------------------------------- one reply's scoring


def test_rating_renormalised_over_the_options_present() -> None:
    # '2' sampled at p=.5; '4' at .3 and '0' at .1 among its alternatives, 'x' (no option) .05
    tokens = toks(
        ('{"', 0.0),
        ("rating", 0.0),
        ('":', 0.0),
        (" ", ln(0.9)),
        ("2", ln(0.5), {"4": ln(0.3), "0": ln(0.1), "x": ln(0.05)}),
        ("}", 0.0),
    )
    scoring = score_reply(text_of(tokens), {"rating": 2}, tokens, RATING)
    assert scoring.used == "probabilities"
    choice = scoring.choice("rating")
    assert choice.probabilities == pytest.approx({2: 0.5 / 0.9, 4: 0.3 / 0.9, 0: 0.1 / 0.9})
    # (2*.5 + 4*.3 + 0*.1) / .9
    assert scoring.expected("rating") == pytest.approx(2.2 / 0.9)


def test_alternatives_spaced_differently_spell_the_same_option() -> None:
    # the token ' 4' holds the space before the value; '4' (no space) and ' 2' are the
    # alternatives: 4 gets .6 + .1, 2 gets .2
    tokens = toks(('{"rating":', 0.0), (" 4", ln(0.6), {" 2": ln(0.2), "4": ln(0.1)}), ("}", 0.0))
    scoring = score_reply(text_of(tokens), {"rating": 4}, tokens, RATING)
    assert scoring.choice("rating").probabilities == pytest.approx({4: 0.7 / 0.9, 2: 0.2 / 0.9})


def test_options_in_place_of_the_space_before_the_value_count_too() -> None:
    # llama.cpp's distribution is the model's own: at the space after the colon (p .9) the
    # model also gives '4' (p .05), a path without the space. 4 = .05 + .9*.3, 0 = .9*.5
    tokens = toks(
        ('{"rating":', 0.0),
        (" ", ln(0.9), {"4": ln(0.05), "x": ln(0.01)}),
        ("0", ln(0.5), {"4": ln(0.3), "1": ln(0.1)}),
        ("}", 0.0),
    )
    scoring = score_reply(text_of(tokens), {"rating": 0}, tokens, RATING)
    assert scoring.choice("rating").probabilities == pytest.approx({0: 0.45 / 0.77, 4: 0.32 / 0.77})


def test_tokens_may_hold_whitespace_the_content_was_trimmed_of() -> None:
    # llama.cpp's content leaves out the whitespace its grammar let the model write after
    # the object; the tokens still have it
    tokens = toks(
        ("{\n", 0.0), ('"rating": ', 0.0), ("2", ln(0.6), {"4": ln(0.2)}), ("\n}\n\n ", 0.0)
    )
    scoring = score_reply('{\n"rating": 2\n}', {"rating": 2}, tokens, RATING)
    assert scoring.choice("rating").probabilities == pytest.approx({2: 0.75, 4: 0.25})


def test_tokens_may_hold_a_code_fence_the_content_was_stripped_of() -> None:
    # llama.cpp (Qwen2.5-Coder-1.5B, German MEMERAG rows) sends the content without the
    # ```json fence the model wrote around the object; the tokens still have it
    tokens = toks(
        ("```json\n", 0.0),
        ("{\n", 0.0),
        ('"rating": ', 0.0),
        ("2", ln(0.6), {"4": ln(0.2)}),
        ("\n}\n```", 0.0),
    )
    scoring = score_reply('{\n"rating": 2\n}', {"rating": 2}, tokens, RATING)
    assert scoring.used == "probabilities"
    assert scoring.choice("rating").probabilities == pytest.approx({2: 0.75, 4: 0.25})


def test_tokens_with_prose_around_the_content_are_not_read() -> None:
    tokens = toks(
        ("Here it is: ", 0.0), ('{"rating": ', 0.0), ("2", ln(0.6), {"4": ln(0.2)}), ("}", 0.0)
    )
    scoring = score_reply('{"rating": 2}', {"rating": 2}, tokens, RATING)
    assert scoring.used == "sampled-fallback"
    assert scoring.why == "the reply's tokens do not spell its text"


def test_verdicts_per_item_with_reasons_before_them() -> None:
    tokens = toks(
        ('{"s1": {"reason": "', 0.0),
        ("it says so", 0.0),
        ('", "supported": ', 0.0),
        ("true", ln(0.7), {"false": ln(0.2)}),
        ('}, "s2": {"reason": "', 0.0),
        ("no", 0.0),
        ('", "supported": ', 0.0),
        ("false", ln(0.6), {"true": ln(0.4)}),
        ("}}", 0.0),
    )
    obj = {
        "s1": {"reason": "it says so", "supported": True},
        "s2": {"reason": "no", "supported": False},
    }
    leaves: Leaves = {("s1", "supported"): (True, False), ("s2", "supported"): (True, False)}
    scoring = score_reply(text_of(tokens), obj, tokens, leaves)
    assert scoring.used == "probabilities"
    assert scoring.probability("s1", "supported") == pytest.approx(0.7 / 0.9)
    assert scoring.probability("s2", "supported") == pytest.approx(0.4)
    assert scoring.probability("s2", "supported", option=False) == pytest.approx(0.6)


def test_string_options_with_the_quote_merged_into_a_token() -> None:
    # ' "' (p .8) then 'yes' (p .5, 'no' .25); the merged alternative ' "no' at the first
    # token (p .1): yes = .8*.5 = .4, no = .1 + .8*.25 = .3
    tokens = toks(
        ('{"verdict":', 0.0),
        (' "', ln(0.8), {' "no': ln(0.1)}),
        ("yes", ln(0.5), {"no": ln(0.25)}),
        ('"}', 0.0),
    )
    leaves: Leaves = {("verdict",): ("yes", "no")}
    scoring = score_reply(text_of(tokens), {"verdict": "yes"}, tokens, leaves)
    assert scoring.probability("verdict", option="yes") == pytest.approx(0.4 / 0.7)
    assert scoring.probability("verdict", option="no") == pytest.approx(0.3 / 0.7)


def test_an_option_that_begins_another_is_decided_by_a_later_token() -> None:
    # options 1 and 10, sampled "10" as '1' (p .9) then '0' (p .6) with '}' (p .3): the
    # alternative '1}' ends the value at 1, so 1 = .9*.3 and 10 = .9*.6
    leaves: Leaves = {("n",): (1, 10)}
    tokens = toks(('{"n": ', 0.0), ("1", ln(0.9)), ("0", ln(0.6), {"}": ln(0.3)}), ("}", 0.0))
    scoring = score_reply(text_of(tokens), {"n": 10}, tokens, leaves)
    assert scoring.choice("n").probabilities == pytest.approx({10: 2 / 3, 1: 1 / 3})


def test_only_the_sampled_option_present_is_probability_one() -> None:
    tokens = toks(('{"rating": ', 0.0), ("4", ln(0.4), {"x": ln(0.5)}), ("}", 0.0))
    scoring = score_reply(text_of(tokens), {"rating": 4}, tokens, RATING)
    assert scoring.used == "probabilities"
    assert scoring.choice("rating").probabilities == {4: 1.0}


@pytest.mark.parametrize(
    ("tokens", "why"),
    [
        (None, "the endpoint returned no log-probabilities"),
        # the model wrote 4.0 for the option 4: no option's text
        (toks(('{"rating": ', 0.0), ("4.0", 0.0), ("}", 0.0)), "spell none of the options"),
        (toks(("{}", 0.0)), "the reply's tokens do not spell its text"),
    ],
)
def test_no_option_readable_keeps_the_sampled_value_and_says_why(
    tokens: list[TokenLogprob] | None, why: str
) -> None:
    text = '{"rating": 4.0}' if tokens is not None and len(tokens) == 3 else '{"rating": 4}'
    scoring = score_reply(text, {"rating": 4}, tokens, RATING)
    assert scoring.used == "sampled-fallback"
    assert why in (scoring.why or "")
    assert scoring.choice("rating").probabilities == {4: 1.0}
    assert scoring.expected("rating") == 4.0


def test_unknown_choice_names_the_known_ones() -> None:
    scoring = ReplyScoring("sampled")
    with pytest.raises(KeyError, match="none"):
        scoring.probability("s1", "supported")


def test_stored_scoring_round_trips() -> None:
    tokens = toks(('{"rating": ', 0.0), ("4", ln(0.6), {"2": ln(0.2)}), ("}", 0.0))
    scoring = score_reply(text_of(tokens), {"rating": 4}, tokens, RATING)
    assert ReplyScoring.from_json(scoring.to_json()) == scoring


# ---------------------------------------------------------------------- the judge, end to end


class Checked(BaseModel):
    supported: bool


SUPPORTED_TOKENS: list[ScriptedToken] = [
    ('{"supported": ', 0.0),
    ("true", ln(0.6), {"false": ln(0.3)}),
    ("}", 0.0),
]


def judge(server: FakeOpenAI, **kw: object) -> Judge:
    return Judge("m", base_url=server.base_url, api_key=FAKE_API_KEY, **kw)  # type: ignore[arg-type]


def ask(j: Judge) -> object:
    import asyncio

    return asyncio.run(j.ask([{"role": "user", "content": "is it?"}], Checked))


def test_judge_scores_a_verdict_from_one_request(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.json({"supported": True}, logprobs=SUPPORTED_TOKENS))
    reply = ask(judge(fake_openai, cache=False))
    [request] = fake_openai.chat_requests
    assert request.body["logprobs"] is True
    assert request.body["top_logprobs"] == 20
    assert reply.value.supported is True  # type: ignore[attr-defined]
    assert reply.scoring.used == "probabilities"  # type: ignore[attr-defined]
    assert reply.scoring.probability("supported") == pytest.approx(0.6 / 0.9)  # type: ignore[attr-defined]


def test_sampled_scoring_asks_no_logprobs(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.json({"supported": True}, logprobs=SUPPORTED_TOKENS))
    reply = ask(judge(fake_openai, cache=False, scoring="sampled"))
    [request] = fake_openai.chat_requests
    assert "logprobs" not in request.body
    assert reply.scoring.used == "sampled"  # type: ignore[attr-defined]
    assert reply.scoring.probability("supported") == 1.0  # type: ignore[attr-defined]


def test_auto_stops_asking_an_endpoint_that_gives_none(fake_openai: FakeOpenAI) -> None:
    j = judge(fake_openai, cache=False)
    fake_openai.script(Reply.json({"supported": False}), Reply.json({"supported": False}))
    first, second = ask(j), ask(j)
    assert [("logprobs" in r.body) for r in fake_openai.chat_requests] == [True, False]
    for reply in (first, second):
        # "auto" scores by sampled values there, and says why
        assert reply.scoring.used == "sampled"  # type: ignore[attr-defined]
        assert "no log-probabilities" in reply.scoring.why  # type: ignore[attr-defined]
        assert reply.scoring.probability("supported") == 0.0  # type: ignore[attr-defined]


def test_cache_keeps_the_scoring_and_keys_on_it(fake_openai: FakeOpenAI, tmp_path: object) -> None:
    cache = str(tmp_path)
    fake_openai.script(
        Reply.json({"supported": True}, logprobs=SUPPORTED_TOKENS),
        Reply.json({"supported": True}, logprobs=SUPPORTED_TOKENS),
    )
    first = ask(judge(fake_openai, cache=cache))
    again = ask(judge(fake_openai, cache=cache))
    assert len(fake_openai.chat_requests) == 1
    assert again.cached and again.scoring == first.scoring  # type: ignore[attr-defined]
    # a judge scoring by sampled values does not read the probabilities' entry
    sampled = ask(judge(fake_openai, cache=cache, scoring="sampled"))
    assert len(fake_openai.chat_requests) == 2
    assert sampled.scoring.used == "sampled"  # type: ignore[attr-defined]


def test_probabilities_asked_and_not_given_fall_back(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(Reply.json({"supported": True}))
    reply = ask(judge(fake_openai, cache=False, scoring="probabilities"))
    assert reply.scoring.used == "sampled-fallback"  # type: ignore[attr-defined]
    assert reply.scoring.why == "the endpoint returned no log-probabilities"  # type: ignore[attr-defined]


def test_probabilities_refused_for_a_backend_without_them() -> None:
    with pytest.raises(ValueError, match="no log-probabilities"):
        Judge("claude", backend="anthropic", api_key="k", scoring="probabilities")
    with pytest.raises(ValueError, match="scoring must be one of"):
        Judge("m", base_url="http://127.0.0.1:9", scoring="best")  # type: ignore[arg-type]


def test_a_token_holding_part_of_a_character_is_read_by_its_bytes() -> None:
    # "café" split inside the é (llama.cpp sends the text of such a token without the partial
    # character, and its bytes whole); the rating after it is still found: 4 = .8, 2 = .2
    text = '{"reason": "café", "rating": 4}'
    tokens = [
        TokenLogprob('{"reason": "caf', 0.0, raw=b'{"reason": "caf\xc3'),
        TokenLogprob("", 0.0, raw=b"\xa9"),
        TokenLogprob('", "rating": ', 0.0),
        TokenLogprob("4", ln(0.8), (("4", ln(0.8)), ("2", ln(0.2)))),
        TokenLogprob("}", 0.0),
    ]
    scoring = score_reply(text, {"reason": "café", "rating": 4}, tokens, RATING)
    assert scoring.choice("rating").probabilities == pytest.approx({4: 0.8, 2: 0.2})


# ----------------------------------------------------------------------------- the metrics


def rating_tokens(sampled: int, alternatives: Mapping[str, float]) -> list[ScriptedToken]:
    """The tokens of ``{"rating": N}`` as the test server sends json.dumps of it."""
    return [
        ('{"rating": ', 0.0),
        (str(sampled), alternatives[str(sampled)], alternatives),
        ("}", 0.0),
    ]


async def test_answer_accuracy_averages_each_templates_expected_rating(
    fake_openai: FakeOpenAI,
) -> None:
    from helpers import judge_for, route
    from rageval.metrics import AnswerAccuracy
    from rageval.samples import SingleTurnSample

    sample = SingleTurnSample(user_input="q?", response="a.", reference="b.")
    # template 1: 4 at .6, 2 at .3, 0 at .1 -> 3.0; template 2: 2 at .5, 0 at .5 (4 absent)
    # -> 1.0 -> value (3.0/4 + 1.0/4) / 2 = 0.5 (the sampled ratings alone: (4 + 2) / 8 = 0.75)
    first = {"4": ln(0.6), "2": ln(0.3), "0": ln(0.1)}
    second = {"2": ln(0.5), "0": ln(0.5)}
    fake_openai.handler = route(
        (("reference", "candidate"), Reply.json({"rating": 4}, logprobs=rating_tokens(4, first))),
        (("gold", "proposed"), Reply.json({"rating": 2}, logprobs=rating_tokens(2, second))),
    )
    expected = AnswerAccuracy(llm=judge_for(fake_openai), value="expected")
    result = await expected.single_turn_ascore(sample)
    assert result.value == pytest.approx(0.5)
    assert result.evidence["ratings"] == {"template_1": 4, "template_2": 2}
    assert result.evidence["expected"] == pytest.approx({"template_1": 3.0, "template_2": 1.0})
    # each template's whole distribution is kept (a rating the reply's tokens lack: absent)
    distributions = result.evidence["distributions"]
    assert distributions["template_1"] == pytest.approx({4: 0.6, 2: 0.3, 0: 0.1})
    assert distributions["template_2"] == pytest.approx({2: 0.5, 0: 0.5})
    assert result.evidence["scoring"] == "probabilities"
    # the default reads P(r1 + r2 >= 4): (4, 2) .6 x .5 + (4, 0) .6 x .5 + (2, 2) .3 x .5 = 0.75
    result = await AnswerAccuracy(llm=judge_for(fake_openai)).single_turn_ascore(sample)
    assert result.value == pytest.approx(0.75)
    assert "P(value >= 0.5) 0.75" in (result.reason or "")
    sampled = AnswerAccuracy(llm=judge_for(fake_openai, scoring="sampled"))
    result = await sampled.single_turn_ascore(sample)
    assert result.value == pytest.approx(0.75)
    assert result.evidence["scoring"] == "sampled"
    assert "expected" not in result.evidence
    assert "distributions" not in result.evidence


def test_the_run_log_keeps_each_templates_rating_distribution(
    fake_openai: FakeOpenAI, tmp_path: Path
) -> None:
    from helpers import make_judge, route
    from rageval.results import load_run
    from rageval.runner import evaluate

    # template 1: 4 at .25, 2 at .5, 0 at .25 (expected 2.0); template 2: 2 at .8, 4 at .2
    # (expected 2.4) -> value="expected" (2.0 + 2.4) / 8 = 0.55; the default P(r1 + r2 >= 4):
    # r1 = 4 or 2 (.75, any r2) + r1 = 0 with r2 = 4 (.25 x .2) = 0.8
    first = {"4": ln(0.25), "2": ln(0.5), "0": ln(0.25)}
    second = {"2": ln(0.8), "4": ln(0.2)}
    fake_openai.handler = route(
        (("reference", "candidate"), Reply.json({"rating": 2}, logprobs=rating_tokens(2, first))),
        (("gold", "proposed"), Reply.json({"rating": 2}, logprobs=rating_tokens(2, second))),
    )
    row = {"user_input": "q?", "response": "a.", "reference": "b."}
    run = tmp_path / "run"
    metric_params = {"answer_accuracy": {"value": "expected"}}
    evaluate([row], ["answer_accuracy"], llm=make_judge(fake_openai), run_dir=str(run),
             metric_params=metric_params)  # fmt: skip
    written = json.loads((run / "results.jsonl").read_text().splitlines()[0])
    evidence = written["metrics"]["answer_accuracy"]["evidence"]
    # JSON keys are text; the ratings' probabilities in the reply's order
    assert evidence["distributions"] == {
        "template_1": {"2": pytest.approx(0.5), "4": pytest.approx(0.25), "0": pytest.approx(0.25)},
        "template_2": {"2": pytest.approx(0.8), "4": pytest.approx(0.2)},
    }
    cell = load_run(run).sample(0).cells["answer_accuracy"]
    assert cell.value == pytest.approx(0.55)
    assert cell.evidence["distributions"]["template_2"] == pytest.approx({2: 0.8, 4: 0.2})
    # a line written before the distributions were kept (format 9 without them) reads as it is
    del evidence["distributions"]
    (run / "results.jsonl").write_text(json.dumps(written) + "\n")
    old = load_run(run).sample(0).cells["answer_accuracy"]
    assert old.value == pytest.approx(0.55) and "distributions" not in old.evidence


async def test_context_precision_weighs_each_context_by_its_probability(
    fake_openai: FakeOpenAI,
) -> None:
    from helpers import judge_for
    from rageval.metrics import ContextPrecision
    from rageval.samples import SingleTurnSample

    sample = SingleTurnSample(
        user_input="q?", retrieved_contexts=["one", "two"], reference="r.", response="x"
    )
    reply = {"c1": {"useful": True}, "c2": {"useful": False}}
    # json.dumps(reply) = {"c1": {"useful": true}, "c2": {"useful": false}}
    tokens: list[ScriptedToken] = [
        ('{"c1": {"useful": ', 0.0),
        ("true", ln(0.8), {"false": ln(0.2)}),
        ('}, "c2": {"useful": ', 0.0),
        ("false", ln(0.75), {"true": ln(0.25)}),
        ("}}", 0.0),
    ]
    fake_openai.script(Reply.json(reply, logprobs=tokens))
    result = await ContextPrecision(llm=judge_for(fake_openai), reasons=False).single_turn_ascore(
        sample
    )
    # v = (.8, .25): precision@1 = .8, precision@2 = (.8 + .25) / 2 = .525;
    # (.8 * .8 + .525 * .25) / (.8 + .25) = .77125 / 1.05
    assert result.value == pytest.approx(0.77125 / 1.05)
    assert [v["probability"] for v in result.evidence["verdicts"]] == pytest.approx([0.8, 0.25])
    assert result.evidence["scoring"] == "probabilities"


async def test_a_cell_records_the_fallback_and_why(fake_openai: FakeOpenAI) -> None:
    from helpers import judge_for
    from rageval.metrics import ContextRecall
    from rageval.samples import SingleTurnSample

    sample = SingleTurnSample(user_input="q?", retrieved_contexts=["one"], reference="Fact.")
    fake_openai.script(Reply.json({"r1": {"attributed": True}}))  # no log-probabilities
    judge_ = judge_for(fake_openai, scoring="probabilities")
    result = await ContextRecall(llm=judge_, reasons=False).single_turn_ascore(sample)
    assert result.value == 1.0
    assert result.evidence["scoring"] == "sampled-fallback"
    assert result.evidence["scoring_why"] == "the endpoint returned no log-probabilities"


def test_a_cells_note_names_the_weakest_scoring_of_its_replies() -> None:
    from rageval.metrics.evidence import scoring_notes

    both = ReplyScoring("probabilities")
    assert scoring_notes([both, both]) == {"scoring": "probabilities"}
    assert scoring_notes([both, ReplyScoring("sampled")]) == {
        "scoring": "sampled",
        "scoring_why": "1 of 2 replies by sampled values",
    }
    fell = scoring_notes([both, ReplyScoring("sampled-fallback", "x")])
    assert fell == {"scoring": "sampled-fallback", "scoring_why": "x"}
    assert scoring_notes([ReplyScoring("sampled", "none here")])["scoring_why"] == "none here"


def test_config_file_and_command_line_set_the_scoring(
    server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from helpers import rows, write_jsonl
    from rageval.cli import main

    monkeypatch.chdir(tmp_path)
    config = f'[judge]\nmodel = "m"\nbase_url = "{server.base_url}"\nscoring = "sampled"\n'
    (tmp_path / "rageval.toml").write_text(config)
    write_jsonl(tmp_path / "d.jsonl", rows(1))
    base = ["evaluate", "d.jsonl", "-q", "--no-cache", "-m", "answer_accuracy"]

    def scoring_of(run: str) -> tuple[str, str]:
        judge = json.loads((tmp_path / run / "manifest.json").read_text())["judge"]
        cell = json.loads((tmp_path / run / "results.jsonl").read_text().splitlines()[0])
        return judge["scoring"], cell["metrics"]["answer_accuracy"]["evidence"]["scoring"]

    assert main([*base, "-o", "a"]) == 0
    assert scoring_of("a") == ("sampled", "sampled")
    assert main([*base, "-o", "b", "--judge-scoring", "probabilities"]) == 0
    # the test server's synthetic judge returns no log-probabilities: recorded as a fallback
    assert scoring_of("b") == ("probabilities", "sampled-fallback")


def test_a_null_logprob_is_a_probability_of_zero() -> None:
    # llama.cpp writes log(0) as null: a token its grammar forced that the model gave no chance
    from rageval.judge._openai import _read_logprobs

    tokens = _read_logprobs(
        {
            "content": [
                {"token": "4", "logprob": None, "top_logprobs": [{"token": "2", "logprob": -0.1}]},
                {"token": "}", "logprob": -0.5, "top_logprobs": [{"token": "x", "logprob": None}]},
            ]
        }
    )
    assert tokens is not None
    assert [(t.token, t.logprob, t.top) for t in tokens] == [
        ("4", -math.inf, (("2", -0.1),)),
        ("}", -0.5, (("x", -math.inf),)),
    ]
    assert _read_logprobs({"content": [{"token": "4"}]}) is None  # no logprob at all
