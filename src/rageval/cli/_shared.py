"""What every command of the command line shares: usage errors, output, SIGTERM handling,
option types, and the options of a command that scores data with what they configure (the
metric parameters, the judge and embeddings); the exit codes are
:mod:`rageval.cli._exit_codes`.

The options of how a run executes are defined here once (:func:`add_run_options`) and read
into one :class:`~rageval.runner.RunConfig` (:func:`read_run_options`), so every command that
scores data -- evaluate, calibrate, align, pairwise, generate -- takes all of them: the run
directory, --overwrite, the engine, the budget, batch mode, the endpoint check, the progress
line, human labels, observers and the request cache. One resolver (:func:`resolve_run`) reads
them and the judges' JudgeSpecs, each from the first layer that sets it: the command line, the
environment, a new run's config file or a resumed run's manifest, the defaults.

The command modules import this one, and it imports none of them. Like them, it imports only
the standard library until a command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict

from rageval._progress import text_table as text_table  # the CLI's tables, in one place

if TYPE_CHECKING:
    from rageval._config import Settings
    from rageval.embeddings import Embeddings
    from rageval.judge import BatchSettings, Judge, PriceTable
    from rageval.observers import RunObserver
    from rageval.runner import Panel, RunConfig
    from rageval.runner._runconfig import JudgeSetup
    from rageval.runner._stored import StoredRun


class _UsageError(Exception):
    """A problem with the command line or its input: printed without a traceback, exit 2."""


def err(message: str) -> None:
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


out = _Stdout.write


@contextlib.contextmanager
def sigterm_as_sigint() -> Iterator[list[int]]:
    """SIGTERM (a cancelled CI job, `kill`) stops the command the way Ctrl-C does: it is
    turned into SIGINT, so a run ends with its finished rows kept and the resume hint. Yields
    the signals received, for the exit code."""
    from rageval._sync import interrupt_main  # asyncio: loaded when a command runs, not before

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


def name_value_pairs(values: Sequence[str], what: str) -> list[tuple[str, str]]:
    """The NAME=VALUE words of option `what`, split (a word without both is a usage error)."""
    found = []
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise _UsageError(f"{what} must look like NAME=VALUE, got {item!r}")
        found.append((key.strip(), value.strip()))
    return found


def stated_language(text: str) -> str:
    """The argparse type of ``--language``: an ISO 639-1 code or a language's name."""
    from rageval.samples import language_problem

    problem = language_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text.strip()


def whole_number(minimum: int) -> Callable[[str], int]:
    """The argparse type of an option whose value is a whole number of at least `minimum`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value

    return parse


def endpoint_url(text: str) -> str:
    """The argparse type of --base-url: an empty URL is refused rather than read as "not
    given" (which would send the judge's requests to OpenAI): it is what a script passes when
    the variable meant to hold the URL is unset. (The endpoint checks the scheme.)"""
    if not text.strip():
        raise argparse.ArgumentTypeError("the URL is empty (is the variable meant to hold it set?)")
    return text


def number(more_than: float, less_than: float | None = None) -> Callable[[str], float]:
    """The argparse type of an option whose value is a number above `more_than` (and below
    `less_than`, if given)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if less_than is None and not value > more_than:
            raise argparse.ArgumentTypeError(f"must be more than {more_than:g}, got {text}")
        if less_than is not None and not more_than < value < less_than:
            raise argparse.ArgumentTypeError(
                f"must be between {more_than:g} and {less_than:g}, got {text}"
            )
        return value

    return parse


positive_int = whole_number(1)
positive_float = number(0)


def positional_data(args: argparse.Namespace) -> str | None:
    """DATA, wherever argparse found it: an option taking several values (--column-map,
    --fail-under...) hands over the words after its NAME=VALUE pairs, which are DATA."""
    spilled: list[str] = args.spilled
    if args.data is not None and spilled:
        raise _UsageError(f"unexpected argument(s): {' '.join(spilled)} (DATA is {args.data})")
    if len(spilled) > 1:
        raise _UsageError(f"unexpected argument(s): {' '.join(spilled[1:])}")
    return args.data if args.data is not None else (spilled[0] if spilled else None)


