"""evaluate(human_labels=...) (the PPI++ mean of a label next to the judge's) and
evaluate(repeats=K) (each judge cell scored K times, the judge's noise in the summary).

Judge replies are scripted per prompt, so every number below is worked by hand.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from helpers import (
    PPI_GRADES,
    PPI_LABELS,
    grader,
    judge_for,
    labelled_rows,
    make_judge,
    user_text,
    write_jsonl,
)
from rageval import evaluate
from rageval.cli import main
from rageval.judge import Judge
from rageval.report import write_report
from rageval.results import EvaluationResult, compare, load_run
from rageval.runner import RunConfigError, RunDirError
from rageval.samples import InvalidDataError
from rageval.testing import FAKE_API_KEY, FakeOpenAI, RecordedRequest, Reply

# ---------------------------------------------------------------------- PPI++ in evaluate


def _expected_ppi() -> tuple[float, float]:
    var_fu = sum((f - 0.625) ** 2 for f in (1, 1, 0.5, 0)) / 3
    lam = (1 / 6) / (1 / 6 + var_fu)
    return lam, 0.5 + 0.125 * lam


def ppi_run(run_dir: Path, **options: Any) -> EvaluationResult:
    """answer_accuracy of tests/helpers.py's PPI rows, judged by the grader, with their
    ``human`` labels (PPI++ worked by hand there), written to `run_dir`; `options`:
    evaluate()'s others."""
    with FakeOpenAI(grader) as server:
        return evaluate(
            labelled_rows(PPI_GRADES, PPI_LABELS),
            ["answer_accuracy"],
            judge_for(server),
            human_labels={"human": "answer_accuracy"},
            run_dir=run_dir,
            progress=False,
            **options,
        )


def test_the_summary_gives_the_ppi_mean_of_the_label(tmp_path: Path) -> None:
    lam, mean = _expected_ppi()
    result = ppi_run(tmp_path / "run")
    summary = result.summary()["answer_accuracy"]
    assert summary.mean == pytest.approx(sum(PPI_GRADES) / 4 / 8)  # the judge's own mean
    ppi = summary.ppi["human"]
    assert ppi.lam == pytest.approx(lam) and ppi.mean == pytest.approx(mean)
    assert (ppi.n_labelled, ppi.n_unlabelled) == (4, 4)
    assert ppi.labelled_mean == pytest.approx(0.5)
    # in summary.json, read back by load_run, in the report, and in the printed summary
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert on_disk["metrics"]["answer_accuracy"]["ppi"]["human"]["mean"] == pytest.approx(mean)
    again = load_run(tmp_path / "run").summary()["answer_accuracy"].ppi["human"]
    assert again.mean == pytest.approx(mean)
    html = write_report(tmp_path / "run").read_text(encoding="utf-8")
    assert '"ppi":{"human":{"mean":' in html
    assert f"answer_accuracy <- human: {mean:.3f}" in str(result)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["human_labels"] == [{"column": "human", "metric": "answer_accuracy"}]


def test_human_labels_are_checked_before_any_request(tmp_path: Path) -> None:
    rows = labelled_rows(PPI_GRADES, [*PPI_LABELS[:2], "perhaps", *PPI_LABELS[3:]])
    with FakeOpenAI(grader) as server:

        def scored(data: Any, metric: str = "answer_accuracy") -> None:
            evaluate(data, ["answer_accuracy"], judge_for(server), human_labels={"human": metric},
                     progress=False)  # fmt: skip

        with pytest.raises(InvalidDataError, match=r"row 2, id 'r2', field 'human'"):
            scored(rows)
        with pytest.raises(
            RunConfigError, match="'faithfulness', which is not a metric of this run"
        ):
            scored(rows, "faithfulness")
        # from a line-based file, the file's line, as its other problems are named
        data = tmp_path / "rows.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        with pytest.raises(InvalidDataError, match=r"line 3, id 'r2', field 'human'"):
            scored(data)
        assert server.chat_requests == []


