"""The Kafka adapter's group-less reader of chosen partitions (``EventBus.read``)."""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from cogsub.bus.kafka.clients import record_of, stop_consumer
from cogsub.bus.kafka.errors import kafka_errors
from cogsub.bus.ports import Record


class PartitionReader:
    """One group-less client that reads partitions from chosen offsets (``EventBus.read``).

    Partitions stay assigned once read, so a caller reading on from where it stopped
    (a tail) gets what the client has fetched meanwhile instead of seeking again.
    """

    def __init__(self, options: dict[str, Any]) -> None:
        self._options = options
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
            records = [record_of(m) for m in fetched if m.offset >= offset][: max(max_records, 0)]
            if records:
                self._next[tp] = records[-1].offset + 1
            elif fetched:
                self._next[tp] = -1  # the client moved elsewhere: seek next time
            return records

    async def _started(self) -> Any:
        if self._consumer is None:
            consumer = AIOKafkaConsumer(group_id=None, **self._options)
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
