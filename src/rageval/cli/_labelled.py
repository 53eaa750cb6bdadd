"""What `rageval calibrate` and `rageval align` share: rows that carry people's labels (a data
file and its --labels, or a public dataset), how the labels are read, and how a run on them
fails."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from rageval.cli._exit_codes import EXIT_BUDGET, EXIT_FATAL, EXIT_IN_USE, EXIT_INTERRUPTED
from rageval.cli._shared import (
    CommandRunArguments,
    _UsageError,
    add_labels_file_option,
    add_pairs_option,
    add_run_options,
    add_threshold_option,
    err,
    name_value_pairs,
    positional_data,
    positive_int,
    read_run_options,
    run_dir_of,
    with_labels_file,
)

if TYPE_CHECKING:
    from rageval.calibration.datasets import LabelledSet
    from rageval.labels import LabelKind

R = TypeVar("R")


def add_labelled_options(
    cmd: argparse.ArgumentParser,
    *,
    labels_help: str,
    limit_help: str,
    label_kind_help: str,
    threshold_help: str,
    param_help: str,
) -> None:
    """The options of a command that runs on labelled rows: DATA and where its labels are
    (--labels, --dataset, --limit), how they are read (--label-kind, --threshold,
    --kappa-weights), the metrics' -p, the judge and how the run executes (as `evaluate`
    takes them: the budget, batch mode, observers, engine...); the help of those the commands
    use differently is theirs."""
    from rageval.calibration.datasets import DATASETS

    cmd.add_argument(
        "data",
        metavar="DATA",
        nargs="?",
        help="data file whose label columns hold human labels; with --dataset, the folder "
        "(or file) of a public labelled dataset",
    )
    add_pairs_option(cmd, "--labels", metavar="COLUMN=METRIC", help=labels_help)
    cmd.add_argument(
        "--dataset",
        metavar="NAME",
        help=f"read DATA as a public dataset: {', '.join(DATASETS)} (default --labels: its "
        "label column against the metric it validates most closely)",
    )
    cmd.add_argument("--limit", type=positive_int, metavar="N", help=limit_help)
    add_labels_file_option(cmd)
    add_pairs_option(cmd, "--label-kind", metavar="COLUMN=KIND", help=label_kind_help)
    add_threshold_option(cmd, threshold_help)
    cmd.add_argument(
        "--kappa-weights",
        choices=("linear", "quadratic"),
        default="quadratic",
        help="weights of the weighted kappa of ordinal labels (default quadratic)",
    )
    add_run_options(cmd, param_help=param_help)


@dataclass(frozen=True)
class LabelledData:
    """The rows and labels of the options :func:`add_labelled_options` adds."""

    #: the data file's path, or the public dataset's rows
    data: Any
    #: (label column, metric) pairs
    labels: list[tuple[str, str]]
    #: --label-kind: the kind of each column named
    kinds: dict[str, LabelKind]
    #: --limit, unless the public dataset has already been cut to it
    limit: int | None


def _labelled_data(args: argparse.Namespace) -> LabelledData:
    """DATA (with --dataset, the public dataset's rows, cut to --limit) and its label pairs:
    --labels, else the dataset's own."""
    from rageval.labels import LABEL_KINDS

    labels = name_value_pairs(args.labels, "--labels")
    kinds: dict[str, LabelKind] = {}
    for column, kind in name_value_pairs(args.label_kind, "--label-kind"):
        known = [k for k in LABEL_KINDS if k == kind]
        if not known:
            raise _UsageError(f"--label-kind {column}={kind}: the kind is one of {LABEL_KINDS}")
        kinds[column] = known[0]
    data: Any = positional_data(args)
    if data is None:
        raise _UsageError("DATA is required (a data file, or with --dataset its folder)")
    limit = args.limit
    if args.dataset is not None and args.labels_file is not None:
        raise _UsageError("--labels-file labels a data file: use it without --dataset")
    data = with_labels_file(args, data)
    if args.dataset is not None:
        dataset = _read_dataset(args.dataset, data, limit)
        data, limit = dataset.rows, None
        labels = labels or dataset.labels()
    if not labels:
        raise _UsageError("name the label columns: --labels COLUMN=METRIC (or use --dataset)")
    return LabelledData(data, labels, kinds, limit)


def _read_dataset(name: str, path: str, limit: int | None) -> LabelledSet:
    """`--dataset NAME` with DATA at `path`: the public dataset's rows (with `limit`, its
    seeded random sample of that many), its origin and what was left out printed."""
    from rageval.calibration.datasets import DatasetError, load_dataset

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


class LabelledArguments(CommandRunArguments):
    """What `calibrate()` and `align()` take alike from their command's options, besides the
    rows and labels."""

    #: --label-kind (None: inferred)
    label_kinds: dict[str, LabelKind] | None
    threshold: float
    kappa_weights: Literal["linear", "quadratic"]


@dataclass(frozen=True)
class LabelledCommand:
    """What a labelled command read from its options."""

    labelled: LabelledData
    arguments: LabelledArguments
    #: -o DIR, else a fresh run directory (the RunConfig's)
    run_dir: Path


def read_labelled_command(args: argparse.Namespace) -> LabelledCommand:
    """The rows, labels and run arguments of the options :func:`add_labelled_options`
    added."""
    labelled = _labelled_data(args)
    run_dir = run_dir_of(args)
    arguments = LabelledArguments(
        **read_run_options(args, [metric for _, metric in labelled.labels], run_dir=run_dir),
        label_kinds=labelled.kinds or None,
        threshold=args.threshold,
        kappa_weights=args.kappa_weights,
    )
    return LabelledCommand(labelled, arguments, run_dir)


def run_on_labels(run: Callable[[], R], *, interrupted: str) -> R | int:
    """What `run` (a calibration or an alignment) returns, or the exit code of how it failed,
    said on stderr (`interrupted` after Ctrl-C); bad input is a usage error."""
    from rageval.errors import BudgetReached
    from rageval.judge import FatalJudgeError
    from rageval.runner import RunConfigError, RunDirError, RunDirInUseError
    from rageval.samples import InvalidDataError

    try:
        return run()
    except BudgetReached as e:
        err(
            f"stopped at the budget: ${e.spent_usd:.6f} spent of --max-cost "
            f"${e.max_cost_usd:.6f} (the next request could have passed it); the requests made "
            "so far are in the request cache, so a re-run with a larger --max-cost (or none) "
            "pays only for the rest"
        )
        return EXIT_BUDGET
    except RunDirInUseError as e:
        err(str(e))
        return EXIT_IN_USE
    except (InvalidDataError, RunConfigError, RunDirError, FileNotFoundError) as e:
        raise _UsageError(str(e)) from None
    except FatalJudgeError as e:
        # refused: it answered with an error status; else it could not be reached
        err(f"the judge endpoint refused: {e}" if e.status else str(e))
        return EXIT_FATAL
    except KeyboardInterrupt:
        err(interrupted)
        return EXIT_INTERRUPTED
