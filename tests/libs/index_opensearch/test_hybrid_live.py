"""The hybrid query body and its normalization pipeline against a live OpenSearch.

``test_queries.py`` pins the bodies (golden files, the fast check); here a server that lists
the k-NN and neural-search plugins runs them (an OpenSearch container when Docker answers,
``tests/fixtures/engines.py``). osmem-server lists neither, so these skip there, on the
capability the server reports; an OpenSearch container lacking either is an error instead
(``require_knn_and_hybrid``), and ``COGSUB_TEST_NO_SKIPS=1`` fails a run where these skipped on it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest

from cogsub.index import opensearch_queries as q
from cogsub.index.opensearch import OpenSearchMemoryIndex
from cogsub.index.ports import SearchFilters
from tests.fixtures.opensearch import KNN_PLUGIN, OpenSearchEndpoint
from tests.libs.index_opensearch.test_adapter import DIM, make_doc, unit

pytestmark = pytest.mark.connected


def test_capabilities_are_what_the_server_lists(opensearch_endpoint: OpenSearchEndpoint) -> None:
    if os.environ.get("OPENSEARCH_KNN"):
        pytest.skip("OPENSEARCH_KNN overrides the plugin list")
    assert opensearch_endpoint.supports_knn is (KNN_PLUGIN in opensearch_endpoint.plugins)
    if opensearch_endpoint.emulator:
        assert not opensearch_endpoint.supports_hybrid


@pytest.fixture
async def hybrid_index(
    opensearch_endpoint: OpenSearchEndpoint, opensearch_index_name: str
) -> AsyncIterator[OpenSearchMemoryIndex]:
    if not opensearch_endpoint.supports_hybrid:
        pytest.skip("this server lists no k-NN and neural-search plugins: no hybrid queries")
    index = opensearch_endpoint.memory_index(opensearch_index_name)
    await index.ensure(dimension=DIM)
    await index.upsert(
        [
            make_doc("both", summary="deploy the billing service", embedding=unit(0)),
            make_doc("text-only", summary="deploy the billing service today", embedding=unit(5)),
            make_doc("vector-only", summary="lunch menu for friday", embedding=unit(0)),
            make_doc("neither", summary="lunch menu for monday", embedding=unit(6)),
            make_doc("other-bank", bank_id="bank-b", summary="deploy billing", embedding=unit(0)),
        ]
    )
    try:
        yield index
    finally:
        await index.close()


def _hybrid_search(
    endpoint: OpenSearchEndpoint, index: str, pipeline: str, body: dict[str, Any]
) -> list[dict[str, Any]]:
    with endpoint.http() as http:
        put = http.put(f"/_search/pipeline/{pipeline}", json=q.hybrid_pipeline_body((0.5, 0.5)))
        assert put.is_success, put.text
        try:
            found = http.post(f"/{index}/_search", params={"search_pipeline": pipeline}, json=body)
            assert found.is_success, found.text
            hits: list[dict[str, Any]] = found.json()["hits"]["hits"]
            return hits
        finally:
            http.delete(f"/_search/pipeline/{pipeline}")


async def test_hybrid_query_ranks_text_and_vector_matches_within_the_bank(
    hybrid_index: OpenSearchMemoryIndex,
    opensearch_endpoint: OpenSearchEndpoint,
    opensearch_index_name: str,
) -> None:
    body = q.hybrid_query("deploy billing", unit(0), SearchFilters(bank_id="bank-a"), size=4, k=10)
    hits = _hybrid_search(
        opensearch_endpoint, hybrid_index.index_name, f"{opensearch_index_name}-hybrid", body
    )
    events = [hit["_source"]["event_id"] for hit in hits]
    assert events[0] == "both"  # matched by BM25 and by k-NN: the highest combined score
    assert {"text-only", "vector-only"} <= set(events)
    assert {hit["_source"]["bank_id"] for hit in hits} == {"bank-a"}
    scores = [hit["_score"] for hit in hits]
    assert scores == sorted(scores, reverse=True)
