"""Retrieval feedback off the answer's path: counts are coalesced and written in the background.

Every recall marks the memories it returned; a single background task writes the
accumulated increments (one bulk update across banks per flush, one increment per
memory however often it was returned meanwhile), so recall latency never
includes an index write and a burst of recalls costs a bounded number of writes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Sequence

import structlog

from cogsub.bulk import update_all
from cogsub.index.ports import DocumentPatch, MemoryIndex

log = structlog.get_logger("cogsub.recall")

MAX_PENDING = 50_000


class RetrievalFeedback:
    """Coalesces retrieval-count increments per (bank, memory) and flushes them."""

    def __init__(self, index: MemoryIndex, *, flush_interval_s: float = 0.5) -> None:
        self._index = index
        self._interval = flush_interval_s
        self._pending: Counter[tuple[str, str]] = Counter()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def returned(self, bank_id: str, memory_ids: Sequence[str]) -> None:
        """Note that recall returned ``memory_ids``; never blocks, never raises."""
        if len(self._pending) >= MAX_PENDING:
            log.warning("retrieval_feedback_dropped", memories=len(memory_ids))
            return  # bounded memory beats unbounded growth when the index is down
        for memory_id in memory_ids:
            self._pending[(bank_id, memory_id)] += 1
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while self._pending:
            await self.flush()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=self._interval)
            self._wake.clear()

    async def flush(self) -> None:
        """Write every pending increment now, in one bulk update across banks.

        One, not one per bank: each write waits its turn at the index's one writer
        behind ingestion's, and recalls over ten banks had made ten of them a flush.
        """
        pending, self._pending = self._pending, Counter()
        by_bank: dict[str, dict[str, DocumentPatch]] = {}
        for (bank_id, memory_id), count in sorted(pending.items()):
            patch = DocumentPatch(retrieval_count_increment=count)
            by_bank.setdefault(bank_id, {})[memory_id] = patch
        if not by_bank:
            return
        try:
            await update_all(self._index, by_bank)
        except Exception as exc:  # feedback is best effort; recall already answered
            # Not retried bank by bank: an adapter whose bulk update is not atomic may
            # have written some banks already, and counting them twice is worse than
            # losing one flush (an index that fails, fails them all alike).
            log.warning(
                "retrieval_feedback_failed",
                banks=len(by_bank),
                memories=sum(len(p) for p in by_bank.values()),
                error=str(exc),
            )

    async def drain(self) -> None:
        """Flush what is pending and stop the background task (before closing the index)."""
        self._wake.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._pending:
            await self.flush()