# Run B's judge rates every row one step lower (grade 4 → 2, 2 → 0, 0 → 0) and its labels are
# the same rows': the paired difference is computed on per-row terms with each run's λ.
def test_compare_gives_both_ppi_means_and_their_paired_difference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    lower = [max(0, g - 2) for g in PPI_GRADES]
    for name, grades in (("a", PPI_GRADES), ("b", lower)):
        write_jsonl(tmp_path / f"{name}.jsonl", labelled_rows(grades, PPI_LABELS))
    with FakeOpenAI(grader) as server:
        for name in ("a", "b"):
            code = main(
                ["evaluate", str(tmp_path / f"{name}.jsonl"), "-m", "answer_accuracy", "--llm", "m",
                 "--base-url", server.base_url, "--human-labels", "human=answer_accuracy",
                 "-o", str(tmp_path / name), "-q"]
            )  # fmt: skip
            assert code == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    a, b = load_run(tmp_path / "a"), load_run(tmp_path / "b")
    pa = a.summary()["answer_accuracy"].ppi["human"]
    pb = b.summary()["answer_accuracy"].ppi["human"]
    assert pa.lam is not None and pb.lam is not None
    fa = [g / 4 for g in PPI_GRADES]
    fb = [g / 4 for g in lower]
    y = [1, 0, 1, 0]
    d_l = [(y[i] - pb.lam * fb[i]) - (y[i] - pa.lam * fa[i]) for i in range(4)]
    d_u = [pb.lam * fb[i] - pa.lam * fa[i] for i in range(4, 8)]
    expected = sum(d_l) / 4 + sum(d_u) / 4
    (comparison,) = compare(a, b)
    assert comparison.metric == "answer_accuracy"
    (p,) = comparison.ppi
    assert p.diff.mean_diff == pytest.approx(expected)
    assert p.diff.n_labelled == 4 and p.diff.n_unlabelled == 4
    assert "human labels: the mean label by PPI++" in out
    assert f"{expected:+.4f}" in out


# ---------------------------------------------------------------------- repeats


#: the asks a FLAKY row fails in a row: as many as end a call's re-asks
FLAKY_ASKS = 3


class Sequenced:
    """Rates each distinct prompt from a fixed sequence, one step per time it is asked:
    rows marked HIGH get 4, 2, 4, 2, ...; rows marked LOW 0, 2, 0, 2, ...; a row marked FLAKY
    gets the same rating off the scale on its 2nd, 3rd and 4th asks, and then goes on with its
    sequence: the whole second scoring (its first ask and two re-asks, which end the re-asks by
    meeting the same problem three times in a row) fails, so that scoring is not measured."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, req: RecordedRequest) -> Reply:
        text = user_text(req)
        with self.lock:
            k = self.seen[text]
            self.seen[text] += 1
        if "FLAKY" in text:
            if 1 <= k <= FLAKY_ASKS:
                return Reply.json({"rating": 3})
            if k:  # past its failed asks: on with the sequence where it left off
                k -= FLAKY_ASKS
        high = re.search(r"\bHIGH\b", text) is not None
        return Reply.json(
            {"rating": (4 if k % 2 == 0 else 2) if high else (0 if k % 2 == 0 else 2)}
        )


def level_rows(marks: list[str]) -> list[dict[str, Any]]:
    return [
        {
            "id": f"r{i}",
            "user_input": f"q{i}",
            "response": f"answer {i} {mark}",
            "reference": f"ref {i}",
        }
        for i, mark in enumerate(marks)
    ]


def repeated(marks: list[str], **options: Any) -> EvaluationResult:
    """answer_accuracy of ``level_rows(marks)``, each cell scored 3 times by a
    :class:`Sequenced` judge; `options`: evaluate()'s others."""
    with FakeOpenAI(Sequenced()) as server:
        return evaluate(
            level_rows(marks),
            ["answer_accuracy"],
            make_judge(server),
            repeats=3,
            progress=False,
            **options,
        )


