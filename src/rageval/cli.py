"""The `rageval` command line.

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
import contextlib
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from rageval._sync import interrupt_main
from rageval._version import __version__

if TYPE_CHECKING:
    from rageval._config import Settings
    from rageval.embeddings import Embeddings
    from rageval.judge import BatchSettings, Judge, PriceTable
    from rageval.results import EvaluationResult
    from rageval.runner._stored import StoredRun
    from rageval.stats import MetricComparison

EXIT_OK, EXIT_GATE, EXIT_USAGE, EXIT_FATAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
#: `rageval calibrate --min-kappa`: the judge disagrees with the people more than allowed
EXIT_CALIBRATION_GATE = 4
#: `evaluate --max-cost`: the next request could have passed the budget; the run can resume
EXIT_BUDGET = 5
#: another writer holds the run directory (rageval._rundir_lock); nothing was written
EXIT_IN_USE = 6
#: `evaluate`: a metric that ran got no value in any cell (--allow-unmeasured accepts it)
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
    (EXIT_UNMEASURED, "a metric that ran measured no cell at all (--allow-unmeasured accepts it)"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C)"),
    (EXIT_TERMINATED, "terminated (SIGTERM): handled as Ctrl-C"),
)


class _UsageError(Exception):
    """A problem with the command line or its input: printed without a traceback, exit 2."""


def _err(message: str) -> None:
    print(f"rageval: {message}", file=sys.stderr)


class _Stdout:
    """Writes to stdout until its reader goes away (`rageval ... | head -2`): then the rest of
    the output, and Python's own flush at exit, go nowhere, and the command's exit code is
    still the one its work earned."""

    closed = False

    @classmethod
    def write(cls, text: str = "") -> None:
        if cls.closed:
            return
        try:
            print(text)
            sys.stdout.flush()
        except BrokenPipeError:
            cls.closed = True
            with contextlib.suppress(OSError, ValueError):  # stdout may not be a real file
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, sys.stdout.fileno())
                os.close(devnull)


_out = _Stdout.write


@contextlib.contextmanager
def _sigterm_as_sigint() -> Iterator[list[int]]:
    """SIGTERM (a cancelled CI job, `kill`) stops the command the way Ctrl-C does: it is
    turned into SIGINT, so a run ends with its finished rows kept and the resume hint. Yields
    the signals received, for the exit code."""
    received: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        received.append(signum)
        if callable(signal.getsignal(signal.SIGINT)):
            signal.raise_signal(signal.SIGINT)  # Ctrl-C's own path (asyncio's handler too)
        # SIGINT ignored (a background job of a script): stop all the same, the way asyncio's
        # own SIGINT handler would, so no KeyboardInterrupt lands inside a finalizer
        elif not interrupt_main():
            raise KeyboardInterrupt  # between runs: nothing else is running

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield received
        return
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


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


# ---------------------------------------------------------------------- evaluate


def _cmd_evaluate(args: argparse.Namespace) -> int:
    """`rageval evaluate`, holding the run directory from the start (a dry run writes none):
    a second writer is refused before this command imports anything heavy."""
    from rageval._rundir_lock import hold_run_dir
    from rageval.errors import RunDirError, RunDirInUseError

    run_dir = Path(args.resume or args.output or _fresh_run_dir())
    if args.dry_run:
        return _evaluate_in(run_dir, args)
    try:
        with hold_run_dir(run_dir):
            return _evaluate_in(run_dir, args)
    except RunDirInUseError as e:
        _err(str(e))
        return EXIT_IN_USE
    except RunDirError as e:  # a path that cannot be a run directory
        raise _UsageError(str(e)) from None


def _evaluate_in(run_dir: Path, args: argparse.Namespace) -> int:
    from rageval._config import Settings, merged_params, parse_params
    from rageval.errors import BudgetReached, MissingExtraError
    from rageval.judge import FatalJudgeError
    from rageval.runner import RunConfigError, RunDirError, evaluate
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
        # resuming, the run's manifest holds its settings: no config file applies
        settings = Settings() if args.resume else _load_settings(args.config)
        stored = _stored_run(args.resume) if args.resume else None
        cli_params = parse_params(args.param)
    except ValueError as e:  # a bad config file, -p or run directory
        raise _UsageError(str(e)) from None
    metrics = _own_metrics_by_name(_metric_names(args.metric) or settings.metrics)
    if stored is not None and any(":" in name for name, _, _ in stored.metrics):
        _import_from_cwd()  # the run used a metric of the user's own, recorded by its module
    params = merged_params(settings.params, cli_params)
    judge, embeddings = _judge_and_embeddings(args, settings, stored)
    column_map = dict(_pairs(args.column_map, "--column-map")) or settings.column_map
    human_labels = _pairs(args.human_labels, "--human-labels")
    if args.dry_run:
        return _dry_run(
            data,
            metrics,
            judge,
            embeddings,
            column_map=column_map or None,
            metric_params=params or None,
            on_invalid="skip" if args.skip_invalid else settings.on_invalid,
            repeats=args.repeats or 1,
            batch=bool(_batch_settings(args.batch, settings.batch)),
            as_json=args.json,
        )
    gates = _gates(args.fail_under)
    # the config file's gates are general: those on metrics this run has apply
    file_gates = {m: v for m, v in settings.fail_under.items() if m not in dict(gates)}
    _check_param_names(cli_params, metrics)
    _check_gate_names(gates, metrics, stored)
    _check_gate_ranges(list(file_gates.items()), "the config file's fail_under")
    if judge is None and metrics:
        _require_a_judge_for(metrics)
    if args.engine == "ray":
        _show_ray_notices()
    copy = _stdin_to(run_dir, args) if data == "-" else None
    interrupted = f"finished rows are kept in {run_dir}; continue with --resume {run_dir}"
    try:
        with _sigterm_as_sigint() as signals:
            result = evaluate(
                copy or data,
                metrics=metrics,
                llm=judge,
                embeddings=embeddings,
                column_map=column_map or None,
                metric_params=params or None,
                on_invalid="skip" if args.skip_invalid else settings.on_invalid,
                run_dir=run_dir,
                resume=bool(args.resume),
                overwrite=args.overwrite,
                progress=False if args.quiet else None,
                probe=not args.no_probe and settings.probe is not False,
                human_labels=human_labels or None,
                repeats=args.repeats,
                engine=args.engine,
                ray_address=args.ray_address,
                ray_actors=args.ray_actors,
                max_cost=args.max_cost if args.max_cost is not None else settings.max_cost,
                # resuming without --batch: as the run was started
                batch=_batch_settings(args.batch, settings.batch),
            )
    except (
        InvalidDataError,
        RunConfigError,
        RunDirError,
        FileNotFoundError,
        MissingExtraError,
    ) as e:
        _discard_unused(copy, run_dir)
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
            f"stopped at the budget: ${e.spent_usd:.6f} spent of --max-cost "
            f"${e.max_cost_usd:.6f} (the next request could have passed it); {finished} "
            f"finished, kept in {run_dir}; continue with --resume {run_dir} and a larger "
            "--max-cost (or none)"
        )
        return EXIT_BUDGET
    except (FatalJudgeError, RayEngineError) as e:
        _discard_unused(copy, run_dir)
        refused = isinstance(e, FatalJudgeError) and e.status
        _err(f"the judge endpoint refused: {e}" if refused else str(e))
        if (run_dir / "manifest.json").exists():
            _err(interrupted)
        return EXIT_FATAL
    except KeyboardInterrupt:
        _discard_unused(copy, run_dir)
        how = "terminated (SIGTERM)" if signals else "interrupted"
        if (run_dir / "manifest.json").exists():
            _err(f"{how}; {interrupted}")
        else:
            _err(how)
        return EXIT_TERMINATED if signals else EXIT_INTERRUPTED
    _out(result.summary_table())
    _print_retries(result)
    _print_causes(result)
    _print_batches(run_dir)
    report = run_dir / "report.html"
    _out(f"\nrun directory: {run_dir}" + (f"  (report: {report})" if report.exists() else ""))
    _print_left_out(result.metrics_left_out)
    gated = _check_gates(
        result, [*gates, *((m, v) for m, v in file_gates.items() if m in result.metrics)]
    )
    unmeasured = result.unmeasured_metrics
    for name, why in unmeasured.items():
        _err(f"measured nothing: {name}: {why}")
    if gated != EXIT_OK:
        return gated
    if unmeasured and not args.allow_unmeasured:
        _err(
            f"exit {EXIT_UNMEASURED}: {len(unmeasured)} metric(s) measured nothing (the causes "
            "above; every one in the report); --allow-unmeasured accepts such a run"
        )
        return EXIT_UNMEASURED
    return EXIT_OK


def _print_left_out(left_out: dict[str, str]) -> None:
    """The metrics the default selection left out, grouped by why, on stderr: never silently."""
    if not left_out:
        return
    by_reason: dict[str, list[str]] = {}
    for name, why in left_out.items():
        by_reason.setdefault(why, []).append(name)
    _err(
        "not run (no metric was named, and the data lacks what these need; name one with -m "
        "to see which rows lack what, or map a column with --column-map):"
    )
    for why, names in by_reason.items():
        _err(f"  {', '.join(names)}: {why}")


def _dry_run(
    data: str | None,
    metrics: Sequence[str] | None,
    judge: Judge | list[Judge] | None,
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
    _out(found.model_dump_json(indent=2) if as_json else found.table())
    return EXIT_OK


def _batch_settings(
    flag: bool, configured: bool | dict[str, int | float | str] | None
) -> bool | BatchSettings | None:
    """--batch or the config file's `batch = true` (True: the default settings, or resuming a
    batched run, its own), the config file's table of BatchSettings, or None when neither asks
    for batch mode (resuming: as the run was)."""
    from rageval.judge import BatchSettings

    if isinstance(configured, dict):
        try:
            return BatchSettings(**configured)  # type: ignore[arg-type]
        except (TypeError, ValueError) as e:
            raise _UsageError(f"the config file's batch settings: {e}") from None
    return True if flag or configured else None


def _prices(values: Sequence[str]) -> PriceTable | None:
    """--price MODEL=INPUT,OUTPUT[,CACHED_INPUT[,BATCH_INPUT,BATCH_OUTPUT]] (USD per million)."""
    if not values:
        return None
    from rageval.judge import ModelPrice, PriceTable

    table = {}
    for model, spec in _pairs(values, "--price"):
        try:
            table[model] = ModelPrice.of([float(v) for v in spec.split(",")])
        except ValueError:
            raise _UsageError(
                f"--price {model}={spec}: give INPUT,OUTPUT[,CACHED_INPUT[,BATCH_INPUT,"
                "BATCH_OUTPUT]] in USD per million tokens"
            ) from None
    return PriceTable(table)


def _positional_data(args: argparse.Namespace) -> str | None:
    """DATA, wherever argparse found it: an option taking several values (--column-map,
    --fail-under...) hands over the words after its NAME=VALUE pairs, which are DATA."""
    spilled: list[str] = args.spilled
    if args.data is not None and spilled:
        raise _UsageError(f"unexpected argument(s): {' '.join(spilled)} (DATA is {args.data})")
    if len(spilled) > 1:
        raise _UsageError(f"unexpected argument(s): {' '.join(spilled[1:])}")
    return args.data if args.data is not None else (spilled[0] if spilled else None)


def _data_argument(args: argparse.Namespace) -> str | None:
    """`evaluate`'s DATA: required unless resuming; not stdin when resuming."""
    data = _positional_data(args)
    if data is None and not args.resume:
        raise _UsageError("DATA is required (a data file, or - for stdin), or --resume DIR")
    if data == "-" and args.resume:
        raise _UsageError(
            f"a run read from stdin keeps a copy of its data: resume it with --resume "
            f"{args.resume} alone"
        )
    return data


