"""``/readyz`` on the production engines: each outage is named, and recovery is seen.

The app is wired by ``running_api`` as ``cogsub serve`` wires it, over Kafka
(noida-db), S3 (SeaweedFS) and the OpenSearch API (osmem-server). The server
under test is private to the test: SeaweedFS and the broker are stopped and
started again by PID; osmem is frozen with SIGSTOP and thawed with SIGCONT (a
hung index, which only the readiness timeout can report).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest

from cogsub.runtime.settings import (
    EmbedderSettings,
    KafkaSettings,
    OpenSearchSettings,
    S3Settings,
    Settings,
)
from cogsub.runtime.wiring import running_api
from tests.fixtures.kafka import KafkaServerProcess
from tests.fixtures.opensearch import osmem_process
from tests.fixtures.s3 import S3Endpoint, S3Location, SeaweedFS

pytestmark = [pytest.mark.connected, pytest.mark.slow, pytest.mark.timeout(30)]

# The wired readiness timeout is 2 s; a state change shows within one probe or two.
SETTLE_S = 8.0


def _settings(kafka: str, s3: S3Endpoint, bucket: str, prefix: str, opensearch: str, index: str):
    return Settings(
        backend="distributed",
        embedder=EmbedderSettings(kind="hash"),
        kafka=KafkaSettings(bootstrap_servers=kafka, enable_idempotence=False),
        s3=S3Settings(
            endpoint_url=s3.endpoint_url,
            bucket=bucket,
            prefix=prefix,
            region=s3.region,
            access_key_id=s3.access_key_id,
            secret_access_key=s3.secret_access_key,
        ),
        opensearch=OpenSearchSettings(url=opensearch, index=index),
    )


@asynccontextmanager
async def readyz_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with running_api(settings, with_worker=False) as api:
        transport = httpx.ASGITransport(app=api.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            yield client


async def failing(client: httpx.AsyncClient) -> list[str]:
    """The dependencies ``/readyz`` names now (empty: 200)."""
    response = await client.get("/readyz")
    if response.status_code == 200:
        return []
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"]
    return [problem["field"] for problem in response.json()["error"]["problems"]]


async def settles(client: httpx.AsyncClient, expected: list[str]) -> float:
    """Seconds until ``/readyz`` names exactly ``expected``; fails after SETTLE_S."""
    began = time.monotonic()
    seen: list[str] = []
    while time.monotonic() - began < SETTLE_S:
        seen = await failing(client)
        if seen == expected:
            return time.monotonic() - began
        await asyncio.sleep(0.1)  # an orchestrator's next poll; no event to await
    pytest.fail(f"/readyz named {seen}, not {expected}, for {SETTLE_S} s")


async def test_an_s3_outage_is_named_and_its_end_seen(
    seaweedfs_server: SeaweedFS,
    kafka_bootstrap: str,
    opensearch_url: str,
    opensearch_index_name: str,
    unique_name: str,
) -> None:
    settings = _settings(
        kafka_bootstrap,
        seaweedfs_server.endpoint,
        unique_name,
        "",
        opensearch_url,
        opensearch_index_name,
    )
    async with readyz_client(settings) as client:
        assert await failing(client) == []
        await asyncio.to_thread(seaweedfs_server.stop)
        await settles(client, ["archive"])
        await asyncio.to_thread(seaweedfs_server.start)
        await settles(client, [])


async def test_a_hung_index_and_a_stopped_broker_are_named_and_their_end_seen(
    noida_kafka_server: KafkaServerProcess, s3_bucket: S3Location, unique_name: str
) -> None:
    with osmem_process() as osmem:
        settings = _settings(
            noida_kafka_server.bootstrap,
            s3_bucket.endpoint,
            s3_bucket.bucket,
            s3_bucket.prefix,
            osmem.url,
            unique_name,
        )
        async with readyz_client(settings) as client:
            assert await failing(client) == []
            os.kill(osmem.pid, signal.SIGSTOP)
            try:
                await settles(client, ["index"])
            finally:
                os.kill(osmem.pid, signal.SIGCONT)
            await settles(client, [])
            await asyncio.to_thread(noida_kafka_server.stop)
            await settles(client, ["bus"])
            await asyncio.to_thread(noida_kafka_server.start)
            await settles(client, [])
