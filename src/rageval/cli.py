"""The `rageval` command line.

Only the standard library is imported at module level so that `rageval --help` and
`rageval --version` answer at once; each command imports what it needs when it runs.

Exit codes: 0 ok, 1 a --fail-under gate failed, 2 usage or input error, 3 fatal judge error
(bad key, unknown model...), 4 a `calibrate --min-kappa` gate failed, 5 the --max-cost budget
was reached (the run stopped, resumable), 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from rageval._version import __version__

if TYPE_CHECKING:
    from rageval.embeddings import Embeddings
    from rageval.judge import Judge, PriceTable
    from rageval.results import EvaluationResult
    from rageval.stats import MetricComparison

EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_FATAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: `rageval calibrate --min-kappa`: the judge disagrees with the people more than allowed
EXIT_CALIBRATION_GATE = 4
#: `evaluate --max-cost`: the next request would have passed the budget; the run can resume
EXIT_BUDGET = 5


class _UsageError(Exception):
    """A problem with the command line or its input: printed without a traceback, exit 2."""


def _err(message: str) -> None:
    print(f"rageval: {message}", file=sys.stderr)


def _pairs(values: Sequence[str], what: str) -> list[tuple[str, str]]:
    out = []
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise _UsageError(f"{what} must look like NAME=VALUE, got {item!r}")
        out.append((key.strip(), value.strip()))
    return out


def _gates(values: Sequence[str]) -> list[tuple[str, float]]:
    gates = []
    for metric, threshold in _pairs(values, "--fail-under"):
        try:
            gates.append((metric, float(threshold)))
        except ValueError:
            raise _UsageError(
                f"--fail-under {metric}={threshold}: the threshold must be a number"
            ) from None
    return gates


def _metric_names(values: Sequence[str]) -> list[str]:
    return [name.strip() for v in values for name in v.split(",") if name.strip()]


# ---------------------------------------------------------------------- evaluate


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from rageval.errors import BudgetReached
    from rageval.judge import FatalJudgeError
    from rageval.metrics.base import registered_metrics
    from rageval.runner import RunConfigError, RunDirError, evaluate
    from rageval.samples import InvalidDataError

    if args.json and not args.dry_run:
        raise _UsageError("--json goes with --dry-run")
    if args.dry_run:
        return _dry_run(args)
    column_map = dict(_pairs(args.column_map, "--column-map"))
    gates = _gates(args.fail_under)
    metrics = _metric_names(args.metric) or None
    known = set(metrics or registered_metrics())
    for metric, _ in gates:
        if metric not in known:
            raise _UsageError(f"--fail-under names {metric!r}, which is not a metric of this run")
    human_labels = _pairs(args.human_labels, "--human-labels")
    if args.resume and args.output and Path(args.resume) != Path(args.output):
        raise _UsageError("give either -o DIR for a new run or --resume DIR, not both")
    run_dir = Path(args.resume or args.output or _fresh_run_dir())
    judge, embeddings = _judge_and_embeddings(args)
    try:
        result = evaluate(
            args.data,
            metrics=metrics,
            llm=judge,
            embeddings=embeddings,
            column_map=column_map or None,
            on_invalid="skip" if args.skip_invalid else "raise",
            run_dir=run_dir,
            resume=bool(args.resume),
            progress=False if args.quiet else None,
            human_labels=human_labels or None,
            repeats=args.repeats,
            max_cost=args.max_cost,
        )
    except (InvalidDataError, RunConfigError, RunDirError, FileNotFoundError) as e:
        raise _UsageError(str(e)) from None
    except BudgetReached as e:
        from rageval.results import EvaluationResult

        done = e.result
        finished = (
            f"{done.n_finished} of {len(done)} rows"
            if isinstance(done, EvaluationResult)
            else "the rows"
        )
        _err(
            f"stopped at the budget: ${e.spent_usd:.4f} spent of --max-cost "
            f"${e.max_cost_usd:.4f} (the next request could have passed it); {finished} "
            f"finished and kept in {run_dir}; continue with --resume {run_dir} and a larger "
            "--max-cost (or none)"
        )
        return EXIT_BUDGET
    except FatalJudgeError as e:
        _err(f"the judge endpoint refused: {e}")
        if (run_dir / "manifest.json").exists():
            _err(f"finished rows are kept in {run_dir}; continue with --resume {run_dir}")
        return EXIT_FATAL
    except KeyboardInterrupt:
        _err(f"interrupted; finished rows are kept in {run_dir}; continue with --resume {run_dir}")
        return EXIT_INTERRUPTED
    print(result.summary_table())
    _print_causes(result)
    report = run_dir / "report.html"
    print(f"\nrun directory: {run_dir}" + (f"  (report: {report})" if report.exists() else ""))
    return _check_gates(result, gates)


def _dry_run(args: argparse.Namespace) -> int:
    """`evaluate --dry-run`: validate, plan and price the run; send nothing, write nothing."""
    from rageval.runner import RunConfigError, estimate
    from rageval.samples import InvalidDataError

    judge, embeddings = _judge_and_embeddings(args)
    try:
        found = estimate(
            args.data,
            metrics=_metric_names(args.metric) or None,
            llm=judge,
            embeddings=embeddings,
            column_map=dict(_pairs(args.column_map, "--column-map")) or None,
            on_invalid="skip" if args.skip_invalid else "raise",
            batch=args.batch,
        )
    except (InvalidDataError, RunConfigError, FileNotFoundError) as e:
        raise _UsageError(str(e)) from None
    print(found.model_dump_json(indent=2) if args.json else found.table())
    return EXIT_OK


def _prices(values: Sequence[str]) -> PriceTable | None:
    """--price MODEL=INPUT,OUTPUT[,CACHED_INPUT[,BATCH_INPUT,BATCH_OUTPUT]] (USD per million)."""
    if not values:
        return None
    from rageval.judge import ModelPrice, PriceTable

    table = {}
    for model, spec in _pairs(values, "--price"):
        try:
            rates = [float(v) for v in spec.split(",")]
            if len(rates) not in (2, 3, 5):
                raise ValueError
            inp, out, *more = rates
            cached = more[0] if more else None
            batch_in, batch_out = (more[1], more[2]) if len(more) == 3 else (None, None)
            table[model] = ModelPrice(inp, out, cached, batch_in, batch_out)
        except ValueError:
            raise _UsageError(
                f"--price {model}={spec}: give INPUT,OUTPUT[,CACHED_INPUT[,BATCH_INPUT,"
                "BATCH_OUTPUT]] in USD per million tokens"
            ) from None
    return PriceTable(table)


def _judge_and_embeddings(args: argparse.Namespace) -> tuple[Judge | None, Embeddings | None]:
    """The judge and embeddings of the options added by :func:`_add_judge_options`."""
    from rageval.runner import embeddings_from_spec, judge_from_env

    try:
        judge = judge_from_env(
            args.llm,
            base_url=args.base_url,
            max_concurrency=args.concurrency,
            cache=not args.no_cache,
            prices=_prices(getattr(args, "price", [])),
        )
        embeddings = (
            embeddings_from_spec(args.embeddings, base_url=args.base_url, cache=not args.no_cache)
            if args.embeddings
            else None
        )
    except ValueError as e:  # a malformed base URL, model name or embeddings spec
        raise _UsageError(str(e)) from None
    return judge, embeddings


def _fresh_run_dir() -> Path:
    """rageval-runs/<timestamp>, with a suffix if a run of the same second exists."""
    base = Path("rageval-runs") / datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


def _print_causes(result: EvaluationResult, examples: int = 2, width: int = 300) -> None:
    """Why cells were not measured or skipped, grouped by cause kind: the count, what the kind
    means, the metrics it hit and a few example causes. However many cells failed, this is at
    most four lines per kind (there are eleven kinds); a line is cut at `width` characters."""
    from collections import Counter

    from rageval.errors import CAUSE_KINDS

    per_metric: dict[str, Counter[str]] = {}
    causes: dict[str, Counter[str]] = {}
    for name, summary in result.summary().items():
        for group in summary.failures:
            per_metric.setdefault(group.kind, Counter())[name] += group.count
            found = causes.setdefault(group.kind, Counter())
            for example in group.examples:
                found[example.cause] += example.count
    if not per_metric:
        return
    print("\nnot measured / skipped, by kind:")
    for kind, metrics in sorted(per_metric.items(), key=lambda item: -item[1].total()):
        total = metrics.total()
        meaning = CAUSE_KINDS.get(kind, kind)  # type: ignore[call-overload]
        print(_clip(f"  {kind}: {total:,} {'cell' if total == 1 else 'cells'} -- {meaning}", width))
        hit = ", ".join(f"{m} ({n:,})" for m, n in metrics.most_common())
        print(_clip(f"    {hit}", width))
        for cause, _ in causes[kind].most_common(examples):
            print(_clip(f"    e.g. {' '.join(cause.split())}", width))
    print("  (every cause, per sample: the report and results.jsonl)")


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _check_gates(result: EvaluationResult, gates: Sequence[tuple[str, float]]) -> int:
    summary = result.summary()
    failed = []
    for metric, threshold in gates:
        s = summary.get(metric)
        if s is None or s.mean is None:
            failed.append(f"{metric}: no measured value (gate {threshold})")
        elif s.mean < threshold:
            failed.append(f"{metric}: mean {s.mean:.4f} < {threshold}")
    for line in failed:
        _err(f"gate failed: {line}")
    if gates and not failed:
        print(f"all {len(gates)} gate(s) passed")
    return EXIT_GATE if failed else EXIT_OK


# ---------------------------------------------------------------------- other commands


def _cmd_report(args: argparse.Namespace) -> int:
    from rageval.report import write_report

    if not (Path(args.run_dir) / "manifest.json").exists():
        raise _UsageError(f"{args.run_dir} is not a rageval run directory (no manifest.json)")
    print(write_report(Path(args.run_dir)))
    return EXIT_OK


def _cmd_compare(args: argparse.Namespace) -> int:
    from rageval.results import load_run
    from rageval.stats import compare

    try:
        a, b = load_run(args.run_a), load_run(args.run_b)
    except (FileNotFoundError, ValueError) as e:
        raise _UsageError(str(e)) from None
    comparisons = compare(a, b, top=args.top)
    if not comparisons:
        raise _UsageError("the two runs have no metric in common")
    shared = len(set(a.ids) & set(b.ids))
    print(f"A = {args.run_a} ({len(a)} samples)\nB = {args.run_b} ({len(b)} samples)")
    print(f"{shared} samples matched by id\n")
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
    print(_table(header, rows))
    print(
        "\npaired over samples (matched by id) measured in both runs; CI: paired percentile "
        "bootstrap; p-value: sign-flip permutation test of no difference"
    )
    _print_ppi_comparisons(comparisons)
    for c in comparisons:
        if c.movers:
            print(f"\n{c.metric}: samples that moved most")
            for sid, x, y in c.movers:
                print(f"  {sid}: {x:.4f} -> {y:.4f} ({y - x:+.4f})")
    return EXIT_OK


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
    print(_table(header, rows))


def _fmt_interval(mean: float | None, low: float | None, high: float | None) -> str:
    if mean is None:
        return "-"
    return f"{mean:.4f}" + ("" if low is None or high is None else f" [{low:.4f}, {high:.4f}]")


def _cmd_metrics(args: argparse.Namespace) -> int:
    import json

    from rageval.metrics.base import registered_metrics

    rows = []
    for name, cls in registered_metrics().items():
        rows.append(
            (
                name,
                ", ".join(cls.required_fields),
                "yes" if cls.needs_llm else "no",
                "yes" if cls.needs_embeddings else "no",
                json.dumps(cls().params(), ensure_ascii=False, default=str),
            )
        )
    print(_table(("metric", "required fields", "judge", "embeddings", "defaults"), rows))
    return EXIT_OK


def _cmd_cache(args: argparse.Namespace) -> int:
    from rageval.judge import RequestCache

    cache = RequestCache(args.cache_dir)
    if args.action == "clear":
        removed = cache.clear()
        print(f"cleared {cache.path}: " + ", ".join(f"{n} {k}" for k, n in removed.items()))
        return EXIT_OK
    stats = cache.stats()
    print(f"path: {stats['path']}")
    print(f"size: {stats['size_bytes']:,} bytes")
    for table, n in stats["entries"].items():
        print(f"{table}: {n:,} entries")
    return EXIT_OK


def _fmt(value: float | None, *, signed: bool = False) -> str:
    if value is None:
        return "-"
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in [header, *rows]
    ]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


# ---------------------------------------------------------------------- parser


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        _err(message)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rageval",
        description="Score RAG outputs with LLM judges and embeddings.",
        epilog="Judge configuration from the environment: RAGEVAL_LLM (model), OPENAI_BASE_URL "
        "or RAGEVAL_BASE_URL (endpoint: OpenAI, Ollama, vLLM...), OPENAI_API_KEY.",
    )
    parser.add_argument("--version", action="version", version=f"rageval {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    ev = sub.add_parser("evaluate", help="score a dataset and write a run directory")
    ev.add_argument("data", metavar="DATA", help="JSONL, JSON, CSV, TSV or Parquet file")
    ev.add_argument(
        "-m",
        "--metric",
        action="append",
        default=[],
        metavar="METRIC",
        help="metric to run (repeat, or comma-separate); default: every metric "
        "whose fields the data has",
    )
    _add_judge_options(ev)
    ev.add_argument("--resume", metavar="DIR", help="continue the interrupted run in DIR")
    ev.add_argument(
        "--fail-under",
        nargs="+",
        action="extend",
        default=[],
        metavar="METRIC=VALUE",
        help="exit 1 if the metric's mean is below VALUE (or not measured)",
    )
    ev.add_argument(
        "--human-labels",
        nargs="+",
        action="extend",
        default=[],
        metavar="COLUMN=METRIC",
        help="a column of human scores for METRIC (empty where not labelled): the summary adds "
        "the PPI++ mean of the label, the judge's scores rectified by the labelled rows",
    )
    ev.add_argument(
        "--repeats",
        type=_positive_int,
        default=1,
        metavar="K",
        help="score every judge cell K times (the repeats bypass the cache): the value is their "
        "mean, and the summary says how much of the CI is the judge's own noise",
    )
    ev.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    cost = ev.add_argument_group("cost control (README: Cost control)")
    cost.add_argument(
        "--dry-run",
        action="store_true",
        help="validate the data and estimate the requests, tokens and cost of the run "
        "(estimate and range, per metric); send nothing, write nothing",
    )
    cost.add_argument("--json", action="store_true", help="--dry-run's estimate as JSON")
    cost.add_argument(
        "--max-cost",
        type=_positive_float,
        metavar="USD",
        help="stop before the judge requests would cost more than USD (exit 5; what finished "
        "is kept, --resume continues); needs the judge model's price (--price)",
    )
    cost.add_argument(
        "--batch",
        action="store_true",
        help="send the judge requests through the endpoint's Batch API (about half the "
        "price; up to 24 hours)",
    )
    ev.set_defaults(func=_cmd_evaluate)

    from rageval._calibrate_cli import add_calibrate_command

    add_calibrate_command(sub, _add_judge_options)

    rep = sub.add_parser("report", help="(re)build report.html of a run directory")
    rep.add_argument("run_dir", metavar="DIR")
    rep.set_defaults(func=_cmd_report)

    cmp_ = sub.add_parser("compare", help="paired comparison of two runs on the same samples")
    cmp_.add_argument("run_a", metavar="DIR_A")
    cmp_.add_argument("run_b", metavar="DIR_B")
    cmp_.add_argument(
        "--top", type=_positive_int, default=5, help="samples that moved most to list"
    )
    cmp_.set_defaults(func=_cmd_compare)

    met = sub.add_parser("metrics", help="list the metrics, their fields and defaults")
    met.set_defaults(func=_cmd_metrics)

    cache = sub.add_parser("cache", help="inspect or clear the request cache")
    cache.add_argument("action", choices=("stats", "clear"))
    cache.add_argument(
        "--cache-dir",
        metavar="DIR",
        default=None,
        help="cache directory (default: $RAGEVAL_CACHE_DIR or ~/.cache/rageval)",
    )
    cache.set_defaults(func=_cmd_cache)
    return parser


def _add_judge_options(parser: argparse.ArgumentParser) -> None:
    """The options of a command that scores data: judge, embeddings, run directory, input."""
    parser.add_argument("--llm", metavar="MODEL", help="judge model (default: $RAGEVAL_LLM)")
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help="OpenAI-compatible endpoint (default: $RAGEVAL_BASE_URL, $OPENAI_BASE_URL, OpenAI)",
    )
    parser.add_argument(
        "--embeddings",
        metavar="local|openai:MODEL",
        default=None,
        help="embedding model (default: the local all-MiniLM-L6-v2)",
    )
    parser.add_argument(
        "-o", "--output", metavar="DIR", help="run directory (default: rageval-runs/<timestamp>)"
    )
    parser.add_argument(
        "--concurrency",
        type=_positive_int,
        metavar="N",
        help="judge requests in flight at most (default 16)",
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="do not read or write the request cache"
    )
    parser.add_argument(
        "--column-map",
        nargs="+",
        action="extend",
        default=[],
        metavar="THEIRS=OURS",
        help="rename columns, e.g. query=user_input",
    )
    parser.add_argument(
        "--skip-invalid",
        action="store_true",
        help="skip cells of rows that lack a required field instead of stopping",
    )
    parser.add_argument(
        "--price",
        nargs="+",
        action="extend",
        default=[],
        metavar="MODEL=IN,OUT[,CACHED[,BATCH_IN,BATCH_OUT]]",
        help="the judge model's price in USD per million tokens (input, output, cached input, "
        "batch input and output), for a model the built-in table does not know",
    )


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        code: int = args.func(args)
    except _UsageError as e:
        _err(str(e))
        return EXIT_USAGE
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED
    return code
