"""The operator's view of the dead-letter topics: list, show, retry.

Reads with ``EventBus.read`` (no group, nothing committed), so looking never
changes what any worker reads. A retry publishes the original bytes, key and
headers back to the topic the letter came from; the letter itself stays where
it is (a topic is append-only), and the retried record names it in a header.
"""

from __future__ import annotations

from dataclasses import dataclass

from cogsub.bus.ports import EventBus
from cogsub.core.errors import FieldProblem, InvalidInputError, NotFoundError
from cogsub.deadletters.letters import (
    DLQ_TOPICS,
    DeadLetter,
    Position,
    dead_letter_of,
    retried_headers,
    retry_target,
)

#: How long a read waits for records known to be there (a Kafka fetch takes a moment).
READ_WAIT_S = 5.0
MAX_PAGE = 500


@dataclass(frozen=True)
class Page:
    """Dead letters in topic, partition and offset order; ``next`` continues after them."""

    letters: list[DeadLetter]
    next: Position | None


@dataclass(frozen=True)
class Retried:
    letter: DeadLetter
    published: Position


def checked_topic(topic: str) -> str:
    """``topic`` if it is a dead-letter topic; ``InvalidInputError`` naming ``topic`` if not."""
    if topic not in DLQ_TOPICS:
        rule = f"must be a dead-letter topic: {', '.join(DLQ_TOPICS)}"
        raise InvalidInputError([FieldProblem("topic", rule)])
    return topic


class DeadLetterDesk:
    """List, show and retry the dead letters of ``topics`` on ``bus``."""

    def __init__(self, bus: EventBus, *, topics: tuple[str, ...] = DLQ_TOPICS) -> None:
        self._bus = bus
        self._topics = topics

    async def page(
        self, *, topic: str | None = None, after: Position | None = None, limit: int = 50
    ) -> Page:
        """Up to ``limit`` letters from ``after`` on (a previous page's ``next``)."""
        if not 1 <= limit <= MAX_PAGE:
            raise InvalidInputError([FieldProblem("limit", f"must be 1 to {MAX_PAGE}")])
        topics = (checked_topic(topic),) if topic is not None else self._topics
        if after is not None and after.topic not in topics:
            raise InvalidInputError([FieldProblem("after", "names another topic than listed")])
        letters: list[DeadLetter] = []
        for rank, name in enumerate(topics):
            for partition, end in await self._ends(name):
                offset = _first_offset(topics, (rank, partition), after)
                if offset is None:
                    continue
                offset = await self._collect(letters, Position(name, partition, offset), end, limit)
                if len(letters) >= limit:
                    return Page(letters, Position(name, partition, offset))
        return Page(letters, None)

    async def _collect(self, letters: list[DeadLetter], at: Position, end: int, limit: int) -> int:
        """Add the letters from ``at`` up to ``end`` to ``letters``, up to ``limit`` in all;
        the offset after the last one added."""
        offset = at.offset
        while offset < end and len(letters) < limit:
            records = await self._bus.read(
                at.topic,
                at.partition,
                offset=offset,
                max_records=min(limit - len(letters), end - offset),
                timeout_s=READ_WAIT_S,
            )
            if not records:
                break
            letters += [dead_letter_of(r) for r in records]
            offset = records[-1].offset + 1
        return offset

    async def _ends(self, topic: str) -> list[tuple[int, int]]:
        try:
            stats = await self._bus.topic_stats(topic)
        except NotFoundError:
            return []  # never created here (consolidation not set up): nothing dead-lettered
        return [(p.partition, p.end_offset) for p in stats.partitions]

    async def show(self, at: Position) -> DeadLetter:
        """The letter at ``at``; ``NotFoundError`` if there is none (or no longer)."""
        checked_topic(at.topic)
        if at.offset >= dict(await self._ends(at.topic)).get(at.partition, 0):
            raise NotFoundError(f"no dead letter at {at}")  # not yet there: no need to wait
        records = await self._bus.read(
            at.topic, at.partition, offset=at.offset, max_records=1, timeout_s=READ_WAIT_S
        )
        if not records or records[0].offset != at.offset:
            raise NotFoundError(f"no dead letter at {at}")
        return dead_letter_of(records[0])

    async def retry(self, at: Position) -> Retried:
        """Publish the letter at ``at`` back to its source topic, as it first arrived."""
        letter = await self.show(at)
        target = retry_target(letter)
        published = await self._bus.publish(
            target, letter.value, key=letter.key, headers=retried_headers(letter)
        )
        return Retried(letter, Position(published.topic, published.partition, published.offset))


def _first_offset(
    topics: tuple[str, ...], slot: tuple[int, int], after: Position | None
) -> int | None:
    """Where a partition's letters start on a page that begins at ``after``; None: before it."""
    if after is None:
        return 0
    begins = (topics.index(after.topic), after.partition)
    if slot < begins:
        return None
    return after.offset if slot == begins else 0
