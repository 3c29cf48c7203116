"""Embedded ArchiveStore: one file per object under a root directory.

``put_once`` writes the body to a temporary file in the object's directory,
makes it durable, then hard-links it to the final name. ``os.link`` fails
atomically when the name is taken, so two writers can never both win and a
reader never sees half an object. The temporary name is unlinked and the new
entry made durable before the put returns, so an acknowledged put survives
power loss. Durability is group-committed: on Linux concurrent puts share one
``syncfs(2)`` before their links and one after (elsewhere, an fsync per file
and shared directory fsyncs). Blocking calls run on a bounded thread pool, so puts
awaited together proceed in parallel.

Keys are ``/``-separated relative paths; anything that could leave the root
(absolute paths, ``..``, backslashes, empty segments) is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import os
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from cogsub.core.errors import (
    ConfigurationError,
    ConflictError,
    FieldProblem,
    InvalidInputError,
    NotFoundError,
    ObjectExistsError,
    UnavailableError,
)

T = TypeVar("T")

# Temporary files share the object's directory (so link() stays on one filesystem);
# keys may not use this prefix, and listings skip it.
_TMP_PREFIX = ".cogsub-tmp-"
_MAX_SEGMENT_BYTES = 255


def _key_problem(key: str, *, what: str) -> str | None:
    if not key:
        return f"{what} must not be empty"
    if "\\" in key or "\x00" in key:
        return f"{what} must not contain backslashes or NUL"
    if key.startswith("/"):
        return f"{what} must be relative (no leading '/')"
    for segment in key.split("/"):
        if segment in ("", ".", ".."):
            return f"{what} must not contain empty, '.' or '..' segments"
        if segment.startswith(_TMP_PREFIX):
            return f"{what} must not use the reserved prefix {_TMP_PREFIX!r}"
        if len(segment.encode()) > _MAX_SEGMENT_BYTES:
            return f"{what} segments must be at most {_MAX_SEGMENT_BYTES} bytes"
    return None


def _check_key(key: str) -> None:
    problem = _key_problem(key, what="key") if isinstance(key, str) else "key must be a str"
    if problem is not None:
        raise InvalidInputError([FieldProblem("key", f"{problem}: {key!r}")])


@contextlib.contextmanager
def _mapped_errors(key: str) -> Iterator[None]:
    """Turn OSErrors into our errors (the one place this adapter does it)."""
    try:
        yield
    except PermissionError as exc:
        raise ConfigurationError(f"archive cannot access {key!r}: {exc}") from exc
    except NotADirectoryError as exc:
        raise ConflictError(f"archive key {key!r} lies under an existing object") from exc
    except OSError as exc:
        raise UnavailableError(f"archive filesystem failed on {key!r}: {exc}") from exc


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _load_syncfs() -> Callable[[Path], None] | None:
    """``syncfs(2)`` on Linux: one call makes everything written on a filesystem durable."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        syncfs = libc.syncfs
    except (OSError, AttributeError):
        return None

    def sync_filesystem(directory: Path) -> None:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if syncfs(fd) != 0:
                errno = ctypes.get_errno()
                raise OSError(errno, os.strerror(errno))
        finally:
            os.close(fd)

    return sync_filesystem


_SYNCFS = _load_syncfs()


class _GroupSync:
    """Group commit for fsync-like calls (a directory fsync, or a whole-filesystem syncfs).

    A caller needs one sync of ``target`` that started after its own writes.
    One sync covers every write made before it started, so a thread that finds
    one already running waits for the next, which covers everyone who queued
    meanwhile; concurrent puts then share one sync instead of queueing one each
    behind the filesystem journal.
    """

    def __init__(self, sync_fn: Callable[[Path], None] = _fsync_dir) -> None:
        self._sync_fn = sync_fn
        self._cond = threading.Condition()
        self._started: dict[Path, int] = {}
        self._finished: dict[Path, int] = {}
        self._running: set[Path] = set()

    def sync(self, directory: Path) -> None:
        """Return once an fsync of ``directory`` that started after this call finished."""
        with self._cond:
            needed = self._started.get(directory, 0) + 1
            while self._finished.get(directory, 0) < needed:
                if directory in self._running:
                    self._cond.wait()
                    continue
                self._running.add(directory)
                number = self._started[directory] = self._started.get(directory, 0) + 1
                self._cond.release()
                try:
                    self._sync_fn(directory)
                finally:
                    self._cond.acquire()
                    self._running.discard(directory)
                    self._cond.notify_all()
                self._finished[directory] = number


def _make_dirs(directory: Path) -> None:
    """``mkdir -p`` that also makes every new directory entry durable."""
    missing: list[Path] = []
    while not directory.is_dir():
        missing.append(directory)
        directory = directory.parent
    for new in reversed(missing):
        with contextlib.suppress(FileExistsError):  # a concurrent put made it first
            new.mkdir()
        _fsync_dir(new.parent)


@dataclass(frozen=True)
class _Durability:
    """How puts become durable: per file and directory, or one shared syncfs per group."""

    dir_sync: _GroupSync
    fs_sync: _GroupSync | None
    root: Path

    def after_write(self, file_fd: int) -> None:
        if self.fs_sync is None:
            os.fsync(file_fd)

    def before_link(self) -> None:
        if self.fs_sync is not None:
            self.fs_sync.sync(self.root)  # the body is durable before its name is visible

    def after_link(self, directory: Path) -> None:
        if self.fs_sync is not None:
            self.fs_sync.sync(self.root)
        else:
            self.dir_sync.sync(directory)


