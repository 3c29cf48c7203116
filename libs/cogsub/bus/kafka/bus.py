"""``KafkaEventBus``: the producer, the admin client and the members it hands out."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any, Self

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka import errors as kafka
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from cogsub.bus.kafka.consumer import KafkaConsumer
from cogsub.bus.kafka.errors import PRODUCER_STATE_LOST, kafka_errors
from cogsub.bus.kafka.reader import PartitionReader
from cogsub.bus.kafka.settings import KafkaSettings
from cogsub.bus.ports import (
    Headers,
    OutgoingRecord,
    PartitionOffsets,
    Published,
    Record,
    TopicStats,
    checked_record,
)
from cogsub.core.errors import (
    CogsubError,
    FieldProblem,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
)
from cogsub.core.topics import TopicSpec

log = structlog.get_logger(__name__)


class KafkaEventBus:
    """EventBus over a Kafka cluster.

    Connections open lazily on first use (or ``await bus.start()``); ``close`` flushes
    the producer, so every ``publish`` that was accepted is delivered or fails, then
    closes any consumer still open.
    """

    def __init__(
        self,
        *,
        bootstrap_servers: str | Sequence[str],
        client_id: str = "cogsub",
        settings: KafkaSettings | None = None,
    ) -> None:
        self._bootstrap = (
            bootstrap_servers if isinstance(bootstrap_servers, str) else list(bootstrap_servers)
        )
        self._client_id = client_id
        self.settings = settings or KafkaSettings()
        self._producer: Any = None
        self._admin: Any = None
        self._known_topics: set[str] = set()
        self._consumers: list[KafkaConsumer] = []
        self._reader = PartitionReader({**self.consumer_options, "client_id": f"{client_id}-read"})
        self._partition_cache: dict[str, frozenset[int]] = {}
        self._start_lock = asyncio.Lock()
        self._closed = False

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Connect the producer and the admin client; repeated calls do nothing."""
        async with self._start_lock:
            if self._closed:
                raise UnavailableError("the kafka event bus is closed")
            if self._producer is not None:
                return
            s = self.settings
            admin = self._admin or AIOKafkaAdminClient(
                bootstrap_servers=self._bootstrap,
                client_id=self._client_id,
                request_timeout_ms=s.request_timeout_ms,
            )
            producer = AIOKafkaProducer(**self.producer_options)
            try:
                with kafka_errors():
                    if admin is not self._admin:
                        await admin.start()
                    await producer.start()
            except BaseException:
                await producer.stop()
                if admin is not self._admin:
                    await admin.close()
                raise
            self._producer, self._admin = producer, admin

    @property
    def producer_options(self) -> dict[str, Any]:
        """The keyword arguments the AIOKafkaProducer is built with."""
        s = self.settings
        return {
            "bootstrap_servers": self._bootstrap,
            "client_id": self._client_id,
            "acks": "all",
            "enable_idempotence": s.enable_idempotence,
            "linger_ms": s.linger_ms,
            "max_batch_size": s.max_batch_size,
            "request_timeout_ms": s.request_timeout_ms,
        }

    @property
    def consumer_options(self) -> dict[str, Any]:
        """The keyword arguments every group member's AIOKafkaConsumer is built with."""
        s = self.settings
        return {
            "bootstrap_servers": self._bootstrap,
            "client_id": self._client_id,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "isolation_level": "read_committed",
            "session_timeout_ms": s.session_timeout_ms,
            "heartbeat_interval_ms": s.heartbeat_interval_ms,
            "max_poll_interval_ms": s.max_poll_interval_ms,
            "request_timeout_ms": s.request_timeout_ms,
        }

    async def ensure_topics(self, specs: Sequence[TopicSpec]) -> None:
        """Create missing topics with their partition counts; existing ones are left alone."""
        for spec in specs:
            if not spec.name or spec.partitions < 1:
                rule = f"needs a name and at least one partition: {spec!r}"
                raise InvalidInputError([FieldProblem("topic", rule)])
        await self.start()
        existing = await self._refresh_topics()
        missing = [
            NewTopic(s.name, s.partitions, self.settings.replication_factor)
            for s in specs
            if s.name not in existing
        ]
        if not missing:
            return
        with kafka_errors():
            response = await self._admin.create_topics(missing)
            for name, code, message in response.topic_errors:
                if code not in (0, kafka.TopicAlreadyExistsError.errno):
                    raise kafka.for_code(code)(message)
                # Trust the broker's answer: metadata may lag behind a fresh topic.
                self._known_topics.add(name)
        log.info("kafka_topics_created", topics=[t.name for t in missing])

    async def publish(
        self,
        topic: str,
        value: bytes,
        *,
        key: bytes | None = None,
        headers: Mapping[str, bytes] | Headers | None = None,
    ) -> Published:
        """Append one record with acks=all and return where it landed.

        Raises ``UnavailableError`` when no acknowledgement came within
        ``delivery_timeout_ms``; the producer may still deliver that record later,
        so a retry can duplicate it (consumers are at-least-once anyway).
        """
        (published,) = await self.publish_many([(topic, value, key, headers)])
        return published

    async def publish_many(self, records: Sequence[OutgoingRecord]) -> list[Published]:
        """Append ``(topic, value, key, headers)`` records with acks=all, in order.

        Every record is checked before any is sent. They go to the producer one
        after another (so records of one partition keep their order) and are
        awaited together under one ``delivery_timeout_ms``: one timer and one task
        for the batch rather than per record. Raises the first failure once every
        delivery has settled; records that were acknowledged stay appended, so the
        caller's retry can duplicate them, as with ``publish``.
        """
        checked = [
            (topic, *checked_record(value, key, headers)) for topic, value, key, headers in records
        ]
        if not checked:
            return []
        await self.require_topics(sorted({topic for topic, *_ in checked}))
        producer = self._producer
        try:
            with kafka_errors():
                metas = await asyncio.wait_for(
                    self._deliver_all(producer, checked), self.settings.delivery_timeout_ms / 1000
                )
        except UnavailableError as exc:
            if isinstance(exc.__cause__, PRODUCER_STATE_LOST):
                await self._replace_producer(producer)
            raise
        return [Published(topic=m.topic, partition=m.partition, offset=m.offset) for m in metas]

    async def _replace_producer(self, failed: Any) -> None:
        """Retire a producer the broker no longer accepts; the next publish starts a new one.

        The new producer has a new id, so a retried record the old one had delivered
        is appended again (consumers are at-least-once anyway).
        """
        async with self._start_lock:
            if self._closed or self._producer is not failed:
                return  # already replaced by a concurrent publish
            self._producer = None
        log.warning("kafka_producer_replaced", reason="producer state lost by the broker")
        try:
            with kafka_errors():
                await self._stop_producer(failed)
        except CogsubError as exc:  # its unsent records fail; their publishes are retried
            log.warning("kafka_producer_stop_failed", error=str(exc))

    async def _deliver_all(
        self, producer: Any, records: list[tuple[str, bytes, bytes | None, Headers]]
    ) -> list[Any]:
        deliveries = []
        try:
            for topic, value, key, headers in records:
                deliveries.append(await producer.send(topic, value, key=key, headers=list(headers)))
        finally:
            # Records already handed over settle (their failures retrieved) even when
            # a later send is refused; that refusal is what the caller then sees.
            settled = await asyncio.gather(*deliveries, return_exceptions=True)
        for outcome in settled:
            if isinstance(outcome, BaseException):
                raise outcome
        return settled

    def consumer(self, topics: Sequence[str], *, group: str) -> KafkaConsumer:
        """A new member of ``group``; it connects and joins on its first ``poll``."""
        if self._closed:
            raise UnavailableError("the kafka event bus is closed")
        consumer = KafkaConsumer(self, list(topics), group=group)
        self._consumers.append(consumer)
        return consumer

    async def topic_stats(self, topic: str, *, group: str | None = None) -> TopicStats:
        """End offsets per partition, plus ``group``'s committed offsets when given."""
        await self.require_topics((topic,))
        with kafka_errors():
            described = await self._admin.describe_topics([topic])
        partitions = sorted(p["partition"] for p in described[0]["partitions"])
        tps = [TopicPartition(topic, p) for p in partitions]
        # A consumer that never subscribes does not join the group, so it disturbs no member.
        probe = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap,
            client_id=f"{self._client_id}-stats",
            group_id=group,
            enable_auto_commit=False,
            request_timeout_ms=self.settings.request_timeout_ms,
        )
        try:
            with kafka_errors():
                await probe.start()
                ends = await probe.end_offsets(tps)
                committed = {tp: await probe.committed(tp) for tp in tps} if group else {}
        finally:
            await probe.stop()
        stats = TopicStats(topic=topic)
        for tp in tps:
            stats.partitions.append(
                PartitionOffsets(topic, tp.partition, ends[tp], committed.get(tp))
            )
        return stats

    async def read(
        self, topic: str, partition: int, *, offset: int, max_records: int, timeout_s: float = 0.0
    ) -> list[Record]:
        """Records of one partition from ``offset`` on, by a client that joins no group."""
        if self._closed:
            raise UnavailableError("the kafka event bus is closed")
        if partition not in await self._partition_ids(topic):
            raise NotFoundError(f"topic {topic!r} has no partition {partition}")
        return await self._reader.read(
            TopicPartition(topic, partition), offset, max_records=max_records, timeout_s=timeout_s
        )

    async def _partition_ids(self, topic: str) -> frozenset[int]:
        known = self._partition_cache.get(topic)
        if known is None:
            await self.require_topics((topic,))
            with kafka_errors():
                described = await self._admin.describe_topics([topic])
            known = frozenset(p["partition"] for p in described[0]["partitions"])
            self._partition_cache[topic] = known  # partition counts never shrink
        return known

    async def close(self) -> None:
        """Close leftover consumers, flush and stop the producer, close the admin client."""
        self._closed = True
        consumers, self._consumers = self._consumers, []
        for consumer in consumers:
            await consumer.close()
        await self._reader.close()
        async with self._start_lock:
            producer, admin = self._producer, self._admin
            self._producer = self._admin = None
        try:
            if producer is not None:
                with kafka_errors():
                    await self._stop_producer(producer)
        finally:
            if admin is not None:
                await admin.close()

    async def _stop_producer(self, producer: Any) -> None:
        stopping = asyncio.ensure_future(producer.stop())
        done, _ = await asyncio.wait({stopping}, timeout=self.settings.delivery_timeout_ms / 1000)
        if not done:
            # aiokafka has no public way to abandon unsent batches. Stop its sender (which
            # lets in-flight requests finish), then fail what is left so each waiting
            # publish ends with an error instead of its record vanishing silently.
            log.warning("kafka_close_abandoned_unsent_records")
            sender = producer._sender.sender_task
            sender.cancel()
            await asyncio.wait({sender})
            producer._message_accumulator.fail_all(
                kafka.KafkaTimeoutError("closed before delivery")
            )
        await stopping

    async def require_topics(self, topics: Sequence[str]) -> None:
        """Raise NotFoundError unless every topic exists (known topics are cached)."""
        await self.start()
        if all(t in self._known_topics for t in topics):
            return
        existing = await self._refresh_topics()
        missing = sorted(set(topics) - existing)
        if missing:
            raise NotFoundError(f"topics do not exist: {', '.join(missing)}")

    async def _refresh_topics(self) -> set[str]:
        # Listing every topic names none, so a broker with auto-create on makes nothing.
        with kafka_errors():
            existing = set(await self._admin.list_topics())
        self._known_topics |= existing
        return existing

    def release(self, consumer: KafkaConsumer) -> None:
        """Stop tracking a member that closed itself."""
        if consumer in self._consumers:
            self._consumers.remove(consumer)