def add_labels_file_option(
    parser: argparse.ArgumentParser,
    help: str = "the labels file `rageval label` wrote on DATA: its label columns are read as "
    "columns of DATA (empty where a row has no label)",
) -> None:
    """--labels-file: the labels `rageval label` writes (there) and the other commands read as
    columns of DATA."""
    parser.add_argument("--labels-file", metavar="FILE", help=help)


def add_threshold_option(parser: argparse.ArgumentParser, help: str) -> None:
    """--threshold X: where a judge score counts as 1 against binary (0/1) labels."""
    parser.add_argument("--threshold", type=float, default=0.5, metavar="X", help=help)


def with_labels_file(
    args: argparse.Namespace, data: str | None
) -> str | list[dict[str, Any]] | None:
    """DATA, or with --labels-file its rows with the file's label columns put in (said on
    stderr, with a warning when the rows were not chosen uniformly)."""
    if getattr(args, "labels_file", None) is None:
        return data
    from rageval.labelling import LabelsFileError, rows_with_labels
    from rageval.samples import InvalidDataError

    if data is None or data == "-":
        raise _UsageError("--labels-file needs DATA as a file (the data that was labelled)")
    if not Path(args.labels_file).exists():
        raise _UsageError(f"--labels-file: {args.labels_file} does not exist")
    try:
        merged = rows_with_labels(data, args.labels_file)
    except (InvalidDataError, LabelsFileError, ValueError, FileNotFoundError) as e:
        raise _UsageError(str(e)) from None
    counts = ", ".join(f"{c} ({n} rows)" for c, n in merged.labelled.items()) or "none"
    err(f"labels from {args.labels_file}: {counts}")
    for column, people in merged.people.items():
        kappa = people["kappa"]
        shown = _interval(kappa["value"], kappa["low"], kappa["high"])
        err(
            f"{column}: the annotators {' and '.join(people['pair'])} agree with each other at "
            f"Cohen's κ {shown} on {people['rows']} rows (a judge's κ near it is as good as a "
            "second person's; the first annotator's label of each row is used)"
        )
    for column in merged.unequal:
        err(
            f"warning: the rows of {column!r} were chosen where the judge was least certain "
            "(rageval label --order uncertain): the run's statistics take them for a uniform "
            "sample; the PPI mean and kappa weighted for their probabilities follow the table"
        )
    return merged.rows


def print_weighted_labels(
    args: argparse.Namespace, run_dir: Path, pairs: Sequence[tuple[str, str]]
) -> None:
    """With --labels-file of rows chosen with unequal probabilities (rageval label --order
    uncertain): each (column, metric)'s PPI mean and judge κ weighted by 1/π, which stand for
    all the rows (the run's own take the labelled rows for a uniform sample)."""
    if getattr(args, "labels_file", None) is None:
        return
    from rageval.labelling import read_rows, weighted_statistics

    run = read_rows(run_dir)
    threshold = getattr(args, "threshold", 0.5)
    for column, metric in pairs:
        if metric not in run.metrics:
            continue
        judge = dict(zip((r.id for r in run.rows), run.judge_values(metric), strict=True))
        found = weighted_statistics(args.labels_file, column, judge, threshold=threshold)
        if found is None:
            continue
        ppi, kappa = found.get("ppi"), found.get("judge_kappa")
        parts = [f"PPI mean {_interval(ppi['mean'], ppi['low'], ppi['high'])}"] if ppi else []
        if kappa:
            parts.append(f"Cohen's κ {_interval(kappa['value'], kappa['low'], kappa['high'])}")
        out(
            f"{metric} <- {column}, weighted for the rows' selection probabilities "
            f"(rageval label --order uncertain): {'; '.join(parts) or 'too few labels'}"
        )


def _interval(value: float | None, low: float | None, high: float | None) -> str:
    if value is None:
        return "undefined"
    return f"{value:.3f}" + ("" if low is None or high is None else f" [{low:.3f}, {high:.3f}]")


def run_dir_of(args: argparse.Namespace) -> Path:
    """The run directory of a new run: -o DIR, else a fresh one."""
    return Path(args.output) if args.output else _fresh_run_dir()


def _fresh_run_dir() -> Path:
    """rageval-runs/<timestamp>, with a suffix if a run of the same second exists."""
    base = Path("rageval-runs") / datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{base.name}-{n}")
    return candidate


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


