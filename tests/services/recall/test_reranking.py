"""Recall with a reranker: the head reordered as the reranker says, and never a failed recall."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from cogsub.core.documents import SUMMARY_LENGTH
from cogsub.core.memory import MemoryHit, RecallRequest, RetainRequest
from cogsub.embeddings.hash import HashEmbedder
from cogsub.recall import MemoryService
from cogsub.rerank import HttpReranker, NoReranker, Reranking
from cogsub.runtime.adapters import build_reranking
from cogsub.runtime.settings import RerankerSettings, Settings
from tests.fixtures.rerank_server import RerankServer, relevance

from .stack import LiveStack, live_stack

BANK = "ops"
NOW = datetime.now(UTC) + timedelta(days=1)
QUERY = "how do I deploy the billing service"
MEMORIES = [
    "The billing service is written in Go.",
    "Deploy: run make deploy, then watch the billing dashboard.",
    "We deploy every Tuesday after the standup.",
    "To deploy the billing service, tag a release and run the deploy job for billing.",
    "The service mesh handles retries between services.",
    "Billing invoices go out on the first of the month.",
]


@asynccontextmanager
async def _bank(root: Path) -> AsyncIterator[LiveStack]:
    async with live_stack(root) as stack:
        for text in MEMORIES:
            await stack.service.retain(BANK, RetainRequest(content=text, wait=True))
        yield stack


def _service(stack: LiveStack, reranking: Reranking | None) -> MemoryService:
    return MemoryService(
        bus=stack.bus,
        archive=stack.archive,
        index=stack.index,
        embedder=HashEmbedder(),
        reranking=reranking,
        clock=lambda: NOW,  # recency, and so every score, the same on each recall
    )


async def _recall(service: MemoryService) -> list[MemoryHit]:
    request = RecallRequest(query=QUERY, k=4, reinforce=False)
    return (await service.recall(BANK, request)).results


def _http(server: RerankServer, **options: float) -> Reranking:
    reranker = HttpReranker(f"{server.base_url}/rerank", backoff_base_s=0.01)
    return Reranking(reranker, **options)  # type: ignore[arg-type]


async def test_the_reranker_orders_the_results_by_its_rule(
    data_dir: Path, rerank_server: RerankServer
) -> None:
    reranking = _http(rerank_server, weight=1.0)
    async with _bank(data_dir) as stack:
        plain = await _recall(_service(stack, None))
        reranked = await _recall(_service(stack, reranking))
    await reranking.close()
    (request,) = rerank_server.requests()
    sent = request["body"]["texts"]
    scores = dict(zip(sent, relevance(QUERY, sent), strict=True))
    best_first = sorted(sent, key=lambda text: -scores[text])
    assert [hit.text for hit in reranked] == best_first[:4]
    assert [hit.text for hit in plain] != best_first[:4]  # the reranker made the difference
    for hit in reranked:
        assert hit.explain.rerank == pytest.approx(scores[hit.text])
        assert hit.explain.weights["rerank"] == 1.0
        assert hit.score == pytest.approx(hit.explain.rerank)


async def test_the_reranker_reads_a_long_memory_past_its_summary(
    data_dir: Path, rerank_server: RerankServer
) -> None:
    long = "Release checklist. " + "Check the changelog and the version. " * 7
    long += "Finally, to deploy the billing service, run the deploy job for billing."
    assert len(long) > SUMMARY_LENGTH and "deploy" not in long[:SUMMARY_LENGTH]
    reranking = _http(rerank_server, weight=1.0)
    async with _bank(data_dir) as stack:
        await stack.service.retain(BANK, RetainRequest(content=long, wait=True))
        reranked = await _recall(_service(stack, reranking))
    await reranking.close()
    (request,) = rerank_server.requests()
    sent = request["body"]["texts"]
    assert long in sent  # whole: it is within the summary and detail
    scores = dict(zip(sent, relevance(QUERY, sent), strict=True))
    (hit,) = [hit for hit in reranked if hit.text == long]  # lifted by its last sentence
    assert hit.explain.rerank == pytest.approx(scores[long])
    summary_only = [long[:SUMMARY_LENGTH] if text == long else text for text in sent]
    assert scores[long] > relevance(QUERY, summary_only)[sent.index(long)]


async def test_the_blend_keeps_the_breakdown_summing_to_the_score(
    data_dir: Path, rerank_server: RerankServer
) -> None:
    reranking = _http(rerank_server, weight=0.4)
    async with _bank(data_dir) as stack:
        plain = {hit.id: hit for hit in await _recall(_service(stack, None))}
        reranked = await _recall(_service(stack, reranking))
    await reranking.close()
    for hit in reranked:
        explain = hit.explain
        assert explain.rerank is not None
        assert hit.score == pytest.approx(
            sum(w * getattr(explain, name) for name, w in explain.weights.items())
        )
        if hit.id in plain:
            expected = 0.6 * plain[hit.id].score + 0.4 * explain.rerank
            assert hit.score == pytest.approx(expected)


@pytest.mark.parametrize(
    ("fault", "params"),
    [("hang", {"hang_s": 3.0}), ("500", {"count": 5}), ("429", {"retry_after": 30, "count": 5})],
    ids=["slow", "failing", "throttling"],
)
async def test_a_failing_reranker_leaves_the_order_within_the_deadline(
    data_dir: Path, rerank_server: RerankServer, fault: str, params: dict[str, Any]
) -> None:
    reranking = _http(rerank_server, weight=1.0, deadline_s=0.4)
    async with _bank(data_dir) as stack:
        plain = await _recall(_service(stack, None))
        rerank_server.inject(fault, **params)
        started = time.monotonic()
        with capture_logs() as logs:
            degraded = await _recall(_service(stack, reranking))
        elapsed = time.monotonic() - started
    await reranking.close()
    assert elapsed < 1.5
    assert [hit.model_dump() for hit in degraded] == [hit.model_dump() for hit in plain]
    assert [e["event"] for e in logs].count("recall_rerank_skipped") == 1


async def test_the_null_reranker_changes_nothing(data_dir: Path) -> None:
    async with _bank(data_dir) as stack:
        plain = await _recall(_service(stack, None))
        null = await _recall(_service(stack, Reranking(NoReranker())))
    assert plain
    assert [hit.model_dump() for hit in null] == [hit.model_dump() for hit in plain]
    assert all(hit.explain.rerank is None and "rerank" not in hit.explain.weights for hit in plain)


def test_no_reranker_is_wired_by_default() -> None:
    assert Settings().reranker == RerankerSettings()
    assert build_reranking(Settings().reranker) is None


async def test_the_environment_wires_an_http_reranker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COGSUB_RERANKER__KIND", "http")
    monkeypatch.setenv("COGSUB_RERANKER__URL", "http://127.0.0.1:9/v2/rerank")
    monkeypatch.setenv("COGSUB_RERANKER__API", "cohere")
    monkeypatch.setenv("COGSUB_RERANKER__MODEL", "rerank-v3.5")
    monkeypatch.setenv("COGSUB_RERANKER__MAX_CANDIDATES", "20")
    monkeypatch.setenv("COGSUB_RERANKER__WEIGHT", "0.3")
    reranking = build_reranking(Settings().reranker)
    assert reranking is not None
    assert (reranking.max_candidates, reranking.weight) == (20, 0.3)
    await reranking.close()


async def test_the_rerankers_key_shows_nowhere(monkeypatch: pytest.MonkeyPatch) -> None:
    key = "rk-never-shown-8c1f"
    monkeypatch.setenv("COGSUB_RERANKER__KIND", "http")
    monkeypatch.setenv("COGSUB_RERANKER__API_KEY", key)
    settings = Settings().reranker
    reranking = build_reranking(settings)
    assert reranking is not None
    shown = [repr(settings), str(settings), settings.model_dump_json(), repr(reranking._reranker)]
    await reranking.close()
    assert settings.api_key is not None and settings.api_key.get_secret_value() == key
    assert all(key not in text for text in shown)
