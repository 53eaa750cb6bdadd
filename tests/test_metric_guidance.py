"""People's guidance in a judge metric's prompt (GuidedMetric: instructions, labelled examples,
reasons before the verdict, a decision threshold), for answer_accuracy, answer_correctness and
faithfulness: where it goes in each request (fixed text first, the sample last, so a prompt
cache serves the guidance), what the judge is asked to reply, how a threshold turns the score
into a verdict, and that the parameters travel like any other (-p, [params.METRIC], the
manifest) and are checked before any request."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from helpers import grader, handle, judge_for, labelled_rows, make_judge, user_text, write_jsonl
from rageval.cli import main
from rageval.metrics import AnswerAccuracy, AnswerCorrectness, Faithfulness, create_metric
from rageval.metrics.authoring import GuidedMetric, item_verdict, rated_verdict
from rageval.metrics.base import Metric
from rageval.metrics.evidence import VerdictEvidence
from rageval.results import load_run
from rageval.runner import RunDirError, evaluate
from rageval.testing import FAKE_API_KEY, FakeOpenAI, RecordedRequest, Reply

GUIDE = "Count a surname alone as the whole name."
QA_EXAMPLE = {
    "user_input": "Who wrote Dune?",
    "response": "Herbert",
    "reference": "Frank Herbert",
    "label": 1,
}
CONTEXT_EXAMPLE = {
    "response": "Dune was written in 1990.",
    "retrieved_contexts": ["Dune is a 1965 novel by Frank Herbert."],
    "label": 0,
}
EXAMPLES: dict[str, dict[str, Any]] = {
    "answer_accuracy": QA_EXAMPLE,
    "answer_correctness": QA_EXAMPLE,
    "faithfulness": CONTEXT_EXAMPLE,
}
#: the requests of each metric that carry its guidance, per sample (the shared statement
#: extraction carries none: it is the same whichever metrics read it)
GUIDED_REQUESTS = {"answer_accuracy": 2, "answer_correctness": 1, "faithfulness": 1}
SAMPLES: list[dict[str, Any]] = [
    {
        "user_input": "When did the harbour of T001 open?",
        "response": "The harbour of T001 opened in 1901. It has three entrances.",
        "retrieved_contexts": ["Records of T001: the harbour opened in 1901."],
        "reference": "The harbour of T001 opened in 1901.",
    },
    {
        "user_input": "Which gas do plants absorb?",
        "response": "Plants absorb carbon dioxide.",
        "retrieved_contexts": ["Photosynthesis turns carbon dioxide into sugar."],
        "reference": "Carbon dioxide.",
    },
]
MARK = "Now the case to judge:"


def _guided(name: str, **params: Any) -> Metric:
    return create_metric(name, {"instructions": GUIDE, "examples": [EXAMPLES[name]], **params})


def _requests(metric: Metric, sample: dict[str, Any]) -> list[RecordedRequest]:
    with FakeOpenAI(handle) as server:
        result = evaluate([sample], [metric], llm=make_judge(server), progress=False)
        assert result.statuses(metric.name) == ["ok"], result.sample(0).cells[metric.name]
        return [r for r in server.chat_requests if "Guidelines:" in user_text(r)]


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_guidance_is_fixed_text_before_the_sample_in_every_request(name: str) -> None:
    per_sample = [_requests(_guided(name), sample) for sample in SAMPLES]
    for requests, sample in zip(per_sample, SAMPLES, strict=True):
        assert len(requests) == GUIDED_REQUESTS[name]
        for request in requests:
            text = user_text(request)
            head, _, data = text.partition(MARK)
            # the task, then the guidelines, then the example with people's verdict
            assert head.index("\n\nGuidelines: " + GUIDE) < head.index("Example 1:\n")
            assert "People's" in head.split("Example 1:\n", 1)[1]
            # after the mark, the sample's data alone
            assert sample["response"].split(".")[0] not in head
            assert data.startswith("\n\n<") and sample["user_input"] not in head
    # prefix-cache friendly: the same text up to the sample's data, whatever the sample
    for first, second in zip(*per_sample, strict=True):
        heads = [user_text(r).partition(MARK)[0] for r in (first, second)]
        assert heads[0] == heads[1]
        assert first.messages[0] == second.messages[0]  # the system message


def test_an_example_is_shown_in_the_tags_of_the_request_it_is_in() -> None:
    (request,) = _requests(_guided("faithfulness"), SAMPLES[1])
    assert (
        "Examples people judged (judge as they did):\n\nExample 1:\n"
        "<contexts>\n[c1] Dune is a 1965 novel by Frank Herbert.\n</contexts>\n"
        "<statements>\n[s1] Dune was written in 1990.\n</statements>\n"
        "People's verdict: not supported\n\n" + MARK
    ) in user_text(request)
    first, second = _requests(_guided("answer_accuracy"), SAMPLES[1])
    texts = {user_text(first), user_text(second)}
    # template 1 shows the response as <candidate>; template 2 swaps roles: <gold>
    assert any("<candidate>\nHerbert\n</candidate>\nPeople's rating: 4" in t for t in texts)
    assert any("<gold>\nHerbert\n</gold>\n<proposed>\nFrank Herbert\n</proposed>\n" in t
               for t in texts)  # fmt: skip


def test_people_s_label_reads_on_the_metric_s_scale() -> None:
    assert [rated_verdict((0, 2, 4), x) for x in (0, 0.25, 0.5, 0.6, 1)] == [
        f"People's rating: {r}" for r in (0, 0, 2, 2, 4)
    ]  # a tie goes to the lower rating
    assert rated_verdict((0, 1, 2), 0.5) == "People's rating: 1"
    assert item_verdict("supported", 0.5) == "People's verdict: supported"
    assert item_verdict("supported", 0.49) == "People's verdict: not supported"


def test_without_guidance_the_prompt_has_none_of_it() -> None:
    with FakeOpenAI(handle) as server:
        evaluate(SAMPLES[:1], sorted(EXAMPLES), llm=make_judge(server), progress=False)
        texts = [user_text(r) for r in server.chat_requests]
    assert texts and not any("Guidelines:" in t or "Example 1" in t or MARK in t for t in texts)


def _schema_keys(request: RecordedRequest) -> list[str]:
    assert request.schema is not None
    return list(request.schema["properties"])


def reasoning_grader(req: RecordedRequest) -> Reply:
    """`grader`'s rating (the GRADE in the response), with a reason when the schema asks."""
    found = re.search(r"GRADE([024])", user_text(req))
    assert found is not None
    reply: dict[str, Any] = {"rating": int(found.group(1))}
    if req.schema is not None and "reason" in req.schema["properties"]:
        reply = {"reason": "it says so", **reply}
    return Reply.json(reply)


