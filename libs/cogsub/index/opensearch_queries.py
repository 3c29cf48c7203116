"""Pure builders for OpenSearch request bodies: mapping, filters, BM25, k-NN, hybrid.

Nothing here does I/O, so every body the adapter sends is pinned by golden
tests without a server. Two rules hold for every query body built here:

- the ``bank_id`` term filter is always present (bank isolation is enforced
  by the query, not by post-filtering), and
- filters sit *inside* the ``knn`` clause, so OpenSearch applies them during
  the graph search (efficient filtering) instead of after it, which would
  return fewer than ``size`` hits for selective filters.

Engine choice: ``lucene``. It supports ``cosinesimil`` and efficient
filtering (pre-filtering with an exact-search fallback for small candidate
sets) on every OpenSearch version we target, needs no native library, and our
per-bank result sets are small; ``faiss`` only pays off for large, mostly
unfiltered indices, and its efficient filtering and cosine support are newer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from cogsub.core.documents import EXPERIENCE_INDEX, IndexDocument
from cogsub.core.errors import ConfigurationError, FieldProblem, InvalidInputError
from cogsub.core.events import MAX_EMBEDDING_DIMENSION, format_timestamp
from cogsub.index.ports import DecayStep, SearchFilters

#: Writes wait for the refresh that makes them searchable (the port's contract), without
#: forcing a segment per request.
REFRESH = "wait_for"

Body = dict[str, Any]

INDEX_NAME = EXPERIENCE_INDEX
EMBEDDING_FIELD = "embedding"
KNN_ENGINE = "lucene"
KNN_SPACE_TYPE = "cosinesimil"
# Graph quality vs build cost for memories of a few hundred dimensions: the
# k-NN plugin's documented defaults (m=16) with a wider construction beam.
HNSW_EF_CONSTRUCTION = 128
HNSW_M = 16
# Tags are short exact terms; at full weight one tag hit would outrank most summary matches.
TAG_MATCH_BOOST = 0.5
HYBRID_PIPELINE = "cogsub-hybrid"
DEFAULT_HYBRID_WEIGHTS = (0.3, 0.7)
#: Joins bank and event id into a document's ``_id``; no SafeId can hold it.
ID_SEPARATOR = "|"

_KEYWORD_FIELDS = (
    "bank_id",
    "event_id",
    "event_type",
    "fact_type",
    "object_storage_key",
    "session_id",
    "tags",
)
_FLOAT_FIELDS = ("confidence", "decay_factor", "importance_score", "reward_score")
#: Fields mapped since the first indices were made: ``ensure`` adds any an index lacks
#: (OpenSearch adds a field to a mapping in place; its older documents simply lack it).
ADDED_FIELDS: Body = {"detail": {"type": "text", "analyzer": "english"}}


def index_template(dimension: int, *, shards: int = 1, replicas: int = 0) -> Body:
    """Settings and mappings for the ``experience_events`` index.

    Args:
        dimension: Length of every ``embedding`` vector.
        shards: Primary shards (one is plenty below tens of millions of docs).
        replicas: Replica shards (zero for a single-node cluster).

    Raises:
        ConfigurationError: a dimension, shard or replica count that cannot work.
    """
    if not 1 <= dimension <= MAX_EMBEDDING_DIMENSION:
        raise ConfigurationError(
            f"embedding dimension must be between 1 and {MAX_EMBEDDING_DIMENSION}, got {dimension}"
        )
    if shards < 1 or replicas < 0:
        raise ConfigurationError(f"need shards >= 1 and replicas >= 0, got {shards}/{replicas}")
    properties: Body = {
        EMBEDDING_FIELD: {
            "type": "knn_vector",
            "dimension": dimension,
            "method": {
                "name": "hnsw",
                "space_type": KNN_SPACE_TYPE,
                "engine": KNN_ENGINE,
                "parameters": {"ef_construction": HNSW_EF_CONSTRUCTION, "m": HNSW_M},
            },
        },
        "summary": {"type": "text", "analyzer": "english"},
        "retrieval_count": {"type": "integer"},
        "timestamp": {"type": "date"},
        **ADDED_FIELDS,
    }
    properties.update({name: {"type": "keyword"} for name in _KEYWORD_FIELDS})
    properties.update({name: {"type": "float"} for name in _FLOAT_FIELDS})
    return {
        "settings": {
            "index": {
                "knn": True,
                "number_of_shards": shards,
                "number_of_replicas": replicas,
            }
        },
        "mappings": {"dynamic": "strict", "properties": dict(sorted(properties.items()))},
    }


def mapped_dimension(mapping_response: Mapping[str, Any], index: str) -> int | None:
    """The ``embedding`` dimension in a ``GET <index>/_mapping`` response, if mapped as a vector."""
    field = _mapped_properties(mapping_response, index).get(EMBEDDING_FIELD, {})
    if field.get("type") != "knn_vector" or not isinstance(field.get("dimension"), int):
        return None
    dimension: int = field["dimension"]
    return dimension


def unmapped_fields(mapping_response: Mapping[str, Any], index: str) -> Body:
    """The ``ADDED_FIELDS`` a ``GET <index>/_mapping`` response lacks, as mapping properties."""
    mapped = _mapped_properties(mapping_response, index)
    return {name: field for name, field in ADDED_FIELDS.items() if name not in mapped}


def _mapped_properties(mapping_response: Mapping[str, Any], index: str) -> Mapping[str, Any]:
    entry = mapping_response.get(index)
    if not isinstance(entry, Mapping) and len(mapping_response) == 1:
        # An alias answers under the concrete index name.
        entry = next(iter(mapping_response.values()))
    if not isinstance(entry, Mapping):
        return {}
    properties = entry.get("mappings", {}).get("properties", {})
    return properties if isinstance(properties, Mapping) else {}


def filters_clause(filters: SearchFilters) -> list[Body]:
    """The ``bool.filter`` list for ``filters``; the bank term always comes first.

    An empty (not ``None``) set of fact types or tags matches nothing, as a
    ``terms`` query with no values does.
    """
    clauses: list[Body] = [{"term": {"bank_id": filters.bank_id}}]
    if filters.fact_types is not None:
        clauses.append({"terms": {"fact_type": sorted(str(t) for t in filters.fact_types)}})
    if filters.tags_any is not None:
        clauses.append({"terms": {"tags": sorted(filters.tags_any)}})
    window: Body = {}
    if filters.since is not None:
        window["gte"] = format_timestamp(filters.since)
    if filters.until is not None:
        window["lt"] = format_timestamp(filters.until)
    if window:
        clauses.append({"range": {"timestamp": window}})
    if filters.min_importance is not None:
        clauses.append({"range": {"importance_score": {"gte": filters.min_importance}}})
    return clauses


def scan_query(filters: SearchFilters, size: int, *, after: str | None) -> Body:
    """Documents matching ``filters`` in ``event_id`` order after the cursor (no scoring)."""
    check_size(size)
    clauses = filters_clause(filters)
    if after is not None:
        clauses.append({"range": {"event_id": {"gt": after}}})
    return {"size": size, "query": {"bool": {"filter": clauses}}, "sort": [{"event_id": "asc"}]}


#: What decay reads of a document: its two signals, its version and its event id (the
#: page's cursor; the ``_id`` holds the bank too), not the document.
_DECAY_SIGNALS = {
    "_source": ["decay_factor", "event_id", "timestamp"],
    "seq_no_primary_term": True,
}


def decay_page_query(bank_id: str, size: int, *, after: str | None) -> Body:
    """The decay signals of a bank's next ``size`` documents in ``event_id`` order."""
    return {**scan_query(SearchFilters(bank_id=bank_id), size, after=after), **_DECAY_SIGNALS}


