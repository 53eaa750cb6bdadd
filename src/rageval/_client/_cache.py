"""Persistent request cache: one sqlite file shared by every judge and embeddings client.

Location: ``$RAGEVAL_CACHE_DIR/requests.sqlite3``; without that variable
``$XDG_CACHE_HOME/rageval`` or ``~/.cache/rageval``. The file is opened in WAL mode with a busy
timeout, so many tasks (through worker threads) and several processes can use it at once.

What is stored: for chat calls, the validated JSON value of a successful reply and its usage,
under ``sha256(canonical JSON of endpoint, model, messages, parameters, response schema)``;
for embeddings, the float32 vector under ``sha256(endpoint, model, dimensions, text)``; the
structured-output mode found to work for each (endpoint, model); and ``records``: text values
other layers keep beside the requests they came from, under keys of their own (the runner keeps
its finished cells there, see :mod:`rageval.runner._cells`; this module knows nothing of them:
they share the file so that one ``rageval cache clear`` forgets everything). Failed calls are
never stored, and neither are API keys or the prompts themselves (only their hash).

Lookups run inline on the caller's thread (a primary-key read in WAL mode takes microseconds and
never waits for a writer), so a request costs no thread hop. Writes are queued and committed by
one background writer thread, many rows per transaction; lookups see queued rows at once.
Queued rows are committed by :meth:`RequestCache.flush` (called by ``evaluate()`` at the end of
a run, by :meth:`~RequestCache.stats`/:meth:`~RequestCache.clear`/:meth:`~RequestCache.close`,
and at interpreter exit). A process killed outright loses at most the rows of the last moments:
the cache only saves requests, the results of a run live in its run directory.

A cache that cannot be opened or written (read-only disk, locked for too long) is reported once
as a warning and otherwise behaves as a miss: it never fails an evaluation. "Locked" is not
always waited out by sqlite's busy timeout: two processes that open a new file at once, or
lock each other out while upgrading a lock, get SQLITE_BUSY at once. So opening and committing
are retried with backoff for as long as the busy timeout, and a lookup that meets a lock counts
as a miss; only other errors, or a lock that outlasts the timeout, disable the cache.

Shards, for many processes at once (the Ray engine's workers): ``RequestCache.shard(directory,
label)`` writes to a file of its own, ``shards/<label>.<pid>.<host>.sqlite3``, and reads that
file and then the main one. :func:`merge_shards` copies the shards whose writer process has
ended into the main file and deletes them, so the main file has one writer at a time however
many workers there were, and every later run (local or on Ray) reads what they learned.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from rageval import _env

__all__ = [
    "CACHE_FILE_NAME",
    "SHARDS_DIR",
    "RequestCache",
    "cache_key",
    "cache_location",
    "default_cache_dir",
    "merge_shards",
    "recorded_cache",
    "resolve_cache",
    "shared_cache",
]

log = logging.getLogger("rageval.judge")

CACHE_FILE_NAME = "requests.sqlite3"
SHARDS_DIR = "shards"
_SHARD_SUFFIX = ".sqlite3"
_BUSY_TIMEOUT_MS = 30_000
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS completions ("
    " key TEXT PRIMARY KEY, model TEXT NOT NULL, value TEXT NOT NULL,"
    " usage TEXT NOT NULL, created REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS embeddings ("
    " key TEXT PRIMARY KEY, model TEXT NOT NULL, vector BLOB NOT NULL, created REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS records ("
    " key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS modes ("
    " endpoint TEXT NOT NULL, model TEXT NOT NULL, mode TEXT NOT NULL, created REAL NOT NULL,"
    " PRIMARY KEY (endpoint, model))",
)
_TABLES = ("completions", "embeddings", "records", "modes")
#: tables earlier versions made, emptied by clear(): "cells" became "records"
_OLD_TABLES = ("cells",)
_GET_COMPLETION = "SELECT value, usage FROM completions WHERE key = ?"
_PUT_COMPLETION = (
    "INSERT OR REPLACE INTO completions (key, model, value, usage, created) VALUES (?, ?, ?, ?, ?)"
)
_DELETE_COMPLETION = "DELETE FROM completions WHERE key = ?"
_PUT_VECTOR = "INSERT OR REPLACE INTO embeddings (key, model, vector, created) VALUES (?, ?, ?, ?)"
_PUT_RECORD = "INSERT OR REPLACE INTO records (key, value, created) VALUES (?, ?, ?)"
_PUT_MODE = "INSERT OR REPLACE INTO modes (endpoint, model, mode, created) VALUES (?, ?, ?, ?)"
#: how often the writer thread commits what was queued, and how long it stays without work
_WRITE_INTERVAL_S = 0.1
_WRITER_IDLE_S = 2.0


_T = TypeVar("_T")
_SQLITE_BUSY, _SQLITE_LOCKED = 5, 6


def _is_lock_error(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)  # Python >= 3.11
    if code is not None:
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def _retry_locked(action: Callable[[], _T]) -> _T:
    """``action()``, repeated with backoff while it fails on a lock, up to the busy timeout."""
    deadline = time.monotonic() + _BUSY_TIMEOUT_MS / 1000
    delay = 0.005
    while True:
        try:
            return action()
        except sqlite3.Error as exc:
            if not _is_lock_error(exc) or time.monotonic() + delay > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.25)


def default_cache_dir() -> Path:
    """``RAGEVAL_CACHE_DIR``, else ``$XDG_CACHE_HOME/rageval``, else ``~/.cache/rageval``."""
    return _env.cache_dir()


def cache_key(payload: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON form of ``payload`` (sorted keys, no whitespace)."""
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class RequestCache:
    """The sqlite request cache in ``directory`` (default: :func:`default_cache_dir`).

    Nothing touches the disk until the first lookup or store. Methods are synchronous,
    thread-safe and quick (no method waits for a write, except :meth:`flush` and the
    maintenance methods), so async callers call them directly.
    """

    def __init__(
        self, directory: str | os.PathLike[str] | None = None, *, _shard: str | None = None
    ) -> None:
        self.directory = Path(directory).expanduser() if directory else default_cache_dir()
        self.path = self.directory / CACHE_FILE_NAME
        #: the main file, read after this shard's own (None: this is the main file)
        self._base: RequestCache | None = None
        if _shard is not None:
            self.path = self.directory / SHARDS_DIR / f"{_shard}{_SHARD_SUFFIX}"
            self._base = RequestCache(self.directory)
        self._broken = False
        self._exit_hook_set = False
        self._start_afresh()
        self.hits = 0
        self.misses = 0
        self.embedding_hits = 0
        self.embedding_misses = 0

    @classmethod
    def shard(cls, directory: str | os.PathLike[str] | None, label: str) -> RequestCache:
        """A cache that writes to a shard of its own in ``directory`` (see the module
        docstring); ``label`` (letters, digits, ``-`` and ``_``) names the shards of one job."""
        if not label or not label.replace("-", "").replace("_", "").isalnum():
            raise ValueError(f"a shard label is letters, digits, '-' and '_', got {label!r}")
        return cls(directory, _shard=f"{label}.{os.getpid()}.{socket.gethostname()}")

    def _start_afresh(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()  # the reading connection and the counters
        self._reader: sqlite3.Connection | None = None
        self._writer: sqlite3.Connection | None = None
        # queued writes, in order: (statement, row); and the queued rows lookups must see
        self._queue: list[tuple[str, tuple[Any, ...]]] = []
        self._queued_completions: dict[str, tuple[str, str]] = {}
        self._queued_vectors: dict[str, bytes] = {}
        self._queued_modes: dict[tuple[str, str], str] = {}
        self._queued_records: dict[str, str] = {}
        self._writing = threading.Condition()
        self._writer_busy = False
        self._flush_wanted = False
        self._writer_thread: threading.Thread | None = None

    def _in_this_process(self) -> None:
        # A forked child has no writer thread (flush would wait for it forever) and must not use
        # the parent's sqlite connections; what the parent queued, the parent writes.
        if self._pid != os.getpid():
            self._start_afresh()

    def _queue_lock(self) -> threading.Condition:
        """The write queue's lock (and condition), this process's own."""
        self._in_this_process()
        return self._writing

    # ------------------------------------------------------------ connection

    def _open(self) -> sqlite3.Connection | None:
        if self._broken:
            return None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            conn = sqlite3.connect(
                self.path,
                timeout=_BUSY_TIMEOUT_MS / 1000,
                check_same_thread=False,
                isolation_level=None,
            )

            def set_up() -> None:
                conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                for statement in _SCHEMA:
                    conn.execute(statement)

            _retry_locked(set_up)
            return conn
        except (OSError, sqlite3.Error) as exc:
            self._give_up(exc)
            return None

    def _give_up(self, exc: BaseException) -> None:
        if not self._broken:
            log.warning("request cache at %s disabled: %s", self.path, exc)
        self._broken = True

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        self._in_this_process()
        with self._lock:
            if self._reader is None:
                self._reader = self._open()
            if self._reader is None:
                return []
            try:
                return self._reader.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                if not _is_lock_error(exc):  # a lookup that meets a lock is only a miss
                    self._give_up(exc)
                return []

    def _read_through(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """`_read`, then the main file for a shard that does not have the row."""
        rows = self._read(sql, params)
        base = self._base
        if not rows and base is not None and base.path.exists():
            rows = base._read(sql, params)
        return rows

    def _enqueue(self, rows: Sequence[tuple[str, tuple[Any, ...]]]) -> None:
        """Queue writes for the writer thread (started on demand; it stops when idle)."""
        if self._broken or not rows:
            return
        with self._queue_lock():
            self._queue.extend(rows)
            if not self._exit_hook_set:
                self._exit_hook_set = True
                atexit.register(self.flush)
            if self._writer_thread is None:
                self._writer_thread = threading.Thread(
                    target=self._write_loop, name="rageval-cache-writer", daemon=True
                )
                self._writer_thread.start()

    def _write_loop(self) -> None:
        idle = 0.0
        while True:
            with self._writing:
                # Wake on a timer, not per queued row: one commit per interval holds many rows,
                # and the thread takes the GIL from the event loop a few times a second rather
                # than once per request. flush() wakes it at once.
                if not self._flush_wanted:
                    self._writing.wait(timeout=_WRITE_INTERVAL_S)
                if not self._queue:
                    idle += _WRITE_INTERVAL_S
                    if idle >= _WRITER_IDLE_S or self._flush_wanted:
                        self._writer_thread = None
                        self._flush_wanted = False
                        self._writing.notify_all()
                        return
                    continue
                idle = 0.0
                batch, self._queue = self._queue, []
                self._writer_busy = True
            try:
                self._commit(batch)
            finally:
                with self._writing:
                    self._writer_busy = False
                    self._forget_queued(batch)
                    self._writing.notify_all()

    def _commit(self, batch: list[tuple[str, tuple[Any, ...]]]) -> None:
        if self._writer is None:
            self._writer = self._open()
        conn = self._writer
        if conn is None:
            return

        def write() -> None:
            # one transaction for the whole batch, not one per row
            conn.execute("BEGIN IMMEDIATE")
            try:
                for sql, row in batch:
                    conn.execute(sql, row)
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

        try:
            _retry_locked(write)
        except sqlite3.Error as exc:
            self._give_up(exc)

    def _forget_queued(self, batch: list[tuple[str, tuple[Any, ...]]]) -> None:
        # a row queued again meanwhile (same key, new value) stays visible until its own write
        queued: dict[Any, Any]
        for sql, row in batch:
            if sql is _PUT_COMPLETION:
                queued, key, value = self._queued_completions, row[0], (row[2], row[3])
            elif sql is _PUT_VECTOR:
                queued, key, value = self._queued_vectors, row[0], row[2]
            elif sql is _PUT_RECORD:
                queued, key, value = self._queued_records, row[0], row[1]
            elif sql is _PUT_MODE:
                queued, key, value = self._queued_modes, (row[0], row[1]), row[2]
            else:
                continue
            if queued.get(key) == value:
                del queued[key]

    def _get_many(
        self, table: str, column: str, keys: Sequence[str], queued: Mapping[str, Any]
    ) -> dict[str, Any]:
        """`column` of `keys` in `table`: rows still queued first, then the file (then, for a
        shard, the main file)."""
        with self._queue_lock():
            found = {key: queued[key] for key in keys if key in queued}
        rest = [key for key in keys if key not in found]
        found.update(self._select_many(table, column, rest))
        base = self._base
        if base is not None and len(found) < len(keys) and base.path.exists():
            rest = [key for key in keys if key not in found]
            found.update(base._select_many(table, column, rest))
        return found

    def _select_many(self, table: str, column: str, keys: Sequence[str]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        # sqlite caps the number of bound parameters; stay well below it
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(
                self._read(f"SELECT key, {column} FROM {table} WHERE key IN ({marks})", chunk)
            )
        return found

    def flush(self) -> None:
        """Wait until every queued write is committed."""
        with self._queue_lock():
            while self._writer_thread is not None and (self._queue or self._writer_busy):
                self._flush_wanted = True
                self._writing.notify_all()
                self._writing.wait()
            self._flush_wanted = False

    def close(self) -> None:
        self.flush()
        with self._lock:
            for conn in (self._reader, self._writer):
                if conn is not None:
                    conn.close()
            self._reader = self._writer = None
        if self._base is not None:
            self._base.close()

    # ------------------------------------------------------------ completions

    def get(self, key: str) -> tuple[str, dict[str, Any]] | None:
        """The cached (value JSON, usage dict) for ``key``, or None. Counts a hit or miss."""
        with self._queue_lock():
            queued = self._queued_completions.get(key)
        rows = [queued] if queued is not None else self._read_through(_GET_COMPLETION, (key,))
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
        usage_json = json.dumps(dict(usage))
        with self._queue_lock():
            self._queued_completions[key] = (value, usage_json)
        self._enqueue([(_PUT_COMPLETION, (key, model, value, usage_json, time.time()))])

    def discard(self, key: str) -> None:
        with self._queue_lock():
            self._queued_completions.pop(key, None)
        self._enqueue([(_DELETE_COMPLETION, (key,))])

    # ------------------------------------------------------------- embeddings

    def get_vectors(self, keys: Sequence[str]) -> dict[str, bytes]:
        found = {
            str(k): bytes(v)
            for k, v in self._get_many("embeddings", "vector", keys, self._queued_vectors).items()
        }
        with self._lock:
            self.embedding_hits += len(found)
            self.embedding_misses += len(keys) - len(found)
        return found

    def put_vectors(self, model: str, vectors: Mapping[str, bytes]) -> None:
        now = time.time()
        with self._queue_lock():
            self._queued_vectors.update(vectors)
        self._enqueue([(_PUT_VECTOR, (key, model, blob, now)) for key, blob in vectors.items()])

    # ---------------------------------------------------------------- records

    def get_records(self, keys: Sequence[str]) -> dict[str, str]:
        """The records stored under `keys` (those found): key -> value."""
        found = self._get_many("records", "value", keys, self._queued_records)
        return {str(k): str(v) for k, v in found.items()}

    def put_record(self, key: str, value: str) -> None:
        with self._queue_lock():
            self._queued_records[key] = value
        self._enqueue([(_PUT_RECORD, (key, value, time.time()))])

    # ------------------------------------------------------------------ modes

    def get_mode(self, endpoint: str, model: str) -> str | None:
        with self._queue_lock():
            queued = self._queued_modes.get((endpoint, model))
        if queued is not None:
            return queued
        rows = self._read_through(
            "SELECT mode FROM modes WHERE endpoint = ? AND model = ?", (endpoint, model)
        )
        return str(rows[0][0]) if rows else None

    def set_mode(self, endpoint: str, model: str, mode: str) -> None:
        with self._queue_lock():
            self._queued_modes[(endpoint, model)] = mode
        self._enqueue([(_PUT_MODE, (endpoint, model, mode, time.time()))])

    # ------------------------------------------------------------ maintenance

    def stats(self) -> dict[str, Any]:
        """Entry counts, size on disk and this process's hit/miss counts (creates nothing)."""
        self.flush()
        counts = dict.fromkeys(_TABLES, 0)
        if self.path.exists():
            for table in _TABLES:
                rows = self._read(f"SELECT COUNT(*) FROM {table}")
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
        self.flush()
        if not self.path.exists():
            return dict.fromkeys(_TABLES, 0)
        removed: dict[str, int] = {}
        for table in _TABLES:
            rows = self._read(f"SELECT COUNT(*) FROM {table}")
            removed[table] = int(rows[0][0]) if rows else 0
            self._read(f"DELETE FROM {table}")
        for table in _OLD_TABLES:
            self._read(f"DROP TABLE IF EXISTS {table}")
        self._read("VACUUM")
        return removed

    def __repr__(self) -> str:
        return f"RequestCache({str(self.directory)!r})"


def merge_shards(
    directory: str | os.PathLike[str] | None = None,
    *,
    wait_for: str | None = None,
    timeout: float = 0.0,
) -> int:
    """Copy into the main file every shard in ``directory`` whose writer (a process on this
    host) has ended, then delete it; returns how many were copied.

    Shards labelled ``wait_for`` (a job that has finished) are waited for up to ``timeout``
    seconds, as its workers may take a moment to exit; one whose writer still runs then is
    copied but kept (the copy is repeated, harmlessly, and the file deleted, once it has
    ended). Shards of other live writers are left alone, and so is a shard that cannot be
    merged now: it is tried again next time, and only its rows are missing from lookups.
    """
    root = Path(directory).expanduser() if directory else default_cache_dir()
    shards_dir = root / SHARDS_DIR
    if not shards_dir.is_dir():
        return 0
    host = socket.gethostname()
    deadline = time.monotonic() + timeout
    merged = 0
    pending = sorted(shards_dir.glob(f"*{_SHARD_SUFFIX}"))
    while pending:
        waiting = []
        for path in pending:
            label, pid, shard_host = _shard_owner(path)
            if shard_host != host:
                continue  # written on another machine that shares this directory
            if pid is not None and _running(pid):
                if label == wait_for:
                    waiting.append(path)
                continue
            if _merge_one(root / CACHE_FILE_NAME, path, delete=True):
                merged += 1
        if not waiting:
            break
        if time.monotonic() >= deadline:
            merged += sum(
                _merge_one(root / CACHE_FILE_NAME, path, delete=False) for path in waiting
            )
            break
        time.sleep(0.1)
        pending = waiting
    return merged


def _shard_owner(path: Path) -> tuple[str, int | None, str]:
    """(label, writer pid, writer host) from a shard's file name."""
    label, _, rest = path.name[: -len(_SHARD_SUFFIX)].partition(".")
    pid, _, host = rest.partition(".")
    return label, int(pid) if pid.isdigit() else None, host


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _merge_one(main: Path, shard: Path, *, delete: bool) -> bool:
    try:
        conn = sqlite3.connect(main, timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None)
    except sqlite3.Error as exc:
        log.warning("could not merge cache shard %s: %s", shard, exc)
        return False
    try:

        def merge() -> None:
            conn.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
            conn.execute("PRAGMA journal_mode=WAL")
            for statement in _SCHEMA:
                conn.execute(statement)
            conn.execute("ATTACH DATABASE ? AS shard", (str(shard),))
            try:
                present = {
                    str(row[0]) for row in conn.execute("SELECT name FROM shard.sqlite_master")
                }
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for table in _TABLES:
                        if table in present:
                            conn.execute(
                                f"INSERT OR REPLACE INTO main.{table} SELECT * FROM shard.{table}"
                            )
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
            finally:
                conn.execute("DETACH DATABASE shard")

        _retry_locked(merge)
    except sqlite3.Error as exc:
        log.warning("could not merge cache shard %s: %s", shard, exc)
        return False
    finally:
        conn.close()
    if delete:
        for leftover in (shard, Path(f"{shard}-wal"), Path(f"{shard}-shm")):
            leftover.unlink(missing_ok=True)
    return True


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


def cache_location(cache: RequestCache | None) -> str | None:
    """Where `cache` is, as a run's manifest records it: its directory, absolute (what a
    client's ``cache=``, ``RAGEVAL_CACHE_DIR`` and ``rageval cache --cache-dir`` name; a
    shard's is the main file's), None for no cache. :func:`recorded_cache` reads it back."""
    return str(cache.directory.resolve()) if cache is not None else None


def recorded_cache(location: str | None) -> str | bool:
    """The ``cache=`` argument that reopens the cache a manifest recorded with
    :func:`cache_location` (False: the run had none). Earlier manifests recorded the cache's
    file, ``DIR/requests.sqlite3``, instead (which a resume took for a directory, turning the
    cache off): that reopens DIR too."""
    if not location:
        return False
    path = Path(location)
    if path.name == CACHE_FILE_NAME and not path.is_dir():
        return str(path.parent)
    return location


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
