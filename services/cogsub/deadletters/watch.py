"""Follow ``experience.raw.dlq`` from its end, so a waiting retain hears of its rejection.

Runs in every API process (embedded or distributed alike: it only reads the bus,
joining no consumer group, so any number of API replicas each see every dead
letter). It reads briskly while a retain is waiting and rarely otherwise.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from cogsub.bus.ports import EventBus
from cogsub.core.errors import CogsubError, NotFoundError
from cogsub.core.topics import EXPERIENCE_RAW_DLQ
from cogsub.deadletters.letters import RejectionBook, dead_letter_of

log = structlog.get_logger("cogsub.deadletters")

READ_BATCH = 256
#: Seconds between looks for partitions that appeared since the last look.
PARTITIONS_REFRESH_S = 30.0


class DeadLetterWatch:
    """Feeds the dead letters published after ``start`` into ``book``.

    Args:
        bus: Where the dead letters are.
        book: What a waiting retain consults.
        busy_interval_s: Between reads while a retain waits (``book.asked_within``).
        idle_interval_s: Between reads otherwise (the book is still kept current).
    """

    def __init__(
        self,
        *,
        bus: EventBus,
        book: RejectionBook,
        topic: str = EXPERIENCE_RAW_DLQ,
        busy_interval_s: float = 0.02,
        idle_interval_s: float = 1.0,
    ) -> None:
        self._bus = bus
        self._book = book
        self._topic = topic
        self._busy_s = busy_interval_s
        self._idle_s = idle_interval_s
        self._next: dict[int, int] | None = None
        self._looked_at = 0.0

    async def start(self) -> None:
        """Take the topic's end offsets as the starting point: older letters were answered."""
        try:
            stats = await self._bus.topic_stats(self._topic)
        except NotFoundError:  # no letter yet: follow the topic from its first once it exists
            self._next, self._looked_at = {}, time.monotonic()
            return
        except CogsubError as exc:  # the next read tries again; retains still time out
            log.warning("dead_letter_watch_not_started", topic=self._topic, error=str(exc))
            return
        self._next = {p.partition: p.end_offset for p in stats.partitions}
        self._looked_at = time.monotonic()

    async def _add_new_partitions(self) -> None:
        """Follow partitions made since the start (or the topic itself) from their first letter."""
        assert self._next is not None
        due = self._looked_at + PARTITIONS_REFRESH_S
        if self._next and time.monotonic() < due:
            return
        self._looked_at = time.monotonic()
        try:
            stats = await self._bus.topic_stats(self._topic)
        except NotFoundError:
            return
        for partition in stats.partitions:
            self._next.setdefault(partition.partition, 0)

    async def read_once(self) -> int:
        """Note every dead letter published since the last read; how many there were."""
        if self._next is None:
            await self.start()
            if self._next is None:
                return 0
        else:
            await self._add_new_partitions()
        seen = 0
        for partition, offset in self._next.items():
            while True:
                records = await self._bus.read(
                    self._topic, partition, offset=offset, max_records=READ_BATCH
                )
                for record in records:
                    self._book.note(dead_letter_of(record))
                seen += len(records)
                if not records:
                    break
                offset = records[-1].offset + 1
            self._next[partition] = offset
        return seen

    async def run(self, stop: asyncio.Event) -> None:
        """Read until ``stop`` is set; a failing bus is logged and read again later."""
        asked = asyncio.Event()
        self._book.on_ask = asked.set
        try:
            while not stop.is_set():
                asked.clear()
                try:
                    await self.read_once()
                except CogsubError as exc:
                    log.warning("dead_letter_watch_failed", topic=self._topic, error=str(exc))
                if self._book.asked_within(self._idle_s):  # a brisk pace; more asks change nothing
                    await _first_of(stop, timeout_s=self._busy_s)
                else:  # idle until the first ask
                    await _first_of(stop, asked, timeout_s=self._idle_s)
        finally:
            self._book.on_ask = None


async def _first_of(*events: asyncio.Event, timeout_s: float) -> None:
    """Sleep ``timeout_s``, less if one of ``events`` is set (stop, or a retain waits)."""
    if any(event.is_set() for event in events):
        return
    waits = {asyncio.ensure_future(event.wait()) for event in events}
    try:
        await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()
        await asyncio.gather(*waits, return_exceptions=True)


async def watched_rejections(
    bus: EventBus, stop: asyncio.Event
) -> tuple[RejectionBook, asyncio.Task[None]]:
    """A book of recent rejections and the task keeping it current until ``stop``.

    The watch starts at the end of the topic before this returns, so every retain
    served afterwards has its dead letter seen.
    """
    book = RejectionBook()
    watch = DeadLetterWatch(bus=bus, book=book)
    await watch.start()
    return book, asyncio.create_task(watch.run(stop))