def test_reasons_come_before_the_rating_when_asked() -> None:
    with FakeOpenAI(reasoning_grader) as server:
        rows = labelled_rows([2], ["yes"])
        plain = evaluate(rows, [AnswerAccuracy()], llm=make_judge(server), progress=False)
        asked = evaluate(
            rows, [AnswerAccuracy(reasons=True)], llm=make_judge(server), progress=False
        )
        first, _, with_reasons, _ = server.chat_requests
    assert AnswerAccuracy().reasons is False  # the rating alone by default, as before
    assert (
        _schema_keys(first) == ["rating"]
        and "reason" not in plain.sample(0).cells["answer_accuracy"].evidence
    )
    assert _schema_keys(with_reasons) == ["reason", "rating"]  # reasoning first
    assert any('"reason": "your reasoning"' in m["content"] for m in with_reasons.messages)
    cell = asked.sample(0).cells["answer_accuracy"]
    assert cell.value == 0.5 and set(cell.evidence["reasons"]) == {"template_1", "template_2"}


@pytest.mark.parametrize("cls", [Faithfulness, AnswerCorrectness])
def test_verdicts_without_reasons_when_asked(cls: type[GuidedMetric]) -> None:
    with FakeOpenAI(handle) as server:
        result = evaluate(SAMPLES[:1], [cls(reasons=False)], llm=make_judge(server), progress=False)
        verdicts = [r for r in server.chat_requests if r.schema and "s1" in r.schema["properties"]]
    assert cls().reasons is True  # a reason before each verdict by default, as before
    (request,) = verdicts
    assert request.schema is not None
    item = request.schema["$defs"][request.schema["properties"]["s1"]["$ref"].split("/")[-1]]
    assert list(item["properties"]) == ["supported"]
    assert not any('"reason"' in m["content"] for m in request.messages)
    cell = result.sample(0).cells[cls.name]
    assert cell.status == "ok"
    ev = cell.evidence
    listed = ev if isinstance(ev, VerdictEvidence) else ev["response_statements"]
    assert listed.verdicts and all(s.reason is None for s in listed.verdicts)
    if cls is AnswerCorrectness:
        claims = request.schema["$defs"]["BareReferenceStatement"]["properties"]
        assert list(claims) == ["statement", "covered"]


