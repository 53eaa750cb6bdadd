"""Pairwise runs (``rageval pairwise``): two answers to each question judged side by side.

The pairs are built here and scored by an ordinary run with the ``pairwise`` metric (so the
run directory, resume, cache, budget, observers and report are those of every run); this
module then adds up the verdicts into ``pairwise.json``.

Where the answers come from: run directories or data files of the systems answering the same
questions, matched by id (each two systems are paired on the ids both have); or one data file
whose rows hold both answers, ``response_a`` and ``response_b`` (a ``response`` column is
read as A). The question, reference and contexts a pair is judged with are A's; a question
that differs between two systems' rows is an error naming the row. People's verdicts on some
pairs come with the one-file form, in a column (``a``, ``b`` or ``tie``; blank: not judged).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rageval.log import RESULTS_FILE, read_lines, write_atomic
from rageval.log._pairwise import (
    PAIRWISE_FILE,
    HumanAgreement,
    Interval,
    PairwiseReport,
    SystemPair,
    SystemStrength,
)
from rageval.metrics.evidence import PairwiseEvidence
from rageval.metrics.pairwise import RESPONSE_B
from rageval.runner._evaluate import _write_report
from rageval.runner._rundir import RunDir
from rageval.samples import InvalidDataError, RowProblem, Sample, load_samples, sample_ids
from rageval.stats import (
    ConfidenceInterval,
    PPIEstimate,
    bradley_terry,
    human_preferences,
    pairwise_summary,
)

#: the metadata keys a pairwise row carries beside answer B
SYSTEM_A, SYSTEM_B, QUESTION, HUMAN = "system_a", "system_b", "question_id", "human_winner"
_VERDICTS = ("a", "b", "tie")


def read_answers(path: str | Path) -> list[Sample]:
    """The samples of a run directory (its finished rows) or a data file, each with its id
    (a row without one: ``row-N``); bad rows raise InvalidDataError naming row and field."""
    path = Path(path)
    if path.is_dir() and (path / RESULTS_FILE).exists():
        last = {e.line.id: e.line for e in read_lines(path / RESULTS_FILE)}
        samples = []
        for sid, line in last.items():
            fields = line.inputs.model_dump(exclude_none=True)
            if "turns" in fields:
                raise InvalidDataError(
                    [RowProblem(line.row, "turns", "pairwise compares single-turn answers", sid)],
                    source=str(path),
                )
            samples.append(Sample.model_validate({**fields, "id": sid}))
        return samples
    loaded = load_samples(path)
    if loaded.problems:
        raise InvalidDataError(loaded.problems, source=loaded.source)
    ids = sample_ids(loaded.samples)
    return [s.model_copy(update={"id": i}) for s, i in zip(loaded.samples, ids, strict=True) if s]


def system_rows(systems: Mapping[str, Sequence[Sample]]) -> list[dict[str, Any]]:
    """A pairwise row for each two systems (in the order given) and each id both answered:
    A's question, reference and contexts, A's response and B's as ``response_b``. With two
    systems a row's id is the question's; with more, ``<id>|<system A>|<system B>``."""
    if len(systems) < 2:
        raise ValueError("pairwise compares at least two systems")
    by_id = {name: {s.id: s for s in samples} for name, samples in systems.items()}
    rows: list[dict[str, Any]] = []
    problems: list[RowProblem] = []
    for sa, sb in itertools.combinations(systems, 2):
        for n, (qid, a) in enumerate(by_id[sa].items()):
            b = by_id[sb].get(qid)
            if b is None:
                continue
            if a.text("user_input").strip() != b.text("user_input").strip():
                problems.append(
                    RowProblem(n, "user_input", f"differs between {sa} and {sb}", str(qid))
                )
                continue
            rows.append(_row(a, b.text("response"), sa, sb, str(qid), len(systems) > 2))
    if problems:
        raise InvalidDataError(problems, source="the systems' answers")
    if not rows:
        raise ValueError(
            "no two systems answered a question with the same id: pairwise matches answers by id"
        )
    return rows


def _row(a: Sample, b: str, sa: str, sb: str, qid: str, many: bool) -> dict[str, Any]:
    row = a.model_dump(exclude_none=True, exclude={"metadata", "id"})
    meta = {RESPONSE_B: b, SYSTEM_A: sa, SYSTEM_B: sb, QUESTION: qid}
    return {**row, "id": f"{qid}|{sa}|{sb}" if many else qid, "metadata": meta}


def file_rows(path: str | Path, *, human: str | None = None) -> list[dict[str, Any]]:
    """The pairwise rows of one file holding both answers (``response_a`` or ``response``, and
    ``response_b``), with people's verdicts from the column `human` when given."""
    loaded = load_samples(path)
    problems = list(loaded.problems)
    rows = []
    for n, (s, sid) in enumerate(zip(loaded.samples, sample_ids(loaded.samples), strict=True)):
        if s is None:
            continue
        meta = dict(s.metadata)
        a = meta.pop("response_a", None)
        if a is not None and s.response is not None:
            problems.append(RowProblem(n, "response_a", "give response_a or response, not both"))
        a = s.response if a is None else a
        for field, value in (("response_a", a), (RESPONSE_B, meta.get(RESPONSE_B))):
            if not isinstance(value, str):
                problems.append(RowProblem(n, field, "needs a text (each pair has two answers)"))
        verdict = None
        if human is not None:
            verdict, why = _human_verdict(meta.pop(human, None))
            if why:
                problems.append(RowProblem(n, human, why, sid))
        row = s.model_dump(exclude_none=True, exclude={"metadata", "id", "response"})
        extra = {SYSTEM_A: "A", SYSTEM_B: "B", QUESTION: sid, HUMAN: verdict}
        rows.append({**row, "id": sid, "response": a, "metadata": {**meta, **extra}})
    if problems:
        raise InvalidDataError(problems, source=loaded.source)
    if human is not None and not any(r["metadata"][HUMAN] for r in rows):
        raise ValueError(f"the column {human!r} holds no verdict (a, b or tie) on any row")
    return rows


