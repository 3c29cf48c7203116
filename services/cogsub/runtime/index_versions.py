"""A new index version built beside the live one, and the switch that makes it live (replay)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from cogsub.index.ports import MemoryIndex
from cogsub.runtime.settings import Settings


@dataclass
class IndexVersion:
    """A new, empty index version and how to make it the live one once it is complete.

    Close ``index`` before calling ``promote`` (an embedded index file is moved).
    """

    index: MemoryIndex
    name: str
    promote: Callable[[], Awaitable[None]]


def new_index_version(settings: Settings, tag: str) -> IndexVersion:
    """A fresh index beside the live one; ``promote`` switches readers and writers to it.

    Embedded: ``index.<tag>.sqlite3`` next to ``index.sqlite3``, moved over it (no
    process may have the live index open: stop `cogsub run` first). Distributed: the
    OpenSearch index ``<index>-<tag>``, and ``<index>`` becomes an alias of it in one
    atomic update (the versions it pointed at before stay for a rollback).
    """
    if settings.backend == "embedded":
        from cogsub.index.sqlite import SqliteMemoryIndex

        live = settings.index_path
        target = live.with_name(f"{live.stem}.{tag}{live.suffix}")
        for path in (target, *_sidecars(target)):
            path.unlink(missing_ok=True)

        async def swap_files() -> None:
            await asyncio.to_thread(_replace_sqlite, target, live)

        # FTS5 alone while building: a tantivy store beside the new file would be left behind
        # by the move, and the live file's store is rebuilt from the rows when next opened.
        built = SqliteMemoryIndex(target, text_engine="fts5")
        return IndexVersion(built, str(target), swap_files)
    from cogsub.index.opensearch import OpenSearchMemoryIndex

    os_ = settings.opensearch
    password = os_.password.get_secret_value() if os_.password else None
    name = f"{os_.index}-{tag}"

    def client() -> OpenSearchMemoryIndex:
        return OpenSearchMemoryIndex(
            url=os_.url, index=name, username=os_.username, password=password
        )

    version = client()

    async def swap_alias() -> None:
        async with client() as admin:  # its own client: the version's may be closed by now
            await admin.promote(os_.index)

    return IndexVersion(version, name, swap_alias)


def _sidecars(path: Path) -> tuple[Path, Path]:
    return path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")


def _replace_sqlite(target: Path, live: Path) -> None:
    import sqlite3

    # Fold the new version's write-ahead log into its main file first, so one atomic
    # rename moves the whole database; the old index's own log goes with the old file.
    conn = sqlite3.connect(target)
    try:
        conn.execute("PRAGMA journal_mode=DELETE")
    finally:
        conn.close()
    for sidecar in _sidecars(live):
        sidecar.unlink(missing_ok=True)
    target.replace(live)