def _stored_run(run_dir: str) -> StoredRun:
    from rageval.runner._stored import read_stored_run

    return read_stored_run(run_dir)


def _load_settings(path: str | None) -> Settings:
    from rageval._config import load_settings

    return load_settings(path)


def _judge(
    args: argparse.Namespace, stored: StoredRun | None, settings: Settings
) -> Judge | list[Judge] | None:
    """The judge the command line, the environment and the config file configure, one per
    --base-url (a list when there are several: the rows are spread over them); resuming, the
    run's own judge (from its manifest, on its endpoints) with what the command line changes."""
    from rageval._config import configured_judge
    from rageval.runner._stored import judge_from_settings, judge_settings

    overrides: dict[str, Any] = {}
    for option, setting in (
        ("concurrency", "max_concurrency"),
        ("requests_per_minute", "requests_per_minute"),
        ("tokens_per_minute", "tokens_per_minute"),
    ):
        if getattr(args, option) is not None:
            overrides[setting] = getattr(args, option)
    if args.no_cache:
        overrides["cache"] = False
    prices = _prices(args.price)
    if prices is not None:
        overrides["prices"] = prices
    judges: list[Judge | None]
    if stored is not None and args.llm is None:
        if stored.judge is None:
            return None
        resumed = {**judge_settings(stored.judge), **overrides}
        urls = args.base_url or stored.judge.get("base_urls") or [resumed.get("base_url")]
        judges = [judge_from_settings({**resumed, "base_url": url}) for url in urls]
    else:
        urls = args.base_url or [None]
        judges = [
            configured_judge(settings, model=args.llm, base_url=url, **overrides) for url in urls
        ]
    found = [j for j in judges if j is not None]
    return found if len(found) > 1 else next(iter(found), None)


