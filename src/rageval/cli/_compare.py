"""`rageval compare`: a paired comparison of two runs of the same samples."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rageval.cli._exit_codes import EXIT_OK
from rageval.cli._shared import _UsageError, out, positive_int, text_table

if TYPE_CHECKING:
    from rageval.stats import MetricComparison


def add_compare_command(sub: Any) -> None:
    """Add `compare` to the subcommands `sub`."""
    cmp_ = sub.add_parser(
        "compare",
        help="paired comparison of two runs on the same samples",
        description="Compare two run directories sample by sample (matched by id): for each "
        "metric both runs scored, the mean of each, B - A with a paired bootstrap 95%% CI and "
        "a permutation p-value, and the samples that moved most.",
    )
    cmp_.add_argument("run_a", metavar="DIR_A", help="the first run directory (A)")
    cmp_.add_argument("run_b", metavar="DIR_B", help="the second run directory (B)")
    cmp_.add_argument("--top", type=positive_int, default=5, help="samples that moved most to list")
    cmp_.set_defaults(func=run_compare)


def run_compare(args: argparse.Namespace) -> int:
    from rageval.results import load_run
    from rageval.stats import TIE_BELOW, compare

    try:
        a, b = load_run(args.run_a), load_run(args.run_b)
    except (FileNotFoundError, ValueError) as e:
        raise _UsageError(str(e)) from None
    for run, path in ((a, args.run_a), (b, args.run_b)):
        # a comparison of what an unfinished run happened to finish would look like a result
        if run.n_finished == 0:
            raise _UsageError(f"{path} has no finished rows: there is nothing to compare")
        if not run.complete:
            raise _UsageError(
                f"{path} is unfinished ({run.n_finished} of {len(run)} rows): finish it first "
                f"with rageval evaluate --resume {path}"
            )
    shared = len(set(a.ids) & set(b.ids))
    if not shared:
        raise _UsageError(
            f"the two runs have no sample id in common (A's ids: {_some(a.ids)}; B's: "
            f"{_some(b.ids)}): compare pairs the samples by id, so both runs must score the "
            "same data"
        )
    comparisons = compare(a, b, top=args.top)
    only = _only_in_one(a.metrics, b.metrics)
    if not comparisons:
        raise _UsageError(f"the two runs have no metric in common ({only})")
    out(f"A = {args.run_a} ({len(a)} samples)\nB = {args.run_b} ({len(b)} samples)")
    out(f"{shared} samples matched by id\n")
    header = ("metric", "n pairs", "mean A", "mean B", "B - A", "95% CI", "p-value")
    rows = []
    for c in comparisons:
        d = c.diff
        rows.append(
            (
                c.metric,
                str(d.n_pairs),
                _fmt(c.mean_a),
                _fmt(c.mean_b),
                _fmt(d.mean_diff, signed=True),
                "-" if d.low is None or d.high is None else f"[{d.low:+.4f}, {d.high:+.4f}]",
                "-" if d.p_value is None else f"{d.p_value:.4f}",
            )
        )
    out(text_table(header, rows))
    out(
        "\npaired over samples (matched by id) measured in both runs; CI: paired percentile "
        "bootstrap; p-value: sign-flip permutation test of no difference"
    )
    if set(a.metrics) != set(b.metrics):
        out(f"not compared, scored by one run only: {only}")
    same = [c.metric for c in comparisons if c.diff.no_difference]
    if same:
        which = "every metric" if len(same) == len(comparisons) else ", ".join(same)
        out(
            f"\nno difference in {which}: every sample measured in both runs has the same "
            f"value in both (differences below {TIE_BELOW:g} count as none)"
        )
    _print_ppi_comparisons(comparisons)
    for c in comparisons:
        if c.movers:
            out(f"\n{c.metric}: samples that moved most")
            for sid, x, y in c.movers:
                out(f"  {sid}: {x:.4f} -> {y:.4f} ({y - x:+.4f})")
    return EXIT_OK


def _only_in_one(metrics_a: Sequence[str], metrics_b: Sequence[str]) -> str:
    """The metrics one run scored and the other did not, for a message."""
    parts = [
        f"{', '.join(m for m in mine if m not in theirs) or 'none'} only in {side}"
        for side, mine, theirs in (("A", metrics_a, metrics_b), ("B", metrics_b, metrics_a))
    ]
    return "; ".join(parts)


def _some(ids: Sequence[str], shown: int = 3) -> str:
    """The first few of a run's sample ids, for a message."""
    more = f", … ({len(ids)} in all)" if len(ids) > shown else ""
    return ", ".join(ids[:shown]) + more


def _print_ppi_comparisons(comparisons: Sequence[MetricComparison]) -> None:
    """The human-label (PPI++) means of both runs, and their paired difference."""
    rows = []
    for c in comparisons:
        for p in c.ppi:
            d = p.diff
            rows.append(
                (
                    f"{c.metric} <- {p.column}",
                    _fmt_interval(p.a.mean, p.a.ci_low, p.a.ci_high),
                    _fmt_interval(p.b.mean, p.b.ci_low, p.b.ci_high),
                    _fmt(d.mean_diff, signed=True),
                    "-" if d.low is None or d.high is None else f"[{d.low:+.4f}, {d.high:+.4f}]",
                    f"{d.n_labelled} + {d.n_unlabelled}",
                )
            )
    if not rows:
        return
    print("\nhuman labels: the mean label by PPI++ (the judge rectified by the labelled rows)")
    header = ("metric <- label", "A [95% CI]", "B [95% CI]", "B - A", "95% CI", "rows (lab. + not)")
    print(text_table(header, rows))


def _fmt_interval(mean: float | None, low: float | None, high: float | None) -> str:
    if mean is None:
        return "-"
    return f"{mean:.4f}" + ("" if low is None or high is None else f" [{low:.4f}, {high:.4f}]")


def _fmt(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.4f}" if signed else f"{value:.4f}"