def test_a_threshold_turns_the_score_into_a_verdict() -> None:
    rows = labelled_rows([2, 4, 0], ["yes", "yes", "no"])
    with FakeOpenAI(grader) as server:
        at_half = evaluate(
            rows, [AnswerAccuracy(threshold=0.5)], llm=judge_for(server), progress=False
        )
        above = evaluate(
            rows, [AnswerAccuracy(threshold=0.75)], llm=judge_for(server), progress=False
        )
    assert at_half["answer_accuracy"] == [1.0, 1.0, 0.0]  # 0.5 ≥ 0.5
    assert above["answer_accuracy"] == [0.0, 1.0, 0.0]
    cell = above.sample(0).cells["answer_accuracy"]
    assert cell.evidence["score"] == 0.5 and "below threshold 0.75" in (cell.reason or "")
    with FakeOpenAI(handle) as server:
        share = evaluate(SAMPLES[:1], [Faithfulness()], llm=make_judge(server), progress=False)
        cut = evaluate(
            SAMPLES[:1], [Faithfulness(threshold=0.6)], llm=make_judge(server), progress=False
        )
    assert share["faithfulness"] == [0.5]  # one of the two statements is in the context
    assert (
        cut["faithfulness"] == [0.0]
        and cut.sample(0).cells["faithfulness"].evidence["score"] == 0.5
    )


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"examples": [{"user_input": "q"}]}, r"examples\[0\]: missing response, reference, label"),
        ({"examples": [{**QA_EXAMPLE, "label": 2}]}, r"examples\[0\]: label must be a number"),
        ({"examples": [{**QA_EXAMPLE, "label": True}]}, r"label must be a number from 0 to 1"),
        ({"examples": [QA_EXAMPLE, {**QA_EXAMPLE, "notes": "x"}]}, r"examples\[1\]: unknown"),
        ({"examples": [{**QA_EXAMPLE, "response": 3}]}, r"examples\[0\]: field 'response'"),
        ({"examples": QA_EXAMPLE}, "examples must be a list of mappings"),
        ({"threshold": 1.5}, "threshold must be a number in"),
        ({"reasons": "yes"}, "reasons must be true, false or None"),
        ({"instructions": 3}, "instructions must be text"),
    ],
)
def test_bad_guidance_is_refused_naming_what_is_wrong(params: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AnswerAccuracy(**params)


def test_a_faithfulness_example_needs_its_contexts_as_a_list() -> None:
    with pytest.raises(ValueError, match=r"examples\[0\]: field 'retrieved_contexts'"):
        Faithfulness(examples=[{**CONTEXT_EXAMPLE, "retrieved_contexts": "one text"}])
    assert Faithfulness(examples=[CONTEXT_EXAMPLE]).guidance.examples[0].label == 0.0


def test_guidance_from_the_config_file_and_p_reaches_the_prompt_and_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    write_jsonl(tmp_path / "d.jsonl", labelled_rows([2, 4], ["yes", "yes"]))
    (tmp_path / "rageval.toml").write_text(
        "[params.answer_accuracy]\n"
        f'instructions = "{GUIDE}"\n'
        "examples = [\n"
        '  { user_input = "Who wrote Dune?", response = "Herbert", reference = "Frank Herbert",'
        " label = 1 },\n"
        "]\n"
        "threshold = 0.6\n"
    )
    with FakeOpenAI(reasoning_grader) as server:
        args = ["evaluate", "d.jsonl", "-m", "answer_accuracy", "--llm", "m", "--base-url",
                server.base_url, "-q", "--no-cache"]  # fmt: skip
        assert main([*args, "-o", "a"]) == 0
        assert main([*args, "-o", "b", "-p", "answer_accuracy.reasons=true"]) == 0
        texts = [user_text(r) for r in server.chat_requests]
    assert all(f"Guidelines: {GUIDE}" in t and "People's rating: 4" in t for t in texts)
    manifests = [json.loads((tmp_path / d / "manifest.json").read_text()) for d in "ab"]
    params = [m["metrics"][0]["params"] for m in manifests]
    assert params[0] == {
        "instructions": GUIDE,
        "examples": [{**QA_EXAMPLE}],
        "reasons": False,
        "threshold": 0.6,
        "max_retries": 5,
        "value": "pass_probability",
    }
    assert params[1] == {**params[0], "reasons": True}
    assert load_run(tmp_path / "a")["answer_accuracy"] == [0.0, 1.0]  # 0.5 < 0.6 ≤ 1


def test_a_bad_example_on_the_command_line_is_a_usage_error_before_any_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    data = tmp_path / "d.jsonl"
    write_jsonl(data, labelled_rows([2], ["yes"]))
    with FakeOpenAI(grader) as server:
        code = main(
            ["evaluate", str(data), "-m", "answer_accuracy", "--llm", "m", "--base-url",
             server.base_url, "-o", str(tmp_path / "run"), "-q",
             "-p", 'answer_accuracy.examples=[{user_input = "q", label = 1}]']
        )  # fmt: skip
        assert server.chat_requests == []
    assert code == 2
    assert "examples[0]: missing response, reference" in capsys.readouterr().err


def test_a_run_started_before_the_guidance_parameters_resumes(tmp_path: Path) -> None:
    # its manifest records answer_accuracy without instructions, examples, reasons and
    # threshold: it ran with none of them, which is what their defaults mean
    run = tmp_path / "run"
    data = labelled_rows([4, 2, 0], ["yes", "yes", "no"])
    with FakeOpenAI(grader) as server:
        evaluate(data, ["answer_accuracy"], llm=make_judge(server), run_dir=run, progress=False)
        manifest = json.loads((run / "manifest.json").read_text())
        manifest["metrics"][0]["params"] = {"max_retries": 5}
        (run / "manifest.json").write_text(json.dumps(manifest))
        first, *_ = (run / "results.jsonl").read_text().splitlines(keepends=True)
        (run / "results.jsonl").write_text(first)  # killed after one row
        sent = len(server.chat_requests)
        # (`value`, taken later, is not one of those: such a run read its ratings as
        # "expected", today's default for answer_accuracy is another reading)
        resumed = evaluate(data, ["answer_accuracy"], llm=make_judge(server), run_dir=run,
                           resume=True, progress=False,
                           metric_params={"answer_accuracy": {"value": "expected"}})  # fmt: skip
        assert len(server.chat_requests) == sent + 4  # the two rows left, two templates each
    assert resumed["answer_accuracy"] == [1.0, 0.5, 0.0]
    with FakeOpenAI(grader) as server, pytest.raises(RunDirError, match="the metrics differ"):
        evaluate(data, [AnswerAccuracy(threshold=0.5)], llm=make_judge(server), run_dir=run,
                 resume=True, progress=False)  # fmt: skip
