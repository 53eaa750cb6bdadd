"""`rageval evaluate`: score a dataset into a run directory (or, with --dry-run, estimate
what that would cost), then print the summary and apply the gates."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rageval.cli._exit_codes import (
    EXIT_BUDGET,
    EXIT_FATAL,
    EXIT_GATE,
    EXIT_IN_USE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_UNMEASURED,
    exit_codes_help,
)
from rageval.cli._shared import (
    _UsageError,
    add_labels_file_option,
    add_pairs_option,
    add_run_options,
    command_settings,
    err,
    name_value_pairs,
    out,
    positional_data,
    positive_int,
    print_weighted_labels,
    read_run_options,
    run_dir_of,
    sigterm_as_sigint,
    stated_language,
    with_labels_file,
)

if TYPE_CHECKING:
    from rageval.embeddings import Embeddings
    from rageval.judge import Judge
    from rageval.results import EvaluationResult
    from rageval.runner import Panel
    from rageval.runner._stored import StoredRun

_FORMATS = ("jsonl", "json", "csv", "tsv", "parquet")
#: --format values that read DATA as exported traces (rageval.traces, docs/traces.md)
_TRACE_FORMATS = ("otlp", "openinference", "langfuse")


def add_evaluate_command(sub: Any) -> None:
    """Add `evaluate` to the subcommands `sub`."""
    ev = sub.add_parser(
        "evaluate",
        help="score a dataset and write a run directory",
        epilog=exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ev.add_argument(
        "data",
        metavar="DATA",
        nargs="?",
        help="JSONL, JSON, CSV, TSV or Parquet file, or - for stdin (optional with --resume)",
    )
    ev.add_argument(
        "-m",
        "--metric",
        action="append",
        default=[],
        metavar="METRIC",
        help="metric to run: a name, or module:ClassName for one of your own (repeat, or "
        "comma-separate); default: every metric "
        "whose fields the data has",
    )
    add_run_options(
        ev,
        param_help="a metric's constructor argument, e.g. answer_correctness.weights=[0.5,0.5] "
        "(VALUE read as TOML: numbers, true/false, lists, quoted text; else text)",
    )
    add_labels_file_option(ev)  # the --human-labels columns from `rageval label`'s file
    ev.add_argument(
        "--resume",
        metavar="DIR",
        help="continue the interrupted run in DIR (its data, metrics and settings are the "
        "run's own, as its manifest records them)",
    )
    add_pairs_option(
        ev,
        "--fail-under",
        metavar="METRIC=VALUE",
        help="exit 1 if the metric's mean is below VALUE (or not measured)",
    )
    ev.add_argument(
        "--format",
        choices=(*_FORMATS, *_TRACE_FORMATS),
        default=None,
        help="format of DATA read from stdin (default: guessed from its first bytes); otlp, "
        "openinference or langfuse read the DATA file as exported traces (docs/traces.md): one "
        "row per assistant turn, or one conversation per session when every metric scores "
        "conversations (tool_call_f1 ...)",
    )
    ev.add_argument(
        "--language",
        metavar="LANG",
        type=stated_language,
        help="the language of every row without a language column of its own, which every "
        "judge prompt states: a code (de, es, fr, ja ...) or a name (default: detected per "
        "row; resuming, the run's; docs/languages.md)",
    )
    ev.add_argument(
        "--qrels",
        metavar="FILE",
        help="TREC qrels (QUERY ITER DOC GRADE), with --run and no DATA: one row per judged "
        "query, scored by the retrieval metrics on ids (map, mrr, ndcg_at_10 ...; "
        "docs/retrieval.md)",
    )
    ev.add_argument(
        "--run",
        dest="trec_run",
        metavar="FILE",
        help="TREC run file (QUERY Q0 DOC RANK SCORE TAG), ranked by score as trec_eval "
        "ranks it, with --qrels",
    )
    ev.add_argument(
        "--repeats",
        type=positive_int,
        default=None,
        metavar="K",
        help="score every judge cell K times (default 1; resuming, the run's): the repeats "
        "bypass the cache, the value is their mean, and the summary says how much of the CI "
        "is the judge's own noise",
    )
    ev.add_argument(
        "--allow-unmeasured",
        action="store_true",
        help=f"exit 0 even when a metric that ran measured no cell at all (default: exit "
        f"{EXIT_UNMEASURED}, e.g. a judge whose every reply failed validation)",
    )
    cost = ev.add_argument_group("cost control (docs/cost.md)")
    cost.add_argument(
        "--dry-run",
        action="store_true",
        help="validate the data and estimate the requests, tokens and cost of the run (an "
        "estimate and a range, per metric); send nothing, write nothing",
    )
    cost.add_argument("--json", action="store_true", help="--dry-run's estimate as JSON")
    ev.set_defaults(func=run_evaluate)


def run_evaluate(args: argparse.Namespace) -> int:
    """`rageval evaluate`, holding the run directory from the start (a dry run writes none):
    a second writer is refused before this command imports anything heavy."""
    from rageval._rundir_lock import hold_run_dir
    from rageval.errors import RunDirError, RunDirInUseError

    run_dir = Path(args.resume) if args.resume else run_dir_of(args)
    if args.dry_run:
        return _evaluate_in(run_dir, args)
    try:
        with hold_run_dir(run_dir):
            return _evaluate_in(run_dir, args)
    except RunDirInUseError as e:
        err(str(e))
        return EXIT_IN_USE
    except RunDirError as e:  # a path that cannot be a run directory
        raise _UsageError(str(e)) from None


def _evaluate_in(run_dir: Path, args: argparse.Namespace) -> int:
    from rageval._config import Settings
    from rageval.errors import BudgetReached, MissingExtraError
    from rageval.judge import FatalJudgeError
    from rageval.runner import RunConfigError, RunDirError, evaluate
    from rageval.runner._stored import read_stored_run
    from rageval.runner.engines import RayEngineError
    from rageval.samples import InvalidDataError

    data = _data_argument(args)
    if args.json and not args.dry_run:
        raise _UsageError("--json goes with --dry-run")
    if args.dry_run and args.resume:
        raise _UsageError("--dry-run estimates a new run: give DATA, not --resume")
    if args.resume and args.output and Path(args.resume) != Path(args.output):
        raise _UsageError("give either -o DIR for a new run or --resume DIR, not both")
    if args.resume and args.overwrite:
        raise _UsageError("--resume continues the run in DIR; --overwrite replaces it: not both")
    if args.resume and args.param:
        raise _UsageError("a resumed run keeps its metrics' parameters (see its manifest): no -p")
    try:
        stored = read_stored_run(args.resume) if args.resume else None
    except ValueError as e:  # not a run directory
        raise _UsageError(str(e)) from None
    # resuming, the run's manifest holds its settings: no config file applies
    settings = Settings() if args.resume else command_settings(args)
    metrics = _own_metrics_by_name(_metric_names(args.metric) or settings.metrics)
    if stored is not None and any(":" in name for name, _, _ in stored.metrics):
        _import_from_cwd()  # the run used a metric of the user's own, recorded by its module
    options = read_run_options(
        args,
        metrics,
        settings=settings,
        stored=stored,
        run_dir=run_dir,
        observe=not args.dry_run,
        keys=not args.dry_run,  # a dry run sends nothing: a missing key is a note in its table
    )
    judge = options["llm"]
    if args.dry_run:
        return _dry_run(
            data,
            metrics,
            judge,
            options["embeddings"],
            column_map=options["column_map"],
            metric_params=options["metric_params"],
            on_invalid=options["on_invalid"],
            repeats=args.repeats or 1,
            language=args.language,
            batch=options["config"].batch_settings is not None,
            as_json=args.json,
        )
    gates = _gates(args.fail_under)
    # the config file's gates are general: those on metrics this run has apply
    file_gates = {m: v for m, v in settings.fail_under.items() if m not in dict(gates)}
    _check_gate_names(gates, metrics, stored)
    _check_gate_ranges(list(file_gates.items()), "the config file's fail_under")
    if judge is None and metrics:
        _require_a_judge_for(metrics, options["metric_params"] or {})
    if args.format in _TRACE_FORMATS:
        data = _trace_rows(data, args.format, metrics)
    if options["config"].engine == "ray":
        _show_ray_notices()
    copy = _stdin_to(run_dir, args) if data == "-" else None
    interrupted = f"finished rows are kept in {run_dir}; continue with --resume {run_dir}"
    try:
        with sigterm_as_sigint() as signals:
            result = evaluate(
                copy or data,
                metrics=metrics,
                repeats=args.repeats,
                language=args.language,
                **options,
            )
    except (
        InvalidDataError,
        RunConfigError,
        RunDirError,
        FileNotFoundError,
        MissingExtraError,
    ) as e:
        _discard_unused(copy, run_dir)
        raise _UsageError(_as_stdin(str(e), copy)) from None
    except BudgetReached as e:
        from rageval.results import EvaluationResult

        done = e.result
        finished = (
            f"{done.n_finished} of {len(done)} rows"
            if isinstance(done, EvaluationResult)
            else "the rows"
        )
        err(
            f"stopped at the budget: ${e.spent_usd:.6f} spent of --max-cost "
            f"${e.max_cost_usd:.6f} (the next request could have passed it); {finished} "
            f"finished, kept in {run_dir}; continue with --resume {run_dir} (the same budget "
            "again) or with a larger --max-cost (or --max-cost none)"
        )
        return EXIT_BUDGET
    except (FatalJudgeError, RayEngineError) as e:
        _discard_unused(copy, run_dir)
        refused = isinstance(e, FatalJudgeError) and e.status
        err(f"the judge endpoint refused: {e}" if refused else str(e))
        if (run_dir / "manifest.json").exists():
            err(_after_refusal(refused or None, run_dir))
        return EXIT_FATAL
    except KeyboardInterrupt:
        _discard_unused(copy, run_dir)
        how = "terminated (SIGTERM)" if signals else "interrupted"
        if (run_dir / "manifest.json").exists():
            err(f"{how}; {interrupted}")
        else:
            err(how)
        return EXIT_TERMINATED if signals else EXIT_INTERRUPTED
    out(result.summary_table())
    print_weighted_labels(args, run_dir, name_value_pairs(args.human_labels, "--human-labels"))
    _print_retries(result)
    _print_causes(result)
    _print_batches(run_dir)
    report = run_dir / "report.html"
    out(f"\nrun directory: {run_dir}" + (f"  (report: {report})" if report.exists() else ""))
    _print_left_out(result.metrics_left_out)
    gated = _check_gates(
        result, [*gates, *((m, v) for m, v in file_gates.items() if m in result.metrics)]
    )
    unmeasured = result.unmeasured_metrics
    for name, why in unmeasured.items():
        err(f"measured nothing: {name}: {why}")
    if gated != EXIT_OK:
        return gated
    if unmeasured and not args.allow_unmeasured:
        err(
            f"exit {EXIT_UNMEASURED}: {len(unmeasured)} metric(s) measured nothing (the causes "
            "above; every one in the report); --allow-unmeasured accepts such a run"
        )
        return EXIT_UNMEASURED
    return EXIT_OK


def _trec_data(args: argparse.Namespace, data: str | None) -> list[dict[str, Any]]:
    """The rows of --qrels and --run (rageval.samples.trec_rows); the run's queries that the
    qrels do not judge are left out, as trec_eval leaves them out, and said so."""
    from rageval.samples import InvalidDataError, trec_rows

    if not (args.qrels and args.trec_run):
        raise _UsageError("--qrels and --run go together: the judgements and the run")
    if data is not None or args.resume or args.format:
        raise _UsageError("--qrels and --run are the data: no DATA, --format or --resume")
    try:
        found = trec_rows(args.qrels, args.trec_run)
    except (InvalidDataError, FileNotFoundError) as e:
        raise _UsageError(str(e)) from None
    if found.unjudged_queries:
        shown = ", ".join(found.unjudged_queries[:10])
        more = " ..." if len(found.unjudged_queries) > 10 else ""
        err(
            f"left out {len(found.unjudged_queries)} queries of the run that the qrels do not "
            f"judge (as trec_eval does): {shown}{more}"
        )
    return found.rows


def _dry_run(
    data: str | list[dict[str, Any]] | None,
    metrics: Sequence[str] | None,
    judge: Judge | list[Judge] | Panel | None,
    embeddings: Embeddings | None,
    *,
    as_json: bool,
    **options: Any,
) -> int:
    """`evaluate --dry-run`: validate, plan and price the run; send nothing, write nothing."""
    from rageval.runner import RunConfigError, estimate
    from rageval.samples import InvalidDataError

    if data == "-":
        raise _UsageError("--dry-run reads DATA from a file, not from stdin")
    try:
        found = estimate(data, metrics, judge, embeddings, **options)
    except (InvalidDataError, RunConfigError, FileNotFoundError) as e:
        raise _UsageError(str(e)) from None
    out(found.model_dump_json(indent=2) if as_json else found.table())
    return EXIT_OK


def _trace_rows(data: Any, format: str, metrics: Sequence[Any] | None) -> Any:
    """The rows of the trace file `data` (rageval.traces.load): one conversation per session
    when every metric asked for scores conversations, else one row per assistant turn."""
    from rageval.metrics.base import metric_class, scores_conversations
    from rageval.samples import InvalidDataError
    from rageval.traces import load

    if not isinstance(data, str) or data == "-":
        raise _UsageError(f"--format {format} reads a trace file: give its path as DATA")
    try:
        conversational = bool(metrics) and all(
            isinstance(m, str) and scores_conversations(metric_class(m)) for m in metrics or ()
        )
    except KeyError as e:
        raise _UsageError(str(e.args[0])) from None
    try:
        return load(data, format, view="conversations" if conversational else "turns")  # type: ignore[arg-type]
    except (InvalidDataError, FileNotFoundError) as e:
        raise _UsageError(str(e)) from None


def _data_argument(args: argparse.Namespace) -> str | list[dict[str, Any]] | None:
    """`evaluate`'s DATA: required unless resuming or given as --qrels and --run; not stdin
    when resuming."""
    data = positional_data(args)
    if args.qrels or args.trec_run:
        return _trec_data(args, data)
    if data is None and not args.resume:
        raise _UsageError("DATA is required (a data file, or - for stdin), or --resume DIR")
    if data == "-" and args.resume:
        raise _UsageError(
            f"a run read from stdin keeps a copy of its data: resume it with --resume "
            f"{args.resume} alone"
        )
    return with_labels_file(args, data)


def _metric_names(values: Sequence[str]) -> list[str] | None:
    """The names given with -m (None: no -m at all); `-m ""` names nothing, an error."""
    if not values:
        return None
    names = [name.strip() for v in values for name in v.split(",") if name.strip()]
    if not names:
        raise _UsageError("-m/--metric needs a metric name (see: rageval metrics)")
    return names


def _import_from_cwd() -> None:
    """Let a user's metric module in the current directory be imported, as ``python -m``
    would (only done when a metric is named by its module)."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())


