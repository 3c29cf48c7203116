"""What the bus, its group members and its partition reader share about aiokafka clients."""

from __future__ import annotations

import asyncio
from typing import Any

from cogsub.bus.ports import Record


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


def record_of(msg: Any) -> Record:
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
