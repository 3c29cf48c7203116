"""Browsing: the banks a caller may see, and a bank's memories newest first, a page at a time.

The index decides what a page holds and in which order (a keyset on
(timestamp, event_id), see ``MemoryIndex.list_newest``); the archive supplies
each memory's full text and event, as ``GET …/memories/{id}`` does. A memory
forgotten between the two reads is left out of its page rather than shown
half-read.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence

from cogsub.archive.ports import ArchiveStore
from cogsub.core.documents import IndexDocument
from cogsub.core.listing import (
    BankPage,
    BankSummary,
    ListingKey,
    MemoryListFilters,
    MemoryPage,
    decode_bank_cursor,
    decode_cursor,
    encode_bank_cursor,
    encode_cursor,
)
from cogsub.core.memory import MemoryRecord
from cogsub.index.ports import BankCounts, MemoryIndex, SearchFilters
from cogsub.lifecycle.archive_reads import read_many

__all__ = ["MemoryBrowser", "memory_record", "summary_of"]


class MemoryBrowser:
    """Bank summaries and memory pages over the index and the archive."""

    def __init__(self, *, archive: ArchiveStore, index: MemoryIndex) -> None:
        self._archive = archive
        self._index = index

    async def banks(
        self, granted: Collection[str] | None, *, cursor: str | None, limit: int
    ) -> BankPage:
        """The banks ``granted`` (every bank holding memories when None), in id order.

        A granted bank that holds nothing yet is listed with a total of 0: the key
        may use it.
        """
        after = decode_bank_cursor(cursor) if cursor is not None else None
        if granted is None:
            found = await self._index.bank_counts(None, size=limit + 1, after=after)
            summaries = [summary_of(counts) for counts in found]
        else:
            wanted = sorted(b for b in set(granted) if after is None or b > after)[: limit + 1]
            held = {c.bank_id: c for c in await self._index.bank_counts(wanted, size=len(wanted))}
            summaries = [summary_of(held.get(b, BankCounts(b, {}, None))) for b in wanted]
        more = len(summaries) > limit
        page = summaries[:limit]
        next_cursor = encode_bank_cursor(page[-1].bank_id) if more else None
        return BankPage(banks=page, next_cursor=next_cursor)

    async def memories(self, bank_id: str, ask: MemoryListFilters) -> MemoryPage:
        """One page of ``bank_id``'s memories, newest first, after ``ask.cursor``."""
        after = decode_cursor(ask.cursor) if ask.cursor is not None else None
        filters = SearchFilters(
            bank_id=bank_id,
            fact_types=frozenset(ask.types) if ask.types is not None else None,
            tags_any=frozenset(ask.tags) if ask.tags is not None else None,
            since=ask.since,
            until=ask.until,
        )
        found = await self._index.list_newest(
            filters,
            size=ask.limit + 1,
            after=after,
            include_superseded=ask.include_superseded,
        )
        page = found[: ask.limit]
        more = len(found) > ask.limit
        next_cursor = encode_cursor(listing_key(page[-1])) if more else None
        return MemoryPage(memories=await self.records(page), next_cursor=next_cursor)

    async def records(self, docs: Sequence[IndexDocument]) -> list[MemoryRecord]:
        """Each document with its archived event, in order; one erased meanwhile is left out."""
        bodies = await read_many(self._archive, [doc.object_storage_key for doc in docs])
        return [
            memory_record(doc, json.loads(bodies[doc.object_storage_key]))
            for doc in docs
            if doc.object_storage_key in bodies
        ]


def listing_key(doc: IndexDocument) -> ListingKey:
    return ListingKey(doc.timestamp, doc.event_id)


def summary_of(counts: BankCounts) -> BankSummary:
    """The wire summary of a bank; untyped memories count in ``total`` only."""
    typed = {fact: n for fact, n in counts.counts.items() if fact is not None}
    return BankSummary(
        bank_id=counts.bank_id, total=counts.total, counts=typed, newest_at=counts.newest_at
    )


def memory_record(doc: IndexDocument, archived: dict[str, object]) -> MemoryRecord:
    """What ``GET …/memories/{id}`` answers for ``doc``, its archived event already read."""
    event_input = archived.get("input")
    text = event_input.get("text") if isinstance(event_input, dict) else None
    return MemoryRecord(
        id=doc.event_id,
        bank_id=doc.bank_id,
        fact_type=doc.fact_type,
        text=text if isinstance(text, str) else doc.summary,
        timestamp=doc.timestamp,
        tags=doc.tags,
        object_storage_key=doc.object_storage_key,
        importance_score=doc.importance_score,
        retrieval_count=doc.retrieval_count,
        archived_event=archived,
    )