def _own_metrics_by_name(names: Sequence[str] | None) -> list[str] | None:
    """The metrics with every ``module:ClassName`` (a metric of the user's own, importable
    from the current directory as with ``python -m``) imported, registered and replaced by
    its name, so that -p, --fail-under and the judge check know it."""
    if names is None or not any(":" in n for n in names):
        return None if names is None else list(names)
    from rageval.metrics.base import metric_class

    _import_from_cwd()
    try:
        return [metric_class(n).name if ":" in n else n for n in names]
    except KeyError as e:
        raise _UsageError(f"-m: {e.args[0]}") from None


def _gates(values: Sequence[str]) -> list[tuple[str, float]]:
    gates = []
    for metric, threshold in name_value_pairs(values, "--fail-under"):
        try:
            gates.append((metric, float(threshold)))
        except ValueError:
            raise _UsageError(
                f"--fail-under {metric}={threshold}: the threshold must be a number"
            ) from None
    return gates


#: refusals of what a run directory records (the model, batch mode, a request's parameters):
#: a resume sends the same requests and is refused again. A refused key (401) or permission
#: (403) is not recorded: fixed outside the run, the resume goes on.
_REFUSED_SETTINGS = frozenset({400, 404, 422})


def _after_refusal(status: int | None, run_dir: Path) -> str:
    """What a run stopped by a fatal error keeps, and whether --resume can go on with it."""
    from rageval.log import RunLogError, read_summary

    try:
        summary = read_summary(run_dir)
    except RunLogError:
        summary = None
    finished = (summary.n_finished or 0) if summary is not None else 0
    kept = f"{finished} finished rows are kept in {run_dir}" if finished else "no row finished"
    if status in _REFUSED_SETTINGS:
        reuse = "" if finished else f" (-o {run_dir} --overwrite reuses the directory)"
        return (
            f"{kept}; the run records the settings the endpoint refused, so --resume would be "
            f"refused the same way: change the command and start a new run{reuse}"
        )
    return f"{kept}; continue with --resume {run_dir}"