def bulk_decay_lines(index: str, hits: Sequence[Mapping[str, Any]], step: DecayStep) -> list[Body]:
    """Bulk partial ``update`` actions for the hits ``step`` changes, each only at the version read.

    A hit is a search hit with ``decay_factor`` and ``timestamp`` in its source;
    one not older than ``step.before``, or at or below the floor, gets no action.
    """
    lines: list[Body] = []
    for hit in hits:
        source = hit["_source"]
        factor = float(source["decay_factor"])
        moment = datetime.fromisoformat(str(source["timestamp"]).replace("Z", "+00:00"))
        if moment >= step.before or (decayed := step.applied_to(factor)) == factor:
            continue
        version = {"if_seq_no": hit["_seq_no"], "if_primary_term": hit["_primary_term"]}
        lines.append({"update": {"_index": index, "_id": hit["_id"], **version}})
        lines.append({"doc": {"decay_factor": decayed}})
    return lines


def replay_order_query(filters: SearchFilters, size: int, *, after: IndexDocument | None) -> Body:
    """Documents matching ``filters`` in replay order after the cursor's place (no scoring)."""
    check_size(size)
    body: Body = {
        "size": size,
        "query": {"bool": {"filter": filters_clause(filters)}},
        "sort": [{"decay_factor": "desc"}, {"importance_score": "desc"}, {"event_id": "asc"}],
    }
    if after is not None:
        body["search_after"] = [after.decay_factor, after.importance_score, after.event_id]
    return body


