"""HttpReranker: both wire shapes parsed, and a real local /rerank server that fails on demand."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

import pytest
from structlog.testing import capture_logs

from cogsub.core.errors import ConfigurationError, UnavailableError
from cogsub.rerank import HttpReranker, parse_scores, rerank_request
from tests.fixtures.rerank_server import RerankServer, bm25, relevance

API_KEY = "rk-test-2b7d9e41c0a8"
QUERY = "how do we deploy the billing service"
TEXTS = [
    "Lunch is at noon on Fridays.",
    "To deploy billing, run make deploy in the billing service repository.",
    "The billing service sends invoices.",
]

MakeReranker = Callable[..., HttpReranker]


def test_tei_answers_come_back_in_request_order() -> None:
    body = [{"index": 2, "score": 0.9}, {"index": 0, "score": 0.1}, {"index": 1, "score": 0.5}]
    assert parse_scores(body, 3) == [0.1, 0.5, 0.9]


def test_cohere_and_jina_answers_come_back_in_request_order() -> None:
    results = [{"index": 1, "relevance_score": 0.8}, {"index": 0, "relevance_score": 0.3}]
    assert parse_scores({"id": "x", "results": results, "meta": {}}, 2) == [0.3, 0.8]
    assert parse_scores({"data": results}, 2) == [0.3, 0.8]


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"embeddings": [[0.1]]}, "no list"),
        ([{"index": 0, "score": 0.5}], "scored 1 of 2"),
        ([{"index": 0, "score": 0.5}, {"index": 0, "score": 0.4}], "repeated index 0"),
        ([{"index": 0, "score": 0.5}, {"index": 7, "score": 0.4}], "wrong or repeated index 7"),
        ([{"index": 0, "score": 0.5}, {"index": 1, "score": True}], "numeric score"),
        ([{"index": 0, "score": 0.5}, {"index": 1, "score": float("nan")}], "not finite"),
        ([{"index": 0, "score": 0.5}, "0.4"], "not an object"),
    ],
)
def test_answers_in_no_rerank_shape_are_refused(body: object, problem: str) -> None:
    with pytest.raises(ConfigurationError, match=problem):
        parse_scores(body, 2)


def test_each_api_gets_its_own_request_shape() -> None:
    assert rerank_request("tei", "m", "q", ["a", ""]) == {
        "query": "q",
        "texts": ["a", " "],
        "raw_scores": False,
        "truncate": True,
    }
    assert rerank_request("cohere", "m", "q", ["a", "b"]) == {
        "model": "m",
        "query": "q",
        "documents": ["a", "b"],
        "top_n": 2,
    }


def test_the_fixture_scores_by_its_rule() -> None:
    # The rule the server tests lean on: more query words, rarer words, more weight.
    scores = bm25(QUERY, TEXTS)
    assert scores[1] > scores[2] > scores[0] == 0.0


@pytest.mark.parametrize(
    "url", ["not a url", "http://", "ftp://127.0.0.1/rerank"], ids=["text", "hostless", "ftp"]
)
def test_a_url_that_cannot_work_is_refused_at_once(url: str) -> None:
    with pytest.raises(ConfigurationError, match="rerank URL"):
        HttpReranker(url)


def test_a_cohere_api_needs_a_model() -> None:
    with pytest.raises(ConfigurationError, match="needs a model"):
        HttpReranker("http://127.0.0.1:1/v1/rerank", api="cohere")


@pytest.fixture
async def make(rerank_server: RerankServer) -> AsyncIterator[MakeReranker]:
    """Builds rerankers against the fixture server with fast retries; closes them after."""
    made: list[HttpReranker] = []

    def build(path: str = "/rerank", **options: object) -> HttpReranker:
        settings: dict[str, object] = {"api_key": API_KEY, "backoff_base_s": 0.01}
        settings.update(options)
        reranker = HttpReranker(f"{rerank_server.base_url}{path}", **settings)  # type: ignore[arg-type]
        made.append(reranker)
        return reranker

    yield build
    for reranker in made:
        await reranker.close()


async def test_tei_scores_are_the_servers_rule(
    make: MakeReranker, rerank_server: RerankServer
) -> None:
    scores = await make().rerank(QUERY, TEXTS)
    assert scores == pytest.approx(relevance(QUERY, TEXTS))
    (request,) = rerank_server.requests()
    assert request["path"] == "/rerank"
    assert request["body"] == rerank_request("tei", "", QUERY, TEXTS)
    assert request["authorization"] == f"Bearer {API_KEY}"


@pytest.mark.parametrize("path", ["/v1/rerank", "/v2/rerank"])
async def test_cohere_scores_are_the_servers_rule(
    make: MakeReranker, rerank_server: RerankServer, path: str
) -> None:
    reranker = make(path, api="cohere", model="rerank-v3.5")
    assert await reranker.rerank(QUERY, TEXTS) == pytest.approx(relevance(QUERY, TEXTS))
    assert reranker.name == "rerank-v3.5"
    (request,) = rerank_server.requests()
    assert request["body"]["model"] == "rerank-v3.5"
    assert request["body"]["documents"] == TEXTS


async def test_no_texts_make_no_request(make: MakeReranker, rerank_server: RerankServer) -> None:
    assert await make().rerank(QUERY, []) == []
    assert rerank_server.requests() == []


async def test_a_server_error_is_retried(make: MakeReranker, rerank_server: RerankServer) -> None:
    rerank_server.inject("500")
    assert await make(max_retries=1).rerank(QUERY, TEXTS) == pytest.approx(relevance(QUERY, TEXTS))
    assert [r["fault"] for r in rerank_server.requests()] == ["500", None]


async def test_throttling_waits_at_most_the_backoff_cap(
    make: MakeReranker, rerank_server: RerankServer
) -> None:
    rerank_server.inject("429", retry_after=30)
    started = time.monotonic()
    with capture_logs() as logs:
        scores = await make(max_retries=1, backoff_max_s=0.2).rerank(QUERY, TEXTS)
    assert scores == pytest.approx(relevance(QUERY, TEXTS))
    assert 0.2 <= time.monotonic() - started < 2.0
    (retry,) = [e for e in logs if e["event"] == "rerank_request_retrying"]
    assert retry["delay_s"] == 0.2


async def test_an_outage_past_the_retries_is_unavailable_without_the_key(
    make: MakeReranker, rerank_server: RerankServer
) -> None:
    rerank_server.inject("500", count=3)
    with pytest.raises(UnavailableError, match="gave up after 2 attempts") as caught:
        await make(max_retries=1).rerank(QUERY, TEXTS)
    assert API_KEY not in str(caught.value)


async def test_a_wrong_key_is_a_configuration_error(
    make: MakeReranker, rerank_server: RerankServer
) -> None:
    rerank_server.reset(api_key="another-key")
    with pytest.raises(ConfigurationError, match="401"):
        await make().rerank(QUERY, TEXTS)


async def test_an_answer_in_no_rerank_shape_is_a_configuration_error(
    make: MakeReranker, rerank_server: RerankServer
) -> None:
    rerank_server.inject("garbled")
    with pytest.raises(ConfigurationError, match="no list of results"):
        await make().rerank(QUERY, TEXTS)
