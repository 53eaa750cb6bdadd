"""`rageval label`: a local page to label rows of a data file or a run directory."""

from __future__ import annotations

import argparse
import getpass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rageval.cli._exit_codes import EXIT_IN_USE, EXIT_OK
from rageval.cli._shared import (
    _UsageError,
    add_labels_file_option,
    add_threshold_option,
    err,
    out,
    positive_int,
)

if TYPE_CHECKING:
    from rageval.labelling import PlanRecord, Session

_DESCRIPTION = """\
Label rows one at a time in a web page served on 127.0.0.1 only (the URL printed carries a
random token; a request without it is refused). The page shows the question, contexts,
answer and reference, and from a run directory each metric's value and evidence. Keys: a
label's key (y/n or its digit), s skip, u undo, t write a note. Every label is appended to the
labels file and synced to disk at once; Ctrl-C (or kill -9, or a closed tab) loses nothing
written, and running the command again continues where it stopped. Rows come in the order
--order says: by default, from a run directory, where the judge is least certain (--order
uncertain: each row is chosen with a probability that mixes the judge's uncertainty with an
even share, the probability is recorded, and the page's judge-powered mean and kappa weigh
the labels by it, so they stay unbiased); from a data file, at random (a uniform sample at
every point, which calibrate, align and evaluate --human-labels take the labels for)."""


def add_label_command(sub: Any) -> None:
    """Add `label` to the subcommands `sub`."""
    cmd = sub.add_parser(
        "label", help="label rows in a local web page (127.0.0.1, token)", description=_DESCRIPTION
    )
    cmd.add_argument("data", metavar="DATA", help="a data file, or a run directory")
    add_labels_file_option(
        cmd,
        "where the labels go (default: DATA.labels.jsonl beside a data file, labels.jsonl in a "
        "run directory)",
    )
    cmd.add_argument(
        "--metric",
        metavar="NAME",
        help="from a run directory: the judge metric the labels check (default: its first)",
    )
    cmd.add_argument(
        "--column",
        metavar="NAME",
        help="the label column (default human_METRIC, or human)",
    )
    cmd.add_argument(
        "--order",
        choices=("file", "random", "uncertain"),
        help="which row next: file order, random (the default for a data file), or where the "
        "judge is least certain (uncertain: the default for a run directory; the PPI mean "
        "weighs each label by its row's probability: docs/labelling.md)",
    )
    cmd.add_argument(
        "--budget",
        type=positive_int,
        default=100,
        metavar="N",
        help="--order uncertain: about how many rows to choose (default 100)",
    )
    cmd.add_argument("--seed", type=int, default=0, help="the random order's seed (default 0)")
    cmd.add_argument(
        "--scale",
        default="0,1",
        metavar="V,V,...",
        help="the label values (default 0,1: keys y/1 and n/0)",
    )
    cmd.add_argument(
        "--annotator",
        metavar="NAME",
        help="who labels (default: the login name)",
    )
    cmd.add_argument(
        "--overlap",
        type=float,
        default=0.0,
        metavar="F",
        help="the share of chosen rows every annotator labels, for their agreement "
        "(default 0; set when the plan is made)",
    )
    add_threshold_option(
        cmd, "a judge score >= X counts as 1 in its kappa against 0/1 labels (default 0.5)"
    )
    cmd.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    cmd.set_defaults(func=run_label)


def _scale(text: str) -> tuple[float, ...]:
    try:
        values = tuple(sorted({float(v) for v in text.split(",") if v.strip()}))
    except ValueError:
        raise _UsageError(f"--scale takes numbers separated by commas, got {text!r}") from None
    if len(values) < 2:
        raise _UsageError(f"--scale needs at least two values, got {text!r}")
    return values


