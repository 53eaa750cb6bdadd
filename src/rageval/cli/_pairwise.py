"""`rageval pairwise`: two (or more) systems' answers to the same questions judged side by
side, each pair in both orders; the win rate, flips, sign test, Bradley–Terry strengths."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rageval.cli._exit_codes import EXIT_OK
from rageval.cli._labelled import run_on_labels
from rageval.cli._shared import (
    CommandRunArguments,
    _UsageError,
    add_run_options,
    command_settings,
    out,
    read_run_options,
    run_dir_of,
)

if TYPE_CHECKING:
    from rageval.log._pairwise import PairwiseReport

#: the pairwise metric's settings the command takes as options of its own
_SETTINGS = ("criterion", "rubric", "winner_from", "ask")

_DESCRIPTION = """\
Judge which of two answers to each question is better, asking the judge twice per pair (A
shown first, then B shown first) for a verdict on each answer; the winner is the answer more
probably right where it is shown first, and orders whose verdicts disagree count as a flip.
SOURCES are
two or more run directories or data files answering the same questions (matched by id; with
three or more, every two systems are compared and ranked by Bradley-Terry), or one data file
whose rows hold response_a and response_b. Prints B's win rate over A (ties half) with a
bootstrap 95% CI, the flip rate and a sign test; writes a run directory like `evaluate`
(resumable, cached, --max-cost) with pairwise.json."""


def add_pairwise_command(sub: Any) -> None:
    """Add `pairwise` to the subcommands `sub`."""
    pw = sub.add_parser(
        "pairwise",
        help="which of two systems' answers is better: win rate, flips, Bradley-Terry",
        description=_DESCRIPTION,
    )
    pw.add_argument(
        "sources",
        nargs="*",
        metavar="SOURCE",
        help="run directories or data files of the systems (two or more), or one file with "
        "response_a and response_b columns (none with --resume)",
    )
    pw.add_argument(
        "--criterion",
        choices=("correctness", "completeness", "faithfulness", "rubric"),
        default=None,
        help="what 'better' means (default correctness; faithfulness: to the retrieved "
        "contexts; rubric: your own words in --rubric)",
    )
    pw.add_argument(
        "--winner-from",
        choices=("verdicts", "probabilities"),
        default=None,
        help="a pair's winner: from the judge's log-probabilities (default; with --ask each the "
        "answer more probably right where it is shown first, a tie when the two are close; "
        "with --ask which the option most probable over both orders), or the verdicts of both "
        "orders (differing verdicts are a tie)",
    )
    pw.add_argument(
        "--ask",
        choices=("each", "which"),
        default=None,
        help="what each request asks: a verdict on each answer judged on its own (default), or "
        "which answer is better",
    )
    pw.add_argument("--rubric", metavar="TEXT", help="with --criterion rubric: what to judge by")
    pw.add_argument(
        "--human",
        metavar="COLUMN",
        help="one-file form: a column of people's verdicts (a, b or tie; blank where not "
        "judged): adds the judge's agreement with them and the PPI++ win rate",
    )
    pw.add_argument("--resume", metavar="DIR", help="continue the pairwise run in DIR")
    pw.add_argument(
        "--dry-run",
        action="store_true",
        help="validate, plan and price the run: send nothing, write nothing",
    )
    add_run_options(
        pw, param_help="the pairwise metric's constructor argument, e.g. pairwise.criterion=..."
    )
    pw.set_defaults(func=run_pairwise)


def run_pairwise(args: argparse.Namespace) -> int:
    from rageval.runner._stored import read_stored_run

    if args.resume and (args.sources or args.output or args.dry_run):
        raise _UsageError("--resume DIR continues a run: no SOURCE, -o or --dry-run")
    if args.resume and any(getattr(args, name) for name in (*_SETTINGS, "param")):
        raise _UsageError(
            "a resumed run keeps its metric's settings (see its manifest): no --criterion, "
            "--rubric, --winner-from, --ask or -p"
        )
    if not args.resume and not args.sources:
        raise _UsageError("give the SOURCEs to compare (or --resume DIR)")
    if args.human and len(args.sources) != 1:
        raise _UsageError("--human reads a column of the one-file form (response_a/response_b)")
    try:
        stored = read_stored_run(args.resume) if args.resume else None
    except ValueError as e:  # not a run directory
        raise _UsageError(str(e)) from None
    run_dir = Path(args.resume) if args.resume else run_dir_of(args)
    settings = command_settings(args)
    options = read_run_options(
        args,
        ["pairwise"],
        settings=settings,
        stored=stored,
        run_dir=run_dir,
        observe=not args.dry_run,
    )
    params = dict((options["metric_params"] or {}).get("pairwise", {}))
    for name in _SETTINGS:
        if getattr(args, name):
            params[name] = getattr(args, name)
    if args.dry_run:
        return _dry_run(args, params, options)
    source = None if stored is not None else _source(args)
    if options["llm"] is None:
        raise _UsageError("pairwise needs a judge: --llm MODEL (or $RAGEVAL_LLM)")
    if stored is not None and not any(name == "pairwise" for name, _, _ in stored.metrics):
        raise _UsageError(f"{run_dir} is not a pairwise run (it has no pairwise metric)")
    report = run_on_labels(
        lambda: _run(source, args.human, params, options),
        interrupted=f"interrupted; finished pairs are kept in {run_dir}; continue with "
        f"rageval pairwise --resume {run_dir}",
    )
    if isinstance(report, int):
        return report
    out(report.table())
    out(f"\nrun directory: {run_dir}  (pairwise.json, report.html)")
    return EXIT_OK


def _source(args: argparse.Namespace) -> str | dict[str, str]:
    """The one file holding both answers, or each system's source by its name."""
    if len(args.sources) == 1:
        return str(args.sources[0])
    return {_name(p, args.sources): p for p in args.sources}


def _name(path: str, every: list[str]) -> str:
    """A system's name: its file's or directory's name without suffix, or the path as given
    when two sources share that name."""
    stem = Path(path).stem
    same = [p for p in every if Path(p).stem == stem]
    if len(set(every)) != len(every):
        raise _UsageError(f"{path} is given twice")
    return stem if len(same) == 1 else path


def _run(
    source: str | dict[str, str] | None,
    human: str | None,
    params: dict[str, Any],
    options: CommandRunArguments,
) -> PairwiseReport:
    from rageval.runner._pairwise import pairwise

    chosen = {k: params.pop(k) for k in _SETTINGS if k in params}
    # resuming (no source): the run's own pairs and metric, with its parameters
    return pairwise(
        source,
        options["llm"],
        **(chosen if source is not None else {}),
        human=human,
        metric_params=params if source is not None and params else None,
        column_map=options["column_map"],
        on_invalid=options["on_invalid"],
        config=options["config"],
    )


def _dry_run(args: argparse.Namespace, params: dict[str, Any], options: CommandRunArguments) -> int:
    """The plan and price of the pairs of `args`' sources (a dry run never resumes)."""
    from rageval.runner import RunConfigError, estimate
    from rageval.runner._pairwise import pair_rows
    from rageval.samples import InvalidDataError

    try:
        rows = pair_rows(_source(args), human=args.human, column_map=options["column_map"])
        found = estimate(
            rows,
            ["pairwise"],
            options["llm"],
            options["embeddings"],
            metric_params={"pairwise": params} if params else None,
            on_invalid=options["on_invalid"],
        )
    except (InvalidDataError, RunConfigError, FileNotFoundError) as e:
        raise _UsageError(str(e)) from None
    out(found.table())
    return EXIT_OK
