"""Persistent request cache: one sqlite file shared by every judge and embeddings client.

Location: ``$RAGEVAL_CACHE_DIR/requests.sqlite3``; without that variable
``$XDG_CACHE_HOME/rageval`` or ``~/.cache/rageval``. The file is opened in WAL mode with a busy
timeout, so many tasks (through worker threads) and several processes can use it at once.

What is stored: for chat calls, the validated JSON value of a successful reply and its usage,
under ``sha256(canonical JSON of endpoint, model, messages, parameters, response schema)``;
for embeddings, the float32 vector under ``sha256(endpoint, model, dimensions, text)``; and the
structured-output mode found to work for each (endpoint, model). Failed calls are never stored,
and neither are API keys or the prompts themselves (only their hash).

A cache that cannot be opened or written (read-only disk, locked for too long) is reported once
as a warning and otherwise behaves as a miss: it never fails an evaluation.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "CACHE_FILE_NAME",
    "RequestCache",
    "cache_key",
    "default_cache_dir",
    "resolve_cache",
    "shared_cache",
]

log = logging.getLogger("rageval.judge")

CACHE_FILE_NAME = "requests.sqlite3"
_BUSY_TIMEOUT_MS = 30_000
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS completions ("
    " key TEXT PRIMARY KEY, model TEXT NOT NULL, value TEXT NOT NULL,"
    " usage TEXT NOT NULL, created REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS embeddings ("
    " key TEXT PRIMARY KEY, model TEXT NOT NULL, vector BLOB NOT NULL, created REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS modes ("
    " endpoint TEXT NOT NULL, model TEXT NOT NULL, mode TEXT NOT NULL, created REAL NOT NULL,"
    " PRIMARY KEY (endpoint, model))",
)
_TABLES = ("completions", "embeddings", "modes")


def default_cache_dir() -> Path:
    configured = os.environ.get("RAGEVAL_CACHE_DIR")
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "rageval"


def cache_key(payload: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON form of ``payload`` (sorted keys, no whitespace)."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class RequestCache:
    """The sqlite request cache in ``directory`` (default: :func:`default_cache_dir`).

    Nothing touches the disk until the first lookup or store. Methods are synchronous and
    thread-safe; async callers run them in a worker thread.
    """

    def __init__(self, directory: str | os.PathLike[str] | None = None) -> None:
        self.directory = Path(directory).expanduser() if directory else default_cache_dir()
        self.path = self.directory / CACHE_FILE_NAME
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._broken = False
        self.hits = 0
        self.misses = 0
        self.embedding_hits = 0
        self.embedding_misses = 0

    # ------------------------------------------------------------ connection

    def _connect(self) -> sqlite3.Connection | None:
        if self._conn is None and not self._broken:
            try:
                self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
                conn = sqlite3.connect(
                    self.path,
                    timeout=_BUSY_TIMEOUT_MS / 1000,
                    check_same_thread=False,
                    isolation_level=None,
                )
                conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                for statement in _SCHEMA:
                    conn.execute(statement)
                self._conn = conn
            except (OSError, sqlite3.Error) as exc:
                self._give_up(exc)
        return self._conn

    def _give_up(self, exc: BaseException) -> None:
        if not self._broken:
            log.warning("request cache at %s disabled: %s", self.path, exc)
        self._broken = True
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _run(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            conn = self._connect()
            if conn is None:
                return []
            try:
                return conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                self._give_up(exc)
                return []

    def _run_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._lock:
            conn = self._connect()
            if conn is None:
                return
            try:
                # one transaction per batch: a single fsync instead of one per row
                conn.execute("BEGIN IMMEDIATE")
                try:
                    conn.executemany(sql, rows)
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
            except sqlite3.Error as exc:
                self._give_up(exc)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # ------------------------------------------------------------ completions

    def get(self, key: str) -> tuple[str, dict[str, Any]] | None:
        """The cached (value JSON, usage dict) for ``key``, or None. Counts a hit or miss."""
        rows = self._run("SELECT value, usage FROM completions WHERE key = ?", (key,))
        with self._lock:
            if rows:
                self.hits += 1
            else:
                self.misses += 1
        if not rows:
            return None
        value, usage = rows[0]
        return str(value), dict(json.loads(usage))

    def put(self, key: str, model: str, value: str, usage: Mapping[str, Any]) -> None:
        self._run_many(
            "INSERT OR REPLACE INTO completions (key, model, value, usage, created)"
            " VALUES (?, ?, ?, ?, ?)",
            [(key, model, value, json.dumps(dict(usage)), time.time())],
        )

    def discard(self, key: str) -> None:
        self._run_many("DELETE FROM completions WHERE key = ?", [(key,)])

    # ------------------------------------------------------------- embeddings

    def get_vectors(self, keys: Sequence[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        # sqlite caps the number of bound parameters; stay well below it
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._run(f"SELECT key, vector FROM embeddings WHERE key IN ({marks})", chunk)
            found.update((str(k), bytes(v)) for k, v in rows)
        with self._lock:
            self.embedding_hits += len(found)
            self.embedding_misses += len(keys) - len(found)
        return found

    def put_vectors(self, model: str, vectors: Mapping[str, bytes]) -> None:
        now = time.time()
        self._run_many(
            "INSERT OR REPLACE INTO embeddings (key, model, vector, created) VALUES (?, ?, ?, ?)",
            [(key, model, blob, now) for key, blob in vectors.items()],
        )

    # ------------------------------------------------------------------ modes

    def get_mode(self, endpoint: str, model: str) -> str | None:
        rows = self._run(
            "SELECT mode FROM modes WHERE endpoint = ? AND model = ?", (endpoint, model)
        )
        return str(rows[0][0]) if rows else None

    def set_mode(self, endpoint: str, model: str, mode: str) -> None:
        self._run_many(
            "INSERT OR REPLACE INTO modes (endpoint, model, mode, created) VALUES (?, ?, ?, ?)",
            [(endpoint, model, mode, time.time())],
        )

    # ------------------------------------------------------------ maintenance

    def stats(self) -> dict[str, Any]:
        """Entry counts, size on disk and this process's hit/miss counts (creates nothing)."""
        counts = dict.fromkeys(_TABLES, 0)
        if self.path.exists():
            for table in _TABLES:
                rows = self._run(f"SELECT COUNT(*) FROM {table}")
                counts[table] = int(rows[0][0]) if rows else 0
        size = sum(
            p.stat().st_size
            for p in (self.path, Path(f"{self.path}-wal"), Path(f"{self.path}-shm"))
            if p.exists()
        )
        return {
            "path": str(self.path),
            "size_bytes": size,
            "entries": counts,
            "hits": self.hits,
            "misses": self.misses,
            "embedding_hits": self.embedding_hits,
            "embedding_misses": self.embedding_misses,
        }

    def clear(self) -> dict[str, int]:
        """Delete every entry; returns how many rows each table had."""
        if not self.path.exists():
            return dict.fromkeys(_TABLES, 0)
        removed: dict[str, int] = {}
        for table in _TABLES:
            rows = self._run(f"SELECT COUNT(*) FROM {table}")
            removed[table] = int(rows[0][0]) if rows else 0
            self._run(f"DELETE FROM {table}")
        self._run("VACUUM")
        return removed

    def __repr__(self) -> str:
        return f"RequestCache({str(self.directory)!r})"


_SHARED: dict[Path, RequestCache] = {}
_SHARED_LOCK = threading.Lock()


def shared_cache(directory: str | os.PathLike[str] | None = None) -> RequestCache:
    """The process-wide cache object for ``directory`` (so hit counts add up across clients)."""
    path = (Path(directory).expanduser() if directory else default_cache_dir()).resolve()
    with _SHARED_LOCK:
        cache = _SHARED.get(path)
        if cache is None:
            cache = _SHARED[path] = RequestCache(path)
        return cache


def resolve_cache(
    cache: RequestCache | bool | str | os.PathLike[str] | None,
) -> RequestCache | None:
    """A client's ``cache=`` argument: True (the default directory), False, a directory, or
    a RequestCache."""
    if isinstance(cache, RequestCache):
        return cache
    if cache is True:
        return shared_cache()
    if cache is False or cache is None:
        return None
    if isinstance(cache, (str, os.PathLike)):
        return shared_cache(cache)
    raise TypeError(f"cache must be a bool, a directory or a RequestCache, got {cache!r}")