def _embeddings(args: argparse.Namespace, settings: Settings) -> Embeddings | None:
    from rageval.runner import embeddings_from_spec

    spec = args.embeddings or settings.embeddings
    if not spec:
        return None  # the local model if a metric needs one; resuming, the run's own
    base_url = args.base_url[0] if args.base_url else None
    return embeddings_from_spec(spec, base_url=base_url, cache=not args.no_cache)


def _check_param_names(params: dict[str, dict[str, Any]], metrics: Sequence[str] | None) -> None:
    """-p for a metric that is not one, or not one of those named for the run, would do
    nothing: say so."""
    from rageval.metrics.base import metric_class

    for name in params:
        try:
            metric_class(name)
        except KeyError as e:
            raise _UsageError(f"-p {name}...: {e.args[0]}") from None
        if metrics is not None and name not in metrics:
            raise _UsageError(f"-p {name}...: {name} is not a metric of this run")


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
    from rageval.metrics.base import registered_metrics

    known = registered_metrics()
    for metric, threshold in gates:
        bounds = known[metric].value_range if metric in known else None
        if bounds is not None and not bounds[0] <= threshold <= bounds[1]:
            raise _UsageError(
                f"{where} {metric}={threshold:g}: {metric} ranges over {bounds[0]:g}..{bounds[1]:g}, "
                "so this gate could never " + ("pass" if threshold > bounds[1] else "fail")
            )


