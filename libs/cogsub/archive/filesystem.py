"""Embedded ArchiveStore: one file per object under a root directory.

``put_once`` writes the body to a temporary file in the object's directory,
makes it durable, then hard-links it to the final name. ``os.link`` fails
atomically when the name is taken, so two writers can never both win and a
reader never sees half an object. The temporary name is unlinked and the new
entry made durable before the put returns, so an acknowledged put survives
power loss. Durability is group-committed: on Linux concurrent puts share one
``syncfs(2)`` before their links and one after (elsewhere, an fsync per file
and shared directory fsyncs). Blocking calls run on a bounded thread pool, so puts
awaited together proceed in parallel. ``put_once_many`` stores a batch with
the same steps taken together: every body, one sync, every name, one sync,
on a few threads, instead of a thread hop and a share of two syncs per object.

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
import zlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from cogsub.core.errors import (
    CogsubError,
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
#: The fewest keys one thread reads in a `get_many` (below that a hop costs more than a read).
_KEYS_PER_READ = 16


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
        # Callers inside sync() per directory: the last one out forgets the directory's
        # counts, or a directory per fact (each one's evidence) would be kept forever.
        self._callers: dict[Path, int] = {}

    def sync(self, directory: Path) -> None:
        """Return once an fsync of ``directory`` that started after this call finished."""
        with self._cond:
            self._callers[directory] = self._callers.get(directory, 0) + 1
            try:
                self._sync_locked(directory)
            finally:
                left = self._callers.pop(directory) - 1
                if left:
                    self._callers[directory] = left
                else:  # nobody waits on these counts; a later caller starts from zero
                    self._started.pop(directory, None)
                    self._finished.pop(directory, None)

    def _sync_locked(self, directory: Path) -> None:
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

    @property
    def directories_tracked(self) -> int:
        with self._cond:
            return len(self._started) + len(self._finished) + len(self._callers)


def _make_dirs(directory: Path, durability: _Durability) -> None:
    """``mkdir -p`` whose new directory entries are durable before any name in them is."""
    missing: list[Path] = []
    while not directory.is_dir():
        missing.append(directory)
        directory = directory.parent
    for new in reversed(missing):
        with contextlib.suppress(FileExistsError):  # a concurrent put made it first
            new.mkdir()
        durability.after_mkdir(new.parent)


@dataclass(frozen=True)
class _Durability:
    """How puts become durable: per file and directory, or one shared syncfs per group."""

    dir_sync: _GroupSync
    fs_sync: _GroupSync | None
    root: Path

    def after_write(self, file_fd: int) -> None:
        if self.fs_sync is None:
            os.fsync(file_fd)

    def after_mkdir(self, parent: Path) -> None:
        # With syncfs, the one before any link covers new directories too: a directory
        # sync per new directory (each new fact's evidence has one) had made these syncs
        # most of extraction's archive time. A put that finds the directory already there
        # links only after a syncfs of its own, so it cannot outrun the entry either.
        if self.fs_sync is None:
            self.dir_sync.sync(parent)

    def before_link(self) -> None:
        if self.fs_sync is not None:
            self.fs_sync.sync(self.root)  # the body is durable before its name is visible

    def after_link_all(self, directories: Iterable[str | Path]) -> None:
        if self.fs_sync is not None:
            self.fs_sync.sync(self.root)  # one syncfs covers every directory
        else:
            for directory in sorted({Path(name) for name in directories}):
                self.dir_sync.sync(directory)


def _put_once(path: Path, key: str, body: bytes, durability: _Durability) -> None:
    (outcome,) = _put_batch([(str(path), key, body)], durability)
    if outcome is not None:
        raise outcome


def _put_batch(
    items: Sequence[tuple[str, str, bytes]], durability: _Durability
) -> list[CogsubError | None]:
    """Write-once puts sharing their durability steps; ``None`` or the error for each item.

    Every body is written to its temporary file first, then one sync makes them
    all durable before any name appears, then the names are linked, then one
    sync makes the names durable. A batch therefore costs two syncs however many
    objects it holds, and each outcome means what a lone ``put_once`` would.
    ``items`` are ``(path, key, body)``.
    """
    outcomes: list[CogsubError | None] = [None] * len(items)
    temps: dict[int, str] = {}
    made: set[str] = set()  # known to exist: one mkdir check per directory and batch
    token = uuid.uuid4().hex  # one random name stem per batch: unique across processes
    try:
        for at, (path, key, body) in enumerate(items):
            directory = os.path.dirname(path)
            try:
                with _mapped_errors(key):
                    if os.path.lexists(path):
                        # The name may come from a put that died before its sync: the
                        # closing sync makes it durable before anyone builds on it.
                        outcomes[at] = _taken(path, key)
                        continue
                    if directory not in made:
                        _make_dirs(Path(directory), durability)
                        made.add(directory)
                    temps[at] = _write_temp(directory, f"{token}-{at}", body, durability)
            except CogsubError as exc:
                outcomes[at] = exc
        if temps:
            _sync_or_fail(durability.before_link, list(temps), items, outcomes)
        for at, temp in temps.items():
            if outcomes[at] is not None:
                continue
            path, key, _ = items[at]
            try:
                with _mapped_errors(key):
                    try:
                        os.link(temp, path)
                    except FileExistsError:
                        outcomes[at] = _taken(path, key)
            except CogsubError as exc:
                outcomes[at] = exc
    finally:
        for at, temp in temps.items():
            try:
                with _mapped_errors(items[at][1]):
                    os.unlink(temp)
            except CogsubError as exc:
                outcomes[at] = outcomes[at] or exc
    waiting = [at for at, outcome in enumerate(outcomes) if _needs_sync(outcome)]
    if waiting:
        directories = {os.path.dirname(items[at][0]) for at in waiting}
        _sync_or_fail(lambda: durability.after_link_all(directories), waiting, items, outcomes)
    return outcomes


def _write_temp(directory: str, name: str, body: bytes, durability: _Durability) -> str:
    """The body in a new temporary file in ``directory`` (durable once ``before_link`` ran)."""
    temp = os.path.join(directory, _TMP_PREFIX + name)
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view) :]
        durability.after_write(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    finally:
        os.close(fd)
    return temp


def _needs_sync(outcome: CogsubError | None) -> bool:
    """Stored objects and names found taken are reported only after a closing sync."""
    return outcome is None or isinstance(outcome, ObjectExistsError)


def _sync_or_fail(
    sync: Callable[[], None],
    pending: Sequence[int],
    items: Sequence[tuple[str, str, bytes]],
    outcomes: list[CogsubError | None],
) -> None:
    """Run a shared sync; if it fails, every item waiting on it fails with that error."""
    try:
        with _mapped_errors(items[pending[0]][1]):
            sync()
    except CogsubError as exc:
        for at in pending:
            if _needs_sync(outcomes[at]):
                outcomes[at] = exc


def _slices(
    items: Sequence[tuple[int, tuple[str, str, bytes]]], parts: int
) -> list[list[tuple[int, tuple[str, str, bytes]]]]:
    """``(position, (path, key, body))`` items in at most ``parts`` non-empty slices, by key.

    Every copy of a key lands in the same slice, in call order, so the first copy
    is the one stored, as with puts made one after another.
    """
    slices: list[list[tuple[int, tuple[str, str, bytes]]]] = [[] for _ in range(parts)]
    for item in items:
        slices[zlib.crc32(item[1][1].encode()) % parts].append(item)
    return [part for part in slices if part]


def _taken(path: str, key: str) -> ConflictError:
    if os.path.isdir(path):
        return ConflictError(f"archive key {key!r} is a prefix of other objects")
    return ObjectExistsError(key)


def _get(path: Path, key: str) -> bytes:
    try:
        return path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise NotFoundError(f"no archive object under key {key!r}") from None


def _get_existing(paths: Sequence[tuple[str, Path]]) -> dict[str, bytes]:
    found = {}
    for key, path in paths:
        with _mapped_errors(key):  # a failure names its own key, not the run's first
            try:
                found[key] = path.read_bytes()
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                continue  # erased or never written: left out
    return found


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
        batch_threads: How many threads share one ``put_once_many`` call.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        max_threads: int = 128,
        group_sync: bool | None = None,
        batch_threads: int = 2,
    ) -> None:
        self.root = Path(root).absolute()
        self._root_text = str(self.root)
        self._batch_threads = max(1, min(batch_threads, max_threads))
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

    async def put_once_many(
        self, items: Sequence[tuple[str, bytes]], *, content_type: str = "application/json"
    ) -> list[CogsubError | None]:
        """``put_once`` for many objects at once, each outcome on its own.

        Returns, in order, ``None`` for each object stored (durable, as after
        ``put_once``) or the error ``put_once`` would have raised for it
        (``ObjectExistsError`` when the key is taken, ``InvalidInputError`` for a
        bad key, ...). The objects share their durability steps: a slice of the
        batch runs as one job on each of a few threads (``batch_threads``), and
        each job syncs twice however many objects it holds, instead of a thread
        hop and a share of two syncs per object. Of several items with one key,
        the first is stored and the others find it there.
        """
        if self._closed:
            raise UnavailableError(f"archive on {self.root} is closed")
        outcomes: list[CogsubError | None] = [None] * len(items)
        valid: list[tuple[int, tuple[str, str, bytes]]] = []
        for at, (key, body) in enumerate(items):
            try:
                _check_key(key)  # a checked key is a plain relative path: join it as a string
                valid.append((at, (os.path.join(self._root_text, key), key, bytes(body))))
            except InvalidInputError as exc:
                outcomes[at] = exc
        slices = _slices(valid, self._batch_threads)
        loop = asyncio.get_running_loop()
        results = await asyncio.gather(
            *(
                loop.run_in_executor(
                    self._executor, _put_batch, [item for _, item in part], self._durability
                )
                for part in slices
            )
        )
        for part, result in zip(slices, results, strict=True):
            for (at, _), outcome in zip(part, result, strict=True):
                outcomes[at] = outcome
        return outcomes

    async def get(self, key: str) -> bytes:
        """The stored bytes of ``key``; ``NotFoundError`` if absent."""
        path = self._path(key)
        return await self._run(key, functools.partial(_get, path, key))

    async def get_many(self, keys: Sequence[str]) -> dict[str, bytes]:
        """The stored bytes of each of ``keys`` that exists, a few threads reading runs of them.

        One thread hop per run instead of one per key: a page of a hundred small
        files costs a handful of hops, not a hundred GIL round trips.
        """
        paths = [(key, self._path(key)) for key in dict.fromkeys(keys)]
        if not paths:
            return {}
        size = max(_KEYS_PER_READ, -(-len(paths) // self._batch_threads))
        runs = [paths[start : start + size] for start in range(0, len(paths), size)]
        found: dict[str, bytes] = {}
        for part in await asyncio.gather(
            *(self._run(run[0][0], functools.partial(_get_existing, run)) for run in runs)
        ):
            found.update(part)
        return {key: found[key] for key in keys if key in found}

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
