"""FilesystemArchive behaviour beyond the contract: key safety, temp files, parallel puts."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cogsub.archive.filesystem import FilesystemArchive
from cogsub.core.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    ObjectExistsError,
    UnavailableError,
)


@pytest.fixture
def root(data_dir: Path) -> Path:
    return data_dir / "archive"


@pytest.fixture
async def archive(root: Path) -> AsyncIterator[FilesystemArchive]:
    archive = FilesystemArchive(root)
    try:
        yield archive
    finally:
        await archive.close()


def _all_files(top: Path) -> list[str]:
    return sorted(str(p.relative_to(top)) for p in top.rglob("*") if p.is_file())


def _temp_files(top: Path) -> list[Path]:
    return list(top.rglob(".cogsub-tmp-*"))


@pytest.mark.parametrize(
    "key",
    [
        "",
        "/etc/passwd",
        "../outside.json",
        "events/../../outside.json",
        "events/./a.json",
        "events//a.json",
        "events/",
        "events\\..\\outside.json",
        "events/a\x00.json",
        "events/.cogsub-tmp-123",
        "x" * 256,
    ],
)
async def test_keys_that_could_escape_the_root_are_refused(
    archive: FilesystemArchive, data_dir: Path, key: str
) -> None:
    for operation in (
        archive.put_once(key, b"escape"),
        archive.get(key),
        archive.exists(key),
        archive.delete(key),
    ):
        with pytest.raises(InvalidInputError) as raised:
            await operation
        assert repr(key) in str(raised.value)
    assert _all_files(data_dir) == []


async def test_prefixes_that_could_escape_the_root_are_refused(
    archive: FilesystemArchive,
) -> None:
    for prefix in ("../", "/etc/", "a\\b", "a//b"):
        with pytest.raises(InvalidInputError):
            _ = [key async for key in archive.list(prefix)]


async def test_objects_are_files_at_their_key_path_and_no_temp_file_is_left(
    archive: FilesystemArchive, root: Path
) -> None:
    await archive.put_once("events/2026/05/08/e1.json", b'{"id": 1}')
    racing = [archive.put_once("events/2026/05/08/e2.json", b"%d" % i) for i in range(20)]
    await asyncio.gather(*racing, return_exceptions=True)
    with pytest.raises(ObjectExistsError):
        await archive.put_once("events/2026/05/08/e1.json", b"again")
    assert (root / "events/2026/05/08/e1.json").read_bytes() == b'{"id": 1}'
    assert _all_files(root) == ["events/2026/05/08/e1.json", "events/2026/05/08/e2.json"]


async def test_temp_files_left_by_a_crash_are_invisible(
    archive: FilesystemArchive, root: Path
) -> None:
    await archive.put_once("events/a.json", b"a")
    (root / "events" / ".cogsub-tmp-deadbeef").write_bytes(b"half an obj")
    assert [key async for key in archive.list("")] == ["events/a.json"]
    assert [key async for key in archive.list("events/.cog")] == []


async def test_keys_that_are_prefixes_of_other_keys_conflict_but_are_not_objects(
    archive: FilesystemArchive,
) -> None:
    await archive.put_once("p/a/b", b"deep")
    with pytest.raises(ConflictError) as raised:
        await archive.put_once("p/a", b"shallow")
    assert not isinstance(raised.value, ObjectExistsError)
    with pytest.raises(ConflictError):
        await archive.put_once("p/a/b/c", b"under an object")
    assert not await archive.exists("p/a")
    with pytest.raises(NotFoundError):
        await archive.get("p/a")
    await archive.delete("p/a")  # a directory is not an object: nothing to delete
    assert await archive.get("p/a/b") == b"deep"


async def test_puts_awaited_together_run_in_parallel_threads(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_link = os.link
    lock = threading.Lock()
    running = 0
    most = 0
    threads: set[int] = set()

    def slow_link(src: str, dst: str) -> None:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
            threads.add(threading.get_ident())
        try:
            time.sleep(0.005)  # a slow disk, so that overlapping calls are visible
            real_link(src, dst)
        finally:
            with lock:
                running -= 1

    monkeypatch.setattr(os, "link", slow_link)
    archive = FilesystemArchive(root, max_threads=8)
    try:
        await asyncio.gather(*(archive.put_once(f"par/{i:03d}", b"x" * 2048) for i in range(64)))
    finally:
        await archive.close()
    assert most > 1
    assert 1 < len(threads) <= 8


async def test_a_closed_archive_refuses_work(root: Path) -> None:
    archive = FilesystemArchive(root)
    await archive.close()
    with pytest.raises(UnavailableError):
        await archive.put_once("a", b"a")


def test_concurrent_syncs_share_one_call(tmp_path: Path) -> None:
    from cogsub.archive import filesystem

    spans: list[tuple[float, float]] = []

    def slow_fsync_dir(directory: Path) -> None:
        begun = time.monotonic()
        time.sleep(0.1)  # a slow journal, so that callers pile up behind it
        spans.append((begun, time.monotonic()))

    syncer = filesystem._GroupSync(slow_fsync_dir)
    calls: list[tuple[float, float]] = []
    barrier = threading.Barrier(16)

    def one_put() -> None:
        barrier.wait()
        asked = time.monotonic()
        syncer.sync(tmp_path)
        calls.append((asked, time.monotonic()))

    threads = [threading.Thread(target=one_put) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert len(calls) == 16
    # Sixteen callers shared a few fsyncs (the running one, then one for everyone who queued).
    assert 1 <= len(spans) <= 3
    # Each caller returned only after a whole fsync that began after it asked.
    for asked, returned in calls:
        assert any(asked <= begun and ended <= returned for begun, ended in spans)


def test_group_sync_forgets_a_directory_once_nobody_waits_on_it(tmp_path: Path) -> None:
    """Without syncfs every new directory is synced: their counts must not pile up."""
    from cogsub.archive import filesystem

    synced: list[Path] = []
    syncer = filesystem._GroupSync(synced.append)
    directories = [tmp_path / f"fact-{i}" for i in range(200)]
    threads = [
        threading.Thread(target=syncer.sync, args=(directory,)) for directory in directories * 2
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert set(synced) == set(directories)
    assert syncer.directories_tracked == 0
    syncer.sync(directories[0])  # a later caller still gets a sync of its own
    assert synced.count(directories[0]) >= 2


@pytest.mark.parametrize("group_sync", [True, False])
async def test_both_durability_modes_keep_the_contract(tmp_path: Path, group_sync: bool) -> None:
    from cogsub.archive import FilesystemArchive
    from cogsub.core import ObjectExistsError

    archive = FilesystemArchive(tmp_path, group_sync=group_sync)
    try:
        await asyncio.gather(*(archive.put_once(f"d/{i}.json", b"%d" % i) for i in range(50)))
        with pytest.raises(ObjectExistsError):
            await archive.put_once("d/7.json", b"other")
        assert await archive.get("d/7.json") == b"7"
        assert len([k async for k in archive.list("d/")]) == 50
        assert not [p for p in (tmp_path / "d").iterdir() if p.name.startswith(".cogsub-tmp-")]
    finally:
        await archive.close()


@pytest.mark.parametrize("group_sync", [True, False])
async def test_put_once_many_gives_each_object_its_own_outcome(
    tmp_path: Path, group_sync: bool
) -> None:
    archive = FilesystemArchive(tmp_path, group_sync=group_sync)
    try:
        await archive.put_once("b/old.json", b"original")
        await archive.put_once("p/a/b", b"deep")
        outcomes = await archive.put_once_many(
            [
                ("b/twice.json", b"first"),
                *((f"b/{i}.json", b"%d" % i) for i in range(30)),
                ("b/old.json", b"overwrite?"),
                ("../escape", b"x"),
                ("p/a", b"prefix of an object"),
                ("p/a/b/c", b"under an object"),
                ("b/twice.json", b"second"),  # far from the first copy: other thread's half
                ("c/new/dir/x.json", b"in a new directory"),
            ]
        )
        first = outcomes.pop(0)
        assert outcomes[:30] == [None] * 30
        old, escape, prefix, under, second, new_dir = outcomes[30:]
        assert isinstance(old, ObjectExistsError)
        assert isinstance(escape, InvalidInputError)
        assert isinstance(prefix, ConflictError) and not isinstance(prefix, ObjectExistsError)
        assert isinstance(under, ConflictError) and not isinstance(under, ObjectExistsError)
        assert first is None and isinstance(second, ObjectExistsError)
        assert new_dir is None
        assert await archive.get("b/old.json") == b"original"
        assert await archive.get("b/twice.json") == b"first"
        assert [await archive.get(f"b/{i}.json") for i in range(30)] == [
            b"%d" % i for i in range(30)
        ]
        assert await archive.get("c/new/dir/x.json") == b"in a new directory"
        assert _temp_files(tmp_path) == []
        assert await archive.put_once_many([]) == []
    finally:
        await archive.close()


async def test_put_once_many_syncs_bodies_before_names_and_names_before_returning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cogsub.archive import filesystem

    log: list[str] = []
    real_link = os.link

    def recording_syncfs(directory: Path) -> None:
        log.append("sync")

    def recording_link(src: str, dst: str) -> None:
        log.append("link")
        real_link(src, dst)

    monkeypatch.setattr(filesystem, "_SYNCFS", recording_syncfs)
    monkeypatch.setattr(os, "link", recording_link)
    archive = FilesystemArchive(tmp_path, group_sync=True, batch_threads=1)
    try:
        outcomes = await archive.put_once_many([(f"d/{i}", b"x") for i in range(100)])
        assert outcomes == [None] * 100
        # One sync makes every body durable before any name appears, one more every name.
        assert log == ["sync", *["link"] * 100, "sync"]
        log.clear()
        assert all(
            isinstance(o, ObjectExistsError) for o in await archive.put_once_many([("d/1", b"x")])
        )
        assert log == ["sync"]  # "already there" is said only once the name is durable
    finally:
        await archive.close()


async def test_with_syncfs_new_directories_cost_no_sync_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cogsub.archive import filesystem

    log: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        log.append("fsync")
        real_fsync(fd)

    monkeypatch.setattr(filesystem, "_SYNCFS", lambda directory: log.append("sync"))
    monkeypatch.setattr(os, "fsync", recording_fsync)
    archive = FilesystemArchive(tmp_path, group_sync=True, batch_threads=1)
    try:
        # Fifty objects in fifty new directories, as a batch of new facts' evidence.
        items = [(f"evidence/f{i}/source-0", b"x") for i in range(50)]
        assert await archive.put_once_many(items) == [None] * 50
        assert log == ["sync", "sync"]  # the syncfs before the links covers the directories
        assert [await archive.get(key) for key, _ in items] == [b"x"] * 50
    finally:
        await archive.close()


async def test_a_failed_sync_fails_every_object_waiting_on_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cogsub.archive import filesystem

    def broken_syncfs(directory: Path) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(filesystem, "_SYNCFS", broken_syncfs)
    archive = FilesystemArchive(tmp_path, group_sync=True)
    try:
        outcomes = await archive.put_once_many([(f"d/{i}", b"x") for i in range(20)])
        assert all(isinstance(o, UnavailableError) for o in outcomes)
        assert [key async for key in archive.list("")] == []  # no name without a durable body
        assert _temp_files(tmp_path) == []
    finally:
        await archive.close()


async def test_put_once_many_spreads_a_batch_over_a_few_threads(
    archive: FilesystemArchive, monkeypatch: pytest.MonkeyPatch
) -> None:
    from cogsub.archive import filesystem

    threads: set[int] = set()
    real_write_temp = filesystem._write_temp

    def recording(*args: object, **kwargs: object) -> str:
        threads.add(threading.get_ident())
        time.sleep(0.001)  # a slow disk, so that both slices overlap
        return real_write_temp(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(filesystem, "_write_temp", recording)
    outcomes = await archive.put_once_many([(f"s/{i}", b"x") for i in range(64)])
    assert outcomes == [None] * 64
    assert len(threads) == 2  # the default batch_threads, never one per object
