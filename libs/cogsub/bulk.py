"""Batch forms of port calls: where the adapter offers them, one by one elsewhere.

``EventBus.publish_many`` is on the port: every bus appends a batch in one
durability step. ``ArchiveStore.put_once`` stores one object and
``MemoryIndex.update_many`` patches one bank; an adapter may also offer
``put_once_many`` (the filesystem and S3 archives do) or ``update_across`` (the
SQLite index), which do a whole batch's work in one thread hop and one
durability step instead of one per item or bank; on the hot path that is most
of what the embedded stores cost.

The check for those two looks at the adapter's class, not at the instance, so a
wrapper that delegates unknown attributes (``__getattr__``) and overrides only
the single-item call, as fault-injecting test doubles do, is still called item
by item and still sees every call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from cogsub.archive.ports import ArchiveStore
from cogsub.bus.ports import EventBus, Headers
from cogsub.core.errors import CogsubError
from cogsub.index.ports import DocumentPatch, MemoryIndex

ArchiveItem = tuple[str, bytes]
"""``(key, body)`` of one object to store once."""

Outgoing = tuple[str, bytes, bytes | None, Headers]
"""``(topic, value, key, headers)`` of one record to publish."""


def _bulk(adapter: object, name: str) -> Callable[..., Awaitable[Any]] | None:
    if not callable(getattr(type(adapter), name, None)):
        return None
    method: Callable[..., Awaitable[Any]] = getattr(adapter, name)
    return method


async def put_all(archive: ArchiveStore, items: Sequence[ArchiveItem]) -> list[CogsubError | None]:
    """``put_once`` every item; ``None`` for each stored, or the port error it raised.

    Errors that are not ours (a bug, a crash) are raised, not returned.
    """
    if not items:
        return []
    bulk = _bulk(archive, "put_once_many")
    if bulk is not None:
        outcomes: list[CogsubError | None] = list(await bulk(items))
        return outcomes
    results = await asyncio.gather(
        *(archive.put_once(key, body) for key, body in items), return_exceptions=True
    )
    outcomes = []
    for result in results:
        if isinstance(result, CogsubError):
            outcomes.append(result)
        elif isinstance(result, BaseException):
            raise result
        else:
            outcomes.append(None)
    return outcomes


async def publish_all(bus: EventBus, records: Sequence[Outgoing]) -> None:
    """Publish every record durably, in order, in one call."""
    if records:
        await bus.publish_many(records)


async def update_all(index: MemoryIndex, patches: Mapping[str, Mapping[str, DocumentPatch]]) -> int:
    """``update_many`` for each bank (bank → id → patch); how many documents were found."""
    bulk = _bulk(index, "update_across")
    if bulk is not None:
        return int(await bulk(patches))
    found = 0
    for bank_id, bank_patches in patches.items():
        if bank_patches:
            found += await index.update_many(bank_id, bank_patches)
    return found