def _check_gate_names(
    gates: Sequence[tuple[str, float]], metrics: Sequence[str] | None, stored: StoredRun | None
) -> None:
    from rageval.metrics.base import registered_metrics

    if metrics is not None:
        known = set(metrics)
    elif stored is not None:
        known = {name for name, _, _ in stored.metrics}
    else:
        known = set(registered_metrics())
    for metric, _ in gates:
        if metric not in known:
            raise _UsageError(f"--fail-under names {metric!r}, which is not a metric of this run")
    _check_gate_ranges(gates, "--fail-under")


def _check_gate_ranges(gates: Sequence[tuple[str, float]], where: str) -> None:
    """A threshold outside the metric's documented range could never pass (or never fail):
    a typo (1.5, 80 for 0.8), refused before any work."""
    from rageval.metrics.base import named_metric

    for metric, threshold in gates:
        found = named_metric(metric)  # ndcg_at_10 is ndcg's range
        bounds = found[0].value_range if found is not None else None
        if bounds is not None and not bounds[0] <= threshold <= bounds[1]:
            raise _UsageError(
                f"{where} {metric}={threshold:g}: {metric} ranges over {bounds[0]:g}..{bounds[1]:g}, "
                "so this gate could never " + ("pass" if threshold > bounds[1] else "fail")
            )


