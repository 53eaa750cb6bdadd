"""One writer per run directory: an OS lock on ``DIR/writer.lock``, held for a whole run.

Every writer of a run directory -- :func:`~rageval.evaluate` / ``aevaluate`` (new, resumed or
overwritten runs, the local and the Ray engine alike: the Ray driver is the process that
writes), :func:`~rageval.calibrate` and ``rageval evaluate`` -- takes the lock before it writes
anything (before it even reads the data or the manifest) and gives it up after its last write
(``summary.json``, ``report.html``, ``calibration.json``). A second writer is refused at once,
never made to wait: :class:`~rageval.errors.RunDirInUseError`, naming the holder by the pid,
host and start time it wrote into the lock file. This module imports the standard library
alone, so that the command line takes the lock before it imports anything heavy, and a second
``rageval evaluate --resume DIR`` is refused in the time Python takes to start.

How exclusion works, and how far it reaches:

- The lock is ``flock(LOCK_EX | LOCK_NB)`` on ``writer.lock``. The kernel drops it when its
  holder's file is closed, which happens when the process ends in any way (``kill -9``
  included), so the file left behind by a killed run blocks nothing: its contents are only
  information, and the next writer takes the lock and writes its own name over them.
- Inside one process, a table of the directories held (by device and inode) refuses a second
  writer before it opens the lock file; a call that already holds the directory (``calibrate``
  around the evaluation it runs) goes through (:data:`_held`, per task).
- On NFS, Linux sends ``flock`` to the server as a whole-file POSIX lock (since Linux 2.6.12),
  so writers on different machines exclude each other where the server grants locks (NFSv4,
  or NFSv3 with lockd). Such a lock belongs to the process, not to the open file, and closing
  any descriptor of the file would drop it: that is why a second writer in the same process is
  refused from the table, without ever opening the file. A machine that crashes holding a lock
  keeps it until the server lets go (the NFSv4 lease, 90 s by default; NFSv3: when the machine
  comes back). Mounted with ``nolock`` or ``local_lock=flock|all``, locks are local to each
  machine: writers on one machine still exclude each other, on two machines they do not, and
  no program can tell.
- A filesystem that refuses locks (``ENOLCK``, ``EOPNOTSUPP``, ``ENOSYS``: an NFS server
  without a lock manager, some FUSE filesystems) and a platform without ``flock`` (Windows)
  get a warning and the in-process exclusion only.
- The holder writes its name with ``fsync`` so that a writer on another NFS client reads it.

On release the holder deletes the lock file (and a directory it created for a run that never
started, so that a refused or invalid run leaves nothing behind). A writer that opened the old
file just before it went checks, once it holds the lock, that the file it locked is still the
one at the path, and starts again if not.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import errno
import functools
import inspect
import json
import logging
import os
import socket
import sys
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from rageval.errors import RunDirError, RunDirInUseError

if sys.platform != "win32":
    import fcntl

LOCK_FILE = "writer.lock"

P = ParamSpec("P")
T = TypeVar("T")

#: errors of a filesystem that has no locks to give (as opposed to a lock someone holds)
_NO_LOCKS = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS})
#: a lock file deleted by its holder between our open and our lock (NFS says ESTALE)
_GONE = frozenset({errno.ENOENT, errno.ESTALE})
#: how many times the lock file may be replaced under us before we give up (it takes a run
#: ending at that very moment, every time)
_ATTEMPTS = 50

_DirKey = tuple[int, int]


@dataclasses.dataclass(frozen=True)
class Holder:
    """Who holds a run directory, as the lock file says (None: not written yet)."""

    pid: int | None
    host: str | None
    started_at: str | None

    @staticmethod
    def me() -> Holder:
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        return Holder(os.getpid(), socket.gethostname(), now)

    @staticmethod
    def parse(text: bytes) -> Holder:
        try:
            found = json.loads(text)
        except ValueError:  # empty: the holder is starting this instant
            found = None
        if not isinstance(found, dict):
            return Holder(None, None, None)
        pid, host, started = (found.get(k) for k in ("pid", "host", "started_at"))
        return Holder(
            pid if isinstance(pid, int) else None,
            host if isinstance(host, str) else None,
            started if isinstance(started, str) else None,
        )

    def text(self) -> bytes:
        return json.dumps(dataclasses.asdict(self)).encode("utf-8") + b"\n"

    def describe(self) -> str:
        if self.pid is None:
            return "a process that has not written its name yet: it is starting"
        where = f" on host {self.host}" if self.host else ""
        mine = self.pid == os.getpid() and self.host == socket.gethostname()
        since = f", since {self.started_at}" if self.started_at else ""
        return f"pid {self.pid}{where}{' (this process)' if mine else ''}{since}"


#: the directories this process holds, and by whom
_holders: dict[_DirKey, Holder] = {}
_holders_lock = threading.Lock()
#: the directories the current task (and the tasks it starts) holds: it may enter them again
_held: contextvars.ContextVar[frozenset[_DirKey]] = contextvars.ContextVar(
    "rageval_run_dirs_held", default=frozenset()
)


@contextlib.contextmanager
def hold_run_dir(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the run directory `path` (created if missing) for the body of the ``with``;
    :class:`RunDirInUseError` at once if another writer holds it."""
    directory = Path(path)
    with _holders_lock:
        key, fd, made = _acquire(directory)
    if fd is None:  # this task holds it already
        yield
        return
    token = _held.set(_held.get() | {key})
    try:
        yield
    finally:
        _held.reset(token)
        _release(directory, key, fd, made)


