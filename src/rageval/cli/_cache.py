"""`rageval cache`: the request cache's size, or clear it."""

from __future__ import annotations

import argparse
from typing import Any

from rageval.cli._exit_codes import EXIT_OK
from rageval.cli._shared import out


def add_cache_command(sub: Any) -> None:
    """Add `cache` to the subcommands `sub`."""
    cache = sub.add_parser("cache", help="inspect or clear the request cache")
    cache.add_argument(
        "action",
        choices=("stats", "clear"),
        help="stats: where the cache is, its size and entries; clear: delete every entry",
    )
    cache.add_argument(
        "--cache-dir",
        metavar="DIR",
        default=None,
        help="cache directory (default: $RAGEVAL_CACHE_DIR or ~/.cache/rageval)",
    )
    cache.set_defaults(func=run_cache)


def run_cache(args: argparse.Namespace) -> int:
    from rageval.judge import RequestCache

    cache = RequestCache(args.cache_dir)
    if args.action == "clear":
        removed = cache.clear()
        out(f"cleared {cache.path}: " + ", ".join(f"{n} {k}" for k, n in removed.items()))
        return EXIT_OK
    stats = cache.stats()
    out(f"path: {stats['path']}")
    out(f"size: {stats['size_bytes']:,} bytes")
    for table, n in stats["entries"].items():
        out(f"{table}: {n:,} entries")
    return EXIT_OK
