"""`rageval align`: choose, on training rows, the configuration of a judge metric that agrees
best with people's labels, and report the gain on held-out rows."""

from __future__ import annotations

import argparse
from typing import Any

from rageval.cli._exit_codes import EXIT_OK
from rageval.cli._labelled import add_labelled_options, read_labelled_command, run_on_labels
from rageval.cli._shared import _UsageError, number, whole_number

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


def add_align_command(sub: Any) -> None:
    """Add `align` to the subcommands `sub`."""
    cmd = sub.add_parser(
        "align",
        help="make a judge metric agree with human labels: threshold, guidelines, examples, "
        "reasoning chosen on training rows, kappa before/after on held-out rows",
        description=_DESCRIPTION,
    )
    add_labelled_options(
        cmd,
        labels_help="a label column and the judge metric to align with it (repeat for other "
        "metrics)",
        limit_help="a random sample of N labelled rows (the same every time; with --dataset the "
        "rows `calibrate --limit N` takes)",
        label_kind_help="binary or ordinal (default: inferred from the values)",
        threshold_help="binary labels: the decision threshold of the metric as configured "
        "(default 0.5)",
        param_help="a metric's constructor argument: the configuration the search starts from "
        "(as `evaluate -p`; the config file's [params.METRIC] too)",
    )
    cmd.add_argument(
        "--split",
        type=number(0, 1),
        default=0.5,
        metavar="X",
        help="the share of each label's rows that trains (default 0.5); the rest is held out",
    )
    cmd.add_argument(
        "--seed", type=int, default=0, metavar="N", help="seed of the split and the examples"
    )
    cmd.add_argument(
        "--shots",
        type=whole_number(0),
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
    cmd.set_defaults(func=run_align)


def _steps(text: str) -> list[str]:
    from rageval.runner._align import SEARCH_STEPS

    steps = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in steps if s not in SEARCH_STEPS]
    if unknown or not steps:
        raise argparse.ArgumentTypeError(f"steps are {', '.join(SEARCH_STEPS)}; got {text!r}")
    return steps


def run_align(args: argparse.Namespace) -> int:
    from rageval.log import ALIGNED_CONFIG_FILE
    from rageval.runner import align
    from rageval.runner._align import SEARCH_STEPS

    if not 0.0 <= args.threshold <= 1.0:
        raise _UsageError(f"--threshold must be between 0 and 1, got {args.threshold}")
    command = read_labelled_command(args)
    labelled, run_dir = command.labelled, command.run_dir
    report = run_on_labels(
        lambda: align(
            labelled.data,
            labelled.labels,
            split=args.split,
            seed=args.seed,
            limit=labelled.limit,
            shots=args.shots,
            instructions=args.instructions,
            search=args.search or SEARCH_STEPS,
            **command.arguments,
        ),
        interrupted="interrupted; the requests made so far are in the request cache (a re-run "
        "reuses them)",
    )
    if isinstance(report, int):
        return report
    print(report.table())
    config = run_dir / ALIGNED_CONFIG_FILE
    print(f"\nrun directory: {run_dir}  (align.json, the held-out runs)")
    print(f"the chosen configuration: {config}  (rageval evaluate DATA --config {config})")
    options = report.param_options()
    if options:
        print("or on the command line:\n  " + " \\\n  ".join(options))
    return EXIT_OK
