"""TREC qrels and run files: read as trec_eval reads them (ties by document id in reverse
order, the rank column ignored), scored by `rageval evaluate --qrels --run` to trec_eval's
values, and two retrievers compared."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rageval.cli import main
from rageval.results import load_run
from rageval.samples import InvalidDataError, read_run, trec_rows

pytrec_eval = pytest.importorskip("pytrec_eval")

QRELS = """\
q1 0 d1 2
q1 0 d2 0
q1 0 d3 1
q1 0 d9 3
q2 0 d1 1
q3 0 d4 1
"""
# q1: d3 and d2 tie (d3 first: the greater id), the rank column says otherwise; q2 has no
# ranking; q4 is not judged
RUN = """\
q1 Q0 d2 1 5.0 sys
q1 Q0 d3 2 5.0 sys
q1 Q0 d1 3 7.5 sys
q1 Q0 d10 4 1 sys
q3 Q0 d4 1 0.1 sys
q4 Q0 d4 1 0.9 sys
"""


def _files(tmp_path: Path, qrels: str, run: str, name: str = "run") -> tuple[Path, Path]:
    (tmp_path / "qrels").write_text(qrels)
    (tmp_path / name).write_text(run)
    return tmp_path / "qrels", tmp_path / name


def test_a_run_is_ranked_as_trec_eval_ranks_it(tmp_path: Path) -> None:
    _, run = _files(tmp_path, QRELS, RUN)
    assert read_run(run)["q1"] == ["d1", "d3", "d2", "d10"]
    found = trec_rows(tmp_path / "qrels", run)
    assert [r["id"] for r in found.rows] == ["q1", "q2", "q3"]
    assert found.rows[1]["retrieved_context_ids"] == []  # judged, not retrieved: trec_eval -c
    assert found.unjudged_queries == ["q4"]


def _trec_eval(qrels: Path, run: Path, measures: set[str]) -> dict[str, dict[str, float]]:
    with qrels.open() as q, run.open() as r:
        evaluator = pytrec_eval.RelevanceEvaluator(pytrec_eval.parse_qrel(q), measures)
        return dict(evaluator.evaluate(pytrec_eval.parse_run(r)))


def test_evaluate_qrels_and_run_equals_trec_eval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(7)
    qrels_lines, run_lines = [], []
    for q in range(12):
        for d in rng.sample(range(20), 8):
            qrels_lines.append(f"q{q} 0 d{d} {rng.choice((0, 1, 2, 3))}")
        for d in rng.sample(range(20), rng.randint(1, 15)):
            # scores from few values: many ties, broken by document id
            run_lines.append(f"q{q} Q0 d{d} 0 {rng.choice((0.5, 1.0, 2.0))} sys")
    qrels, run = _files(tmp_path, "\n".join(qrels_lines), "\n".join(run_lines))
    names = ["map", "mrr", "r_precision", "ndcg", "ndcg_at_5", "precision_at_5", "recall_at_10"]
    code = main(["evaluate", "--qrels", str(qrels), "--run", str(run), "-m", ",".join(names),
                 "-o", str(tmp_path / "out"), "-q"])  # fmt: skip
    assert code == 0, capsys.readouterr()
    result = load_run(tmp_path / "out")
    measures = {"map", "recip_rank", "Rprec", "ndcg", "ndcg_cut.5", "P.5", "recall.10"}
    expected = _trec_eval(qrels, run, measures)
    trec_names = ["map", "recip_rank", "Rprec", "ndcg", "ndcg_cut_5", "P_5", "recall_10"]
    for ours, theirs in zip(names, trec_names, strict=True):
        by_query = dict(zip(result.ids, result[ours], strict=True))
        assert by_query == {q: v[theirs] for q, v in expected.items()}, ours


def test_compare_two_retrievers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels_lines = [f"q{q} 0 d{q} 1" for q in range(20)]
    good = [f"q{q} Q0 d{q} 1 2.0 good" for q in range(20)]
    bad = [f"q{q} Q0 x{q} 1 2.0 bad\nq{q} Q0 d{q} 2 1.0 bad" for q in range(20)]
    qrels, run_good = _files(tmp_path, "\n".join(qrels_lines), "\n".join(good), "good")
    _, run_bad = _files(tmp_path, "\n".join(qrels_lines), "\n".join(bad), "bad")
    for name, run in (("a", run_good), ("b", run_bad)):
        code = main(["evaluate", "--qrels", str(qrels), "--run", str(run), "-m", "mrr",
                     "-o", str(tmp_path / name), "-q"])  # fmt: skip
        assert code == 0
    capsys.readouterr()
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("mrr"))
    assert "-0.5000" in line  # 1.0 -> 0.5 on every query


@pytest.mark.parametrize(
    ("qrels", "run", "message"),
    [
        ("q1 0 d1 high\n", "q1 Q0 d1 1 1.0 s\n", "line 1: the grade 'high' is not an integer"),
        (
            "q1 0 d1 1\n",
            "q1 Q0 d1 1 1.0 s\nq1 Q0 d1 2 0.5 s\n",
            "line 2: document 'd1' is given twice",
        ),
        ("q1 0 d1 1\n", "q1 Q0 d1 1 1.0\n", "line 1: a run line has 6 fields, this one 5"),
        ("q1 0 d1 1\n", "q1 Q0 d1 1 nan s\n", "the score 'nan' is not a number"),
    ],
)
def test_bad_trec_files_name_the_line(tmp_path: Path, qrels: str, run: str, message: str) -> None:
    with pytest.raises(InvalidDataError, match=message):
        trec_rows(*_files(tmp_path, qrels, run))


def test_qrels_and_run_go_together_without_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels, run = _files(tmp_path, QRELS, RUN)
    assert main(["evaluate", "--qrels", str(qrels), "-o", str(tmp_path / "x")]) == 2
    assert "--qrels and --run go together" in capsys.readouterr().err
    assert main(["evaluate", "data.jsonl", "--qrels", str(qrels), "--run", str(run)]) == 2
    assert "no DATA" in capsys.readouterr().err
    # the default metrics of id rows, and the query the qrels do not judge said so
    assert (
        main(["evaluate", "--qrels", str(qrels), "--run", str(run), "-o", str(tmp_path / "d")]) == 0
    )
    out, err = capsys.readouterr()
    assert "left out 1 queries" in err and "q4" in err
    assert "ndcg" in out and "map" in out


def test_rageval_metrics_shows_what_a_name_with_a_cutoff_means(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["metrics", "ndcg_at_10"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("ndcg_at_10: nDCG@k") and "k = 10" in out


def test_a_gate_outside_a_cutoff_metrics_range_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels, run = _files(tmp_path, QRELS, RUN)
    code = main(["evaluate", "--qrels", str(qrels), "--run", str(run), "-m", "ndcg_at_10",
                 "--fail-under", "ndcg_at_10=80", "-o", str(tmp_path / "g")])  # fmt: skip
    assert code == 2 and "ranges over 0..1" in capsys.readouterr().err
