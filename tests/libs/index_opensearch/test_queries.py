"""Golden and structural tests of the pure OpenSearch body builders (no server).

Set ``COGSUB_TEST_UPDATE_GOLDEN=1`` to rewrite the golden files after a
deliberate change, then review the diff.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cogsub.core.documents import IndexDocument
from cogsub.core.errors import ConfigurationError, InvalidInputError
from cogsub.core.events import FactType
from cogsub.index import opensearch_queries as q
from cogsub.index.ports import DecayStep, SearchFilters

GOLDEN = Path(__file__).parent / "golden"

FULL = SearchFilters(
    bank_id="bank-a",
    fact_types=frozenset({FactType.WORLD, FactType.EXPERIENCE}),
    tags_any=frozenset({"ingestion", "memory"}),
    since=datetime(2026, 5, 1, tzinfo=UTC),
    # A non-UTC zone: the builder must send UTC with a Z.
    until=datetime(2026, 5, 8, 22, 31, 25, 237000, tzinfo=timezone(timedelta(hours=2))),
    min_importance=0.25,
)
MINIMAL = SearchFilters(bank_id="bank-a")
VECTOR = [0.5, -0.5, 0.5, -0.5, 0.0, 0.0, 0.0, 0.0]


def _doc(event_id: str) -> IndexDocument:
    return IndexDocument(
        event_id=event_id,
        timestamp="2026-05-08T22:31:25.237Z",
        event_type="user_input",
        session_id="s1",
        summary="Design a memory system.",
        embedding=[0.25] * 4,
        importance_score=0.6,
        reward_score=0.81,
        confidence=0.72,
        object_storage_key=f"events/2026/05/08/{event_id}.json",
        tags=["memory"],
        bank_id="bank-a",
        fact_type=FactType.EXPERIENCE,
    )


DECAY = DecayStep(rate=0.5, floor=0.05, before=datetime(2026, 5, 8, tzinfo=UTC))


def _signals(event_id: str, factor: float, timestamp: str, seq_no: int) -> dict[str, Any]:
    source = {"decay_factor": factor, "timestamp": timestamp}
    hit_id = q.document_id("bank-a", event_id)
    return {"_id": hit_id, "_source": source, "_seq_no": seq_no, "_primary_term": 1}


DECAY_HITS = [
    _signals("old", 1.0, "2026-05-01T00:00:00.000Z", 7),
    _signals("near-floor", 0.06, "2026-05-01T00:00:00.000Z", 8),
    _signals("new", 1.0, "2026-05-08T00:00:00.000Z", 9),  # not before the step: no action
    _signals("at-floor", 0.05, "2026-05-01T00:00:00.000Z", 10),  # nothing to change
    _signals("below-floor", 0.01, "2026-05-01T00:00:00.000Z", 11),
]


CASES: dict[str, Callable[[], Any]] = {
    "index_template_8": lambda: q.index_template(8),
    "index_template_384_3_shards_1_replica": lambda: q.index_template(384, shards=3, replicas=1),
    "filters_minimal": lambda: q.filters_clause(MINIMAL),
    "filters_full": lambda: q.filters_clause(FULL),
    "filters_since_only": lambda: q.filters_clause(
        SearchFilters(bank_id="b", since=datetime(2026, 1, 2, 3, 4, 5, 6, tzinfo=UTC))
    ),
    "filters_empty_sets": lambda: q.filters_clause(
        SearchFilters(bank_id="b", fact_types=frozenset(), tags_any=frozenset())
    ),
    "text_query_minimal": lambda: q.text_query("memory system", MINIMAL, 10),
    "text_query_full": lambda: q.text_query("fast associative retrieval", FULL, 5),
    "text_query_with_tag_terms": lambda: q.text_query(
        "memory ingestion", MINIMAL, 5, tag_terms=["memory", "ingestion"]
    ),
    "knn_query_minimal": lambda: q.knn_query(VECTOR, MINIMAL, 10, k=100),
    "knn_query_full": lambda: q.knn_query(VECTOR, FULL, 3, k=3),
    "hybrid_query_full": lambda: q.hybrid_query(
        "retrieval", VECTOR, FULL, 7, k=50, tag_terms=["retrieval"]
    ),
    "hybrid_pipeline_default": lambda: q.hybrid_pipeline_body(),
    "hybrid_pipeline_l2_geometric": lambda: q.hybrid_pipeline_body(
        [0.5, 0.5], normalization="l2", combination="geometric_mean"
    ),
    "count_all": lambda: q.count_query(None),
    "count_bank": lambda: q.count_query("bank-a"),
    "bulk_lines": lambda: q.bulk_index_lines("experience_events", [_doc("e1"), _doc("e2")]),
    "decay_page_first": lambda: q.decay_page_query("bank-a", 500, after=None),
    "decay_page_after": lambda: q.decay_page_query("bank-a", 500, after="e9"),
    "bulk_decay_lines": lambda: q.bulk_decay_lines("experience_events", DECAY_HITS, DECAY),
    "oldest_document": q.oldest_document_query,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_body_matches_golden_file(name: str) -> None:
    body = CASES[name]()
    text = json.dumps(body, indent=2, sort_keys=True) + "\n"
    path = GOLDEN / f"{name}.json"
    if os.environ.get("COGSUB_TEST_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert json.loads(path.read_text()) == json.loads(text)
    # The exact serialisation is pinned too, so float/int drift (1 vs 1.0) shows.
    assert path.read_text() == text


def test_every_golden_file_has_a_case() -> None:
    assert {p.stem for p in GOLDEN.glob("*.json")} == set(CASES)


# --- mapping -------------------------------------------------------------------------


def test_template_maps_every_index_document_field_and_nothing_else() -> None:
    properties = q.index_template(8)["mappings"]["properties"]
    assert set(properties) == set(IndexDocument.model_fields)


def test_template_types() -> None:
    body = q.index_template(16)
    props = body["mappings"]["properties"]
    assert body["settings"]["index"]["knn"] is True
    assert body["mappings"]["dynamic"] == "strict"
    assert props["embedding"]["dimension"] == 16
    assert props["embedding"]["method"]["space_type"] == "cosinesimil"
    assert props["embedding"]["method"]["engine"] == q.KNN_ENGINE
    assert props["summary"] == {"type": "text", "analyzer": "english"}
    assert props["retrieval_count"]["type"] == "integer"
    assert props["timestamp"]["type"] == "date"
    for name in ("importance_score", "reward_score", "confidence", "decay_factor"):
        assert props[name]["type"] == "float"
    for name in ("event_id", "bank_id", "fact_type", "event_type", "session_id", "tags"):
        assert props[name]["type"] == "keyword"


@pytest.mark.parametrize(
    ("dimension", "shards", "replicas"),
    [(0, 1, 0), (-3, 1, 0), (4097, 1, 0), (8, 0, 0), (8, 1, -1)],
)
def test_template_refuses_impossible_settings(dimension: int, shards: int, replicas: int) -> None:
    with pytest.raises(ConfigurationError):
        q.index_template(dimension, shards=shards, replicas=replicas)


def test_mapped_dimension_reads_the_template_back() -> None:
    response = {"idx": {"mappings": q.index_template(12)["mappings"]}}
    assert q.mapped_dimension(response, "idx") == 12
    # Through an alias the answer is keyed by the concrete index.
    assert q.mapped_dimension({"idx-000001": response["idx"]}, "idx") == 12


@pytest.mark.parametrize(
    "response",
    [
        {},
        {"idx": {"mappings": {}}},
        {"idx": {"mappings": {"properties": {"embedding": {"type": "float"}}}}},
        {"idx": {"mappings": {"properties": {"embedding": {"type": "knn_vector"}}}}},
        {"a": {}, "b": {}},
    ],
)
def test_mapped_dimension_without_a_vector_field(response: dict[str, Any]) -> None:
    assert q.mapped_dimension(response, "idx") is None


# --- document ids --------------------------------------------------------------------------

_safe_ids = st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_.:@+-]{0,30}", fullmatch=True)


def test_a_document_id_names_the_bank_and_the_event() -> None:
    assert q.document_id("jane@example.com", "evt-1") == "jane@example.com|evt-1"
    assert q.document_id("bank-a", "e1") != q.document_id("bank-b", "e1")


@given(_safe_ids, _safe_ids, _safe_ids, _safe_ids)
def test_two_documents_never_share_an_id(bank: str, event: str, bank2: str, event2: str) -> None:
    if (bank, event) != (bank2, event2):
        assert q.document_id(bank, event) != q.document_id(bank2, event2)
    assert q.document_id(bank, event).split(q.ID_SEPARATOR, 1) == [bank, event]


def test_a_bank_id_holding_the_separator_is_refused() -> None:
    # Else bank "a|b" with event "c" and bank "a" with event "b|c" would be one document.
    with pytest.raises(InvalidInputError):
        q.document_id("a|b", "c")
    with pytest.raises(InvalidInputError):
        q.bulk_index_lines("experience_events", [_doc("c").model_copy(update={"bank_id": "a|b"})])


@pytest.mark.parametrize(
    ("hit", "under"),
    [
        ({"_id": "bank-a|e1", "_source": {"bank_id": "bank-a", "event_id": "e1"}}, True),
        ({"_id": "e1", "_source": {"bank_id": "bank-a", "event_id": "e1"}}, False),
        ({"_id": "bank-b|e1", "_source": {"bank_id": "bank-a", "event_id": "e1"}}, False),
        ({"_id": "bank-a|e1", "_source": {}}, False),
    ],
)
def test_a_hit_is_under_its_document_id_only_when_the_id_names_its_bank_and_event(
    hit: dict[str, Any], under: bool
) -> None:
    assert q.under_document_id(hit) is under


# --- structure of every query body ------------------------------------------------------

_ids = st.from_regex(r"[a-z0-9_][a-z0-9_.:@+-]{0,20}", fullmatch=True)
_times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
filters_strategy = st.builds(
    SearchFilters,
    bank_id=_ids,
    fact_types=st.none() | st.frozensets(st.sampled_from(FactType)),
    tags_any=st.none() | st.frozensets(st.text(min_size=1, max_size=10), max_size=4),
    since=st.none() | _times,
    until=st.none() | _times,
    min_importance=st.none() | st.floats(0, 1),
)


def _walk(node: Any) -> Iterator[Any]:
    yield node
    if isinstance(node, dict):
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _assert_filter_list(clauses: list[Any], filters: SearchFilters) -> None:
    assert clauses[0] == {"term": {"bank_id": filters.bank_id}}
    bank_terms = [c for c in clauses if "term" in c and "bank_id" in c["term"]]
    assert len(bank_terms) == 1
    ranges = [c["range"] for c in clauses if "range" in c]
    for window in ranges:
        ((field, bounds),) = window.items()
        assert field in {"timestamp", "importance_score"}
        assert set(bounds) <= {"gte", "lt"}
    if filters.fact_types is not None:
        assert {"terms": {"fact_type": sorted(filters.fact_types)}} in clauses


@given(filters_strategy, st.text(max_size=40), st.integers(0, 100))
def test_text_query_always_filters_by_bank(filters: SearchFilters, text: str, size: int) -> None:
    body = q.text_query(text, filters, size)
    assert body["size"] == size
    boolean = body["query"]["bool"]
    assert boolean["should"][0] == {"match": {"summary": {"query": text, "operator": "or"}}}
    assert boolean["minimum_should_match"] == 1
    assert set(boolean) == {"should", "minimum_should_match", "filter"}  # no scoring filter
    _assert_filter_list(boolean["filter"], filters)
    json.dumps(body)  # serialisable as is


@given(
    filters_strategy,
    st.lists(st.floats(-1, 1), min_size=1, max_size=16),
    st.integers(0, 50),
    st.integers(1, 200),
)
def test_knn_query_keeps_filters_inside_the_knn_clause(
    filters: SearchFilters, vector: list[float], size: int, k: int
) -> None:
    body = q.knn_query(vector, filters, size, k=k)
    assert set(body) == {"size", "query"}
    assert body["size"] == size
    assert set(body["query"]) == {"knn"}  # no outer bool: post-filtering would lose hits
    clause = body["query"]["knn"]["embedding"]
    assert clause["vector"] == vector and clause["k"] == k
    _assert_filter_list(clause["filter"]["bool"]["filter"], filters)
    json.dumps(body, allow_nan=False)


@given(filters_strategy, st.text(max_size=20), st.integers(0, 20))
def test_hybrid_query_filters_every_sub_query(filters: SearchFilters, text: str, size: int) -> None:
    body = q.hybrid_query(text, VECTOR, filters, size, k=10)
    text_part, knn_part = body["query"]["hybrid"]["queries"]
    _assert_filter_list(text_part["bool"]["filter"], filters)
    _assert_filter_list(knn_part["knn"]["embedding"]["filter"]["bool"]["filter"], filters)
    assert text_part == q.text_query(text, filters, size)["query"]
    assert knn_part == q.knn_query(VECTOR, filters, size, k=10)["query"]


@pytest.mark.parametrize("name", [n for n in sorted(CASES) if "query" in n and "count" not in n])
def test_no_query_parser_syntax_is_ever_used(name: str) -> None:
    kinds = {key for node in _walk(CASES[name]()) if isinstance(node, dict) for key in node}
    assert not kinds & {"query_string", "simple_query_string", "script", "script_score"}


def test_range_bounds_are_utc_iso_strings() -> None:
    clauses = q.filters_clause(FULL)
    (window,) = [c["range"]["timestamp"] for c in clauses if "timestamp" in c.get("range", {})]
    assert window == {"gte": "2026-05-01T00:00:00.000Z", "lt": "2026-05-08T20:31:25.237Z"}


# --- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        lambda: q.text_query("x", MINIMAL, -1),
        lambda: q.knn_query(VECTOR, MINIMAL, 1, k=0),
        lambda: q.knn_query([], MINIMAL, 1, k=1),
        lambda: q.knn_query([math.nan] * 8, MINIMAL, 1, k=1),
        lambda: q.knn_query([math.inf] * 8, MINIMAL, 1, k=1),
        lambda: q.hybrid_query("x", VECTOR, MINIMAL, 1, k=0),
        lambda: q.hybrid_query("x", VECTOR, MINIMAL, -2, k=3),
    ],
)
def test_bad_search_arguments_are_invalid_input(build: Callable[[], Any]) -> None:
    with pytest.raises(InvalidInputError):
        build()


@pytest.mark.parametrize(
    ("weights", "options"),
    [
        ([0.5, 0.6], {}),
        ([1.0], {}),
        ([0.2, 0.3, 0.5], {}),
        ([-0.5, 1.5], {}),
        ([math.nan, 1.0], {}),
        ([0.5, 0.5], {"normalization": "z_score_typo"}),
        ([0.5, 0.5], {"combination": "median"}),
    ],
)
def test_hybrid_pipeline_refuses_weights_opensearch_would_refuse(
    weights: list[float], options: dict[str, str]
) -> None:
    with pytest.raises(ConfigurationError):
        q.hybrid_pipeline_body(weights, **options)


# --- bulk responses ------------------------------------------------------------------------


def test_bulk_failures_of_a_clean_response() -> None:
    assert q.bulk_failures({"errors": False, "items": [{"index": {"status": 201}}]}) == []


def test_bulk_failures_reports_positions_with_offset() -> None:
    response = {
        "errors": True,
        "items": [
            {"index": {"_id": "a", "status": 201}},
            {
                "index": {
                    "_id": "b",
                    "status": 400,
                    "error": {"type": "mapper_parsing_exception", "reason": "bad"},
                }
            },
            {
                "index": {
                    "_id": "c",
                    "status": 429,
                    "error": {"type": "es_rejected_execution_exception", "reason": "busy"},
                }
            },
            {"index": {"_id": "d", "status": 503, "error": "unavailable"}},
        ],
    }
    failures = q.bulk_failures(response, offset=500)
    assert [(f.position, f.status, f.error_type, f.retryable) for f in failures] == [
        (501, 400, "mapper_parsing_exception", False),
        (502, 429, "es_rejected_execution_exception", True),
        (503, 503, "error", True),
    ]
    assert failures[0].reason == "bad"
