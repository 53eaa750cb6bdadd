"""The exit codes of the `rageval` command line, what each means (:data:`EXIT_CODES`, as
`rageval --help` lists them), re-exported whole by :mod:`rageval.cli`. Standard library only.
"""

from __future__ import annotations

import signal

__all__ = [
    "EXIT_BUDGET",
    "EXIT_CALIBRATION_GATE",
    "EXIT_CODES",
    "EXIT_FATAL",
    "EXIT_GATE",
    "EXIT_INTERRUPTED",
    "EXIT_IN_USE",
    "EXIT_OK",
    "EXIT_TERMINATED",
    "EXIT_UNMEASURED",
    "EXIT_USAGE",
]

EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_FATAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: `rageval calibrate --min-kappa`: the judge disagrees with the people more than allowed
EXIT_CALIBRATION_GATE = 4

#: `evaluate --max-cost`: the next request could have passed the budget; the run can resume
EXIT_BUDGET = 5

#: another writer holds the run directory (rageval._rundir_lock); nothing was written
EXIT_IN_USE = 6

#: `evaluate`: a metric that ran got no value in any cell (--allow-unmeasured accepts it);
#: `generate`: no item was kept
EXIT_UNMEASURED = 7

EXIT_TERMINATED = 128 + signal.SIGTERM


#: every exit code and what it means, as `rageval --help` lists them
EXIT_CODES = (
    (EXIT_OK, "ok"),
    (EXIT_GATE, "a --fail-under gate failed (it wins over 6)"),
    (EXIT_USAGE, "usage, input or configuration error; an optional extra that is not installed"),
    (
        EXIT_FATAL,
        "fatal judge error (unreachable endpoint, bad key, unknown model) or a failed Ray job",
    ),
    (EXIT_CALIBRATION_GATE, "a calibrate --min-kappa gate failed"),
    (EXIT_BUDGET, "stopped at the --max-cost budget (resumable)"),
    (EXIT_IN_USE, "the run directory is in use by another run: nothing was written"),
    (
        EXIT_UNMEASURED,
        "a metric that ran measured no cell at all (--allow-unmeasured accepts it); generate "
        "kept no item",
    ),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C: after the requests in flight; a second: at once)"),
    (EXIT_TERMINATED, "terminated (SIGTERM): handled as Ctrl-C"),
)


def exit_codes_help() -> str:
    return "exit codes:\n" + "\n".join(f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES)