def test_repeats_score_each_cell_k_times_and_split_out_the_judge_noise(tmp_path: Path) -> None:
    # HIGH cells score 1, .5, 1 (mean 5/6); LOW cells 0, .5, 0 (mean 1/6); each cell's squared
    # deviations sum to 1/6 over 2 degrees of freedom. Pooled within variance (4·1/6)/8 = 1/12;
    # cell means 5/6, 5/6, 1/6, 1/6: variance 4/27; noise left in a mean of 3: 1/36;
    # share (1/36)/(4/27) = 0.1875; CI width share 1 − √(1 − 0.1875).
    with FakeOpenAI(Sequenced()) as server:
        result = evaluate(
            level_rows(["HIGH", "HIGH", "LOW", "LOW"]),
            ["answer_accuracy"],
            judge_for(server),
            repeats=3,
            run_dir=tmp_path / "run",
            progress=False,
        )
        first_requests = len(server.chat_requests)
    assert result["answer_accuracy"] == pytest.approx([5 / 6, 5 / 6, 1 / 6, 1 / 6])
    assert first_requests == 4 * 3 * 2  # rows x scorings x templates
    cell = result.sample("r0").cells["answer_accuracy"]
    assert cell.repeats is not None and cell.repeats.values == [1.0, 0.5, 1.0]
    assert cell.repeats.sd == pytest.approx(math.sqrt(1 / 12))
    noise = result.summary()["answer_accuracy"].judge_noise
    assert noise is not None and noise.repeats == 3 and noise.n_cells == 4
    assert noise.within_variance == pytest.approx(1 / 12)
    assert noise.noise_variance_share == pytest.approx(0.1875)
    assert noise.ci_width_share == pytest.approx(1 - math.sqrt(1 - 0.1875))
    assert "judge noise is 19% of the variance of the mean, 10% of its CI width" in str(result)
    on_disk = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert on_disk["metrics"]["answer_accuracy"]["judge_noise"][
        "noise_variance_share"
    ] == pytest.approx(0.1875)
    assert load_run(tmp_path / "run").summary()["answer_accuracy"].judge_noise == noise


class Verdict(BaseModel):
    verdict: int


async def test_an_uncached_judge_asks_again_as_the_same_judge(fake_openai: FakeOpenAI) -> None:
    fake_openai.script(*(Reply.json({"verdict": v}) for v in (1, 2, 3)))
    judge = Judge("m", base_url=fake_openai.base_url, api_key=FAKE_API_KEY)
    question = [{"role": "user", "content": "question"}]
    assert (await judge.ask(question, Verdict, tags={"metric": "a"})).value.verdict == 1
    assert (await judge.ask(question, Verdict, tags={"metric": "a"})).cached
    view = judge.uncached()
    assert view.cache is None and judge.cache is not None  # the judge keeps its cache
    again = await view.ask(question, Verdict, tags={"metric": "a"})
    assert (again.value.verdict, again.cached) == (2, False)
    assert (await view.ask(question, Verdict, tags={"metric": "a"})).value.verdict == 3
    assert len(fake_openai.chat_requests) == 3
    # the same ledger (and endpoint): the view's calls are the judge's
    assert view.usage is judge.usage and judge.usage.by_tag("metric")["a"].requests == 3
    # what the view was told is not in the cache: the judge still answers its first reply
    assert (await judge.ask(question, Verdict, tags={"metric": "a"})).value.verdict == 1
    assert view.uncached() is view


def test_the_repeats_bypass_the_cache_and_the_first_scoring_does_not(tmp_path: Path) -> None:
    handler = Sequenced()
    rows = level_rows(["HIGH", "LOW"])
    with FakeOpenAI(handler) as server:
        evaluate(rows, ["answer_accuracy"], judge_for(server), repeats=3, progress=False)
        assert len(server.chat_requests) == 2 * 3 * 2
        again = evaluate(rows, ["answer_accuracy"], judge_for(server), repeats=3, progress=False)
        # the first scoring is the kept cell; the two repeats are asked again (4th, 5th time:
        # HIGH 2 then 4... of its own sequence), so the spread is measured anew
        assert len(server.chat_requests) == 2 * 3 * 2 + 2 * 2 * 2
    repeats = again.sample("r0").cells["answer_accuracy"].repeats
    assert repeats is not None and repeats.values == [1.0, 0.5, 1.0]
    assert again.usage.cache_hits >= 2


