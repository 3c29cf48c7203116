"""A consumer-group member of the Kafka adapter (``EventBus.consumer``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Protocol

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

from cogsub.bus.kafka.clients import record_of, stop_consumer
from cogsub.bus.kafka.errors import kafka_errors
from cogsub.bus.kafka.group_repairs import coordination_failure, leave_abandoned_ids
from cogsub.bus.ports import Record
from cogsub.core.errors import CogsubError, UnavailableError

log = structlog.get_logger(__name__)


class MemberHost(Protocol):
    """What a member needs of the bus that made it."""

    @property
    def consumer_options(self) -> dict[str, Any]: ...

    async def require_topics(self, topics: Sequence[str]) -> None: ...

    def release(self, consumer: KafkaConsumer) -> None: ...


class KafkaConsumer:
    """A consumer-group member: manual commits, earliest reset, read_committed."""

    def __init__(self, bus: MemberHost, topics: list[str], *, group: str) -> None:
        self._bus = bus
        self.topics = topics
        self.group = group
        self._consumer: Any = None
        self._closed = False
        self._done: dict[TopicPartition, int] = {}
        self._acked: dict[TopicPartition, int] = {}
        self._start_lock = asyncio.Lock()

    async def poll(self, *, max_records: int, timeout_s: float) -> list[Record]:
        """Up to ``max_records`` records, waiting at most ``timeout_s`` for the first."""
        consumer = await self._started()
        async with self._member_errors(consumer):
            batches = await consumer.getmany(
                timeout_ms=max(0, int(timeout_s * 1000)), max_records=max_records
            )
        return [record_of(msg) for messages in batches.values() for msg in messages]

    async def commit(self, records: Sequence[Record]) -> None:
        """Commit, per partition, the offset after the highest record given.

        Partitions the group has already taken from this member are skipped: their
        records go to the new owner from the last committed offset.
        """
        if not records:
            return
        consumer = await self._started()
        offsets: dict[TopicPartition, int] = {}
        for record in records:
            tp = TopicPartition(record.topic, record.partition)
            offsets[tp] = max(offsets.get(tp, 0), record.offset + 1)
        assigned = consumer.assignment()
        for tp, offset in offsets.items():
            if tp in assigned:
                self._done[tp] = max(self._done.get(tp, 0), offset)
        revoked = sorted(f"{tp.topic}[{tp.partition}]" for tp in offsets if tp not in assigned)
        if revoked:
            log.warning("kafka_commit_skipped_revoked", group=self.group, partitions=revoked)
        await self._commit_done(set(assigned))

    def assigned_partitions(self) -> frozenset[tuple[str, int]]:
        """The (topic, partition) pairs the group gives this member right now."""
        if self._consumer is None:
            return frozenset()
        return frozenset((tp.topic, tp.partition) for tp in self._consumer.assignment())

    async def close(self) -> None:
        """Leave the group without committing anything more."""
        if self._closed:
            return
        self._closed = True
        self._bus.release(self)
        async with self._start_lock:  # a start in progress finishes first, then is undone
            consumer, self._consumer = self._consumer, None
        if consumer is not None:
            with kafka_errors():
                await stop_consumer(consumer)

    async def _commit_done(self, partitions: set[TopicPartition]) -> None:
        pending = {
            tp: offset
            for tp, offset in self._done.items()
            if tp in partitions and offset > self._acked.get(tp, -1)
        }
        if not pending:
            return
        async with self._member_errors(self._consumer):
            await self._consumer.commit(pending)
        self._acked.update(pending)

    @asynccontextmanager
    async def _member_errors(self, consumer: Any) -> AsyncIterator[None]:
        """:func:`kafka_errors` for a call on ``consumer``, dropping it if its coordination died."""
        try:
            with kafka_errors():
                yield
        except CogsubError as exc:
            await self._replace_if_stranded(consumer, exc)
            raise

    async def _replace_if_stranded(self, consumer: Any, error: CogsubError) -> None:
        """Drop a member whose group coordination died, so that the next call starts anew.

        Raises:
            UnavailableError: when the member was dropped (a retry joins a new one).
        """
        failure = coordination_failure(consumer)
        if failure is None:
            return
        async with self._start_lock:
            if self._consumer is consumer:
                self._consumer = None
                self._done.clear()  # nothing is owned any more
                self._acked.clear()
        log.warning("kafka_member_replaced", group=self.group, error=repr(failure))
        try:
            with kafka_errors():
                await stop_consumer(consumer)  # leaves the group under the old member id
        except CogsubError as exc:
            log.warning("kafka_member_stop_failed", group=self.group, error=str(exc))
        raise UnavailableError(
            f"kafka group coordination failed ({failure!r}); a new member joins on retry"
        ) from error

    async def _on_revoked(self, revoked: set[TopicPartition]) -> None:
        try:
            await self._commit_done(revoked)
        except CogsubError as exc:
            # Not fatal: the new owner re-reads from the last acknowledged commit.
            log.warning("kafka_revoke_commit_failed", group=self.group, error=str(exc))
        self._forget_offsets(revoked)

    def _forget_offsets(self, partitions: set[TopicPartition]) -> None:
        # Offsets are tracked per ownership: a partition that comes back starts clean,
        # so a stale "done" mark can never move another member's commit backwards.
        for tp in partitions:
            self._done.pop(tp, None)
            self._acked.pop(tp, None)

    async def _started(self) -> Any:
        async with self._start_lock:
            if self._closed:
                raise UnavailableError(f"consumer of group {self.group!r} is closed")
            if self._consumer is not None:
                return self._consumer
            await self._bus.require_topics(self.topics)
            consumer = AIOKafkaConsumer(group_id=self.group, **self._bus.consumer_options)
            try:
                with kafka_errors():
                    # Started before subscribing, so that no member id it ever drops,
                    # even in its first join, stays behind at the broker.
                    await consumer.start()
                    leave_abandoned_ids(consumer)
                    consumer.subscribe(topics=self.topics, listener=_RevokeListener(self))
                    await consumer._subscription.wait_for_assignment()
            except BaseException as exc:
                await consumer.stop()
                failure = coordination_failure(consumer)
                if failure is not None and isinstance(exc, CogsubError):
                    raise UnavailableError(
                        f"kafka group coordination failed ({failure!r}) while joining"
                    ) from exc
                raise
            self._consumer = consumer
            return consumer


class _RevokeListener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, owner: KafkaConsumer) -> None:
        self._owner = owner

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._owner._on_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._owner._forget_offsets(set(assigned))
