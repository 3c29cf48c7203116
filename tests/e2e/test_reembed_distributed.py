"""`cogsub replay --reembed` on OpenSearch: a new index version behind the alias."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from cogsub.cli.main import main
from cogsub.core.memory import RetainRequest
from cogsub.index.opensearch import OpenSearchMemoryIndex
from cogsub.runtime.settings import Settings
from cogsub.runtime.wiring import running_api
from tests.fixtures.s3 import S3Location

pytestmark = [pytest.mark.connected, pytest.mark.timeout(180)]


async def test_reembed_fills_a_new_version_and_points_the_alias_at_it(
    kafka_bootstrap: str,
    s3_bucket: S3Location,
    opensearch_url: str,
    opensearch_index_name: str,
    unique_name: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    endpoint = s3_bucket.endpoint
    for name, value in {
        "COGSUB_BACKEND": "distributed",
        "COGSUB_EMBEDDER__KIND": "hash",
        "COGSUB_INGESTION__POLL_TIMEOUT_S": "0.1",
        "COGSUB_KAFKA__BOOTSTRAP_SERVERS": kafka_bootstrap,
        "COGSUB_KAFKA__ENABLE_IDEMPOTENCE": "false",
        "COGSUB_S3__ENDPOINT_URL": endpoint.endpoint_url,
        "COGSUB_S3__ACCESS_KEY_ID": endpoint.access_key_id,
        "COGSUB_S3__SECRET_ACCESS_KEY": endpoint.secret_access_key,
        "COGSUB_S3__REGION": endpoint.region,
        "COGSUB_S3__BUCKET": s3_bucket.bucket,
        "COGSUB_S3__PREFIX": s3_bucket.prefix,
        "COGSUB_OPENSEARCH__URL": opensearch_url,
        "COGSUB_OPENSEARCH__INDEX": opensearch_index_name,
    }.items():
        monkeypatch.setenv(name, value)
    async with running_api(Settings(), with_worker=True) as running:
        for i, text in enumerate(["Acme HQ is in Berlin.", "Jane owns billing."]):
            await running.service.retain(
                unique_name,
                RetainRequest(
                    content=text,
                    memory_id=f"{unique_name}-{i}",
                    timestamp=datetime(2026, 5, 1, tzinfo=UTC),
                    wait=True,
                ),
            )
    old = OpenSearchMemoryIndex(url=opensearch_url, index=opensearch_index_name)
    try:
        before = await old.count(unique_name)  # the events and the facts extracted from them
    finally:
        await old.close()
    monkeypatch.setenv("COGSUB_EMBEDDER__HASH_DIMENSION", "16")
    assert await asyncio.to_thread(main, ["replay", "--reembed", "hash"]) == 0
    live = OpenSearchMemoryIndex(url=opensearch_url, index=opensearch_index_name)
    try:
        await live.ensure(dimension=16)  # the alias now answers with the new version's mapping
        doc = await live.get(unique_name, f"{unique_name}-1")
        assert doc is not None and len(doc.embedding) == 16
        assert await live.count(unique_name) == before >= 2
    finally:
        await live.close()
