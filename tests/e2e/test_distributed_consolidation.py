"""Consolidation on the production engines: Kafka protocol, S3 and the OpenSearch API."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from cogsub.core.events import FactType
from cogsub.core.memory import ConsolidationReport, RecallRequest, RetainRequest
from cogsub.runtime.settings import (
    EmbedderSettings,
    IngestionSettings,
    KafkaSettings,
    OpenSearchSettings,
    S3Settings,
    Settings,
)
from cogsub.runtime.wiring import running_api
from tests.fixtures.s3 import S3Location

pytestmark = [pytest.mark.connected, pytest.mark.timeout(180)]
T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


def _settings(kafka: str, s3: S3Location, opensearch_url: str, index: str) -> Settings:
    endpoint = s3.endpoint
    return Settings(
        backend="distributed",
        embedder=EmbedderSettings(kind="hash"),
        ingestion=IngestionSettings(poll_timeout_s=0.1),
        kafka=KafkaSettings(bootstrap_servers=kafka, enable_idempotence=False),
        s3=S3Settings(
            endpoint_url=endpoint.endpoint_url,
            bucket=s3.bucket,
            prefix=s3.prefix,
            region=endpoint.region,
            access_key_id=endpoint.access_key_id,
            secret_access_key=endpoint.secret_access_key,
        ),
        opensearch=OpenSearchSettings(url=opensearch_url, index=index),
    )


async def test_a_correction_repairs_a_procedure_through_the_distributed_stack(
    kafka_bootstrap: str,
    s3_bucket: S3Location,
    opensearch_url: str,
    opensearch_index_name: str,
    opensearch_supports_knn: bool,
    unique_name: str,
) -> None:
    settings = _settings(kafka_bootstrap, s3_bucket, opensearch_url, opensearch_index_name)
    bank = unique_name
    async with running_api(settings, with_worker=True) as running:
        service = running.service
        steps = ["make build", "kubectl rollout restart deployment/billing", "curl /health"]
        v1 = await service.retain(
            bank,
            RetainRequest(
                content="Deploy billing",
                fact_type=FactType.PROCEDURE,
                steps=steps,
                timestamp=T0,
                memory_id=f"{bank}-deploy",
                wait=True,
            ),
        )
        await service.retain(
            bank,
            RetainRequest(
                content="No — drain the pod before restart.",
                fact_type=FactType.CORRECTION,
                timestamp=T0 + timedelta(days=1),
                memory_id=f"{bank}-drain",
                wait=True,
            ),
        )
        transport = httpx.ASGITransport(app=running.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://cogsub") as api:
            answer = await api.post(f"/v1/banks/{bank}/consolidate")
            assert answer.status_code == 200, answer.text
            report = ConsolidationReport.model_validate_json(answer.content)
            again = ConsolidationReport.model_validate_json(
                (await api.post(f"/v1/banks/{bank}/consolidate")).content
            )
        assert len(report.procedures) == 1 and report.superseded == [v1.memory_id]
        assert again.procedures == [] and again.superseded == []
        (v2_id,) = report.procedures
        v2 = await running.stack.index.get(bank, v2_id)
        old = await running.stack.index.get(bank, v1.memory_id)
        assert v2 is not None and old is not None
        assert "version:2" in v2.tags and f"superseded-by:{v2_id}" in old.tags
        assert v2.object_storage_key.startswith(f"consolidation/{bank}/procedures/")
        archived = json.loads(await running.stack.archive.get(v2.object_storage_key))
        assert archived["input"]["structured"]["steps"][1] == "Drain the pod"
        if opensearch_supports_knn:  # recall needs k-NN, which osmem-server does not serve
            found = await service.recall(
                bank, RecallRequest(query="deploy billing", types=[FactType.PROCEDURE])
            )
            assert [h.id for h in found.results] == [v2_id]