def test_a_failed_repeat_is_left_out_of_the_cell_and_counted(tmp_path: Path) -> None:
    with FakeOpenAI(Sequenced()) as server:
        result = evaluate(
            level_rows(["HIGH FLAKY", "LOW"]),
            ["answer_accuracy"],
            judge_for(server),
            repeats=3,
            progress=False,
        )
        asked = Counter(user_text(r) for r in server.chat_requests)
    # per template: 1 ask for the first scoring, 3 for the failed second, 1 for the third
    assert sorted(n for text, n in asked.items() if "FLAKY" in text) == [5, 5]
    cell = result.sample("r0").cells["answer_accuracy"]
    assert cell.repeats is not None
    assert cell.repeats.values == [1.0, 0.5]  # steps 1 and 2 of the sequence
    assert cell.repeats.not_measured == 1
    assert cell.status == "ok" and cell.value == pytest.approx(0.75)


def test_resume_refuses_another_number_of_repeats(tmp_path: Path) -> None:
    rows = level_rows(["HIGH", "LOW"])
    with FakeOpenAI(Sequenced()) as server:
        evaluate(
            rows,
            ["answer_accuracy"],
            judge_for(server),
            repeats=2,
            run_dir=tmp_path / "run",
            progress=False,
        )
        with pytest.raises(RunDirError, match=r"scored each cell 2 time\(s\), now 3"):
            evaluate(
                rows,
                ["answer_accuracy"],
                judge_for(server),
                repeats=3,
                run_dir=tmp_path / "run",
                resume=True,
                progress=False,
            )
        with pytest.raises(RunConfigError, match="repeats must be a whole number >= 1"):
            evaluate(rows, ["answer_accuracy"], judge_for(server), repeats=0, progress=False)


def test_offline_metrics_are_not_repeated(tmp_path: Path) -> None:
    with FakeOpenAI(Sequenced()) as server:
        result = evaluate(
            level_rows(["HIGH", "LOW"]), ["token_f1"], judge_for(server), repeats=3, progress=False
        )
    assert result.summary()["token_f1"].judge_noise is None
    assert result.sample("r0").cells["token_f1"].repeats is None


def test_command_line_repeats_and_human_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_API_KEY)
    data = tmp_path / "rows.jsonl"
    rows = level_rows(["HIGH", "HIGH", "LOW", "LOW"])
    for row, label in zip(rows, [1, None, 0, None], strict=True):
        row["human"] = label
    write_jsonl(data, rows)
    with FakeOpenAI(Sequenced()) as server:
        code = main(
            ["evaluate", str(data), "-m", "answer_accuracy", "--llm", "m", "--base-url",
             server.base_url, "--repeats", "3", "--human-labels", "human=answer_accuracy",
             "-o", str(tmp_path / "run"), "-q"]
        )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "3 scores per cell" in out and "answer_accuracy <- human:" in out
    with pytest.raises(SystemExit) as stop:
        main(["evaluate", str(data), "--repeats", "0"])
    assert stop.value.code == 2
    assert "--repeats: must be at least 1" in capsys.readouterr().err


def test_the_spread_of_each_cell_is_a_pandas_column(tmp_path: Path) -> None:
    df = repeated(["HIGH", "LOW"]).to_pandas()
    assert list(df["answer_accuracy_sd"]) == pytest.approx([math.sqrt(1 / 12)] * 2)


def test_resume_takes_the_human_labels_it_is_given(tmp_path: Path) -> None:
    rows = labelled_rows(PPI_GRADES, PPI_LABELS)
    run = tmp_path / "run"
    with FakeOpenAI(grader) as server:
        evaluate(rows, ["answer_accuracy"], judge_for(server), run_dir=run, progress=False)
        sent = len(server.chat_requests)
        resumed = evaluate(
            rows,
            ["answer_accuracy"],
            judge_for(server),
            run_dir=run,
            resume=True,
            human_labels={"human": "answer_accuracy"},
            progress=False,
        )
        assert len(server.chat_requests) == sent  # nothing scored again
    _, mean = _expected_ppi()
    assert resumed.summary()["answer_accuracy"].ppi["human"].mean == pytest.approx(mean)
    assert load_run(run).summary()["answer_accuracy"].ppi["human"].mean == pytest.approx(mean)
