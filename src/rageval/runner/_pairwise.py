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

In Python: :func:`pairwise` / :func:`apairwise` (``rageval.pairwise``), which the command line
calls too.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rageval._env import judge_model
from rageval._rundir_lock import one_writer
from rageval._sync import synchronous
from rageval.errors import RunConfigError
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
from rageval.metrics.pairwise import (
    DEFAULT_ASK,
    DEFAULT_WINNER_FROM,
    RESPONSE_B,
    Ask,
    Criterion,
    WinnerFrom,
)
from rageval.runner._evaluate import _write_report, aevaluate
from rageval.runner._prepare import OnInvalid
from rageval.runner._runconfig import (
    RunConfig,
    RunKeywords,
    refuse_unknown_keywords,
    run_config,
)
from rageval.runner._rundir import RunDir
from rageval.samples import InvalidDataError, RowProblem, Sample, load_samples, sample_ids
from rageval.stats import (
    ConfidenceInterval,
    PPIEstimate,
    bradley_terry,
    human_preferences,
    pairwise_summary,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from rageval.judge import Judge
    from rageval.results import EvaluationResult
    from rageval.runner._panel import Panel

#: the metadata keys a pairwise row carries beside answer B
SYSTEM_A, SYSTEM_B, QUESTION, HUMAN = "system_a", "system_b", "question_id", "human_winner"
_VERDICTS = ("a", "b", "tie")


def read_answers(source: Any, column_map: Mapping[str, str] | None = None) -> list[Sample]:
    """The samples of a run directory (its finished rows), a data file or anything else
    :func:`rageval.load_samples` reads (with `column_map`), each with its id (a row without
    one: ``row-N``); bad rows raise InvalidDataError naming row and field."""
    if isinstance(source, (str, os.PathLike)) and (Path(source) / RESULTS_FILE).is_file():
        path = Path(source)
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
    loaded = load_samples(source, column_map=column_map)
    if loaded.problems:
        raise InvalidDataError(loaded.problems, source=loaded.source)
    ids = sample_ids(loaded.samples)
    return [s.model_copy(update={"id": i}) for s, i in zip(loaded.samples, ids, strict=True) if s]


def system_rows(systems: Mapping[str, Sequence[Sample]]) -> list[dict[str, Any]]:
    """A pairwise row for each two systems (in the order given) and each id both answered:
    A's question, reference and contexts, A's response and B's as ``response_b``. With two
    systems a row's id is the question's; with more, ``<id>|<system A>|<system B>``."""
    if len(systems) < 2:
        raise RunConfigError("pairwise compares at least two systems")
    by_id = {name: {s.id: s for s in samples} for name, samples in systems.items()}
    rows: list[dict[str, Any]] = []
    problems: list[RowProblem] = []
    for sa, sb in itertools.combinations(systems, 2):
        for qid, a in by_id[sa].items():
            b = by_id[sb].get(qid)
            if b is None:
                continue
            if a.text("user_input").strip() != b.text("user_input").strip():
                # located by its id, which both systems' rows have (each at a line of its own)
                problems.append(
                    RowProblem(None, "user_input", f"differs between {sa} and {sb}", str(qid))
                )
                continue
            rows.append(_row(a, b.text("response"), sa, sb, str(qid), len(systems) > 2))
    if problems:
        raise InvalidDataError(problems, source="the systems' answers")
    if not rows:
        raise InvalidDataError(
            [RowProblem(None, "id", "no two systems answered a question with the same id")],
            source="the systems' answers (pairwise matches answers by id)",
        )
    return rows


def _row(a: Sample, b: str, sa: str, sb: str, qid: str, many: bool) -> dict[str, Any]:
    row = a.model_dump(exclude_none=True, exclude={"metadata", "id"})
    meta = {RESPONSE_B: b, SYSTEM_A: sa, SYSTEM_B: sb, QUESTION: qid}
    return {**row, "id": f"{qid}|{sa}|{sb}" if many else qid, "metadata": meta}


def file_rows(
    data: Any, *, human: str | None = None, column_map: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The pairwise rows of one file (or rows, as :func:`rageval.load_samples` reads them,
    with `column_map`) holding both answers (``response_a`` or ``response``, and
    ``response_b``), with people's verdicts from the column `human` when given."""
    loaded = load_samples(data, column_map=column_map)
    problems = list(loaded.problems)
    rows = []
    for n, (s, sid) in enumerate(zip(loaded.samples, sample_ids(loaded.samples), strict=True)):
        if s is None:
            continue

        def problem(field: str, why: str, n: int = n, sid: str = sid) -> RowProblem:
            # where load_samples puts a row's problems: its line in a line-based file
            return RowProblem(n, field, why, sid, line=loaded.line(n))

        meta = dict(s.metadata)
        a = meta.pop("response_a", None)
        if a is not None and s.response is not None:
            problems.append(problem("response_a", "give response_a or response, not both"))
        a = s.response if a is None else a
        for field, value in (("response_a", a), (RESPONSE_B, meta.get(RESPONSE_B))):
            if not isinstance(value, str):
                problems.append(problem(field, "needs a text (each pair has two answers)"))
        verdict = None
        if human is not None:
            verdict, why = _human_verdict(meta.pop(human, None))
            if why:
                problems.append(problem(human, why))
        row = s.model_dump(exclude_none=True, exclude={"metadata", "id", "response"})
        extra = {SYSTEM_A: "A", SYSTEM_B: "B", QUESTION: sid, HUMAN: verdict}
        rows.append({**row, "id": sid, "response": a, "metadata": {**meta, **extra}})
    if problems:
        raise InvalidDataError(problems, source=loaded.source)
    if human is not None and not any(r["metadata"][HUMAN] for r in rows):
        why = (
            "holds no verdict (a, b or tie) on any row"
            if human in loaded.columns
            else f"is not a column of the data (its columns: {', '.join(loaded.columns)})"
        )
        raise InvalidDataError([RowProblem(None, human, why)], source=loaded.source)
    return rows


def pair_rows(
    data: Any, *, human: str | None = None, column_map: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The pairwise rows of `data`: a mapping of systems' names to their answers (each a run
    directory, a data file or rows: :func:`system_rows`), or one source whose rows hold both
    answers (:func:`file_rows`, with people's verdicts from the column `human`); a data
    file's or rows' columns renamed by `column_map`."""
    if isinstance(data, Mapping):
        if set(data) & {*Sample.model_fields, "response_a", RESPONSE_B}:
            raise RunConfigError(
                "a dict maps system names to their answers (a run directory, a data file or "
                "rows), e.g. {'rag': 'rag.jsonl', 'baseline': 'baseline.jsonl'}; rows go in a "
                f"list: pairwise([row, ...]) (got a dict with {', '.join(map(str, data))})"
            )
        if human is not None:
            raise RunConfigError(
                "people's verdicts (human=) are a column of the one-source form "
                "(response_a / response_b), not of several systems"
            )
        return system_rows({str(name): read_answers(src, column_map) for name, src in data.items()})
    return file_rows(data, human=human, column_map=column_map)


def _human_verdict(value: Any) -> tuple[str | None, str | None]:
    """A person's verdict (a, b or tie, any case) or None when blank; else why it is not one."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, None
    found = str(value).strip().lower()
    if found in _VERDICTS:
        return found, None
    return None, f"a verdict is a, b or tie (or blank), got {value!r}"


@one_writer  # held from the run to pairwise.json and the report
async def apairwise(
    data: Any,
    llm: Judge | str | Sequence[Judge] | Panel | None = None,
    *,
    criterion: Criterion = "correctness",
    rubric: str | None = None,
    winner_from: WinnerFrom = DEFAULT_WINNER_FROM,
    ask: Ask = DEFAULT_ASK,
    human: str | None = None,
    metric_params: Mapping[str, Any] | None = None,
    column_map: Mapping[str, str] | None = None,
    on_invalid: OnInvalid | None = None,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    config: RunConfig | None = None,
    **run: Unpack[RunKeywords],
) -> PairwiseReport:
    """Judge which of two answers to each question is better, each pair asked in both orders,
    and add the verdicts up; see the module docstring and docs/pairwise.md.

    Args:
        data: the systems' answers to the same questions, matched by id: a mapping of each
            system's name to its answers (a run directory, a data file, or rows as
            :func:`rageval.load_samples` reads them); or one source whose rows hold both
            answers, ``response_a`` (or ``response``) and ``response_b``. None resuming a run
            (``resume=True``): its own pairs.
        llm: the judge, as :func:`rageval.evaluate` takes it.
        criterion: what "better" means: ``correctness`` (with the reference when there is
            one), ``completeness``, ``faithfulness`` (to the retrieved contexts) or
            ``rubric`` (the words in `rubric`).
        rubric: with ``criterion="rubric"``, what to judge by.
        winner_from: a pair's winner from the judge's log-probabilities averaged over both
            orders (``probabilities``, the default) or from both orders' written
            ``verdicts`` (differing ones: a tie); see :func:`rageval.metrics.pairwise.combine`.
        ask: what each request asks: a verdict on ``each`` answer judged on its own (the
            default) or ``which`` answer is better.
        human: the one-source form: a column of people's verdicts (a, b or tie; blank where
            nobody judged), for the judge's agreement with them and the PPI++ win rate.
        metric_params: the pairwise metric's other constructor arguments.
        column_map: your column -> rageval's field, for the data files and rows (a run
            directory's are rageval's already).
        on_invalid: as :func:`rageval.evaluate`'s.
        confidence: the level of the intervals.
        n_resamples: the bootstraps' resamples.
        seed: the bootstraps' seed.
        config: how the run executes, one :class:`~rageval.runner.RunConfig`, as
            :func:`rageval.evaluate` takes it; with `run_dir` the run directory also gets
            ``pairwise.json`` and a pairwise section in its report.
        **run: the RunConfig's fields as keywords, instead of `config`.

    Returns:
        The win rate of B over A per pair of systems (ties half), the flips, the sign test;
        Bradley–Terry strengths with three systems or more; the agreement with people.
    """
    refuse_unknown_keywords(apairwise, run)
    config = run_config(config, run)
    if llm is None and judge_model(None) is None and not config.resume:
        raise RunConfigError(
            "pairwise needs a judge: pass llm= (a Judge or a model name) or set RAGEVAL_LLM"
        )
    rows: list[dict[str, Any]] | None = None
    params: dict[str, dict[str, Any]] | None = None
    if data is None:
        if not config.resume:
            raise RunConfigError("data=None goes only with resume=True (the run's own pairs)")
    else:
        named = {"criterion", "rubric", "winner_from", "ask"} & set(metric_params or {})
        if named:
            raise RunConfigError(f"give {', '.join(sorted(named))} as keywords of pairwise()")
        rows = pair_rows(data, human=human, column_map=column_map)
        chosen = {"criterion": criterion, "winner_from": winner_from, "ask": ask}
        params = {"pairwise": {**(metric_params or {}), **chosen}}
        if rubric is not None:
            params["pairwise"]["rubric"] = rubric
    result = await aevaluate(
        rows,
        metrics=None if rows is None else ["pairwise"],
        llm=llm,
        metric_params=params,
        on_invalid=on_invalid,
        config=config,
    )
    report = pairwise_report(
        result, criterion, confidence=confidence, n_resamples=n_resamples, seed=seed
    )
    if config.run_dir is not None:
        write_atomic(config.run_dir / PAIRWISE_FILE, report)
        _write_report(RunDir(config.run_dir))  # again, now with pairwise.json
    return report


pairwise = synchronous(
    apairwise,
    "pairwise",
    """Synchronous :func:`apairwise`. Inside a running event loop (Jupyter) it runs on a
    private loop in a worker thread.""",
)


def pairwise_report(
    result: EvaluationResult,
    criterion: str = "correctness",
    *,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> PairwiseReport:
    """What the verdicts of a pairwise run add up to: per pair of systems the win rate of B
    (ties half) with its bootstrap interval, the flips and the sign test; with three systems
    or more, their Bradley–Terry strengths (questions resampled together); with people's
    verdicts, the agreement with them and the PPI++ win rate. The criterion is the one the
    cells' evidence names (`criterion` when no pair was judged)."""
    by_pair: dict[tuple[str, str], list[tuple[str, str | None, bool | None, str | None]]] = {}
    for sid, sample, cell in zip(result.ids, result.samples, result.cells("pairwise"), strict=True):
        if cell is None or sample is None:  # not finished
            continue
        meta = sample.metadata
        judged = cell.evidence if isinstance(cell.evidence, PairwiseEvidence) else None
        criterion = judged.criterion if judged else criterion
        key = (str(meta.get(SYSTEM_A, "A")), str(meta.get(SYSTEM_B, "B")))
        by_pair.setdefault(key, []).append(
            (
                str(meta.get(QUESTION, sid)),
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
    return report


def _interval(ci: ConfidenceInterval) -> Interval:
    return Interval(value=ci.mean, low=ci.low, high=ci.high, why=ci.undefined)


def _ppi(e: PPIEstimate, *, classical: bool) -> Interval:
    if classical:
        return Interval(value=e.classical_mean, low=e.classical_low, high=e.classical_high)
    return Interval(value=e.mean, low=e.low, high=e.high)