def add_pairs_option(
    parser: argparse.ArgumentParser, flag: str, *, metavar: str, help: str
) -> None:
    """Add `flag`, an option taking NAME=VALUE pairs (repeatable), whose following words are
    left for DATA (:class:`_PairsThenData`: they go to ``spilled``, empty by default)."""
    parser.set_defaults(spilled=[])
    parser.add_argument(
        flag, nargs="+", action=_PairsThenData, default=[], metavar=metavar, help=help
    )


def add_run_options(parser: argparse.ArgumentParser, *, param_help: str) -> None:
    """The options of a command that scores data (:func:`read_run_options` reads them): the
    metrics' -p (`param_help`: what it means to this command), the judge, embeddings, run
    directory, input, and --no-probe."""
    parser.add_argument(
        "-p",
        "--param",
        action="append",
        default=[],
        metavar="METRIC.PARAM=VALUE",
        help=param_help,
    )
    parser.add_argument(
        "--llm",
        metavar="MODEL",
        action="append",
        default=[],
        help="judge model (default: $RAGEVAL_LLM); repeat it, each with its own --base-url, "
        "for a judge panel: every judge scores every judge cell (docs/panels.md)",
    )
    parser.add_argument(
        "--base-url",
        metavar="URL",
        type=endpoint_url,
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
        type=positive_int,
        metavar="N",
        help="judge requests in flight at most (default 16)",
    )
    parser.add_argument(
        "--requests-per-minute",
        type=positive_float,
        metavar="N",
        help="judge requests per minute at most, per endpoint (with --engine ray: for all "
        "actors together)",
    )
    parser.add_argument(
        "--tokens-per-minute",
        type=positive_float,
        metavar="N",
        help="judge tokens per minute at most, per endpoint (as --requests-per-minute)",
    )
    parser.add_argument(
        "--judge-scoring",
        choices=("auto", "probabilities", "sampled"),
        default=None,
        help="how verdicts and ratings are scored: by the probabilities of their options from "
        "the token log-probabilities, by the values sampled, or auto (default: probabilities "
        "where the endpoint returns them; docs/judge-probabilities.md)",
    )
    parser.add_argument(
        "--cache",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="read and write the request cache (default; resuming: as the run did); "
        "--no-cache: neither",
    )
    add_pairs_option(
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
    add_pairs_option(
        parser,
        "--price",
        metavar="MODEL=IN,OUT[,CACHED[,BATCH_IN,BATCH_OUT]]",
        help="the judge model's price in USD per million tokens (input, output, cached input, "
        "batch input and output), for a model the built-in table does not know",
    )
    parser.add_argument(
        "--probe",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="check first, with one quick request, that each endpoint is reachable (default; "
        "the check also reads a llama.cpp server's slots, the requests it takes at once); "
        "--no-probe: do not",
    )
    _add_execution_options(parser)


def _add_execution_options(parser: argparse.ArgumentParser) -> None:
    """The options of how the run executes, beside --output and --no-probe: what
    :func:`read_run_options` makes the RunConfig of."""
    run = parser.add_argument_group("how the run executes (every scoring command alike)")
    run.add_argument(
        "--overwrite", action="store_true", help="replace what is already in the -o DIR"
    )
    run.add_argument("-q", "--quiet", action="store_true", help="no progress line")
    run.add_argument(
        "--max-cost",
        type=_budget,
        metavar="USD",
        help="stop before the judge requests of this command would cost more than USD (exit "
        "5; what finished is kept); needs the judge model's price (--price). A command of "
        "several runs (align) spends it over all of them; resuming, the run's own budget "
        "applies again unless given ('none': no budget)",
    )
    run.add_argument(
        "--batch",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="send the judge requests through the endpoint's Batch API (about half the price, "
        "results within 24 hours); resuming: as the run was, unless given",
    )
    run.add_argument(
        "--observer",
        action="append",
        default=[],
        metavar="NAME",
        help="also tell this observer how the run goes (repeat for more): mlflow "
        "(rageval[mlflow]; MLFLOW_TRACKING_URI), otel (rageval[otel]), or one a package "
        "registers under the entry-point group rageval.observers",
    )
    add_pairs_option(
        run,  # type: ignore[arg-type]  # a group takes arguments as its parser does
        "--human-labels",
        metavar="COLUMN=METRIC",
        help="a column of human scores for METRIC (empty where not labelled): the summary adds "
        "the PPI++ mean of the label, the judge's scores rectified by the labelled rows",
    )
    run.add_argument(
        "--engine",
        choices=("local", "ray"),
        default=None,
        help="where rows are scored: this process (default; resuming: as the run was) or Ray "
        "Data (needs rageval[ray])",
    )
    run.add_argument(
        "--ray-address",
        metavar="ADDRESS",
        help="with --engine ray: join this Ray cluster (host:port) instead of starting a local Ray",
    )
    run.add_argument(
        "--ray-actors",
        type=positive_int,
        metavar="N",
        help="with --engine ray: actors that score rows (default: from the cluster's CPUs)",
    )


def _budget(text: str) -> float | Literal["none"]:
    """The argparse type of --max-cost: USD, or "none" (no budget, a resumed run's included)."""
    return "none" if text.strip().lower() == "none" else positive_float(text)


class CommandRunArguments(TypedDict):
    """The options every command that scores data gives its run, as the run takes them."""

    #: the config file's [params.METRIC] with -p over them (None: none)
    metric_params: dict[str, dict[str, Any]] | None
    llm: Judge | list[Judge] | Panel | None
    embeddings: Embeddings | None
    column_map: dict[str, str] | None
    on_invalid: Literal["raise", "skip"] | None
    #: how the run executes
    config: RunConfig


def command_settings(args: argparse.Namespace) -> Settings:
    """The config file's settings: the file --config names, else the one the search finds."""
    from rageval._config import load_settings

    try:
        return load_settings(args.config)
    except ValueError as e:  # a bad config file
        raise _UsageError(str(e)) from None


def read_run_options(
    args: argparse.Namespace,
    metrics: Sequence[str] | None,
    *,
    settings: Settings | None = None,
    stored: StoredRun | None = None,
    run_dir: Path | None = None,
    observe: bool = True,
    resume: bool = False,
    keys: bool = True,
) -> CommandRunArguments:
    """The options :func:`add_run_options` added, each over the config file's `settings` (by
    default :func:`command_settings`) where it has one:

    - the metric parameters: a -p for a metric that is not one, or not one of the run's
      `metrics` (None: every metric may be), would do nothing and is refused;
    - the judge and embeddings of the command line, the environment and the config file
      (resuming, the run's own, `stored`, with what the command line changes);
    - --column-map and --skip-invalid (None for on_invalid: the run's default);
    - the RunConfig and the judges, from the one resolver (:func:`resolve_run`, which says
      the layers and `observe` and `resume`); `keys` False makes the judges without refusing
      one whose API key is not set (a dry run sends nothing)."""
    from rageval._config import merged_params, parse_params

    settings = _config_layer(args, settings, stored)
    try:
        cli_params = parse_params(args.param)
        _check_param_names(cli_params, metrics, merged_params(settings.params, cli_params))
        config, judges = resolve_run(
            args, settings=settings, stored=stored, run_dir=run_dir, observe=observe, resume=resume
        )
        judge = judges.make(keys=keys) if judges is not None else None
        embeddings = _embeddings(args, settings)
    except ValueError as e:  # a bad -p, base URL, model name, judge setting or embeddings spec
        raise _UsageError(str(e)) from None
    column_map = dict(name_value_pairs(args.column_map, "--column-map")) or settings.column_map
    return CommandRunArguments(
        metric_params=merged_params(settings.params, cli_params) or None,
        llm=judge,
        embeddings=embeddings,
        column_map=column_map or None,
        on_invalid="skip" if args.skip_invalid else settings.on_invalid,
        config=config,
    )


def _config_layer(
    args: argparse.Namespace, settings: Settings | None, stored: StoredRun | None
) -> Settings:
    """The config file's settings as a layer: `settings` (by default
    :func:`command_settings`), or resuming none: the run's manifest takes its place."""
    from rageval._config import Settings

    if stored is not None:
        return Settings()
    return settings if settings is not None else command_settings(args)


def resolve_run(
    args: argparse.Namespace,
    *,
    settings: Settings | None,
    stored: StoredRun | None,
    run_dir: Path | None,
    observe: bool,
    resume: bool = False,
) -> tuple[RunConfig, JudgeSetup | None]:
    """The one resolver of how a command's run executes and what judges it: the RunConfig and
    the judges' JudgeSpecs (a :class:`~rageval.runner._runconfig.JudgeSetup`, None: no judge),
    each setting from the first layer that gives it:

    1. the command line's flags;
    2. the environment (the judge's model and endpoint: RAGEVAL_LLM, RAGEVAL_BASE_URL,
       OPENAI_BASE_URL; see rageval._env);
    3. a new run's config file (`settings`), or a resumed run's manifest (`stored`): the run's
       judge, and its engine, budget, batch mode, endpoint check, human labels and cache
       (:data:`rageval.runner._runconfig.RESUMED`). Resuming, the environment's judge does not
       apply: the run has its own;
    4. the defaults.

    Resuming, a flag given wins for this session (and is recorded as the run's from then on),
    except one that would change the cells already scored -- the judge model, a setting that
    changes its replies, the metrics -- which the run directory refuses (docs/running.md).
    The observers are built only when `observe` (a dry run has none). The run resumes when
    `stored` is its run, or with `resume` (a command whose run directory is of its own kind,
    generate's: its own layers only)."""
    settings = _config_layer(args, settings, stored)
    resume = resume or stored is not None
    config = _run_config(args, settings, run_dir, resume=resume, observe=observe)
    return config, _judges(args, stored, settings)


def _run_config(
    args: argparse.Namespace,
    settings: Settings,
    run_dir: Path | None,
    *,
    resume: bool,
    observe: bool,
) -> RunConfig:
    """The RunConfig of the command line over the config file, or resuming over the run's
    manifest (:func:`rageval.runner.resumed`): see :func:`resolve_run`."""
    from rageval.errors import MissingExtraError
    from rageval.runner import RunConfig
    from rageval.runner._runconfig import resumed

    file, flags = _file_run_fields(settings), _flag_run_fields(args)
    if flags.get("batch") is True and file.get("batch") not in (None, True, False):
        del flags["batch"]  # --batch with the config file's batch settings: those
    given = {**file, **flags}
    try:
        config = RunConfig(
            run_dir=run_dir,
            resume=resume,
            overwrite=args.overwrite,
            progress=False if args.quiet else None,
            observers=tuple(_observers(args.observer)) if observe else (),
            **given,
        )
        return resumed(config, given)
    except (ValueError, MissingExtraError) as e:  # RunConfigError: options that cannot go
        raise _UsageError(str(e)) from None


def _flag_run_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The RunConfig fields the command line gives (a flag left out gives none)."""
    labels = name_value_pairs(args.human_labels, "--human-labels")
    fields: dict[str, Any] = {
        "engine": args.engine,
        "ray_address": args.ray_address,
        "ray_actors": args.ray_actors,
        "max_cost": args.max_cost,
        "batch": args.batch,
        "probe": args.probe,
        "cache": args.cache,
        "human_labels": labels or None,
    }
    fields = {name: value for name, value in fields.items() if value is not None}
    if fields.get("max_cost") == "none":
        fields["max_cost"] = None
    return fields


def _file_run_fields(settings: Settings) -> dict[str, Any]:
    """The RunConfig fields the config file gives: max_cost, batch and probe."""
    fields = {
        "max_cost": settings.max_cost,
        "batch": _batch_settings(settings.batch),
        "probe": settings.probe,
    }
    return {name: value for name, value in fields.items() if value is not None}


def _batch_settings(
    configured: bool | dict[str, int | float | str] | None,
) -> bool | BatchSettings | None:
    """The config file's `batch = true` or `false`, or its table of BatchSettings (None: the
    file does not say)."""
    from rageval.judge import BatchSettings

    if isinstance(configured, dict):
        try:
            return BatchSettings(**configured)  # type: ignore[arg-type]
        except (TypeError, ValueError) as e:
            raise _UsageError(f"the config file's batch settings: {e}") from None
    return configured


def _observers(names: Sequence[str]) -> list[RunObserver]:
    """The observers --observer names, built from their entry points."""
    from rageval.errors import MissingExtraError
    from rageval.observers import load_observer
    from rageval.runner import RunConfigError

    try:
        return [load_observer(name) for name in names]
    except (RunConfigError, MissingExtraError) as e:
        raise _UsageError(str(e)) from None


def _judges(
    args: argparse.Namespace, stored: StoredRun | None, settings: Settings
) -> JudgeSetup | None:
    """The judges of the command line over the environment and the config file, or resuming
    over the run's own (its manifest's, on its endpoints; its panel as it was): one per
    --base-url (the rows are spread over them); a panel for several --llm (each on the
    --base-url in its place) or the config file's [[judges]]."""
    from rageval._config import configured_choice, configured_panel_setup
    from rageval.runner._runconfig import JudgeSetup

    flags = {
        "max_concurrency": args.concurrency,
        "requests_per_minute": args.requests_per_minute,
        "tokens_per_minute": args.tokens_per_minute,
        "scoring": args.judge_scoring,
        "cache": False if args.cache is False else None,
        "prices": _prices(args.price),
    }
    model = args.llm[0] if len(args.llm) == 1 else None
    if len(args.llm) > 1:
        urls = args.base_url or [None]
        if len(urls) not in (1, len(args.llm)):
            raise _UsageError(
                f"a judge panel of {len(args.llm)} --llm takes one --base-url for all of them or "
                f"one for each, got {len(urls)}"
            )
        pairs = zip(args.llm, urls * len(args.llm) if len(urls) == 1 else urls, strict=False)
        panel = [
            configured_choice(settings, model=m, base_url=u, overrides=flags) for m, u in pairs
        ]
        return JudgeSetup(tuple(c for c in panel if c is not None), panel=(None,) * len(panel))
    if stored is not None and model is None:
        own = stored.judges()
        if own is None:
            return None
        if args.base_url and own.panel is None:  # the run's judge on these endpoints
            one = own.choices[0]
            own = JudgeSetup(tuple(one.under({"base_url": url}) for url in args.base_url))
        return own.under(flags)
    if model is None and not args.base_url and settings.judges:
        return configured_panel_setup(settings, flags)
    found = [
        configured_choice(settings, model=model, base_url=url, overrides=flags)
        for url in args.base_url or [None]
    ]
    choices = tuple(c for c in found if c is not None)
    return JudgeSetup(choices) if choices else None


