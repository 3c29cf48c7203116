"""Reading and erasing many archive objects at once, a bounded number in flight.

Forgetting and transfer both walk a bank in batches of keys; each batch is read
(or erased) concurrently, because one object store round trip per key in turn
would make a large bank take minutes, and bounded, because an unbounded gather
opens as many connections as there are keys.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import TypeVar

from cogsub.archive.ports import ArchiveStore

__all__ = ["CONCURRENCY", "bounded", "chunks", "read_many"]

T = TypeVar("T")
R = TypeVar("R")

CONCURRENCY = 32


async def bounded(
    items: Iterable[T], fn: Callable[[T], Awaitable[R]], *, limit: int = CONCURRENCY
) -> list[R]:
    """``fn`` over ``items`` with at most ``limit`` running at once, results in order."""
    gate = asyncio.Semaphore(limit)

    async def one(item: T) -> R:
        async with gate:
            return await fn(item)

    return await asyncio.gather(*(one(item) for item in items))


def chunks(items: Sequence[T], size: int) -> list[Sequence[T]]:
    """``items`` cut into runs of ``size`` (the last one shorter)."""
    return [items[start : start + size] for start in range(0, len(items), size)]


async def read_many(archive: ArchiveStore, keys: Sequence[str]) -> dict[str, bytes]:
    """The bodies of ``keys`` that still exist, in the order of ``keys`` (erased ones left out)."""
    return await archive.get_many(keys)