def neighbour_queries(
    filters: SearchFilters, anchor: IndexDocument, each_side: int, *, within_s: float | None = None
) -> list[Body]:
    """Two searches: the ``each_side`` documents of ``anchor``'s session just before it, and after.

    "Before" is by (``timestamp``, ``event_id``), the order neighbouring turns
    are linked in, so documents sharing the anchor's timestamp split by id.
    ``within_s`` bounds how far from the anchor they may be.
    """
    check_size(each_side)
    at = anchor.timestamp
    window: list[Body] = []
    if within_s is not None:
        moment = datetime.fromisoformat(at.replace("Z", "+00:00"))
        reach = timedelta(seconds=within_s)
        span = {"gte": format_timestamp(moment - reach), "lte": format_timestamp(moment + reach)}
        window.append({"range": {"timestamp": span}})
    bodies = []
    for time_side, id_side, order in (("lt", "lt", "desc"), ("gt", "gt", "asc")):
        around = {
            "bool": {
                "should": [
                    {"range": {"timestamp": {time_side: at}}},
                    {
                        "bool": {
                            "filter": [
                                {"range": {"timestamp": {"gte": at, "lte": at}}},
                                {"range": {"event_id": {id_side: anchor.event_id}}},
                            ]
                        }
                    },
                ],
                "minimum_should_match": 1,
            }
        }
        session = {"term": {"session_id": anchor.session_id}}
        clauses = [*filters_clause(filters), session, around, *window]
        bodies.append(
            {
                "size": each_side,
                "query": {"bool": {"filter": clauses}},
                "sort": [{"timestamp": order}, {"event_id": order}],
            }
        )
    return bodies


def text_query(
    query: str, filters: SearchFilters, size: int, *, tag_terms: Sequence[str] = ()
) -> Body:
    """A BM25 search: any query term may match ``summary`` or ``detail``; filters do not score.

    Args:
        query: Text for the ``summary`` and ``detail`` matches (the english analyzer);
            a document's score is the sum of both, as FTS5 sums its columns.
        filters: Restrictions; the bank term is always included.
        size: Hits to return.
        tag_terms: Terms that also score when a document has them as a tag
            (exact keyword match, weighted by ``TAG_MATCH_BOOST``).
    """
    check_size(size)
    return {"size": size, "query": _text_clause(query, filters, tag_terms)}