def _prices(values: Sequence[str]) -> PriceTable | None:
    """--price MODEL=INPUT,OUTPUT[,CACHED_INPUT[,BATCH_INPUT,BATCH_OUTPUT]] (USD per million)."""
    if not values:
        return None
    from rageval.judge import ModelPrice, PriceTable

    table = {}
    for model, spec in name_value_pairs(values, "--price"):
        try:
            table[model] = ModelPrice.of([float(v) for v in spec.split(",")])
        except ValueError:
            raise _UsageError(
                f"--price {model}={spec}: give INPUT,OUTPUT[,CACHED_INPUT[,BATCH_INPUT,"
                "BATCH_OUTPUT]] in USD per million tokens"
            ) from None
    return PriceTable(table)


def _embeddings(args: argparse.Namespace, settings: Settings) -> Embeddings | None:
    from rageval.runner import embeddings_from_spec

    spec = args.embeddings or settings.embeddings
    if not spec:
        return None  # the local model if a metric needs one; resuming, the run's own
    base_url = args.base_url[0] if args.base_url else None
    return embeddings_from_spec(spec, base_url=base_url, cache=args.cache is not False)


def _check_param_names(
    params: dict[str, dict[str, Any]],
    metrics: Sequence[str] | None,
    merged: dict[str, dict[str, Any]],
) -> None:
    """-p for a metric that is not one, or not one of those named for the run, or not one the
    default selection (no -m) may choose, would do nothing: say so. With no -m, each metric
    -p names is built here with its parameters (`merged`: the config file's under the
    command line's), so that a parameter it does not take or a value it refuses is an error
    even when the data then leaves the metric out."""
    from rageval.metrics.base import metric_class
    from rageval.runner._prepare import make_metric

    for name in params:
        try:
            cls = metric_class(name)
        except KeyError as e:
            raise _UsageError(f"-p {name}...: {e.args[0]}") from None
        if metrics is not None and name not in metrics:
            raise _UsageError(f"-p {name}...: {name} is not a metric of this run")
        if metrics is None and not cls.in_default_run:
            raise _UsageError(
                f"-p {name}...: {name} is not in the default selection: name it with -m {name}"
            )
        if metrics is None:
            make_metric(name, merged)
