"""faithfulness and response_groundedness with ``mode="checker"``: each sentence of the response
checked on its own against the contexts, through the openai SDK against FakeOpenAI; the math
by hand."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from helpers import chat_count, make_judge, run_cli_in_child, user_text
from rageval import evaluate
from rageval._config import parse_params
from rageval.log import read_manifest
from rageval.metrics import Faithfulness, ResponseGroundedness
from rageval.metrics.base import Metric, MetricResult, create_metric
from rageval.metrics.claim_checks import CHECK_REPLY, check_messages, claims_of, claims_score
from rageval.metrics.evidence import ClaimsEvidence
from rageval.results import EvaluationResult, load_run
from rageval.samples import Sample
from rageval.testing import FakeOpenAI, Fault, RecordedRequest, Reply
from rageval.testing.records import ScriptedToken

CONTEXTS = ["Dune is a 1965 novel by Frank Herbert.", "Dune won the Hugo Award in 1966."]
SENTENCES = ["Frank Herbert wrote Dune.", "He was Canadian.", "It won a Hugo Award."]
SAMPLE = Sample(
    user_input="Who wrote Dune?", response=" ".join(SENTENCES), retrieved_contexts=CONTEXTS
)
#: which context supports which sentence (by the context's first word after its id)
SUPPORTS = {("Frank Herbert wrote Dune.", "c1"), ("It won a Hugo Award.", "c2")}
_CLAIM = re.compile(r"<claim>\n(.*)\n</claim>")
_IDS = re.compile(r"\[(c\d+)\]")


def checker(req: RecordedRequest) -> Reply:
    """Yes when one of the contexts shown supports the claim (:data:`SUPPORTS`)."""
    text = user_text(req)
    claim = _CLAIM.search(text)
    assert claim is not None, text
    shown = set(_IDS.findall(text.split("<claim>")[0]))
    yes = any((claim.group(1), c) in SUPPORTS for c in shown)
    return Reply.json({"supported": "yes" if yes else "no"})


def claims_evidence(result: MetricResult) -> ClaimsEvidence:
    assert isinstance(result.evidence, ClaimsEvidence), result
    return result.evidence


def test_the_score_is_the_mean_probability() -> None:
    assert claims_score([1.0, 0.0, 0.5]) == pytest.approx(0.5)
    assert claims_score([0.25]) == 0.25
    assert claims_score([]) is None


def test_claims_are_the_sentences_unchanged() -> None:
    text = "Newton and Leibniz are both credited with calculus. Dr. Smith agreed in 1998."
    assert claims_of(text) == [
        "Newton and Leibniz are both credited with calculus.",
        "Dr. Smith agreed in 1998.",
    ]


async def test_each_sentence_against_each_context(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = checker
    metric = Faithfulness(mode="checker", per_context=True, llm=make_judge(fake_openai))
    result = await metric.single_turn_ascore(SAMPLE)
    # sentences 1 and 3 supported (by c1, c2), sentence 2 by neither: (1 + 0 + 1) / 3
    assert result.value == pytest.approx(2 / 3)
    ev = claims_evidence(result)
    assert [c.text for c in ev.claims] == SENTENCES
    assert [c.probability for c in ev.claims] == [1.0, 0.0, 1.0]
    assert [c.context for c in ev.claims] == ["c1", None, "c2"]
    assert ev.contexts == {"c1": CONTEXTS[0], "c2": CONTEXTS[1]}
    assert ev.checker == "test-model" and ev.per_context
    assert result.reason is not None and result.reason.startswith("2 of 3 claims supported")
    assert chat_count(fake_openai) == 6  # 3 sentences x 2 contexts, no statement extraction
    prompts = [user_text(r) for r in fake_openai.chat_requests]
    # the context first, then the claim, the reply format and the question last
    for text in prompts:
        assert text.index("</context>") < text.index("<claim>") < text.index(CHECK_REPLY)
        assert text.rstrip().endswith('Answer "yes" or "no".')
    # each context keeps its id; the requests of one context begin with the same text
    firsts = [t for t in prompts if "[c1] Dune is a 1965 novel" in t]
    assert len(firsts) == 3 and len({t.split("<claim>")[0] for t in firsts}) == 1
    assert sum("[c2] Dune won the Hugo" in t for t in prompts) == 3
    assert metric.plan(SAMPLE) is not None and len(list(metric.plan(SAMPLE) or [])) == 6


#: P("yes") of each (sentence, context) check
P_YES = {
    (SENTENCES[0], "c1"): 0.9,
    (SENTENCES[0], "c2"): 0.2,
    (SENTENCES[1], "c1"): 0.3,
    (SENTENCES[1], "c2"): 0.45,
    (SENTENCES[2], "c1"): 0.1,
    (SENTENCES[2], "c2"): 0.7,
}


def weighed(req: RecordedRequest) -> Reply:
    """The answer of :data:`P_YES` sampled greedily, with both options' log-probabilities."""
    text = user_text(req)
    claim = _CLAIM.search(text)
    assert claim is not None
    (shown,) = _IDS.findall(text.split("<claim>")[0])
    p = P_YES[(claim.group(1), shown)]
    sampled, other = ("yes", "no") if p >= 0.5 else ("no", "yes")
    chosen = p if sampled == "yes" else 1 - p
    tokens: list[ScriptedToken] = [
        ('{"supported": "', 0.0),
        (sampled, math.log(chosen), {other: math.log(1 - chosen)}),
        ('"}', 0.0),
    ]
    return Reply.json({"supported": sampled}, logprobs=tokens)