def run_label(args: argparse.Namespace) -> int:
    from rageval.labelling import (
        LabelsFile,
        LabelsFileError,
        LabelsFileInUseError,
        Order,
        PlanRecord,
        Scale,
        Session,
        make_plan,
        read_rows,
    )
    from rageval.log import RunLogError
    from rageval.samples import InvalidDataError

    if not 0.0 <= args.overlap <= 1.0:
        raise _UsageError(f"--overlap is a share between 0 and 1, got {args.overlap}")
    source = Path(args.data)
    try:
        rows = read_rows(source)
    except (InvalidDataError, FileNotFoundError, RunLogError) as e:
        raise _UsageError(str(e)) from None
    if not rows.rows:
        raise _UsageError(f"{source} has no rows to label")
    if args.metric is not None and args.metric not in rows.metrics and rows.metrics:
        raise _UsageError(f"--metric {args.metric}: the run scored {', '.join(rows.metrics)}")
    if args.metric is not None and not rows.metrics:
        raise _UsageError(
            f"--metric {args.metric}: {source} holds no metric values (a data file); score it "
            f"first (rageval evaluate {source} -m {args.metric} -o DIR) and label DIR"
        )
    metric = args.metric or (rows.metrics[0] if rows.metrics else None)
    column = args.column or (f"human_{metric}" if metric else "human")
    path = Path(args.labels_file) if args.labels_file else _default_labels_file(source)
    scale = Scale(_scale(args.scale))
    try:
        with LabelsFile.open(path) as labels:
            plan = next((r for r in labels.records() if isinstance(r, PlanRecord)), None)
            if plan is None:
                # where the judge is least certain when there is a judge metric: with the
                # uniform share mixed in, no wider than random even for an overconfident judge
                # (tests/test_stats_active.py); a data file has no judge values to go by
                order: Order = args.order or ("uncertain" if metric else "random")
                plan = make_plan(
                    rows, order=order, column=column, metric=metric,
                    budget=args.budget, seed=args.seed, overlap=args.overlap,
                )  # fmt: skip
                labels.append(plan)
            else:
                _check_same_plan(args, plan, path)
            session = Session(
                rows,
                labels,
                plan,
                annotator=args.annotator or _login(),
                scale=scale,
                threshold=args.threshold,
            )
            return _serve(session, args.port, path, len(rows.rows))
    except LabelsFileInUseError as e:
        err(str(e))
        return EXIT_IN_USE
    except (LabelsFileError, ValueError) as e:
        raise _UsageError(str(e)) from None


def _serve(session: Session, port: int, path: Path, n_rows: int) -> int:
    from rageval.labelling import LabellingServer

    try:
        server = LabellingServer(session, port=port)
    except OSError as e:
        raise _UsageError(f"cannot listen on 127.0.0.1:{port}: {e.strerror}") from None
    plan = session.plan
    out(
        f"labelling {plan.column!r} of {n_rows} rows ({plan.order} order, "
        f"{sum(r.chosen for r in plan.rows)} chosen) into {path}\n"
        f"open: {server.url}\n(another annotator: the same address with &annotator=NAME; "
        "Ctrl-C to stop: every label is already on disk)"
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    done = sum(r.annotator == session.annotator for r in session.standing().done)
    out(f"\n{done} rows labelled or skipped by {session.annotator} in {path}")
    return EXIT_OK


def _check_same_plan(args: argparse.Namespace, plan: PlanRecord, path: Path) -> None:
    """The options that made the plan cannot change once it is written."""
    asked = {"order": args.order, "column": args.column, "metric": args.metric}
    differ = [f"--{k} {v} (the plan's: {getattr(plan, k)})" for k, v in asked.items()
              if v is not None and v != getattr(plan, k)]  # fmt: skip
    if differ:
        raise _UsageError(
            f"{path} was started with another plan: {'; '.join(differ)}; leave the option "
            "out to continue it, or label into another --labels-file"
        )


def _default_labels_file(source: Path) -> Path:
    if source.is_dir():
        return source / "labels.jsonl"
    return source.with_name(source.name + ".labels.jsonl")


def _login() -> str:
    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name (a container without one)
        return "annotator"
