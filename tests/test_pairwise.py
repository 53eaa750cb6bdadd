"""The pairwise metric and `rageval pairwise`, on the test server with scripted verdicts.

The judge reads the two answers of each prompt: an answer marked GOOD beats one marked BAD,
two answers marked BIASED make it pick whichever is shown first (a position flip), SAME is a
tie; asked for a verdict on each answer, GOOD and SAME are right, BAD wrong, and of two BIASED
answers the one shown first. So every pair's winner, every flip and every statistic is known
by hand.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import rageval
from browser_helpers import Opened
from helpers import make_judge, run_cli, user_text, write_jsonl
from rageval import evaluate
from rageval.errors import RunConfigError
from rageval.log import read_lines
from rageval.log._pairwise import read_pairwise
from rageval.metrics import Pairwise
from rageval.metrics.evidence import PairwiseEvidence, PairwiseReading
from rageval.metrics.pairwise import Ask, Winner, combine
from rageval.runner import RunConfig
from rageval.samples import InvalidDataError
from rageval.testing import FAKE_API_KEY, FakeOpenAI, RecordedRequest, Reply
from rageval.testing.records import ScriptedToken

if TYPE_CHECKING:
    from playwright.sync_api import Browser

_ANSWER = re.compile(r"<answer_([12])>\n(.*?)\n</answer_\1>", re.S)


def pair_judge(req: RecordedRequest) -> Reply:
    text = user_text(req)
    answers = dict(_ANSWER.findall(text))
    first, second = answers["1"], answers["2"]
    biased = "BIASED" in first and "BIASED" in second  # picks whichever is shown first
    if '"answer_1": "right" or "wrong"' in text:  # a verdict on each answer (ask="each")
        right = ("BIASED" in first or "BAD" not in first, not biased and "BAD" not in second)
        gives = {"answer_1_gives": first, "answer_2_gives": second}
        return Reply.json(
            gives | {f"answer_{i}": "right" if r else "wrong" for i, r in enumerate(right, 1)}
        )
    if biased or ("GOOD" in first and "BAD" in second):
        better = "1"
    elif "BAD" in first and "GOOD" in second:
        better = "2"
    else:
        better = "tie"
    return Reply.json({"better": better})


def pair_rows() -> list[dict[str, Any]]:
    """Six pairs: B wins 3 (q1, q2, q3), A wins 1 (q4), a tie (q5), a flip (q6)."""
    answers = [
        ("BAD one", "GOOD one"),
        ("BAD two", "GOOD two"),
        ("BAD three", "GOOD three"),
        ("GOOD four", "BAD four"),
        ("SAME five", "SAME five too"),
        ("BIASED six", "BIASED six too"),
    ]
    return [
        {"id": f"q{i}", "user_input": f"question {i}?", "reference": f"ref {i}",
         "response_a": a, "response_b": b, "human": h}
        for i, ((a, b), h) in enumerate(zip(answers, ["b", "b", "a", "a", "", "tie"], strict=True), start=1)
    ]  # fmt: skip


@pytest.fixture
def judge_server(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    with FakeOpenAI(pair_judge) as s:
        yield s


def test_both_orders_are_asked_and_read_back(judge_server: FakeOpenAI) -> None:
    judge = make_judge(judge_server)
    result = Pairwise(llm=judge).single_turn_score(
        {
            "user_input": "q?",
            "response": "BAD a",
            "reference": "r",
            "metadata": {"response_b": "GOOD b"},
        }
    )
    ev = result.evidence
    assert isinstance(ev, PairwiseEvidence)
    assert (result.value, ev.winner, ev.flip) == (1.0, "b", False)
    assert (ev.a_first.winner, ev.b_first.winner) == ("b", "b")
    texts = [user_text(r) for r in judge_server.chat_requests]
    assert len(texts) == 2
    # A first, then B first; the reference is shown
    assert texts[0].index("BAD a") < texts[0].index("GOOD b")
    assert texts[1].index("GOOD b") < texts[1].index("BAD a")
    assert all("<reference>\nr\n</reference>" in t for t in texts)
    flipped = Pairwise(llm=judge).single_turn_score(
        {"user_input": "q?", "response": "BIASED a", "metadata": {"response_b": "BIASED b"}}
    )
    assert flipped.value == 0.5 and flipped.evidence["flip"] is True
    assert flipped.evidence["a_first"].winner == "a" and flipped.evidence["b_first"].winner == "b"


def test_the_winner_from_probabilities_cancels_the_lean_to_a_position() -> None:
    def reading(winner: Winner, p_a: float, p_b: float) -> PairwiseReading:
        return PairwiseReading(winner=winner, p_a=p_a, p_b=p_b, p_tie=1 - p_a - p_b)

    # each order picks the answer shown first, but B is the more probable on average
    a_first, b_first = reading("a", 0.5, 0.4), reading("b", 0.3, 0.6)
    assert combine(a_first, b_first) == ("tie", True)
    assert combine(a_first, b_first, by="probabilities") == ("b", True)
    # written verdicts alone (probability 1 each): the two rules agree
    assert combine(reading("a", 1, 0), reading("b", 0, 1), by="probabilities") == ("tie", True)
    assert combine(reading("a", 1, 0), reading("a", 1, 0), by="probabilities") == ("a", False)
    # a verdict on each answer: P(A right) where A is first against P(B right) where B is first,
    # a tie when they are closer than TIE_MARGIN (0.2)
    each_a = PairwiseReading(winner="tie", p_a=0, p_b=0, p_tie=1, right_a=0.7, right_b=0.9)
    each_b = PairwiseReading(winner="b", p_a=0, p_b=0, p_tie=1, right_a=0.2, right_b=0.7)
    assert combine(each_a, each_b, by="probabilities") == ("tie", True)
    for right_b, winner in ((0.6, "tie"), (0.55, "tie"), (0.45, "a"), (0.85, "tie"), (0.95, "b")):
        b_first = each_b.model_copy(update={"right_b": right_b})
        assert combine(each_a, b_first, by="probabilities")[0] == winner, right_b


def test_scripted_probabilities_are_kept_with_each_reading(judge_server: FakeOpenAI) -> None:
    tokens: list[ScriptedToken] = [
        ('{"better": "', 0.0),
        ("1", math.log(0.6), {"2": math.log(0.3)}),
        ('"}', 0.0),
    ]
    judge_server.script(Reply.json({"better": "1"}, logprobs=tokens))
    judge_server.script(Reply.json({"better": "1"}, logprobs=tokens))
    result = Pairwise(llm=make_judge(judge_server), ask="which").single_turn_score(
        {"user_input": "q?", "response": "x", "metadata": {"response_b": "y"}}
    )
    ev = result.evidence
    assert isinstance(ev, PairwiseEvidence)
    # the options' probabilities, renormalised over the options: 0.6 / 0.9 and 0.3 / 0.9;
    # A first, P(A) is P("1"); B first, P(A) is P("2")
    assert (ev.a_first.p_a, ev.a_first.p_b, ev.a_first.p_tie) == pytest.approx((2 / 3, 1 / 3, 0))
    assert (ev.b_first.p_a, ev.b_first.p_b) == pytest.approx((1 / 3, 2 / 3))
    assert ev.flip is True and ev.winner == "tie"  # symmetric leaning: a tie either way


def test_with_ask_which_the_winner_is_the_most_probable_over_both_orders(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def leaning(req: RecordedRequest) -> Reply:
        """Answer 1 written each time; A first P("1") 0.5, P("2") 0.4; B first 0.7 and 0.2."""
        first = dict(_ANSWER.findall(user_text(req)))["1"]
        p1, p2 = (0.5, 0.4) if first == "x" else (0.7, 0.2)
        tokens: list[ScriptedToken] = [
            ('{"better": "', 0.0),
            ("1", math.log(p1), {"2": math.log(p2)}),
            ('"}', 0.0),
        ]
        return Reply.json({"better": "1"}, logprobs=tokens)

    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    sample = {"user_input": "q?", "response": "x", "metadata": {"response_b": "y"}}
    with FakeOpenAI(leaning) as server:
        judge = make_judge(server)
        result = Pairwise(llm=judge, ask="which").single_turn_score(sample)
        by_verdicts = Pairwise(llm=judge, ask="which", winner_from="verdicts").single_turn_score(
            sample
        )
    # P(A) = (5/9 + 2/9) / 2 = 7/18, P(B) = (4/9 + 7/9) / 2 = 11/18: B, though the verdicts flip
    ev = result.evidence
    assert isinstance(ev, PairwiseEvidence) and ev.winner_from == "probabilities"
    assert ev.ask == "which" and ev.a_first.right_a is None
    assert (ev.a_first.p_a + ev.b_first.p_a) / 2 == pytest.approx(7 / 18)
    assert (ev.winner, ev.flip, result.value) == ("b", True, 1.0)
    assert (by_verdicts.evidence["winner"], by_verdicts.value) == ("tie", 0.5)


def test_by_default_each_answer_gets_a_verdict_and_the_first_shown_are_compared(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # P(right) of answer 1 and of answer 2: A first (A = "x") 0.7 and 0.95; B first 0.4 and
    # 0.5; every verdict written "right"
    probabilities = {"x": (0.7, 0.95), "y": (0.4, 0.5)}

    def each(req: RecordedRequest) -> Reply:
        text = user_text(req)
        assert "Length is no merit" in text and "First write down" in text
        first, second = (a for _, a in _ANSWER.findall(text))
        p1, p2 = probabilities[first]
        head = f'{{"answer_1_gives": "{first}", "answer_2_gives": "{second}", "answer_1": "'
        tokens: list[ScriptedToken] = [
            (head, 0.0),
            ("right", math.log(p1), {"wrong": math.log(1 - p1)}),
            ('", "answer_2": "', 0.0),
            ("right", math.log(p2), {"wrong": math.log(1 - p2)}),
            ('"}', 0.0),
        ]
        reply = {"answer_1_gives": first, "answer_2_gives": second}
        return Reply.json(reply | {"answer_1": "right", "answer_2": "right"}, logprobs=tokens)

    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    sample = {"user_input": "q?", "response": "x", "metadata": {"response_b": "y"}}
    with FakeOpenAI(each) as server:
        judge = make_judge(server)
        result = Pairwise(llm=judge).single_turn_score(sample)
        by_verdicts = Pairwise(llm=judge, winner_from="verdicts").single_turn_score(sample)
    ev = result.evidence
    assert isinstance(ev, PairwiseEvidence)
    assert (ev.ask, ev.winner_from) == ("each", "probabilities")
    # each reading's P(A right) and P(B right), read back from the positions
    assert (ev.a_first.right_a, ev.a_first.right_b) == pytest.approx((0.7, 0.95))
    assert (ev.b_first.right_a, ev.b_first.right_b) == pytest.approx((0.5, 0.4))
    # P(a) = P(A right) P(B wrong), P(b) = P(B right) P(A wrong), the rest a tie
    a_first = ev.a_first
    assert (a_first.p_a, a_first.p_b, a_first.p_tie) == pytest.approx((0.035, 0.285, 0.68))
    # the first-shown verdicts: P(A right | A first) 0.7 - P(B right | B first) 0.4 = 0.3, not
    # under TIE_MARGIN 0.2 -> A (averaging both of each answer's verdicts would give B:
    # (0.7 + 0.5) / 2 < (0.95 + 0.4) / 2)
    assert (ev.winner, ev.flip, result.value) == ("a", False, 0.0)
    # every verdict written "right": both readings are ties
    assert (by_verdicts.evidence["winner"], by_verdicts.value) == ("tie", 0.5)
    # B right 0.55 where B is first: 0.7 - 0.55 = 0.15 < 0.2, the judge holds the two about as
    # likely right -> a tie (the higher probability alone would name A)
    probabilities["y"] = (0.55, 0.5)
    with FakeOpenAI(each) as server:
        close = Pairwise(llm=make_judge(server)).single_turn_score(sample)
    assert close.evidence["b_first"].right_b == pytest.approx(0.55)
    assert (close.evidence["winner"], close.value) == ("tie", 0.5)


def test_bad_input_names_row_and_field_before_any_request(
    judge_server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"id": "q1", "user_input": "q", "response": "a"}]
    with pytest.raises(InvalidDataError, match="response_b"):
        evaluate(rows, metrics=[Pairwise()], llm=make_judge(judge_server),
                 run_dir=tmp_path / "r", progress=False)  # fmt: skip
    with pytest.raises(ValueError, match="rubric"):
        Pairwise(criterion="rubric")
    with pytest.raises(ValueError, match="rubric goes only"):
        Pairwise(rubric="be nice")
    with pytest.raises(ValueError, match="winner_from"):
        Pairwise(winner_from="coin")  # type: ignore[arg-type]
    faithful = Pairwise(criterion="faithfulness")
    from rageval.samples import Sample

    problems = faithful.input_problems(
        Sample(user_input="q", response="a", metadata={"response_b": 3})
    )
    assert ("response_b", "must be a text, got int") in problems
    assert any(f == "retrieved_contexts" for f, _ in problems)
    # the CLI: a bad human verdict is a usage error naming its line (from 1, as evaluate
    # counts a file's lines), id and column; so is an answer that is not a text
    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, [pair_rows()[0], {**pair_rows()[1], "human": "maybe", "response_b": 3}])
    assert run_cli("pairwise", data, "--human", "human", "--llm", "test-model",
                   "--base-url", judge_server.base_url, "-o", tmp_path / "run") == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "line 2, id 'q2', field 'human': a verdict is a, b or tie" in err
    assert "line 2, id 'q2', field 'response_b': needs a text" in err
    assert "row 1" not in err and "counted from 0" not in err
    assert judge_server.chat_requests == []


def test_cli_one_file_win_rate_flips_sign_test_and_people(
    judge_server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, pair_rows())
    run = tmp_path / "run"
    code = run_cli("pairwise", data, "--human", "human", "--llm", "test-model",
                   "--base-url", judge_server.base_url, "-o", run, "-q")  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert len(judge_server.chat_requests) == 12  # six pairs, two orders each
    report = read_pairwise(run)
    assert report is not None and report.criterion == "correctness"
    (p,) = report.pairs
    assert (p.n, p.wins_a, p.wins_b, p.ties, p.flips) == (6, 1, 3, 2, 1)
    assert p.win_rate.value == pytest.approx((3 + 0.5 * 2) / 6)
    # sign test on 4 pairs with a winner, 3 to 1: 2 * (1 + 4) / 16
    assert p.sign_test_p == pytest.approx(10 / 16)
    assert p.flip_rate.value == pytest.approx(1 / 6)
    # people: q1 b=b, q2 b=b, q3 a≠b, q4 a=a, q6 tie=tie (the flip); q5 not judged
    (h,) = report.human or []
    assert h.n_labelled == 5 and h.agreement.value == pytest.approx(4 / 5)
    assert h.labelled_win_rate.value == pytest.approx((1 + 1 + 0 + 0 + 0.5) / 5)
    # the run log: each pair's winner with both orders' readings
    cells = {e.line.id: e.line.cells["pairwise"] for e in read_lines(run / "results.jsonl")}
    assert {k: c.evidence["winner"] for k, c in cells.items()} == {
        "q1": "b", "q2": "b", "q3": "b", "q4": "a", "q5": "tie", "q6": "tie"
    }  # fmt: skip
    assert cells["q6"].evidence["a_first"].winner == "a"
    out = capsys.readouterr().out
    assert "0.667" in out and "1 (0.167)" in out and "0.6250" in out
    assert '"pairwise"' in (run / "report.html").read_text(encoding="utf-8")
    # run again with --resume: nothing left to ask, the same statistics
    assert run_cli("pairwise", "--resume", run, "-q") == 0
    assert len(judge_server.chat_requests) == 12
    assert read_pairwise(run) == report


def test_cli_three_systems_rank_by_bradley_terry(
    judge_server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # good beats ok-ish (BAD) always; ok and meh (both SAME) tie; good vs meh: GOOD vs SAME tie
    systems = {"good": "GOOD", "bad": "BAD", "meh": "SAME"}
    paths = []
    for name, mark in systems.items():
        path = tmp_path / f"{name}.jsonl"
        write_jsonl(path, [{"id": f"q{i}", "user_input": f"question {i}?",
                            "response": f"{mark} {i}"} for i in range(4)])  # fmt: skip
        paths.append(path)
    run = tmp_path / "run"
    code = run_cli("pairwise", *paths, "--llm", "test-model", "--base-url",
                   judge_server.base_url, "-o", run, "-q")  # fmt: skip
    assert code == 0, capsys.readouterr().err
    assert len(judge_server.chat_requests) == 3 * 4 * 2
    report = read_pairwise(run)
    assert report is not None and report.strengths is not None
    assert report.strengths[0].system == "good"
    by_name = {s.system: s for s in report.strengths}
    assert (by_name["good"].wins, by_name["good"].ties, by_name["good"].losses) == (4, 4, 0)
    assert by_name["good"].opponents == {"bad": 4, "meh": 4}
    for s in report.strengths:
        assert s.strength.low is not None and s.strength.high is not None
    ids = {e.line.id for e in read_lines(run / "results.jsonl")}
    assert "q0|good|bad" in ids and len(ids) == 12
    assert "Bradley-Terry" in capsys.readouterr().out


def test_the_python_function_takes_rows_systems_and_a_run_config(
    judge_server: FakeOpenAI, tmp_path: Path
) -> None:
    judge = make_judge(judge_server)
    # one source holding both answers, as rows; how the run executes: one RunConfig
    config = RunConfig(run_dir=tmp_path / "run", progress=False)
    report = rageval.pairwise(pair_rows(), judge, human="human", config=config)
    (p,) = report.pairs
    assert (p.n, p.wins_a, p.wins_b, p.ties, p.flips) == (6, 1, 3, 2, 1)
    assert p.win_rate.value == pytest.approx(4 / 6) and p.sign_test_p == pytest.approx(10 / 16)
    (h,) = report.human or []
    assert h.agreement.value == pytest.approx(4 / 5)
    assert read_pairwise(tmp_path / "run") == report  # pairwise.json beside the run log
    assert len(judge_server.chat_requests) == 12
    # resumed with no data: the run's own pairs, nothing asked again
    again = rageval.pairwise(None, judge, run_dir=tmp_path / "run", resume=True, progress=False)
    assert again == report and len(judge_server.chat_requests) == 12
    # several systems by name, each as rows; no run directory: the report only
    systems = {
        name: [{"id": f"q{i}", "user_input": f"question {i}?", "response": f"{mark} {i}"}
               for i in range(2)]
        for name, mark in (("good", "GOOD"), ("bad", "BAD"), ("meh", "SAME"))
    }  # fmt: skip
    ranked = rageval.pairwise(systems, judge, criterion="completeness", progress=False)
    assert ranked.criterion == "completeness" and ranked.strengths is not None
    assert ranked.strengths[0].system == "good"
    assert {(q.system_a, q.system_b, q.wins_a) for q in ranked.pairs} == {
        ("good", "bad", 2), ("good", "meh", 0), ("bad", "meh", 0)
    }  # fmt: skip
    asked = len(judge_server.chat_requests)
    assert asked == 12 + 3 * 2 * 2
    # what cannot run is refused before any request
    with pytest.raises(RunConfigError, match="resume"):
        rageval.pairwise(None, judge)
    with pytest.raises(RunConfigError, match="one-source form"):
        rageval.pairwise(systems, judge, human="human")
    with pytest.raises(RunConfigError, match="criterion"):
        rageval.pairwise(pair_rows(), judge, metric_params={"criterion": "completeness"})
    assert len(judge_server.chat_requests) == asked


def test_cli_systems_must_ask_the_same_question(
    judge_server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write_jsonl(a, [{"id": "q0", "user_input": "zero?", "response": "x"},
                    {"id": "q1", "user_input": "one?", "response": "x"}])  # fmt: skip
    write_jsonl(b, [{"id": "q1", "user_input": "two?", "response": "y"}])
    assert run_cli("pairwise", a, b, "--llm", "m", "--base-url", judge_server.base_url,
                   "-o", tmp_path / "r") == 2  # fmt: skip
    # located by the id both files have (its line differs between them), not a row from 0
    err = capsys.readouterr().err
    assert "id 'q1', field 'user_input': differs between a and b" in err
    assert "row " not in err and "counted from 0" not in err
    write_jsonl(b, [{"id": "q9", "user_input": "one?", "response": "y"}])
    assert run_cli("pairwise", a, b, "--llm", "m", "--base-url", judge_server.base_url,
                   "-o", tmp_path / "r2") == 2  # fmt: skip
    assert judge_server.chat_requests == []


def test_run_directories_are_read_as_systems(
    judge_server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, mark in (("one", "GOOD"), ("two", "BAD")):
        rows = [{"id": f"q{i}", "user_input": f"question {i}?", "response": f"{mark} {i}",
                 "reference": "r"} for i in range(2)]  # fmt: skip
        evaluate(rows, metrics=["token_f1"], run_dir=tmp_path / name, progress=False)
    code = run_cli("pairwise", tmp_path / "one", tmp_path / "two", "--llm", "test-model",
                   "--base-url", judge_server.base_url, "-o", tmp_path / "run", "-q")  # fmt: skip
    assert code == 0, capsys.readouterr().err
    report = read_pairwise(tmp_path / "run")
    assert report is not None
    (p,) = report.pairs
    assert (p.system_a, p.system_b, p.wins_a, p.wins_b) == ("one", "two", 2, 0)
    assert report.strengths is None  # two systems: the win rate says it all


def test_the_report_shows_the_pairwise_section_and_each_pairs_readings(
    judge_server: FakeOpenAI, tmp_path: Path, browser: Browser
) -> None:
    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, pair_rows())
    run = tmp_path / "run"
    assert run_cli("pairwise", data, "--human", "human", "--llm", "test-model",
                   "--base-url", judge_server.base_url, "-o", run, "-q") == 0  # fmt: skip
    view = Opened(browser, run / "report.html")
    section = view.page.locator("#pairwise")
    assert section.locator("h2").inner_text() == "Pairwise: correctness"
    cells = section.locator("table.pairwise tbody tr").first.locator("td").all_inner_texts()
    assert cells[:6] == ["A", "B", "6", "1", "3", "2"]
    assert cells[6].startswith("0.6667 [") and cells[8] == "0.625"
    assert "judge agrees on 0.8" in section.inner_text()
    # a pair's evidence: the winner and both orders' verdicts
    view.page.locator("#samples-table tbody tr[data-i]").last.click()
    evidence = view.page.locator('.evidence[data-kind="pairwise"]')
    assert "the two orders disagreed" in evidence.inner_text()
    assert "A shown first: verdict" in evidence.inner_text()
    view.close()


def test_dry_run_and_budget_are_those_of_every_run(
    judge_server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, pair_rows())
    judge = ("--llm", "test-model", "--base-url", judge_server.base_url)
    assert run_cli("pairwise", data, *judge, "--dry-run") == 0
    out = capsys.readouterr().out
    assert "pairwise" in out and "12" in out  # six pairs, two requests each
    assert judge_server.chat_requests == [] and not (tmp_path / "rageval-runs").exists()
    # a budget too small for all the pairs stops the run; a resume with room finishes it
    run = tmp_path / "run"
    price = ("--price", "test-model=20,20")
    code = run_cli("pairwise", data, *judge, *price, "--max-cost", "0.05", "-o", run, "-q")
    assert code == 5, capsys.readouterr().err
    assert 0 < len(judge_server.chat_requests) < 12 and read_pairwise(run) is None
    assert run_cli("pairwise", "--resume", run, *price, "--max-cost", "none", "-q") == 0
    report = read_pairwise(run)
    assert report is not None and report.pairs[0].n == 6


def test_criteria_change_the_question_and_what_is_shown(
    judge_server: FakeOpenAI, tmp_path: Path
) -> None:
    from rageval.metrics.pairwise import CRITERIA, RIGHT_WHEN, prompt
    from rageval.samples import Sample

    sample = Sample(
        user_input="q?", response="x", retrieved_contexts=["ctx one"], metadata={"response_b": "y"}
    )
    asks: tuple[tuple[Ask, dict[str, str]], ...] = (("which", CRITERIA), ("each", RIGHT_WHEN))
    for ask, texts in asks:
        faithful = prompt(sample, "x", "y", criterion="faithfulness", ask=ask)[1]["content"]
        assert faithful.startswith("<contexts>\n[c1] ctx one") and texts["faithfulness"] in faithful
        correct = prompt(sample, "x", "y", criterion="correctness", ask=ask)[1]["content"]
        assert "<contexts>" not in correct and "<reference>" not in correct
        own = prompt(
            sample, "x", "y", criterion="rubric", rubric="The kinder answer wins.", ask=ask
        )
        assert "The kinder answer wins." in own[1]["content"] and "<contexts>" in own[1]["content"]
    # a verdict on each answer: without a reference, right is answering correctly
    assert RIGHT_WHEN["correctness-alone"] in correct
    with_reference = sample.model_copy(update={"reference": "r"})
    correct = prompt(with_reference, "x", "y", criterion="correctness")[1]["content"]
    assert RIGHT_WHEN["correctness"] in correct and "<reference>\nr\n</reference>" in correct
    # the CLI passes the criterion on, and a resumed run keeps its own
    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, pair_rows()[:1])
    run = tmp_path / "run"
    assert run_cli("pairwise", data, "--criterion", "completeness", "--llm", "test-model",
                   "--base-url", judge_server.base_url, "-o", run, "-q") == 0  # fmt: skip
    sent = [user_text(r) for r in judge_server.chat_requests]
    assert len(sent) == 2 and all(RIGHT_WHEN["completeness"] in t for t in sent)
    report = read_pairwise(run)
    assert report is not None and report.criterion == "completeness"
    assert run_cli("pairwise", "--resume", run, "--criterion", "correctness") == 2
    assert run_cli("pairwise", "--resume", run, "--ask", "which") == 2
    # --ask which: the judge is asked which answer is better
    assert run_cli("pairwise", data, "--ask", "which", "--llm", "test-model",
                   "--base-url", judge_server.base_url, "-o", tmp_path / "which", "-q") == 0  # fmt: skip
    sent = [user_text(r) for r in judge_server.chat_requests[2:]]
    assert len(sent) == 2 and all(CRITERIA["correctness"] in t for t in sent)
    cells = [e.line.cells["pairwise"] for e in read_lines(tmp_path / "which" / "results.jsonl")]
    assert [(c.evidence["ask"], c.evidence["winner"]) for c in cells] == [("which", "b")]


def test_the_metric_lists_the_answer_b_column_it_needs(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli("metrics", "pairwise") == 0
    assert "required fields: user_input, response, response_b\n" in capsys.readouterr().out
    assert run_cli("metrics") == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("pairwise ")]
    assert "user_input, response, response_b" in line


def test_what_a_new_user_gets_wrong_is_refused_saying_how(
    judge_server: FakeOpenAI,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    judge = make_judge(judge_server)
    # a misspelled keyword, as evaluate refuses one, naming the keyword meant
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'seeed'.*'seed'"):
        rageval.pairwise(pair_rows(), seeed=3, llm=judge)  # type: ignore[call-arg]
    # one row given as a dict is not systems by name
    with pytest.raises(RunConfigError, match=r"maps system names to.*rows go in a list"):
        rageval.pairwise(pair_rows()[0], llm=judge)
    # no judge: nothing can be measured; refused before anything is written
    monkeypatch.delenv("RAGEVAL_LLM", raising=False)
    with pytest.raises(RunConfigError, match=r"pairwise needs a judge: pass llm=.*RAGEVAL_LLM"):
        rageval.pairwise(pair_rows(), run_dir=tmp_path / "none", progress=False)
    assert not (tmp_path / "none").exists()
    # a column of verdicts no row has: not in the data, its columns listed
    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, pair_rows())
    assert run_cli("pairwise", data, "--human", "nosuchcol", "--llm", "test-model",
                   "--base-url", judge_server.base_url, "-o", tmp_path / "r") == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "'nosuchcol': is not a column of the data" in err
    assert "(its columns: id, user_input, reference, response_a, response_b, human)" in err
    assert judge_server.chat_requests == []
    # an endpoint nobody answers at is unreachable, not refusing
    code = run_cli("pairwise", data, "--llm", "test-model", "--base-url",
                   "http://127.0.0.1:9/v1", "-o", tmp_path / "r2", "-q")  # fmt: skip
    err = capsys.readouterr().err
    assert code == 3 and "could not reach" in err and "endpoint refused" not in err


def test_the_report_prints_the_table_the_command_prints(
    judge_server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "pairs.jsonl"
    write_jsonl(data, pair_rows())
    code = run_cli("pairwise", data, "--human", "human", "--llm", "test-model",
                   "--base-url", judge_server.base_url, "-o", tmp_path / "run", "-q")  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    report = read_pairwise(tmp_path / "run")
    assert report is not None
    shown = str(report)
    assert shown.startswith("criterion: correctness") and "B win rate [95% CI]" in shown
    assert "0.667 [" in shown and "people's verdicts on 5 pairs" in shown
    assert shown in printed  # the very table the command prints
    assert repr(report).startswith("PairwiseReport(") and shown in repr(report)


def test_the_tie_margin_is_a_recorded_setting_and_older_runs_keep_theirs() -> None:
    from rageval.runner._rundir import stored_metric

    each_a = PairwiseReading(winner="a", p_a=0, p_b=0, p_tie=1, right_a=0.7, right_b=0.3)
    each_b = PairwiseReading(winner="b", p_a=0, p_b=0, p_tie=1, right_a=0.4, right_b=0.6)
    # 0.7 against 0.6: a tie under the default margin 0.2, A's win with none
    assert combine(each_a, each_b, by="probabilities") == ("tie", True)
    assert combine(each_a, each_b, by="probabilities", tie_margin=0.0) == ("a", True)
    # with no margin, equal probabilities are still a tie (0.1 + 0.2 against 0.3 too)
    for right_a, right_b in ((0.6, 0.6), (0.1 + 0.2, 0.3)):
        a_first = each_a.model_copy(update={"right_a": right_a})
        b_first = each_b.model_copy(update={"right_b": right_b})
        assert combine(a_first, b_first, by="probabilities", tie_margin=0.0)[0] == "tie"
    assert Pairwise().params()["tie_margin"] == 0.2
    assert Pairwise(tie_margin=0.05).params()["tie_margin"] == 0.05
    for bad in (-0.1, 1.0, "0.2", True):
        with pytest.raises(ValueError, match="tie_margin"):
            Pairwise(tie_margin=bad)  # type: ignore[arg-type]
    # a manifest from before the margin (session 17's ask="each" runs): no margin
    before_margin = stored_metric("pairwise", {"ask": "each"})
    assert isinstance(before_margin, Pairwise) and before_margin.tie_margin == 0.0
    # from before `ask`: the which-is-better request it sent
    before_ask = stored_metric("pairwise", {})
    assert isinstance(before_ask, Pairwise) and before_ask.ask == "which"
