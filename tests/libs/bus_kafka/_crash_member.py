"""A consumer-group member for crash tests, run as a child process and SIGKILLed.

Usage: python _crash_member.py BOOTSTRAP TOPIC GROUP SESSION_TIMEOUT_MS

It polls forever and never commits. After every poll it prints one JSON line:
``{"assigned": [partitions], "received": [[partition, offset], ...]}``.
"""

from __future__ import annotations

import asyncio
import json
import sys

from cogsub.bus.kafka import KafkaEventBus, KafkaSettings


async def main(bootstrap: str, topic: str, group: str, session_timeout_ms: int) -> None:
    settings = KafkaSettings(
        enable_idempotence=False,
        session_timeout_ms=session_timeout_ms,
        heartbeat_interval_ms=max(1, session_timeout_ms // 6),
    )
    bus = KafkaEventBus(bootstrap_servers=bootstrap, client_id="crash-member", settings=settings)
    consumer = bus.consumer([topic], group=group)
    while True:
        records = await consumer.poll(max_records=500, timeout_s=0.5)
        report = {
            "assigned": sorted(p for _, p in consumer.assigned_partitions()),
            "received": [[r.partition, r.offset] for r in records],
        }
        print(json.dumps(report), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