def _require_a_judge_for(names: Sequence[str]) -> None:
    """Metrics named on the command line that need a judge, with none configured, would all
    be skipped and the command would pass having measured nothing: refuse instead."""
    from rageval.metrics.base import registered_metrics
    from rageval.runner import NO_JUDGE_CAUSE

    known = registered_metrics()
    judged = [n for n in names if n in known and known[n].needs_llm]
    if judged:
        offline = ", ".join(n for n, cls in known.items() if not cls.needs_llm)
        raise _UsageError(
            f"{', '.join(judged)} {NO_JUDGE_CAUSE.replace('needs', 'need', len(judged) > 1)} "
            f"(metrics that need no judge: {offline})"
        )


_FORMATS = ("jsonl", "json", "csv", "tsv", "parquet")


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


def _discard_unused(copy: Path | None, run_dir: Path) -> None:
    """A copy of stdin for a run that never started goes (the directory, if this command made
    it, goes with its lock: rageval._rundir_lock)."""
    if copy is None or (run_dir / "manifest.json").exists():
        return
    copy.unlink(missing_ok=True)


def _judge_and_embeddings(
    args: argparse.Namespace, settings: Settings | None = None, stored: StoredRun | None = None
) -> tuple[Judge | list[Judge] | None, Embeddings | None]:
    """The judge and embeddings of the options added by :func:`_add_judge_options`, the
    environment and the config file (`settings`, else the file `--config` or the search
    finds); resuming, the run's own (`stored`) with what the command line changes."""
    try:
        if settings is None:
            settings = _load_settings(args.config)
        return _judge(args, stored, settings), _embeddings(args, settings)
    except ValueError as e:  # a bad config, base URL, model name or embeddings spec
        raise _UsageError(str(e)) from None


