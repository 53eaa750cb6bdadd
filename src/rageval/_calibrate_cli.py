"""The `rageval calibrate` command: a judge's agreement with human labels, and its gate.

Its own module so that the command line's main module stays about running evaluations; like
it, only the standard library is imported before the command runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rageval.calibration.datasets import DATASETS

if TYPE_CHECKING:
    from rageval.calibration.datasets import LabelledSet

_DESCRIPTION = """\
Score rows that carry human labels with the judge's metrics, and measure how well each metric
agrees with the people: Cohen's kappa (weighted for ordinal labels), balanced accuracy and
AUROC for binary labels, Spearman, the confusion matrix, each with a bootstrap 95% CI, and the
cost of the run. Writes the run directory with calibration.json and a calibration section in
report.html. Exit 4 when --min-kappa is not met."""


def add_calibrate_command(
    sub: Any, add_judge_options: Callable[[argparse.ArgumentParser], None]
) -> None:
    """Add `calibrate` to the subcommands `sub`; `add_judge_options` adds the judge,
    embeddings and run-directory options every scoring command shares."""
    cal = sub.add_parser(
        "calibrate",
        help="agreement of the judge's metrics with human labels (kappa, AUROC, Spearman)",
        description=_DESCRIPTION,
    )
    from rageval.cli import _add_pairs_option  # options never eat DATA

    cal.add_argument(
        "data",
        metavar="DATA",
        nargs="?",
        help="data file whose label columns hold human labels; with --dataset, the folder "
        "(or file) of a public labelled dataset",
    )
    _add_pairs_option(
        cal,
        "--labels",
        metavar="COLUMN=METRIC",
        help="a label column and the metric it validates (repeat for more pairs; one column "
        "may validate several metrics)",
    )
    cal.add_argument(
        "--dataset",
        metavar="NAME",
        help=f"read DATA as a public dataset: {', '.join(DATASETS)} (default --labels: its "
        "label column against the metric it validates most closely)",
    )
    cal.add_argument(
        "--limit",
        type=_positive_int,
        metavar="N",
        help="with --dataset: a random sample of N rows (the same every time)",
    )
    _add_pairs_option(
        cal,
        "--label-kind",
        metavar="COLUMN=KIND",
        help="binary, ordinal or continuous (default: inferred from the values)",
    )
    cal.add_argument(
        "--threshold",
        type=float,
        default=0.5,
        metavar="X",
        help="binary labels: a judge score >= X counts as 1 (default 0.5)",
    )
    cal.add_argument(
        "--kappa-weights",
        choices=("linear", "quadratic"),
        default="quadratic",
        help="weights of the weighted kappa of ordinal labels (default quadratic)",
    )
    cal.add_argument(
        "--min-kappa",
        type=float,
        metavar="K",
        help="exit 4 unless every agreement with a kappa (binary, ordinal labels) reaches K",
    )
    add_judge_options(cal)
    cal.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    cal.set_defaults(func=run_calibrate)


def _positive_int(text: str) -> int:
    from rageval.cli import _positive_int as positive

    return positive(text)


def read_dataset(name: str, path: str, limit: int | None) -> LabelledSet:
    """`--dataset NAME` with DATA at `path`: the public dataset's rows (with `limit`, its
    seeded random sample of that many), its origin and what was left out printed."""
    from rageval.calibration.datasets import DatasetError, load_dataset
    from rageval.cli import _UsageError

    try:
        dataset = load_dataset(name, path)
    except DatasetError as e:
        raise _UsageError(str(e)) from None
    if limit is not None:
        dataset = dataset.sample(limit)
    left_out = ", ".join(f"{n} {why}" for why, n in dataset.left_out.items())
    print(
        f"{dataset.name}: {len(dataset.rows)} rows from {dataset.source} "
        f"(licence: {dataset.licence})" + (f"; left out: {left_out}" if left_out else "")
    )
    return dataset


def label_kinds(args: argparse.Namespace) -> dict[str, Any]:
    """`--label-kind COLUMN=KIND` (calibrate and align), each kind checked."""
    from rageval.cli import _pairs, _UsageError
    from rageval.labels import LABEL_KINDS

    kinds: dict[str, Any] = {}
    for column, kind in _pairs(args.label_kind, "--label-kind"):
        if kind not in LABEL_KINDS:
            raise _UsageError(f"--label-kind {column}={kind}: the kind is one of {LABEL_KINDS}")
        kinds[column] = kind
    return kinds


def run_calibrate(args: argparse.Namespace) -> int:
    from rageval.cli import (
        EXIT_CALIBRATION_GATE,
        EXIT_FATAL,
        EXIT_IN_USE,
        EXIT_INTERRUPTED,
        EXIT_OK,
        _err,
        _fresh_run_dir,
        _judge_and_embeddings,
        _pairs,
        _positional_data,
        _UsageError,
    )
    from rageval.judge import FatalJudgeError
    from rageval.runner import RunConfigError, RunDirError, RunDirInUseError, calibrate
    from rageval.samples import InvalidDataError

    labels = _pairs(args.labels, "--labels")
    kinds = label_kinds(args)
    if args.min_kappa is not None and not -1.0 <= args.min_kappa <= 1.0:
        raise _UsageError(f"--min-kappa must be between -1 and 1, got {args.min_kappa}")
    data: Any = _positional_data(args)
    if data is None:
        raise _UsageError("DATA is required (a data file, or with --dataset its folder)")
    if args.dataset is not None:
        dataset = read_dataset(args.dataset, data, args.limit)
        data = dataset.rows
        labels = labels or dataset.labels()
    elif args.limit is not None:
        raise _UsageError("--limit samples a public dataset: use it with --dataset")
    if not labels:
        raise _UsageError("name the label columns: --labels COLUMN=METRIC (or use --dataset)")
    run_dir = Path(args.output or _fresh_run_dir())
    judge, embeddings = _judge_and_embeddings(args)
    try:
        report = calibrate(
            data,
            labels,
            llm=judge,
            embeddings=embeddings,
            label_kinds=kinds or None,
            threshold=args.threshold,
            kappa_weights=args.kappa_weights,
            min_kappa=args.min_kappa,
            column_map=dict(_pairs(args.column_map, "--column-map")) or None,
            on_invalid="skip" if args.skip_invalid else "raise",
            run_dir=run_dir,
            progress=False if args.quiet else None,
        )
    except RunDirInUseError as e:
        _err(str(e))
        return EXIT_IN_USE
    except (InvalidDataError, RunConfigError, RunDirError, FileNotFoundError) as e:
        raise _UsageError(str(e)) from None
    except FatalJudgeError as e:
        _err(f"the judge endpoint refused: {e}")
        return EXIT_FATAL
    except KeyboardInterrupt:
        _err(f"interrupted; finished rows are kept in {run_dir}")
        return EXIT_INTERRUPTED
    print(report.table())
    report_file = run_dir / "report.html"
    print(
        f"\nrun directory: {run_dir}  (calibration.json"
        + (f", report: {report_file})" if report_file.exists() else ")")
    )
    if report.min_kappa is None:
        return EXIT_OK
    for line in report.gate_failures:
        _err(f"kappa gate failed: {line}")
    if report.gate_failures:
        return EXIT_CALIBRATION_GATE
    print(f"kappa gate passed: every kappa >= {report.min_kappa}")
    return EXIT_OK
