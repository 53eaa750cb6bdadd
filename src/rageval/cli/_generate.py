"""`rageval generate`: a test set written from a folder of documents (or the user's chunks) by
the judge, each item checked before it is kept; a resumable run like `evaluate`."""

from __future__ import annotations

import argparse
from typing import Any

from rageval.cli._exit_codes import EXIT_OK, EXIT_UNMEASURED
from rageval.cli._labelled import run_on_labels
from rageval.cli._shared import (
    _UsageError,
    add_run_options,
    command_settings,
    err,
    name_value_pairs,
    out,
    read_run_options,
    run_dir_of,
    stated_language,
)

_DESCRIPTION = """\
Generate a test set of N items from DOCS: a folder of .md, .txt and .html files (chunked at
their headings, ids <file>#<heading>) or a .jsonl file of your own chunks ({"id", "text"}: the
items' reference_context_ids are your ids). The judge writes each item and checks it (the
question does not contain its answer, is no near-duplicate, is answerable from its contexts --
or from none, for an unanswerable item -- and the answer is supported by them); a dropped item
is tried again, up to --max-attempts. Writes testset.jsonl, attempts.jsonl (every attempt and
its checks) and report.md to the run directory; --resume continues a stopped run."""


def add_generate_command(sub: Any) -> None:
    """Add `generate` to the subcommands `sub`."""
    gen = sub.add_parser(
        "generate",
        help="a test set from your documents, each item checked",
        description=_DESCRIPTION,
    )
    gen.add_argument("docs", metavar="DOCS", help="a folder of documents or a .jsonl of chunks")
    gen.add_argument("-n", type=int, required=True, metavar="N", help="items wanted")
    gen.add_argument(
        "--mix",
        action="append",
        default=[],
        metavar="TYPE=WEIGHT",
        help="the weight of a question type (repeatable; default every type alike): single_hop, "
        "multi_hop, comparison, summary, unanswerable, follow_up",
    )
    gen.add_argument(
        "--style",
        action="append",
        default=[],
        help="a style the questions are drawn in (repeatable; default all): plain, terse, "
        "misspelled, expert, non_native",
    )
    gen.add_argument("--seed", type=int, default=0, help="the plan's seed (default 0)")
    gen.add_argument(
        "--language",
        type=stated_language,
        help="write the items in this language (default: as the corpus)",
    )
    gen.add_argument(
        "--existing", metavar="FILE", help="a test set (JSONL): its questions count as duplicates"
    )
    gen.add_argument(
        "--min-support",
        type=float,
        default=None,
        help="least faithfulness of an answer (default 0.5, a claim check's own bar)",
    )
    gen.add_argument(
        "--max-duplicate-cosine",
        type=float,
        default=None,
        help="a question this close to one kept is dropped (default 0.9)",
    )
    gen.add_argument(
        "--max-attempts", type=int, default=3, help="attempts per item before giving up (3)"
    )
    gen.add_argument(
        "--resume", action="store_true", help="continue the run in -o DIR (same DOCS and settings)"
    )
    gen.add_argument(
        "--dry-run", action="store_true", help="count the requests and tokens: send nothing"
    )
    add_run_options(gen, param_help="not used by generate")
    gen.set_defaults(func=run_generate)


def _mix(values: list[str]) -> dict[str, float] | None:
    if not values:
        return None
    mix = {}
    for name, weight in name_value_pairs(values, "--mix"):
        try:
            mix[name] = float(weight)
        except ValueError:
            raise _UsageError(f"--mix {name}={weight}: the weight must be a number") from None
    return mix


def run_generate(args: argparse.Namespace) -> int:
    from rageval.generation import (
        CorpusError,
        GenerateError,
        agenerate,
        estimate_generation,
    )
    from rageval.judge import Judge

    if args.resume and not args.output:
        raise _UsageError("--resume continues the run in -o DIR: give -o DIR")
    mix = _mix(args.mix)
    settings = command_settings(args)
    run_dir = run_dir_of(args)
    # every run option, as every command takes them (those generate cannot use are refused)
    options = read_run_options(
        args, [], settings=settings, run_dir=run_dir, observe=not args.dry_run, resume=args.resume
    )
    judge = options["llm"]
    if judge is not None and not isinstance(judge, Judge):
        raise _UsageError("generate takes one judge: one --llm")
    # the settings the run and its dry run share (a library default where no flag is given)
    given = {"min_support": args.min_support, "max_duplicate_cosine": args.max_duplicate_cosine}
    plan: dict[str, Any] = {
        "mix": mix,
        "styles": args.style or None,
        "seed": args.seed,
        "language": args.language,
        "existing": args.existing,
        "max_attempts": args.max_attempts,
        **{name: value for name, value in given.items() if value is not None},
    }
    if args.dry_run:
        model = judge.model if judge is not None else "gpt-4o-mini"
        try:
            found = estimate_generation(args.docs, args.n, model=model, **plan)
        except (CorpusError, GenerateError) as e:
            raise _UsageError(str(e)) from None
        out(found.table())
        return EXIT_OK
    if judge is None:
        raise _UsageError("generate needs a judge: --llm MODEL (or $RAGEVAL_LLM)")
    config = options["config"]

    def run() -> Any:
        from rageval._sync import run_sync

        try:
            return run_sync(
                agenerate(
                    args.docs,
                    args.n,
                    llm=judge,
                    embeddings=options["embeddings"],
                    config=config,
                    **plan,
                )
            )
        except (CorpusError, GenerateError) as e:
            raise _UsageError(str(e)) from None

    result = run_on_labels(
        run,
        interrupted=f"interrupted; finished items are kept in {run_dir}; continue with the "
        f"same command and --resume",
    )
    if isinstance(result, int):
        return result
    u = result.usage
    out(
        f"{len(result.items)} of {result.requested} items kept, {len(result.dropped)} attempt(s) "
        f"dropped; {u.requests} request(s) sent, {u.cache_hits} answered by the cache"
    )
    out(f"run directory: {run_dir}  (testset.jsonl, attempts.jsonl, report.md)")
    for note in result.notes:
        err(f"note: {note}")
    if not result.items:
        err(
            f"exit {EXIT_UNMEASURED}: no item kept: every attempt was dropped by a check (each "
            "attempt's checks and reasons in attempts.jsonl and report.md)"
        )
        return EXIT_UNMEASURED
    return EXIT_OK