def _show_ray_notices() -> None:
    """The Ray engine's own lines (start-up time, actors, nodes) on stderr: starting Ray takes
    seconds before the first row is done."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("rageval: %(message)s"))
    notices = logging.getLogger("rageval.ray")
    notices.addHandler(handler)
    notices.setLevel(logging.INFO)


def _fresh_run_dir() -> Path:
    """rageval-runs/<timestamp>, with a suffix if a run of the same second exists."""
    base = Path("rageval-runs") / datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


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
    _out(
        f"\njudge requests went through the endpoint's Batch API: {created} "
        f"{'batch' if created == 1 else 'batches'} (recorded in {run_dir / 'batches.jsonl'}), "
        "priced at batch rates"
    )


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
    _out("\nnot measured / skipped, by kind:")
    for kind, metrics in sorted(per_metric.items(), key=lambda item: -item[1].total()):
        total = metrics.total()
        meaning = CAUSE_KINDS.get(kind, kind)  # type: ignore[call-overload]
        _out(_clip(f"  {kind}: {total:,} {'cell' if total == 1 else 'cells'} -- {meaning}", width))
        hit = ", ".join(f"{m} ({n:,})" for m, n in metrics.most_common())
        _out(_clip(f"    {hit}", width))
        for cause, _ in causes[kind].most_common(examples):
            _out(_clip(f"    e.g. {' '.join(cause.split())}", width))
    _out("  (every cause, per sample: the report and results.jsonl)")


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _print_retries(result: EvaluationResult) -> None:
    """Requests sent again: after a transient error (rate limit, timeout, 5xx), and replies
    the judge was asked again for because they failed validation."""
    usage = result.usage_by_metric
    for label, field in (("retried requests", "retries"), ("re-asked replies", "reasks")):
        counts = {name: getattr(u, field) for name, u in usage.items() if getattr(u, field)}
        if counts:
            each = ", ".join(f"{name} {n:,}" for name, n in counts.items())
            _out(f"{label}: {sum(counts.values()):,} ({each})")


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
        _out(f"all {len(gates)} gate(s) passed")
    return EXIT_GATE if failed else EXIT_OK


# ---------------------------------------------------------------------- other commands


def _cmd_report(args: argparse.Namespace) -> int:
    from rageval.report import write_report

    if not (Path(args.run_dir) / "manifest.json").exists():
        raise _UsageError(f"{args.run_dir} is not a rageval run directory (no manifest.json)")
    _out(str(write_report(Path(args.run_dir))))
    return EXIT_OK


def _cmd_compare(args: argparse.Namespace) -> int:
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
    if not comparisons:
        raise _UsageError("the two runs have no metric in common")
    _out(f"A = {args.run_a} ({len(a)} samples)\nB = {args.run_b} ({len(b)} samples)")
    _out(f"{shared} samples matched by id\n")
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
    _out(_table(header, rows))
    _out(
        "\npaired over samples (matched by id) measured in both runs; CI: paired percentile "
        "bootstrap; p-value: sign-flip permutation test of no difference"
    )
    same = [c.metric for c in comparisons if c.diff.no_difference]
    if same:
        which = "every metric" if len(same) == len(comparisons) else ", ".join(same)
        _out(
            f"\nno difference in {which}: every sample measured in both runs has the same "
            f"value in both (differences below {TIE_BELOW:g} count as none)"
        )
    _print_ppi_comparisons(comparisons)
    for c in comparisons:
        if c.movers:
            _out(f"\n{c.metric}: samples that moved most")
            for sid, x, y in c.movers:
                _out(f"  {sid}: {x:.4f} -> {y:.4f} ({y - x:+.4f})")
    return EXIT_OK


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
    print(_table(header, rows))


def _fmt_interval(mean: float | None, low: float | None, high: float | None) -> str:
    if mean is None:
        return "-"
    return f"{mean:.4f}" + ("" if low is None or high is None else f" [{low:.4f}, {high:.4f}]")


def _cmd_metrics(args: argparse.Namespace) -> int:
    import json

    from rageval.metrics.base import metric_class, registered_metrics

    if args.name:
        try:
            cls = metric_class(args.name)
        except KeyError as e:
            raise _UsageError(str(e.args[0])) from None
        _out(f"{cls.name}: {cls.summary}")
        _out(f"required fields: {', '.join(cls.required_fields)}")
        _out(
            f"judge: {'yes' if cls.needs_llm else 'no'}; "
            f"embeddings: {'yes' if cls.needs_embeddings else 'no'}"
        )
        if cls.value_range is not None:
            _out(f"range: {cls.value_range[0]:g}..{cls.value_range[1]:g}")
        params = cls().params()
        if not params:
            _out("parameters: none")
            return EXIT_OK
        _out("parameters (defaults; set one with -p NAME.PARAM=VALUE):")
        for key, value in params.items():
            _out(f"  {key} = {json.dumps(value, ensure_ascii=False, indent=2, default=str)}")
        return EXIT_OK
    rows = []
    for name, cls in registered_metrics().items():
        # the parameters that hold something by default (those that are off, None or empty,
        # such as the guidance of the judge metrics, are listed by `rageval metrics NAME`)
        defaults = " ".join(
            f"{k}={_short(v)}" for k, v in cls().params().items() if v not in (None, [], {})
        )
        rows.append(
            (
                name,
                ", ".join(cls.required_fields),
                "yes" if cls.needs_llm else "no",
                "yes" if cls.needs_embeddings else "no",
                defaults,
            )
        )
    _out(_table(("metric", "required fields", "judge", "embeddings", "defaults"), rows))
    _out("\n(every parameter in full: rageval metrics NAME)")
    return EXIT_OK


def _short(value: Any, width: int = 40) -> str:
    """A parameter's value in at most about `width` characters."""
    import json

    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= width:
        return text
    if isinstance(value, dict):
        return f"{{...{len(value)} entries}}"
    if isinstance(value, (list, tuple)):
        return f"[...{len(value)} items]"
    return text[: width - 4] + '..."' if isinstance(value, str) else text[: width - 3] + "..."


