"""The `rageval` command line: one module per command, what they share in
:mod:`rageval.cli._shared`.

Only the standard library is imported at module level so that `rageval --help` and
`rageval --version` answer at once; each command imports what it needs when it runs.

Exit codes (:data:`EXIT_CODES`, printed by `rageval --help`): 0 ok, 1 a --fail-under gate
failed, 2 usage, input or configuration error (a missing optional extra too), 3 fatal judge
error (endpoint unreachable, bad key, unknown model...) or a failed Ray job, 4 a `calibrate
--min-kappa` gate failed, 5 the `--max-cost` budget was reached (the run stopped, resumable),
6 the run directory is in use (another run, resume or calibration is writing it: refused at
once, nothing written), 7 a metric that ran measured no cell at all (unless
--allow-unmeasured), 130 interrupted
(Ctrl-C), 143 terminated (SIGTERM). A reader that stops reading (`| head`) changes none of them.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Sequence
from typing import NoReturn

from rageval._version import __version__
from rageval.cli import _exit_codes
from rageval.cli._align import add_align_command
from rageval.cli._cache import add_cache_command
from rageval.cli._calibrate import add_calibrate_command
from rageval.cli._compare import add_compare_command
from rageval.cli._evaluate import add_evaluate_command
from rageval.cli._exit_codes import *  # noqa: F403 -- the exit codes are this package's API
from rageval.cli._exit_codes import EXIT_INTERRUPTED, EXIT_USAGE, exit_codes_help
from rageval.cli._generate import add_generate_command
from rageval.cli._label import add_label_command
from rageval.cli._metrics import add_metrics_command
from rageval.cli._pairwise import add_pairwise_command
from rageval.cli._report import add_report_command
from rageval.cli._shared import _UsageError, err

__all__ = ["build_parser", "main", "run_process"]
__all__ += _exit_codes.__all__


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        err(message)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rageval",
        description="Score RAG outputs with LLM judges and embeddings.",
        epilog="judge configuration from the environment: RAGEVAL_LLM (model), OPENAI_BASE_URL\n"
        "or RAGEVAL_BASE_URL (endpoint: OpenAI, Ollama, vLLM...), OPENAI_API_KEY.\n\n"
        + exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"rageval {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for add_command in (
        add_evaluate_command,
        add_calibrate_command,
        add_align_command,
        add_label_command,
        add_report_command,
        add_compare_command,
        add_pairwise_command,
        add_generate_command,
        add_metrics_command,
        add_cache_command,
    ):
        add_command(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _unrecognized(parser, args, unknown)
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code: int = args.func(args)
    except _UsageError as e:
        err(str(e))
        return EXIT_USAGE
    except ImportError as e:
        from rageval.errors import MissingExtraError

        if not isinstance(e, MissingExtraError):
            raise
        err(str(e))  # an optional extra this command needs: its install command, one line
        return EXIT_USAGE
    except KeyboardInterrupt:
        err("interrupted")
        return EXIT_INTERRUPTED
    return code


def _unrecognized(
    parser: argparse.ArgumentParser, args: argparse.Namespace, unknown: list[str]
) -> NoReturn:
    """Arguments no parser took, refused with the usage of the command they were given to
    (argparse's top-level usage named no option of it) and the options they are close to."""
    import difflib

    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    command: argparse.ArgumentParser = commands.choices.get(args.command or "", parser)
    options = [o for action in command._actions for o in action.option_strings]
    close = [m for u in unknown for m in difflib.get_close_matches(u.split("=")[0], options, n=1)]
    hint = f" (did you mean {', '.join(dict.fromkeys(close))}?)" if close else ""
    command.error(f"unrecognized arguments: {' '.join(unknown)}{hint}")


#: the garbage collector's thresholds for a `rageval` process (CPython's default: 700, 10, 10)
GC_THRESHOLDS = (50_000, 20, 10)


def run_process() -> NoReturn:
    """`rageval` as a process of its own (the console script, ``python -m rageval``):
    :func:`main` with the garbage collector tuned for a run, then exit with its code.

    A run keeps thousands of objects alive (its results, kept cells, log lines) while it makes
    many more; with CPython's first threshold of 700 allocations the collector walks the
    survivors again and again (measured: 0.1-0.2 s of the 2 s it takes to re-run a finished
    1,000-sample evaluation from the cache). A process of its own is the command's to tune;
    :func:`main` called in-process, and the library (``evaluate()``), leave the interpreter's
    settings alone."""
    gc.set_threshold(*GC_THRESHOLDS)
    sys.exit(main())