def _require_a_judge_for(names: Sequence[str], params: Mapping[str, Mapping[str, Any]]) -> None:
    """Metrics named on the command line that need a judge, with none configured, would all
    be skipped and the command would pass having measured nothing: refuse instead. A metric
    whose parameters give it a judge of its own (`checker`: mode "checker") needs no other."""
    from rageval.metrics.base import registered_metrics
    from rageval.runner import NO_JUDGE_CAUSE

    known = registered_metrics()
    judged = [
        n
        for n in names
        if n in known and known[n].needs_llm and not params.get(n, {}).get("checker")
    ]
    if judged:
        offline = ", ".join(n for n, cls in known.items() if not cls.needs_llm)
        raise _UsageError(
            f"{', '.join(judged)} {NO_JUDGE_CAUSE.replace('needs', 'need', len(judged) > 1)} "
            f"(metrics that need no judge: {offline})"
        )


def _stdin_to(run_dir: Path, args: argparse.Namespace) -> Path:
    """Copy the data on stdin into the run directory (so that --resume finds it again); the
    format is --format, else guessed from the first bytes."""
    import shutil

    if (run_dir / "manifest.json").exists() and not args.overwrite:
        raise _UsageError(
            f"{run_dir} already holds a run; resume it (--resume {run_dir}), replace it "
            "(--overwrite) or choose another directory"
        )
    stream = sys.stdin.buffer
    fmt = args.format or _sniff(stream.peek(64) if hasattr(stream, "peek") else b"")
    run_dir.mkdir(parents=True, exist_ok=True)
    copy = run_dir / f"input.{fmt}"
    with copy.open("wb") as fh:
        shutil.copyfileobj(stream, fh)
    return copy