def knn_query(vector: Sequence[float], filters: SearchFilters, size: int, *, k: int) -> Body:
    """An approximate k-NN search with the filters applied inside the graph search.

    Args:
        vector: The query vector (the index's cosine space needs no normalisation).
        filters: Restrictions; the bank term is always included.
        size: Hits to return.
        k: Neighbours to collect per shard before the top ``size`` are kept;
            a larger ``k`` trades latency for recall.
    """
    check_size(size)
    if k < 1:
        raise InvalidInputError([FieldProblem("k", "must be at least 1")])
    return {"size": size, "query": _knn_clause(vector, filters, k)}


def hybrid_query(
    query: str,
    vector: Sequence[float],
    filters: SearchFilters,
    size: int,
    *,
    k: int,
    tag_terms: Sequence[str] = (),
) -> Body:
    """A ``hybrid`` query (BM25 first, k-NN second) for a normalization search pipeline.

    Send it with ``search_pipeline=HYBRID_PIPELINE`` (see ``hybrid_pipeline_body``).
    Each sub-query carries the filters itself, since sub-query scores are
    normalised separately and an unfiltered sub-query would leak other banks.
    """
    check_size(size)
    if k < 1:
        raise InvalidInputError([FieldProblem("k", "must be at least 1")])
    subqueries = [_text_clause(query, filters, tag_terms), _knn_clause(vector, filters, k)]
    return {"size": size, "query": {"hybrid": {"queries": subqueries}}}


def hybrid_pipeline_body(
    weights: Sequence[float] = DEFAULT_HYBRID_WEIGHTS,
    *,
    normalization: str = "min_max",
    combination: str = "arithmetic_mean",
) -> Body:
    """A search pipeline that normalises BM25 and k-NN scores and mixes them.

    Args:
        weights: (text, vector) weights, in ``hybrid_query``'s sub-query order;
            OpenSearch requires them to add up to 1.
        normalization: ``min_max`` or ``l2``.
        combination: ``arithmetic_mean``, ``geometric_mean`` or ``harmonic_mean``.

    Raises:
        ConfigurationError: weights that OpenSearch would refuse.
    """
    if len(weights) != 2:
        raise ConfigurationError(f"hybrid weights are (text, vector), got {len(weights)} values")
    if any(not math.isfinite(w) or w < 0 for w in weights) or not math.isclose(
        sum(weights), 1.0, abs_tol=1e-6
    ):
        raise ConfigurationError(f"hybrid weights must be >= 0 and sum to 1, got {list(weights)}")
    if normalization not in {"min_max", "l2"}:
        raise ConfigurationError(f"unknown hybrid normalization {normalization!r}")
    if combination not in {"arithmetic_mean", "geometric_mean", "harmonic_mean"}:
        raise ConfigurationError(f"unknown hybrid combination {combination!r}")
    return {
        "description": "Cognitive Substrate: normalised BM25 + k-NN over experience_events",
        "phase_results_processors": [
            {
                "normalization-processor": {
                    "normalization": {"technique": normalization},
                    "combination": {
                        "technique": combination,
                        "parameters": {"weights": [float(w) for w in weights]},
                    },
                }
            }
        ],
    }


def count_query(bank_id: str | None) -> Body:
    """A ``_count`` body for one bank, or for all of them."""
    if bank_id is None:
        return {"query": {"match_all": {}}}
    return {"query": {"bool": {"filter": [{"term": {"bank_id": bank_id}}]}}}


def document_id(bank_id: str, event_id: str) -> str:
    """The ``_id`` of ``event_id`` in ``bank_id``: the same event id in two banks is two documents.

    The separator is outside the SafeId alphabet, and refused in a bank id, so
    the first one in an ``_id`` splits it back: no two (bank, event) pairs share one.

    Raises:
        InvalidInputError: a bank id holding the separator.
    """
    if ID_SEPARATOR in bank_id:
        raise InvalidInputError([FieldProblem("bank_id", f"must not contain {ID_SEPARATOR!r}")])
    return f"{bank_id}{ID_SEPARATOR}{event_id}"