async def test_probabilities_from_the_answers_log_probabilities(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = weighed
    metric = Faithfulness(mode="checker", per_context=True, llm=make_judge(fake_openai))
    result = await metric.single_turn_ascore(SAMPLE)
    # each sentence keeps its best context: 0.9 (c1), 0.45 (c2, below 0.5: no support named),
    # 0.7 (c2); the value is their mean, (0.9 + 0.45 + 0.7) / 3
    assert result.value == pytest.approx(2.05 / 3)
    ev = claims_evidence(result)
    assert [c.probability for c in ev.claims] == pytest.approx([0.9, 0.45, 0.7])
    assert [c.supported for c in ev.claims] == [True, False, True]
    assert [c.context for c in ev.claims] == ["c1", None, "c2"]
    assert all(r.body["logprobs"] is True for r in fake_openai.chat_requests)
    assert ev.get("scoring") == "probabilities"


def test_a_claim_about_what_the_contexts_say_is_checked_against_them() -> None:
    # "The passages do not mention X": MEMERAG's annotators call it supported when X is absent
    many = check_messages(CONTEXTS, "The contexts do not mention his birthplace.")[-1]["content"]
    one = check_messages(CONTEXTS[:1], "The context does not name a publisher.")[-1]["content"]
    assert many.endswith(
        'A claim about what the contexts say or leave out is checked against them: "the '
        'contexts do not mention X" is supported when X is not in them. Answer "yes" or "no".'
    )
    assert one.endswith(
        'A claim about what the context says or leaves out is checked against it: "the '
        'context does not mention X" is supported when X is not in it. Answer "yes" or "no".'
    )
    # the task stays last, after how to reply, whatever the claim says
    assert many.index(CHECK_REPLY) < many.index("A claim about what the contexts")


async def test_by_default_all_contexts_in_one_request(fake_openai: FakeOpenAI) -> None:
    fake_openai.handler = checker
    metric = ResponseGroundedness(mode="checker", llm=make_judge(fake_openai))
    result = await metric.single_turn_ascore(SAMPLE)
    assert result.value == pytest.approx(2 / 3)
    ev = claims_evidence(result)
    assert not ev.per_context
    # no single context is named: each claim was read against both at once
    assert [c.context for c in ev.claims] == [None, None, None] and ev.contexts == {}
    assert chat_count(fake_openai) == 3
    assert all("[c1]" in user_text(r) and "[c2]" in user_text(r) for r in fake_openai.chat_requests)
    assert len(list(metric.plan(SAMPLE) or [])) == 3


async def test_the_question_comes_between_the_contexts_and_the_claim(
    fake_openai: FakeOpenAI,
) -> None:
    fake_openai.handler = checker
    metric = ResponseGroundedness(mode="checker", llm=make_judge(fake_openai))
    await metric.single_turn_ascore(SAMPLE)
    prompts = [user_text(r) for r in fake_openai.chat_requests]
    assert len(prompts) == 3
    for text, sentence in zip(prompts, SENTENCES, strict=True):
        assert text.index("</contexts>") < text.index("<question>\nWho wrote Dune?\n</question>")
        assert text.index("</question>") < text.index(f"<claim>\n{sentence}\n</claim>")
    # the three checks share everything before the claim: the contexts and the question
    assert len({t.split("<claim>")[0] for t in prompts}) == 1
    planned = [r.messages[-1]["content"] for r in metric.plan(SAMPLE) or []]
    assert planned == prompts
    # response_groundedness needs no question: without one (or a blank one) none is shown
    fake_openai.reset()
    for question in (None, "  "):
        bare = Sample(user_input=question, response=SENTENCES[0], retrieved_contexts=CONTEXTS)
        assert (await metric.single_turn_ascore(bare)).value == 1.0
    assert [("<question>" in user_text(r)) for r in fake_openai.chat_requests] == [False, False]


async def test_no_claim_no_context_and_a_failed_check(fake_openai: FakeOpenAI) -> None:
    judge = make_judge(fake_openai, max_retries=0)
    metric = Faithfulness(mode="checker", llm=judge)
    blank = await metric.single_turn_ascore(
        Sample(user_input="q", response=" ", retrieved_contexts=CONTEXTS)
    )
    assert blank.status == "not_measured" and "no claim" in (blank.cause or "")
    bare = await metric.single_turn_ascore(
        Sample(user_input="q", response=" ".join(SENTENCES), retrieved_contexts=[" "])
    )
    assert bare.value == 0.0 and [c.probability for c in claims_evidence(bare).claims] == [0.0] * 3
    assert chat_count(fake_openai) == 0  # nothing to ask in either case
    fake_openai.handler = lambda req: Fault.status(500, "down")
    failed = await metric.single_turn_ascore(SAMPLE)
    assert failed.status == "not_measured" and "judge call failed" in (failed.cause or "")


def on_a_checker_of_its_own(
    name: str,
    rows: list[dict[str, Any]],
    handler: Callable[[RecordedRequest], Reply],
    judge: FakeOpenAI,
    run_dir: Path,
    *names: str,
) -> tuple[Metric, EvaluationResult, list[RecordedRequest]]:
    """Metric `name` in mode "checker" made from ``-p`` names (`names` besides) with a checker
    model of its own ("minicheck", answered by `handler`), run on `rows` beside the run's
    judge (`judge`, which must get nothing): the metric, the result and the checker's
    requests."""
    with FakeOpenAI(handler) as server:
        params = parse_params(
            [
                f"{name}.mode=checker",
                f"{name}.checker.model=minicheck",
                f'{name}.checker.base_url="{server.base_url}"',
                *names,
            ]
        )
        metric = create_metric(name, params[name])
        result = evaluate(
            rows,
            metrics=[metric],
            llm=make_judge(judge),
            progress=False,
            probe=False,
            run_dir=run_dir,
        )
    assert chat_count(judge) == 0
    return metric, result, server.chat_requests


async def test_a_checker_of_its_own_through_the_config_names(
    fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """-p faithfulness.mode=checker -p faithfulness.checker.model=... : the checks go to the
    checker's endpoint and model, the run's judge gets nothing, the usage is the metric's, and
    the run log keeps each claim with its probability and the manifest the checker."""
    monkeypatch.setenv("CHECKER_KEY", "sk-checker")
    metric, result, checks = on_a_checker_of_its_own(
        "faithfulness",
        [SAMPLE.model_dump()],
        checker,
        fake_openai,
        tmp_path / "run",
        "faithfulness.per_context=true",
        "faithfulness.checker.api_key_env=CHECKER_KEY",
    )
    # what the run manifest records makes the same metric again
    assert create_metric("faithfulness", metric.params()).params() == metric.params()
    assert result["faithfulness"] == [pytest.approx(2 / 3)]
    assert {r.body.get("model") for r in checks} == {"minicheck"}
    assert {r.headers.get("authorization") for r in checks} == {"Bearer sk-checker"}
    assert result.usage_by_metric["faithfulness"].requests == 6
    (cell,) = load_run(tmp_path / "run").cells("faithfulness")
    assert cell is not None and isinstance(cell.evidence, ClaimsEvidence)
    logged = cell.evidence
    assert [(c.text, c.probability, c.context) for c in logged.claims] == [
        (SENTENCES[0], 1.0, "c1"),
        (SENTENCES[1], 0.0, None),
        (SENTENCES[2], 1.0, "c2"),
    ]
    (spec,) = read_manifest(tmp_path / "run").metrics
    assert spec.judge is not None and spec.judge["model"] == "minicheck"
    assert spec.params["mode"] == "checker" and spec.params["checker"]["model"] == "minicheck"


def test_the_command_line_runs_a_checker_without_a_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checker given with -p is the metric's judge: no --llm is needed for it (without one,
    the same command is refused before it starts)."""
    monkeypatch.setenv("CHECKER_KEY", "sk-checker")
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps(SAMPLE.model_dump()) + "\n")
    checker_mode = ("-m", "faithfulness", "-p", "faithfulness.mode=checker")
    with FakeOpenAI(checker) as server:
        done = run_cli_in_child(
            "evaluate",
            data,
            *checker_mode,
            "-p",
            "faithfulness.checker.model=minicheck",
            "-p",
            f'faithfulness.checker.base_url="{server.base_url}"',
            "-p",
            "faithfulness.checker.api_key_env=CHECKER_KEY",
            "-o",
            tmp_path / "run",
            "-q",
        )
        assert done.returncode == 0, done.stderr
        assert len(server.chat_requests) == 3  # one per sentence, all contexts in each
    assert load_run(tmp_path / "run")["faithfulness"] == [pytest.approx(2 / 3)]
    refused = run_cli_in_child("evaluate", data, *checker_mode, "-o", tmp_path / "no")
    assert refused.returncode == 2 and "faithfulness needs an LLM judge" in refused.stderr


def test_settings_that_cannot_work_are_refused() -> None:
    with pytest.raises(ValueError, match="mode must be one of statements, checker"):
        Faithfulness(mode="checkr")
    with pytest.raises(ValueError, match="in mode 'checker' only"):
        Faithfulness(checker={"model": "m"})
    with pytest.raises(ValueError, match=r"checker: not a judge's settings.*temprature"):
        Faithfulness(mode="checker", checker={"model": "m", "temprature": 0})
    with pytest.raises(ValueError, match="instructions and examples"):
        Faithfulness(mode="checker", instructions="be lenient")
    with pytest.raises(ValueError, match="per_context must be true or false"):
        ResponseGroundedness(mode="checker", per_context="no")
