"""`rageval calibrate`: a judge's agreement with human labels, and its gate."""

from __future__ import annotations

import argparse
from typing import Any

from rageval.cli._exit_codes import EXIT_CALIBRATION_GATE, EXIT_OK
from rageval.cli._labelled import add_labelled_options, read_labelled_command, run_on_labels
from rageval.cli._shared import _UsageError, err, print_weighted_labels

_DESCRIPTION = """\
Score rows that carry human labels with the judge's metrics, and measure how well each metric
agrees with the people: Cohen's kappa (weighted for ordinal labels), balanced accuracy and
AUROC for binary labels, Spearman, the confusion matrix, each with a bootstrap 95% CI, and the
cost of the run. Writes the run directory with calibration.json and a calibration section in
report.html. Exit 4 when --min-kappa is not met."""


def add_calibrate_command(sub: Any) -> None:
    """Add `calibrate` to the subcommands `sub`."""
    cal = sub.add_parser(
        "calibrate",
        help="agreement of the judge's metrics with human labels (kappa, AUROC, Spearman)",
        description=_DESCRIPTION,
    )
    add_labelled_options(
        cal,
        labels_help="a label column and the metric it validates (repeat for more pairs; one "
        "column may validate several metrics)",
        limit_help="with --dataset: a random sample of N rows (the same every time)",
        label_kind_help="binary, ordinal or continuous (default: inferred from the values)",
        threshold_help="binary labels: a judge score >= X counts as 1 (default 0.5)",
        param_help="a metric's constructor argument, as `evaluate -p` (the config file's "
        "[params.METRIC] too): the agreement measured is that of the metric so configured, "
        "e.g. as `rageval align` chose it",
    )
    cal.add_argument(
        "--min-kappa",
        type=float,
        metavar="K",
        help="exit 4 unless every agreement with a kappa (binary, ordinal labels) reaches K",
    )
    cal.set_defaults(func=run_calibrate)


def run_calibrate(args: argparse.Namespace) -> int:
    from rageval.runner import calibrate

    if args.min_kappa is not None and not -1.0 <= args.min_kappa <= 1.0:
        raise _UsageError(f"--min-kappa must be between -1 and 1, got {args.min_kappa}")
    if args.limit is not None and args.dataset is None:
        raise _UsageError("--limit samples a public dataset: use it with --dataset")
    command = read_labelled_command(args)
    labelled, run_dir = command.labelled, command.run_dir
    report = run_on_labels(
        lambda: calibrate(
            labelled.data, labelled.labels, min_kappa=args.min_kappa, **command.arguments
        ),
        interrupted=f"interrupted; finished rows are kept in {run_dir}",
    )
    if isinstance(report, int):
        return report
    print(report.table())
    print_weighted_labels(args, run_dir, labelled.labels)
    report_file = run_dir / "report.html"
    print(
        f"\nrun directory: {run_dir}  (calibration.json"
        + (f", report: {report_file})" if report_file.exists() else ")")
    )
    if report.min_kappa is None:
        return EXIT_OK
    for line in report.gate_failures:
        err(f"kappa gate failed: {line}")
    if report.gate_failures:
        return EXIT_CALIBRATION_GATE
    print(f"kappa gate passed: every kappa >= {report.min_kappa}")
    return EXIT_OK
