"""Reranking as recall uses it: bounded candidates, a hard deadline, failures that only warn."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from structlog.testing import capture_logs

from cogsub.core.errors import ConfigurationError
from cogsub.rerank import HttpReranker, NoReranker, Reranking, blend
from tests.fixtures.rerank_server import RerankServer, relevance

QUERY = "deploy the billing service"
TEXTS = [f"note {i}: billing" + " deploy" * (i % 4) for i in range(8)]
FINALS = [1.0 - i / 10 for i in range(len(TEXTS))]


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def http(rerank_server: RerankServer) -> AsyncIterator[HttpReranker]:
    reranker = HttpReranker(f"{rerank_server.base_url}/rerank", backoff_base_s=0.01)
    yield reranker
    await reranker.close()


async def test_only_the_head_is_sent_and_blended(
    http: HttpReranker, rerank_server: RerankServer
) -> None:
    reranking = Reranking(http, weight=0.7, max_candidates=5)
    order = await reranking.blended(QUERY, FINALS, TEXTS)
    (request,) = rerank_server.requests()
    assert request["body"]["texts"] == TEXTS[:5]
    assert order == blend(FINALS, relevance(QUERY, TEXTS[:5]), 0.7)
    assert [b.position for b in order] != list(range(len(TEXTS)))  # the rule did reorder


async def test_a_hanging_reranker_costs_one_deadline_then_rests(
    http: HttpReranker, rerank_server: RerankServer
) -> None:
    clock = Clock()
    reranking = Reranking(http, deadline_s=0.3, rest_s=10.0, clock=clock)
    rerank_server.inject("hang", hang_s=3.0)
    started = time.monotonic()
    with capture_logs() as logs:
        assert await reranking.blended(QUERY, FINALS, TEXTS) is None
    assert time.monotonic() - started < 1.0
    (warning,) = [e for e in logs if e["event"] == "recall_rerank_skipped"]
    assert warning["log_level"] == "warning"
    assert warning["reason"] == "TimeoutError"
    clock.now += 9.9  # still resting: no request at all
    assert await reranking.blended(QUERY, FINALS, TEXTS) is None
    assert len(rerank_server.requests()) == 1
    clock.now += 0.2  # rested: it asks again, and the server answers this time
    assert await reranking.blended(QUERY, FINALS, TEXTS) is not None
    assert len(rerank_server.requests()) == 2


async def test_an_outage_degrades_to_no_opinion(
    http: HttpReranker, rerank_server: RerankServer
) -> None:
    rerank_server.inject("500", count=5)
    with capture_logs() as logs:
        assert await Reranking(http).blended(QUERY, FINALS, TEXTS) is None
    (warning,) = [e for e in logs if e["event"] == "recall_rerank_skipped"]
    assert "gave up after 2 attempts" in warning["reason"]


async def test_an_answer_in_no_shape_degrades_to_no_opinion(
    http: HttpReranker, rerank_server: RerankServer
) -> None:
    rerank_server.inject("garbled")
    with capture_logs() as logs:
        assert await Reranking(http).blended(QUERY, FINALS, TEXTS) is None
    assert [e["event"] for e in logs if e["log_level"] == "warning"] == ["recall_rerank_skipped"]


async def test_the_null_reranker_has_no_opinion() -> None:
    reranker = NoReranker()
    assert reranker.name == "none"
    assert await reranker.rerank(QUERY, TEXTS) == []
    assert await Reranking(reranker).blended(QUERY, FINALS, TEXTS) is None


async def test_nothing_to_rerank_asks_nothing(
    http: HttpReranker, rerank_server: RerankServer
) -> None:
    assert await Reranking(http).blended(QUERY, [], []) is None
    assert rerank_server.requests() == []


@pytest.mark.parametrize(
    "options",
    [{"weight": 1.5}, {"max_candidates": 0}, {"deadline_s": 0.0}, {"rest_s": -1.0}],
    ids=["weight", "candidates", "deadline", "rest"],
)
def test_bounds_that_cannot_work_are_refused(options: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        Reranking(NoReranker(), **options)  # type: ignore[arg-type]