def _sniff(head: bytes) -> str:
    start = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    if start.startswith(b"PAR1"):
        return "parquet"
    if start.startswith(b"["):
        return "json"
    if start.startswith(b"{"):
        return "jsonl"
    return "csv"


def _as_stdin(message: str, copy: Path | None) -> str:
    """An error about the copy of stdin names stdin, as the user gave the data, and the
    format it was read as (guessed unless --format said), not a file they never made."""
    if copy is None:
        return message
    read_as = f"stdin (read as {copy.suffix[1:]}; --format FORMAT if it is another)"
    return message.replace(str(copy), read_as)


def _discard_unused(copy: Path | None, run_dir: Path) -> None:
    """A copy of stdin for a run that never started goes (the directory, if this command made
    it, goes with its lock: rageval._rundir_lock)."""
    if copy is None or (run_dir / "manifest.json").exists():
        return
    copy.unlink(missing_ok=True)


def _show_ray_notices() -> None:
    """The Ray engine's own lines (start-up time, actors, nodes) on stderr: starting Ray takes
    seconds before the first row is done."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("rageval: %(message)s"))
    notices = logging.getLogger("rageval.ray")
    notices.addHandler(handler)
    notices.setLevel(logging.INFO)


def _print_retries(result: EvaluationResult) -> None:
    """Requests sent again: after a transient error (rate limit, timeout, 5xx), and replies
    the judge was asked again for because they failed validation."""
    usage = result.usage_by_metric
    for label, field in (("retried requests", "retries"), ("re-asked replies", "reasks")):
        counts = {name: getattr(u, field) for name, u in usage.items() if getattr(u, field)}
        if counts:
            each = ", ".join(f"{name} {n:,}" for name, n in counts.items())
            out(f"{label}: {sum(counts.values()):,} ({each})")


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
    out("\nnot measured / skipped, by kind:")
    for kind, metrics in sorted(per_metric.items(), key=lambda item: -item[1].total()):
        total = metrics.total()
        meaning = CAUSE_KINDS.get(kind, kind)  # type: ignore[call-overload]
        out(_clip(f"  {kind}: {total:,} {'cell' if total == 1 else 'cells'} -- {meaning}", width))
        hit = ", ".join(f"{m} ({n:,})" for m, n in metrics.most_common())
        out(_clip(f"    {hit}", width))
        for cause, _ in causes[kind].most_common(examples):
            out(_clip(f"    e.g. {' '.join(cause.split())}", width))
    out("  (every cause, per sample: the report and results.jsonl)")


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _print_batches(run_dir: Path) -> None:
    """In batch mode: that the requests went through the Batch API (its prices), and how many
    batches the run made (all its sessions)."""
    from rageval.log import RunLogError, read_batch_events, read_manifest

    try:
        if not read_manifest(run_dir).batch:
            return
        created = sum(event.event == "created" for event in read_batch_events(run_dir))
    except (OSError, RunLogError):
        return
    out(
        f"\njudge requests went through the endpoint's Batch API: {created} "
        f"{'batch' if created == 1 else 'batches'} (recorded in {run_dir / 'batches.jsonl'}), "
        "priced at batch rates"
    )


def _print_left_out(left_out: dict[str, str]) -> None:
    """The metrics the default selection left out, grouped by why, on stderr: never silently."""
    if not left_out:
        return
    by_reason: dict[str, list[str]] = {}
    for name, why in left_out.items():
        by_reason.setdefault(why, []).append(name)
    err(
        "also in the default selection, left out as the data lacks what they need (name one "
        "with -m to see which rows lack what, or map a column with --column-map):"
    )
    for why, names in by_reason.items():
        err(f"  {', '.join(names)}: {why}")


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
        err(f"gate failed: {line}")
    if gates and not failed:
        out(f"all {len(gates)} gate(s) passed")
    return EXIT_GATE if failed else EXIT_OK
