"""Two ingestion worker processes on Kafka + S3 + OpenSearch, one SIGKILLed mid-stream.

Tansu is the broker here because it evicts a killed group member (noida-db never
does); its producer is not idempotent, so announcements and dead letters are
at-least-once and the assertions compare sets.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cogsub.archive.s3 import S3Archive
from cogsub.bus.kafka import KafkaEventBus, KafkaSettings
from cogsub.core import (
    EVENTS_PREFIX,
    EXPERIENCE_RAW,
    EXPERIENCE_RAW_DLQ,
    MEMORY_INDEXED,
    STAGE1_TOPICS,
)
from cogsub.index.opensearch import OpenSearchMemoryIndex
from tests.fixtures.kafka import running, tansu_server
from tests.fixtures.s3 import S3Location
from tests.services.ingestion.harness import event_body

pytestmark = [pytest.mark.connected, pytest.mark.slow]

EVENTS = 5000
POISON = [f'{{"broken": {i}'.encode() for i in range(15)] + [
    json.dumps({**event_body(90_000 + i), "eventId": f"../escape-{i}"}).encode() for i in range(5)
]
BANKS = [f"bank-{i}" for i in range(4)]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[str]:
    (tmp_path / "tansu").mkdir()
    with running(tansu_server(tmp_path / "tansu")) as server:
        yield server.bootstrap


def _bus(bootstrap: str) -> KafkaEventBus:
    return KafkaEventBus(
        bootstrap_servers=bootstrap, settings=KafkaSettings(enable_idempotence=False)
    )


async def _produce(bootstrap: str) -> None:
    bus = _bus(bootstrap)
    try:
        await bus.ensure_topics(STAGE1_TOPICS)
        bodies = [json.dumps(event_body(i, bank=BANKS[i % 4])).encode() for i in range(EVENTS)]
        for poison_at, poison in zip(
            range(100, EVENTS, EVENTS // len(POISON)), POISON, strict=False
        ):
            bodies.insert(poison_at, poison)
        for start in range(0, len(bodies), 500):
            await asyncio.gather(
                *(bus.publish(EXPERIENCE_RAW, b) for b in bodies[start : start + 500])
            )
    finally:
        await bus.close()


async def _read_all(bootstrap: str, topic: str, expected: int, timeout_s: float) -> list[bytes]:
    bus = _bus(bootstrap)
    consumer = bus.consumer([topic], group=f"reader-{time.monotonic_ns()}")
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and len(values) < expected:
            values += [r.value for r in await consumer.poll(max_records=2000, timeout_s=1.0)]
        # Duplicates may follow the last expected record; give them a moment to show.
        values += [r.value for r in await consumer.poll(max_records=2000, timeout_s=1.0)]
    finally:
        await consumer.close()
        await bus.close()
    return values


async def _indexed(url: str, index: str) -> int:
    search = OpenSearchMemoryIndex(url=url, index=index)
    try:
        return await search.count()
    finally:
        await search.close()


def _worker(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "cogsub.cli.main", "ingest"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )


def _wait_indexed(url: str, index: str, at_least: int, timeout_s: float, logs: Path) -> int:
    deadline = time.monotonic() + timeout_s
    count = 0
    while time.monotonic() < deadline:
        try:
            count = asyncio.run(_indexed(url, index))
        except Exception:  # the index appears when the first worker starts
            count = 0
        if count >= at_least:
            return count
        time.sleep(0.5)
    tails = "\n".join(p.read_text()[-3000:] for p in logs.glob("*.log"))
    raise AssertionError(f"only {count} of {at_least} indexed in time; worker logs:\n{tails}")


@pytest.mark.timeout(600)
def test_two_workers_one_killed_lose_and_duplicate_nothing(
    broker: str,
    s3_bucket: S3Location,
    opensearch_url: str,
    opensearch_index_name: str,
    tmp_path: Path,
) -> None:
    asyncio.run(_produce(broker))
    endpoint = s3_bucket.endpoint
    env = {
        **os.environ,
        "COGSUB_BACKEND": "distributed",
        "COGSUB_LOG_FORMAT": "json",
        "COGSUB_EMBEDDER__KIND": "hash",
        "COGSUB_INGESTION__BATCH_SIZE": "100",
        "COGSUB_KAFKA__BOOTSTRAP_SERVERS": broker,
        "COGSUB_KAFKA__ENABLE_IDEMPOTENCE": "false",
        "COGSUB_KAFKA__SESSION_TIMEOUT_MS": "6000",
        "COGSUB_KAFKA__HEARTBEAT_INTERVAL_MS": "1000",
        "COGSUB_S3__ENDPOINT_URL": endpoint.endpoint_url,
        "COGSUB_S3__ACCESS_KEY_ID": endpoint.access_key_id,
        "COGSUB_S3__SECRET_ACCESS_KEY": endpoint.secret_access_key,
        "COGSUB_S3__REGION": endpoint.region,
        "COGSUB_S3__BUCKET": s3_bucket.bucket,
        "COGSUB_S3__PREFIX": s3_bucket.prefix,
        "COGSUB_OPENSEARCH__URL": opensearch_url,
        "COGSUB_OPENSEARCH__INDEX": opensearch_index_name,
    }
    workers = [_worker(env, tmp_path / "a.log"), _worker(env, tmp_path / "b.log")]
    try:
        _wait_indexed(opensearch_url, opensearch_index_name, 800, 180, tmp_path)
        workers[0].send_signal(signal.SIGKILL)  # mid-stream, holding uncommitted batches
        workers[0].wait(timeout=10)
        workers.append(_worker(env, tmp_path / "a-restarted.log"))
        final = _wait_indexed(opensearch_url, opensearch_index_name, EVENTS, 300, tmp_path)
        assert final == EVENTS  # one document per event id: nothing indexed twice
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()

    announced = asyncio.run(_read_all(broker, MEMORY_INDEXED, EVENTS, 60))
    assert {json.loads(v)["eventId"] for v in announced} == {f"ev-{i:05d}" for i in range(EVENTS)}
    dead = asyncio.run(_read_all(broker, EXPERIENCE_RAW_DLQ, len(POISON), 60))
    assert set(dead) == set(POISON)

    async def archived_keys() -> list[str]:
        archive = S3Archive(
            bucket=s3_bucket.bucket,
            prefix=s3_bucket.prefix,
            endpoint_url=endpoint.endpoint_url,
            region=endpoint.region,
            access_key_id=endpoint.access_key_id,
            secret_access_key=endpoint.secret_access_key,
        )
        try:
            return [key async for key in archive.list(EVENTS_PREFIX)]
        finally:
            await archive.close()

    keys = asyncio.run(archived_keys())
    assert len(keys) == len(set(keys)) == EVENTS
