"""The Kafka adapter of the EventBus port, on aiokafka.

Publishing uses one idempotent ``acks=all`` producer per bus; ``publish`` returns
once the broker has acknowledged the record, and concurrent publishes share
batches (``linger_ms``, ``max_batch_size``). Topics are never auto-created:
``publish`` and ``consumer`` check a cached view of the cluster's topics and raise
``NotFoundError`` for one that ``ensure_topics`` (or an operator) did not create.

Consumers commit by hand (no auto-commit; a new group starts at the earliest
offset; only committed transactions are read). Per partition it owns, a consumer
tracks the highest offset the caller passed to ``commit`` ("done") and the highest
the broker acknowledged. When a rebalance takes partitions away, the listener
commits the done offsets not yet acknowledged (a commit that failed with
``UnavailableError`` or raced the rebalance), and never anything the caller did
not pass to ``commit``. Tracking restarts whenever a partition is revoked or
assigned. ``commit`` skips partitions this member no longer owns (and logs it).
Records fetched but not committed go again to the partition's next owner
(at-least-once). Every member id aiokafka abandons is left at the broker, and a
member whose group coordination died is dropped with ``UnavailableError`` so that
the caller's retry joins a new one (:mod:`cogsub.bus.kafka_group`).

Every aiokafka exception is translated in :func:`kafka_errors`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any, Self

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka import errors as kafka
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from cogsub.bus.kafka_group import coordination_failure, leave_abandoned_ids
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
    ConfigurationError,
    FieldProblem,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
)
from cogsub.core.topics import TopicSpec

log = structlog.get_logger(__name__)

_UNAVAILABLE = (
    kafka.KafkaConnectionError,
    kafka.KafkaTimeoutError,
    kafka.NodeNotReadyError,
    kafka.RequestTimedOutError,
    # The group moved on while we worked: the same call succeeds once it settles.
    kafka.CommitFailedError,
    kafka.RebalanceInProgressError,
    kafka.IllegalGenerationError,
    kafka.UnknownMemberIdError,
)
# The broker no longer knows this producer's sequence numbers (it restarted without
# them): the producer is stuck on those partitions until a new one replaces it.
_PRODUCER_STATE_LOST = (kafka.OutOfOrderSequenceNumber, kafka.UnknownProducerId)
_REFUSED_SETTINGS = (
    kafka.InvalidPartitionsError,
    kafka.InvalidReplicationFactorError,
    kafka.InvalidSessionTimeoutError,
)


@contextmanager
def kafka_errors() -> Iterator[None]:
    """Translate aiokafka exceptions into the project's errors, by exception type."""
    try:
        yield
    except CogsubError:
        raise
    except kafka.UnknownTopicOrPartitionError as exc:
        raise NotFoundError(f"unknown topic or partition: {exc}") from exc
    except kafka.InvalidTopicError as exc:
        problem = FieldProblem("topic", f"is not a valid topic name: {exc}")
        raise InvalidInputError([problem]) from exc
    except _REFUSED_SETTINGS as exc:
        raise ConfigurationError(f"the broker refused these settings: {exc!r}") from exc
    except _UNAVAILABLE as exc:
        raise UnavailableError(f"kafka is unavailable: {exc!r}") from exc
    except _PRODUCER_STATE_LOST as exc:
        raise UnavailableError(f"kafka lost this producer's state: {exc!r}") from exc
    except kafka.KafkaError as exc:
        if exc.retriable:
            raise UnavailableError(f"kafka is unavailable: {exc!r}") from exc
        raise CogsubError(f"kafka error: {exc!r}") from exc
    except kafka.ConsumerStoppedError as exc:
        raise UnavailableError("the kafka consumer is closed") from exc
    except TimeoutError as exc:
        raise UnavailableError("kafka did not answer in time") from exc


