"""`make bench-ingest BACKEND=distributed`: the pipeline on noida-db + SeaweedFS + osmem-server.

Starts the three servers on loopback (stopped by PID at the end), then measures
in one run: the raw concurrent S3 put rate (boto3, a client configured as the
archive's own, as many threads as its connection pool), the raw Kafka produce
rate (aiokafka, idempotent, acks=all), and the ingestion pipeline's events/s
with the hash embedder. The ratio is pipeline / the slower of the two raw rates.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer

from benchmarks.ingest import make_events, pipeline_rate, process_cpu_s
from cogsub.archive.s3 import build_s3_client, s3_client_config
from cogsub.runtime import Settings

S3_THREADS = 32
RAW_PUTS = 2000
RAW_PRODUCES = 10_000


@contextlib.contextmanager
def servers(workdir: Path) -> Iterator[dict[str, Any]]:
    """noida-db, SeaweedFS and osmem-server, started on loopback and always stopped."""
    from tests.fixtures.kafka import noida_server, running
    from tests.fixtures.opensearch import osmem_process
    from tests.fixtures.s3 import SeaweedFS

    (workdir / "noida").mkdir()
    (workdir / "seaweedfs").mkdir()
    seaweed = SeaweedFS(workdir / "seaweedfs")
    with running(noida_server(workdir / "noida")) as kafka, osmem_process() as search:
        seaweed.start()
        try:
            assert kafka.process is not None and seaweed.pid is not None
            pids = {"kafka": kafka.process.pid, "s3": seaweed.pid, "opensearch": search.pid}
            yield {
                "kafka": kafka.bootstrap,
                "s3": seaweed.endpoint,
                "opensearch": search.url,
                "pids": pids,
            }
        finally:
            seaweed.stop()


def raw_s3_rate(endpoint: Any, bucket: str, server_pid: int) -> dict[str, float]:
    """Concurrent conditional puts through a client configured as the archive's own.

    Also the CPU each put cost the client and the server, to set beside the
    pipeline's per-event CPU: on one shared machine the rates follow those costs.
    """
    client = build_s3_client(
        endpoint_url=endpoint.endpoint_url,
        config=s3_client_config(
            endpoint_url=endpoint.endpoint_url,
            region=endpoint.region,
            max_pool_connections=S3_THREADS,
        ),
        access_key_id=endpoint.access_key_id,
        secret_access_key=endpoint.secret_access_key,
    )
    client.create_bucket(Bucket=bucket)
    body = b"x" * 2048

    def put(i: int) -> None:
        client.put_object(Bucket=bucket, Key=f"raw/{i}.json", Body=body, IfNoneMatch="*")

    with ThreadPoolExecutor(S3_THREADS) as pool:
        list(pool.map(put, range(50)))  # connections warm
        server_before = process_cpu_s(server_pid)
        client_before = time.process_time()
        started = time.perf_counter()
        list(pool.map(put, range(50, 50 + RAW_PUTS)))
        elapsed = time.perf_counter() - started
        client_cpu_s = time.process_time() - client_before
        server_cpu_s = process_cpu_s(server_pid) - server_before
    client.close()
    return {
        "puts_per_s": RAW_PUTS / elapsed,
        "client_cpu_ms_per_put": client_cpu_s * 1000 / RAW_PUTS,
        "server_cpu_ms_per_put": server_cpu_s * 1000 / RAW_PUTS,
    }


async def raw_kafka_rate(bootstrap: str) -> float:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
        max_batch_size=262_144,
    )
    await producer.start()
    try:
        body = b"x" * 1024
        topic = f"raw-produce-{uuid.uuid4().hex[:8]}"
        await producer.send_and_wait(topic, body)
        started = time.perf_counter()
        futures = [await producer.send(topic, body) for _ in range(RAW_PRODUCES)]
        await asyncio.gather(*futures)
        return RAW_PRODUCES / (time.perf_counter() - started)
    finally:
        await producer.stop()


async def bench_distributed(count: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="cogsub-bench-") as tmp, servers(Path(tmp)) as up:
        s3 = up["s3"]
        raw_s3 = await asyncio.to_thread(
            raw_s3_rate, s3, f"raw-{uuid.uuid4().hex[:8]}", up["pids"]["s3"]
        )
        s3_rate = raw_s3["puts_per_s"]
        kafka_rate = await raw_kafka_rate(up["kafka"])
        settings = Settings(
            backend="distributed",
            embedder={"kind": "hash"},
            kafka={"bootstrap_servers": up["kafka"]},
            s3={
                "endpoint_url": s3.endpoint_url,
                "bucket": f"bench-{uuid.uuid4().hex[:8]}",
                "region": s3.region,
                "access_key_id": s3.access_key_id,
                "secret_access_key": s3.secret_access_key,
            },
            opensearch={"url": up["opensearch"], "index": f"bench-{uuid.uuid4().hex[:8]}"},
        )
        measured = await pipeline_rate(settings, make_events(count), servers=up["pids"])
    slowest = min(s3_rate, kafka_rate)
    row = {
        "backend": "distributed",
        "embedder": "hash",
        "events": count,
        "pipeline_events_per_s": round(measured["events_per_s"], 1),
        "raw_s3_puts_per_s": round(s3_rate, 1),
        "raw_kafka_produce_per_s": round(kafka_rate, 1),
        "raw_s3_client_cpu_ms_per_put": round(raw_s3["client_cpu_ms_per_put"], 2),
        "raw_s3_server_cpu_ms_per_put": round(raw_s3["server_cpu_ms_per_put"], 2),
        "ratio_to_slowest": round(measured["events_per_s"] / slowest, 3),
        # Where the cores went during the pipeline phase: CPU ms per event per process.
        **{
            f"{key.removeprefix('cpu_s_')}_cpu_ms_per_event": round(value * 1000 / count, 2)
            for key, value in measured.items()
            if key.startswith("cpu_s_")
        },
        "cores_busy": round(
            sum(v for k, v in measured.items() if k.startswith("cpu_s_")) / measured["wall_s"], 2
        ),
    }
    print(json.dumps(row), flush=True)
    return [row]