def oldest_document_query() -> Body:
    """The ids of the index's oldest memory: the likeliest to predate ``document_id``."""
    return {"size": 1, "_source": ["bank_id", "event_id"], "sort": [{"timestamp": "asc"}]}


def under_document_id(hit: Mapping[str, Any]) -> bool:
    """Whether a hit's ``_id`` is the ``document_id`` of the bank and event in its source."""
    source = hit.get("_source", {})
    joined = f"{source.get('bank_id')}{ID_SEPARATOR}{source.get('event_id')}"
    return bool(hit.get("_id") == joined)


def bulk_index_lines(index: str, documents: Sequence[IndexDocument]) -> list[Body]:
    """Bulk ``index`` actions, each under its document's ``document_id``.

    A redelivered document replaces itself, and only itself: another bank's
    document with the same event id has another ``_id``.
    """
    lines: list[Body] = []
    for doc in documents:
        lines.append({"index": {"_index": index, "_id": document_id(doc.bank_id, doc.event_id)}})
        lines.append(doc.to_source())
    return lines


def bulk_delete_lines(index: str, versions: Mapping[str, tuple[int, int]]) -> list[Body]:
    """Bulk ``delete`` actions, each only if the document is still at the version read.

    ``versions`` maps a document's ``_id`` (see ``document_id``) to its
    ``(_seq_no, _primary_term)``; a document that changed since answers 409
    instead of being deleted.
    """
    return [
        {
            "delete": {
                "_index": index,
                "_id": doc_id,
                "if_seq_no": seq_no,
                "if_primary_term": primary_term,
            }
        }
        for doc_id, (seq_no, primary_term) in versions.items()
    ]


@dataclass(frozen=True)
class BulkFailure:
    """One refused item of a bulk request; ``position`` counts from the first document."""

    position: int
    status: int
    error_type: str
    reason: str

    @property
    def retryable(self) -> bool:
        """Throttled or a server-side failure: the same item may succeed later."""
        return self.status == 429 or self.status >= 500


def bulk_failures(response: Mapping[str, Any], *, offset: int = 0) -> list[BulkFailure]:
    """The failed items of a ``_bulk`` response (empty when ``errors`` is false)."""
    if not response.get("errors"):
        return []
    failures = []
    for position, item in enumerate(response.get("items", ())):
        result: Mapping[str, Any] = next(iter(item.values()), {})
        error = result.get("error")
        if error is None:
            continue
        if isinstance(error, Mapping):
            error_type, reason = str(error.get("type")), str(error.get("reason"))
        else:
            error_type, reason = "error", str(error)
        failures.append(
            BulkFailure(offset + position, int(result.get("status", 0)), error_type, reason)
        )
    return failures


def _text_clause(query: str, filters: SearchFilters, tag_terms: Sequence[str]) -> Body:
    should: list[Body] = [
        {"match": {"summary": {"query": query, "operator": "or"}}},
        {"match": {"detail": {"query": query, "operator": "or"}}},
    ]
    if tag_terms:
        should.append({"terms": {"tags": list(tag_terms), "boost": TAG_MATCH_BOOST}})
    return {
        "bool": {
            "should": should,
            "minimum_should_match": 1,
            "filter": filters_clause(filters),
        }
    }


def _knn_clause(vector: Sequence[float], filters: SearchFilters, k: int) -> Body:
    if not vector:
        raise InvalidInputError([FieldProblem("vector", "must not be empty")])
    if not all(math.isfinite(x) for x in vector):
        raise InvalidInputError([FieldProblem("vector", "must contain only finite numbers")])
    return {
        "knn": {
            EMBEDDING_FIELD: {
                "vector": [float(x) for x in vector],
                "k": k,
                "filter": {"bool": {"filter": filters_clause(filters)}},
            }
        }
    }


def check_size(size: int) -> None:
    """Refuse a negative hit count."""
    if size < 0:
        raise InvalidInputError([FieldProblem("size", "must be at least 0")])