def _human_verdict(value: Any) -> tuple[str | None, str | None]:
    """A person's verdict (a, b or tie, any case) or None when blank; else why it is not one."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, None
    found = str(value).strip().lower()
    if found in _VERDICTS:
        return found, None
    return None, f"a verdict is a, b or tie (or blank), got {value!r}"


def pairwise_report(
    run_dir: str | Path,
    criterion: str,
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> PairwiseReport:
    """What the verdicts of the pairwise run in `run_dir` add up to, written there as
    ``pairwise.json``: per pair of systems the win rate of B (ties half) with its bootstrap
    interval, the flips and the sign test; with three systems or more, their Bradley–Terry
    strengths (questions resampled together); with people's verdicts, the agreement with them
    and the PPI++ win rate. report.html is written again, with them."""
    by_pair: dict[tuple[str, str], list[tuple[str, str | None, bool | None, str | None]]] = {}
    for line in {e.line.id: e.line for e in read_lines(Path(run_dir) / RESULTS_FILE)}.values():
        meta = line.inputs.metadata or {}
        cell = line.cells.get("pairwise")
        ev = cell.evidence if cell is not None else None
        judged = ev if isinstance(ev, PairwiseEvidence) else None
        key = (str(meta.get(SYSTEM_A, "A")), str(meta.get(SYSTEM_B, "B")))
        by_pair.setdefault(key, []).append(
            (
                str(meta.get(QUESTION, line.id)),
                judged.winner if judged else None,
                judged.flip if judged else None,
                meta.get(HUMAN),
            )
        )
    kw: dict[str, Any] = {"confidence": confidence, "n_resamples": n_resamples, "seed": seed}
    pairs, human, comparisons, groups = [], [], [], []
    for (sa, sb), rows in by_pair.items():
        measured = [(q, w, f) for q, w, f, _ in rows if w is not None]
        s = pairwise_summary([w for _, w, _ in measured], [bool(f) for *_, f in measured], **kw)
        pairs.append(
            SystemPair(
                system_a=sa,
                system_b=sb,
                n=s.n,
                wins_a=s.wins_a,
                wins_b=s.wins_b,
                ties=s.ties,
                win_rate=_interval(s.win_rate),
                flips=s.flips,
                flip_rate=_interval(s.flip_rate),
                sign_test_p=s.sign_test_p,
                not_measured=len(rows) - len(measured),
            )
        )
        comparisons += [(sa, sb, w) for _, w, _ in measured]
        groups += [q for q, _, _ in measured]
        if any(h for *_, h in rows):
            h = human_preferences([w for _, w, _, _ in rows], [h for *_, h in rows], **kw)
            human.append(
                HumanAgreement(
                    system_a=sa,
                    system_b=sb,
                    n_labelled=h.n_labelled,
                    agreement=_interval(h.agreement),
                    ppi_win_rate=_ppi(h.win_rate, classical=False),
                    labelled_win_rate=_ppi(h.win_rate, classical=True),
                )
            )
    systems = {s for pair in by_pair for s in pair}
    report = PairwiseReport(
        criterion=criterion,
        confidence=confidence,
        method=f"percentile bootstrap over the pairs, {n_resamples} resamples, seed {seed}; "
        "sign test: two-sided exact binomial on the pairs with a winner",
        pairs=pairs,
        human=human or None,
    )
    if len(systems) > 2 and comparisons:
        bt = bradley_terry(comparisons, groups, **{**kw, "n_resamples": min(n_resamples, 1000)})
        report.strengths = [
            SystemStrength(
                system=x.system,
                strength=Interval(value=x.strength, low=x.low, high=x.high),
                wins=x.wins,
                losses=x.losses,
                ties=x.ties,
                opponents=x.opponents,
            )
            for x in bt.strengths
        ]
        report.strengths_method = bt.method
    write_atomic(Path(run_dir) / PAIRWISE_FILE, report)
    _write_report(RunDir(run_dir))  # again, now with pairwise.json
    return report


def _interval(ci: ConfidenceInterval) -> Interval:
    return Interval(value=ci.mean, low=ci.low, high=ci.high, why=ci.undefined)


def _ppi(e: PPIEstimate, *, classical: bool) -> Interval:
    if classical:
        return Interval(value=e.classical_mean, low=e.classical_low, high=e.classical_high)
    return Interval(value=e.mean, low=e.low, high=e.high)