def one_writer(fn: Callable[P, Awaitable[T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """`fn`, a coroutine function given a ``run_dir`` (a parameter, a keyword argument, or
    the ``run_dir`` of its ``config`` argument: a RunConfig), run holding that directory
    (:func:`hold_run_dir`) from before its first step to after its last write."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    async def holding(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            bound = signature.bind(*args, **kwargs).arguments
        except TypeError:  # the call itself is wrong: let `fn` say so in its own words
            bound = {}
        run_dir: str | os.PathLike[str] | None = (
            bound.get("run_dir")
            or kwargs.get("run_dir")  # type: ignore[assignment]  # a keyword of a TypedDict
            or getattr(bound.get("config"), "run_dir", None)
        )
        if run_dir is None:
            return await fn(*args, **kwargs)
        with hold_run_dir(run_dir):
            return await fn(*args, **kwargs)

    return holding


def _acquire(directory: Path) -> tuple[_DirKey, int | None, list[Path]]:
    """The directory's key, its locked lock file (None if this task holds it already) and the
    directories made here, deepest first; RunDirInUseError if another writer holds it."""
    made: list[Path] = []
    for _ in range(_ATTEMPTS):
        missing = [d for d in (directory, *directory.parents) if not d.exists()]
        try:
            directory.mkdir(parents=True)
            made = missing
        except FileExistsError:
            if not directory.is_dir():
                raise RunDirError(f"{directory} is not a directory") from None
        except OSError as e:  # no permission, a read-only filesystem...
            raise RunDirError(f"cannot create the run directory {directory}: {e}") from None
        try:
            key = _key(directory)
        except FileNotFoundError:  # removed by a run that never started: make it again
            continue
        if key in _held.get():
            return key, None, []
        holder = _holders.get(key)
        if holder is not None:
            raise _in_use(directory, holder)
        fd = _locked_file(directory)
        if fd is not None:
            me = Holder.me()
            _write_name(fd, me)
            _holders[key] = me
            return key, fd, made
    raise RunDirError(f"could not lock {directory / LOCK_FILE}: it kept being replaced")


def _key(directory: Path) -> _DirKey:
    found = directory.stat()
    return found.st_dev, found.st_ino


def _locked_file(directory: Path) -> int | None:
    """The open, locked lock file of `directory`; None when it went before we held it (try
    again); RunDirInUseError when another process holds it."""
    path = directory / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        if e.errno in _GONE:  # the directory went (a run that never started)
            return None
        raise RunDirError(f"cannot write the run directory {directory}: {e.strerror}") from None
    try:
        if not _lock(fd, path):
            os.lseek(fd, 0, os.SEEK_SET)
            raise _in_use(directory, Holder.parse(os.read(fd, 4096)))
        opened = os.fstat(fd)
        now = os.stat(path)
    except OSError as e:
        os.close(fd)
        if e.errno in _GONE:  # deleted by its holder on the way out, after our open
            return None
        raise
    except BaseException:
        os.close(fd)
        raise
    if (now.st_dev, now.st_ino) != (opened.st_dev, opened.st_ino):
        os.close(fd)  # we locked a file its holder deleted; the path has a new one
        return None
    return fd


def _lock(fd: int, path: Path) -> bool:
    """Take the OS lock on `fd` without waiting: False if another holds it. Without locks
    (platform or filesystem), a warning, and True: this process's own table still excludes."""
    if sys.platform == "win32":
        problem = "this platform has no flock"
    else:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as e:
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            if e.errno not in _NO_LOCKS:
                raise
            problem = f"the filesystem gives no locks ({os.strerror(e.errno)})"
    logging.getLogger("rageval").warning(
        "cannot lock %s: %s; another process could write this run directory at the same time",
        path,
        problem,
    )
    return True


def _write_name(fd: int, holder: Holder) -> None:
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, holder.text())
    os.fsync(fd)  # a writer on another NFS client reads it from the server


def _release(directory: Path, key: _DirKey, fd: int, made: list[Path]) -> None:
    with _holders_lock:
        try:
            # deleted while still locked: whoever opens the path next gets a new file (where
            # it cannot be deleted, as on Windows, it stays: a file without a lock blocks nothing)
            with contextlib.suppress(OSError):
                (directory / LOCK_FILE).unlink()
        finally:
            os.close(fd)
            _holders.pop(key, None)
        # a run that never started leaves no directory (one that did is not empty, and a
        # directory someone else has put something in since stays too)
        with contextlib.suppress(OSError):
            for made_here in made:
                made_here.rmdir()


def _in_use(directory: Path, holder: Holder) -> RunDirInUseError:
    return RunDirInUseError(
        f"{directory} is in use: another rageval run is writing it ({holder.describe()}); "
        "wait until it ends, or stop it, then resume the run (a run stopped in any way, "
        f"kill -9 included, gives the directory up; the lock is on {directory / LOCK_FILE})",
        pid=holder.pid,
        host=holder.host,
        started_at=holder.started_at,
    )


__all__ = ["LOCK_FILE", "Holder", "hold_run_dir", "one_writer"]