@dataclass(frozen=True)
class KafkaSettings:
    """Producer and consumer tuning; the defaults suit one broker on loopback and small fleets.

    ``enable_idempotence`` is on in production; turn it off only for brokers without
    idempotent producers (Tansu). An idempotent aiokafka producer retries a batch
    forever, so ``delivery_timeout_ms`` bounds how long ``publish`` waits and how long
    ``close`` tries to flush. Security options are not supported yet.
    """

    linger_ms: int = 5
    max_batch_size: int = 262_144
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000
    request_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 60_000
    enable_idempotence: bool = True
    replication_factor: int = 1

    def __post_init__(self) -> None:
        sizes = (self.max_batch_size, self.session_timeout_ms, self.request_timeout_ms)
        if min(*sizes, self.delivery_timeout_ms) <= 0:
            raise ConfigurationError("kafka batch size and timeouts must be positive")
        if self.linger_ms < 0 or self.replication_factor < 1:
            raise ConfigurationError("linger_ms must be >= 0 and replication_factor >= 1")
        if not 0 < self.heartbeat_interval_ms < self.session_timeout_ms:
            raise ConfigurationError("heartbeat_interval_ms must be below session_timeout_ms")


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
        self._reader = _PartitionReader(self)
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
            if isinstance(exc.__cause__, _PRODUCER_STATE_LOST):
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

    def _forget(self, consumer: KafkaConsumer) -> None:
        if consumer in self._consumers:
            self._consumers.remove(consumer)


class KafkaConsumer:
    """A consumer-group member: manual commits, earliest reset, read_committed."""

    def __init__(self, bus: KafkaEventBus, topics: list[str], *, group: str) -> None:
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
        return [_record(msg) for messages in batches.values() for msg in messages]

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
        self._bus._forget(self)
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


class _PartitionReader:
    """One group-less client that reads partitions from chosen offsets (``EventBus.read``).

    Partitions stay assigned once read, so a caller reading on from where it stopped
    (a tail) gets what the client has fetched meanwhile instead of seeking again.
    """

    def __init__(self, bus: KafkaEventBus) -> None:
        self._bus = bus
        self._consumer: Any = None
        self._next: dict[TopicPartition, int] = {}  # -1: position unknown, seek next time
        self._lock = asyncio.Lock()

    async def read(
        self, tp: TopicPartition, offset: int, *, max_records: int, timeout_s: float
    ) -> list[Record]:
        async with self._lock:
            consumer = await self._started()
            with kafka_errors():
                if tp not in self._next:
                    self._next[tp] = -1
                    consumer.assign(list(self._next))
                    for known, at in self._next.items():  # a new assignment forgets positions
                        if known != tp and at >= 0:
                            consumer.seek(known, at)
                if self._next[tp] != offset:
                    consumer.seek(tp, max(offset, 0))
                self._next[tp] = offset
                batches = await consumer.getmany(
                    tp, timeout_ms=max(0, int(timeout_s * 1000)), max_records=max(max_records, 1)
                )
            fetched = batches.get(tp, [])
            # Past the end, the client resets to the earliest offset: those are not asked for.
            records = [_record(m) for m in fetched if m.offset >= offset][: max(max_records, 0)]
            if records:
                self._next[tp] = records[-1].offset + 1
            elif fetched:
                self._next[tp] = -1  # the client moved elsewhere: seek next time
            return records

    async def _started(self) -> Any:
        if self._consumer is None:
            options = {**self._bus.consumer_options, "client_id": f"{self._bus._client_id}-read"}
            consumer = AIOKafkaConsumer(group_id=None, **options)
            with kafka_errors():
                await consumer.start()
            self._consumer = consumer
        return self._consumer

    async def close(self) -> None:
        async with self._lock:
            consumer, self._consumer = self._consumer, None
            self._next.clear()
        if consumer is not None:
            with kafka_errors():
                await stop_consumer(consumer)


async def stop_consumer(consumer: Any) -> None:
    """``consumer.stop()``, absorbing the cancellation aiokafka raises of its own tasks.

    With the broker gone, its fetcher's ``close`` awaits pending fetch tasks it has
    just cancelled, so ``stop`` raises their ``CancelledError`` although nobody
    cancelled the caller, and the client's connections are left open: close them.
    """
    try:
        await consumer.stop()
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # the caller is being cancelled: that is ours to pass on
        await consumer._client.close()


class _RevokeListener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, owner: KafkaConsumer) -> None:
        self._owner = owner

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._owner._on_revoked(set(revoked))

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._owner._forget_offsets(set(assigned))


def _record(msg: Any) -> Record:
    return Record(
        topic=msg.topic,
        partition=msg.partition,
        offset=msg.offset,
        value=msg.value if msg.value is not None else b"",
        key=msg.key,
        # Kafka allows null header values; the port's headers are bytes, so null is b"".
        headers=tuple((name, value if value is not None else b"") for name, value in msg.headers),
        timestamp_ms=msg.timestamp,
    )
