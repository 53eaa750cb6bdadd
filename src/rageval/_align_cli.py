"""The `rageval align` command: choose, on training rows, the configuration of a judge metric
that agrees best with people's labels, and report the gain on held-out rows.

Its own module, like `rageval calibrate`'s; only the standard library is imported before the
command runs.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

_DESCRIPTION = """\
Split the rows that carry a human label into training and held-out rows (stratified by label,
--split, --seed). On the training rows, try a few configurations of each judge metric -- the
decision threshold (free: the same scores), guideline text (--instructions, and the metric's
own lenient and strict variants), labelled examples in the prompt (--shots), reasoning before
the verdict or not -- and keep what agrees best with the people (Cohen's kappa; weighted for
ordinal labels). Then score the held-out rows with the metric as configured and as chosen, and
report kappa, balanced accuracy and AUROC before and after, with bootstrap 95% CIs and the
paired change. Writes align.json, the chosen configuration as aligned.toml ([params.METRIC],
for --config or rageval.toml) and both held-out runs. The request cache makes a re-run free."""


def add_align_command(
    sub: Any, add_judge_options: Callable[[argparse.ArgumentParser], None]
) -> None:
    """Add `align` to the subcommands `sub`; `add_judge_options` adds the judge, embeddings
    and run-directory options every scoring command shares."""
    from rageval._calibrate_cli import _positive_int
    from rageval.calibration.datasets import DATASETS
    from rageval.cli import _add_pairs_option  # options never eat DATA

    cmd = sub.add_parser(
        "align",
        help="make a judge metric agree with human labels: threshold, guidelines, examples, "
        "reasoning chosen on training rows, kappa before/after on held-out rows",
        description=_DESCRIPTION,
    )
    cmd.add_argument(
        "data",
        metavar="DATA",
        nargs="?",
        help="data file whose label columns hold human labels; with --dataset, the folder "
        "(or file) of a public labelled dataset",
    )
    _add_pairs_option(
        cmd,
        "--labels",
        metavar="COLUMN=METRIC",
        help="a label column and the judge metric to align with it (repeat for other metrics)",
    )
    cmd.add_argument(
        "--dataset",
        metavar="NAME",
        help=f"read DATA as a public dataset: {', '.join(DATASETS)} (default --labels: its "
        "label column against the metric it validates most closely)",
    )
    cmd.add_argument(
        "--limit",
        type=_positive_int,
        metavar="N",
        help="a random sample of N labelled rows (the same every time; with --dataset the rows "
        "`calibrate --limit N` takes)",
    )
    cmd.add_argument(
        "--split",
        type=_share,
        default=0.5,
        metavar="X",
        help="the share of each label's rows that trains (default 0.5); the rest is held out",
    )
    cmd.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seed of the split and the examples"
    )
    cmd.add_argument(
        "--shots",
        type=_whole,
        default=4,
        metavar="K",
        help="labelled training rows shown as examples in the examples step (default 4; 0: "
        "no examples step)",
    )
    cmd.add_argument(
        "--instructions",
        action="append",
        default=[],
        metavar="TEXT",
        help="a guideline text to try besides the metric's own variants (repeat for more)",
    )
    cmd.add_argument(
        "--search",
        type=_steps,
        default=None,
        metavar="STEPS",
        help="what to try, comma-separated: threshold, instructions, examples, reasons "
        "(default: all)",
    )
    cmd.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="METRIC.PARAM=VALUE",
        help="a metric's constructor argument: the configuration the search starts from (as "
        "`evaluate -p`; the config file's [params.METRIC] too)",
    )
    _add_pairs_option(
        cmd,
        "--label-kind",
        metavar="COLUMN=KIND",
        help="binary or ordinal (default: inferred from the values)",
    )
    cmd.add_argument(
        "--threshold",
        type=float,
        default=0.5,
        metavar="X",
        help="binary labels: the decision threshold of the metric as configured (default 0.5)",
    )
    cmd.add_argument(
        "--kappa-weights",
        choices=("linear", "quadratic"),
        default="quadratic",
        help="weights of the weighted kappa of ordinal labels (default quadratic)",
    )
    add_judge_options(cmd)
    cmd.add_argument(
        "--overwrite", action="store_true", help="replace an alignment already in the -o DIR"
    )
    cmd.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    cmd.set_defaults(func=run_align)


def _share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _whole(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _steps(text: str) -> list[str]:
    from rageval.runner._align import SEARCH_STEPS

    steps = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in steps if s not in SEARCH_STEPS]
    if unknown or not steps:
        raise argparse.ArgumentTypeError(f"steps are {', '.join(SEARCH_STEPS)}; got {text!r}")
    return steps


def run_align(args: argparse.Namespace) -> int:
    from rageval._calibrate_cli import label_kinds, read_dataset
    from rageval._config import merged_params, parse_params
    from rageval.cli import (
        EXIT_FATAL,
        EXIT_IN_USE,
        EXIT_INTERRUPTED,
        EXIT_OK,
        _check_param_names,
        _err,
        _fresh_run_dir,
        _judge_and_embeddings,
        _load_settings,
        _pairs,
        _positional_data,
        _UsageError,
    )
    from rageval.judge import FatalJudgeError
    from rageval.log import ALIGNED_CONFIG_FILE
    from rageval.runner import RunConfigError, RunDirError, RunDirInUseError, align
    from rageval.runner._align import SEARCH_STEPS
    from rageval.samples import InvalidDataError

    labels = _pairs(args.labels, "--labels")
    kinds = label_kinds(args)
    if not 0.0 <= args.threshold <= 1.0:
        raise _UsageError(f"--threshold must be between 0 and 1, got {args.threshold}")
    data: Any = _positional_data(args)
    if data is None:
        raise _UsageError("DATA is required (a data file, or with --dataset its folder)")
    limit = args.limit
    if args.dataset is not None:
        dataset = read_dataset(args.dataset, data, limit)
        data, limit = dataset.rows, None
        labels = labels or dataset.labels()
    if not labels:
        raise _UsageError("name the label columns: --labels COLUMN=METRIC (or use --dataset)")
    try:
        settings = _load_settings(args.config)
        cli_params = parse_params(args.param)
    except ValueError as e:  # a bad config file or -p
        raise _UsageError(str(e)) from None
    _check_param_names(cli_params, [metric for _, metric in labels])
    run_dir = Path(args.output or _fresh_run_dir())
    judge, embeddings = _judge_and_embeddings(args, settings)
    try:
        report = align(
            data,
            labels,
            llm=judge,
            embeddings=embeddings,
            split=args.split,
            seed=args.seed,
            limit=limit,
            shots=args.shots,
            instructions=args.instructions,
            search=args.search or SEARCH_STEPS,
            metric_params=merged_params(settings.params, cli_params) or None,
            label_kinds=kinds or None,
            threshold=args.threshold,
            kappa_weights=args.kappa_weights,
            column_map=dict(_pairs(args.column_map, "--column-map")) or settings.column_map,
            on_invalid="skip" if args.skip_invalid else "raise",
            run_dir=run_dir,
            overwrite=args.overwrite,
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
        _err(
            "interrupted; the requests made so far are in the request cache (a re-run reuses them)"
        )
        return EXIT_INTERRUPTED
    print(report.table())
    config = run_dir / ALIGNED_CONFIG_FILE
    print(f"\nrun directory: {run_dir}  (align.json, the held-out runs)")
    print(f"the chosen configuration: {config}  (rageval evaluate DATA --config {config})")
    options = report.param_options()
    if options:
        print("or on the command line:\n  " + " \\\n  ".join(options))
    return EXIT_OK
