"""`rageval report`: (re)build the report of a run directory."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rageval.cli._exit_codes import EXIT_OK
from rageval.cli._shared import _UsageError, out


def add_report_command(sub: Any) -> None:
    """Add `report` to the subcommands `sub`."""
    rep = sub.add_parser(
        "report",
        help="(re)build report.html of a run directory",
        description="Write DIR/report.html again from what the run directory holds: one "
        "offline file (nothing fetched when it is opened).",
    )
    rep.add_argument("run_dir", metavar="DIR", help="a run directory (holding manifest.json)")
    rep.set_defaults(func=run_report)


def run_report(args: argparse.Namespace) -> int:
    from rageval.log import RunLogError
    from rageval.report import write_report

    if not (Path(args.run_dir) / "manifest.json").exists():
        raise _UsageError(f"{args.run_dir} is not a rageval run directory (no manifest.json)")
    try:
        out(str(write_report(Path(args.run_dir))))
    except RunLogError as e:  # a damaged log, or a directory of another kind (a test set)
        raise _UsageError(str(e)) from None
    return EXIT_OK