def _cmd_cache(args: argparse.Namespace) -> int:
    from rageval.judge import RequestCache

    cache = RequestCache(args.cache_dir)
    if args.action == "clear":
        removed = cache.clear()
        _out(f"cleared {cache.path}: " + ", ".join(f"{n} {k}" for k, n in removed.items()))
        return EXIT_OK
    stats = cache.stats()
    _out(f"path: {stats['path']}")
    _out(f"size: {stats['size_bytes']:,} bytes")
    for table, n in stats["entries"].items():
        _out(f"{table}: {n:,} entries")
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


class _PairsThenData(argparse.Action):
    """NAME=VALUE pairs for an option taking several (--column-map, --fail-under). The words
    after the pairs are not the option's: they go to `spilled`, where DATA is looked for, so
    `--column-map query=user_input data.jsonl` works as `data.jsonl --column-map ...` does."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        words = list(values)
        first_plain = next((i for i, w in enumerate(words) if "=" not in w), len(words))
        pairs, rest = words[:first_plain], words[first_plain:]
        if not pairs or any("=" in w for w in rest):
            pairs, rest = words, []  # not pairs then DATA: the command reports the bad word
        setattr(namespace, self.dest, [*getattr(namespace, self.dest), *pairs])
        namespace.spilled = [*namespace.spilled, *rest]


def _add_pairs_option(
    parser: argparse.ArgumentParser, flag: str, *, metavar: str, help: str
) -> None:
    """Add `flag`, an option taking NAME=VALUE pairs (repeatable), whose following words are
    left for DATA (:class:`_PairsThenData`: they go to ``spilled``, empty by default)."""
    parser.set_defaults(spilled=[])
    parser.add_argument(
        flag, nargs="+", action=_PairsThenData, default=[], metavar=metavar, help=help
    )


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        _err(message)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rageval",
        description="Score RAG outputs with LLM judges and embeddings.",
        epilog="judge configuration from the environment: RAGEVAL_LLM (model), OPENAI_BASE_URL\n"
        "or RAGEVAL_BASE_URL (endpoint: OpenAI, Ollama, vLLM...), OPENAI_API_KEY.\n\n"
        + _exit_codes_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"rageval {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    ev = sub.add_parser(
        "evaluate",
        help="score a dataset and write a run directory",
        epilog=_exit_codes_help(),
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
    _add_judge_options(ev)
    ev.add_argument(
        "--resume",
        metavar="DIR",
        help="continue the interrupted run in DIR (its data, metrics and settings are the "
        "run's own, as its manifest records them)",
    )
    ev.add_argument(
        "--overwrite", action="store_true", help="replace the run already in the -o DIR"
    )
    _add_pairs_option(
        ev,
        "--fail-under",
        metavar="METRIC=VALUE",
        help="exit 1 if the metric's mean is below VALUE (or not measured)",
    )
    ev.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="METRIC.PARAM=VALUE",
        help="a metric's constructor argument, e.g. answer_correctness.weights=[0.5,0.5] "
        "(VALUE read as TOML: numbers, true/false, lists, quoted text; else text)",
    )
    ev.add_argument(
        "--format",
        choices=_FORMATS,
        default=None,
        help="format of DATA read from stdin (default: guessed from its first bytes)",
    )
    ev.add_argument(
        "--no-probe",
        action="store_true",
        help="do not check first, with one quick request, that each endpoint is reachable",
    )
    _add_pairs_option(
        ev,
        "--human-labels",
        metavar="COLUMN=METRIC",
        help="a column of human scores for METRIC (empty where not labelled): the summary adds "
        "the PPI++ mean of the label, the judge's scores rectified by the labelled rows",
    )
    ev.add_argument(
        "--repeats",
        type=_positive_int,
        default=None,
        metavar="K",
        help="score every judge cell K times (default 1; resuming, the run's): the repeats "
        "bypass the cache, the value is their mean, and the summary says how much of the CI "
        "is the judge's own noise",
    )
    ev.add_argument(
        "--engine",
        choices=("local", "ray"),
        default="local",
        help="where rows are scored: this process (default) or Ray Data (needs rageval[ray])",
    )
    ev.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="with --engine ray: join this Ray cluster (host:port) instead of starting a local Ray",
    )
    ev.add_argument(
        "--ray-actors",
        type=_positive_int,
        metavar="N",
        help="with --engine ray: actors that score rows (default: from the cluster's CPUs)",
    )
    ev.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    ev.add_argument(
        "--allow-unmeasured",
        action="store_true",
        help=f"exit 0 even when a metric that ran measured no cell at all (default: exit "
        f"{EXIT_UNMEASURED}, e.g. a judge whose every reply failed validation)",
    )
    cost = ev.add_argument_group("cost control (README: Cost control)")
    cost.add_argument(
        "--dry-run",
        action="store_true",
        help="validate the data and estimate the requests, tokens and cost of the run (an "
        "estimate and a range, per metric); send nothing, write nothing",
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
        help="send the judge requests through the endpoint's Batch API (about half the price, "
        "results within 24 hours)",
    )
    ev.set_defaults(func=_cmd_evaluate)

    from rageval._calibrate_cli import add_calibrate_command

    add_calibrate_command(sub, _add_judge_options)

    from rageval._align_cli import add_align_command

    add_align_command(sub, _add_judge_options)

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
    met.add_argument("name", metavar="NAME", nargs="?", help="one metric, every parameter")
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


def _exit_codes_help() -> str:
    return "exit codes:\n" + "\n".join(f"  {code:<4} {meaning}" for code, meaning in EXIT_CODES)


def _add_judge_options(parser: argparse.ArgumentParser) -> None:
    """The options of a command that scores data: judge, embeddings, run directory, input."""
    parser.add_argument("--llm", metavar="MODEL", help="judge model (default: $RAGEVAL_LLM)")
    parser.add_argument(
        "--base-url",
        metavar="URL",
        action="append",
        default=[],
        help="OpenAI-compatible endpoint (default: $RAGEVAL_BASE_URL, $OPENAI_BASE_URL, OpenAI);"
        " repeat it to spread the rows over several servers of the same model",
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
        "--requests-per-minute",
        type=_positive_float,
        metavar="N",
        help="judge requests per minute at most, per endpoint (with --engine ray: for all "
        "actors together)",
    )
    parser.add_argument(
        "--tokens-per-minute",
        type=_positive_float,
        metavar="N",
        help="judge tokens per minute at most, per endpoint (as --requests-per-minute)",
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="do not read or write the request cache"
    )
    _add_pairs_option(
        parser, "--column-map", metavar="THEIRS=OURS", help="rename columns, e.g. query=user_input"
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="config file (default: the nearest rageval.toml, or pyproject.toml with "
        "[tool.rageval], here or above); the command line and the environment win over it",
    )
    parser.add_argument(
        "--skip-invalid",
        action="store_true",
        help="skip cells of rows that lack a required field instead of stopping",
    )
    _add_pairs_option(
        parser,
        "--price",
        metavar="MODEL=IN,OUT[,CACHED[,BATCH_IN,BATCH_OUT]]",
        help="the judge model's price in USD per million tokens (input, output, cached input, "
        "batch input and output), for a model the built-in table does not know",
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
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
    except ImportError as e:
        from rageval.errors import MissingExtraError

        if not isinstance(e, MissingExtraError):
            raise
        _err(str(e))  # an optional extra this command needs: its install command, one line
        return EXIT_USAGE
    except KeyboardInterrupt:
        _err("interrupted")
        return EXIT_INTERRUPTED
    return code
