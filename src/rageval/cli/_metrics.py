"""`rageval metrics`: the metrics, their fields and their parameters' defaults."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rageval.cli._exit_codes import EXIT_OK
from rageval.cli._shared import _UsageError, out, text_table

if TYPE_CHECKING:
    from rageval.metrics.base import Metric


def add_metrics_command(sub: Any) -> None:
    """Add `metrics` to the subcommands `sub`."""
    met = sub.add_parser("metrics", help="list the metrics, their fields and defaults")
    met.add_argument("name", metavar="NAME", nargs="?", help="one metric, every parameter")
    met.set_defaults(func=run_metrics)


def run_metrics(args: argparse.Namespace) -> int:
    import json

    from rageval.metrics.base import create_metric, metric_class, registered_metrics

    if args.name:
        try:
            cls = metric_class(args.name)
        except KeyError as e:
            raise _UsageError(str(e.args[0])) from None
        # a name may imply parameters (ndcg_at_10: ndcg with k = 10), shown as its defaults
        made = create_metric(args.name) if ":" not in args.name else cls()
        out(f"{made.name}: {cls.summary}")
        out(f"required fields: {', '.join(_required(cls))}")
        out(
            f"judge: {'yes' if cls.needs_llm else 'no'}; "
            f"embeddings: {'yes' if cls.needs_embeddings else 'no'}"
        )
        if cls.value_range is not None:
            out(f"range: {cls.value_range[0]:g}..{cls.value_range[1]:g}")
        params = made.params()
        if not params:
            out("parameters: none")
            return EXIT_OK
        out("parameters (defaults; set one with -p NAME.PARAM=VALUE):")
        for key, value in params.items():
            out(f"  {key} = {json.dumps(value, ensure_ascii=False, indent=2, default=str)}")
        return EXIT_OK
    rows = []
    for name, cls in registered_metrics().items():
        # the parameters that hold something by default (those that are off, None or empty,
        # such as the guidance of the judge metrics, are listed by `rageval metrics NAME`)
        defaults = " ".join(
            f"{k}={_short(v)}" for k, v in cls().params().items() if v not in (None, [], {})
        )
        if len(defaults) > _DEFAULTS_WIDTH:  # the rest: `rageval metrics NAME`
            defaults = defaults[: _DEFAULTS_WIDTH - 3] + "..."
        rows.append(
            (
                name,
                ", ".join(_required(cls)),
                "yes" if cls.needs_llm else "no",
                "yes" if cls.needs_embeddings else "no",
                defaults,
            )
        )
    out(text_table(("metric", "required fields", "judge", "embeddings", "defaults"), rows))
    cutoffs = [f"{n}_at_K" for n, cls in registered_metrics().items() if cls.takes_cutoff]
    if cutoffs:
        out(f"\nwith a cutoff K (ndcg_at_10 is ndcg with k = 10): {', '.join(cutoffs)}")
    out("\n(every parameter in full: rageval metrics NAME)")
    return EXIT_OK


def _required(cls: type[Metric]) -> tuple[str, ...]:
    """The fields a metric needs, and the columns it needs beside them (pairwise's
    response_b)."""
    return (*cls.required_fields, *cls.required_columns)


#: the defaults column's width in the list of metrics (a row fits a wide terminal)
_DEFAULTS_WIDTH = 52


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