def _put_once(path: Path, key: str, body: bytes, durability: _Durability) -> None:
    if os.path.lexists(path):
        # The name may come from a put that died before its sync: make it durable before
        # anyone builds on "it already exists" (index it, commit past it).
        durability.after_link(path.parent)
        raise _taken(path, key)
    _make_dirs(path.parent)
    temp = path.parent / f"{_TMP_PREFIX}{uuid.uuid4().hex}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(body)
            file.flush()
            durability.after_write(file.fileno())
        durability.before_link()
        try:
            os.link(temp, path)
        except FileExistsError:
            durability.after_link(path.parent)
            raise _taken(path, key) from None
    finally:
        os.unlink(temp)
    durability.after_link(path.parent)


def _taken(path: Path, key: str) -> ConflictError:
    if path.is_dir():
        return ConflictError(f"archive key {key!r} is a prefix of other objects")
    return ObjectExistsError(key)


def _get(path: Path, key: str) -> bytes:
    try:
        return path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise NotFoundError(f"no archive object under key {key!r}") from None


def _delete(path: Path, dir_sync: _GroupSync) -> None:
    try:
        os.unlink(path)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return
    dir_sync.sync(path.parent)


def _sorted_keys(root: Path, prefix: str) -> list[str]:
    directory, _, name_start = prefix.rpartition("/")
    if directory:
        problem = _key_problem(directory, what="prefix")
        if problem is not None:
            raise InvalidInputError([FieldProblem("prefix", f"{problem}: {prefix!r}")])
    base = root / directory if directory else root
    keys: list[str] = []
    for dirpath, dirnames, filenames in os.walk(base):
        relative = Path(dirpath).relative_to(root).as_posix()
        stem = "" if relative == "." else f"{relative}/"
        if dirpath == str(base):
            dirnames[:] = [name for name in dirnames if name.startswith(name_start)]
        keys += [
            stem + name
            for name in filenames
            if not name.startswith(_TMP_PREFIX) and (stem + name).startswith(prefix)
        ]
    # Walk order is not key order ("a-b/x" sorts before "a/x"), so sort the whole list.
    keys.sort()
    return keys


class FilesystemArchive:
    """An ArchiveStore keeping each object as a file under ``root``.

    Args:
        root: The archive directory; created on the first put.
        max_threads: How many blocking file operations run at once; with ``syncfs``
            this is also the largest group of puts that share one sync.
        group_sync: Make concurrent puts durable with one shared ``syncfs(2)`` (Linux)
            instead of an fsync per file and directory. ``None`` uses it where available.
    """

    def __init__(
        self, root: str | Path, *, max_threads: int = 128, group_sync: bool | None = None
    ) -> None:
        self.root = Path(root).absolute()
        self._executor = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="archive")
        self._dir_sync = _GroupSync()
        use_syncfs = _SYNCFS is not None if group_sync is None else group_sync
        if use_syncfs and _SYNCFS is None:
            raise ConfigurationError("group_sync needs syncfs(2), which this platform lacks")
        fs_sync = _GroupSync(_SYNCFS) if use_syncfs and _SYNCFS is not None else None
        self._durability = _Durability(self._dir_sync, fs_sync, self.root)
        self._closed = False

    async def _run(self, key: str, fn: Callable[[], T]) -> T:
        if self._closed:
            raise UnavailableError(f"archive on {self.root} is closed")

        def call() -> T:
            with _mapped_errors(key):
                return fn()

        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def _path(self, key: str) -> Path:
        _check_key(key)
        return self.root.joinpath(*key.split("/"))

    async def put_once(
        self, key: str, body: bytes, *, content_type: str = "application/json"
    ) -> None:
        """Store ``body`` under ``key``; ``ObjectExistsError`` if anything is there."""
        path = self._path(key)
        await self._run(key, functools.partial(_put_once, path, key, bytes(body), self._durability))

    async def get(self, key: str) -> bytes:
        """The stored bytes of ``key``; ``NotFoundError`` if absent."""
        path = self._path(key)
        return await self._run(key, functools.partial(_get, path, key))

    async def exists(self, key: str) -> bool:
        """Whether an object is stored under ``key``."""
        path = self._path(key)
        return await self._run(key, path.is_file)

    async def list(self, prefix: str = "") -> AsyncIterator[str]:
        """Keys starting with ``prefix`` (a plain string prefix), in lexicographic order."""
        if not isinstance(prefix, str) or "\\" in prefix or prefix.startswith("/"):
            raise InvalidInputError([FieldProblem("prefix", f"must be relative: {prefix!r}")])
        keys = await self._run(prefix, functools.partial(_sorted_keys, self.root, prefix))
        for key in keys:
            yield key

    async def delete(self, key: str) -> None:
        """Erase ``key`` for good; a missing key is not an error."""
        path = self._path(key)
        await self._run(key, functools.partial(_delete, path, self._dir_sync))

    async def close(self) -> None:
        """Wait for running file operations, then stop the threads."""
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._executor.shutdown)
