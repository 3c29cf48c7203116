"""Browsing for the OpenSearch adapter: newest-first keyset pages and bank summaries.

A page sorts on (``timestamp`` desc, ``event_id`` desc) and resumes with
``search_after`` at the cursor's key. ``timestamp`` is a ``date`` field, which
OpenSearch keeps in milliseconds: documents are ordered by the millisecond,
then by id. Every document has one place in that order, so a walk still lists
each document present for its whole length exactly once. Bank summaries are one
``composite`` aggregation over ``bank_id`` (paged by its ``after`` key), with
counts per fact type and the newest timestamp under each bank.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import ValidationError

from cogsub.core.derived import SUPERSEDED_BY_TAG
from cogsub.core.documents import IndexDocument
from cogsub.core.errors import CogsubError, FieldProblem, InvalidInputError
from cogsub.core.events import FactType, format_timestamp
from cogsub.core.listing import ListingKey
from cogsub.core.memory import PROCEDURE_TAG_PREFIX
from cogsub.index.opensearch_errors import translated
from cogsub.index.opensearch_queries import Body, check_size, filters_clause
from cogsub.index.ports import (
    BankCounts,
    SearchFilters,
    is_newest_version,
    newest_versions,
    procedure_of,
)

#: The bucket key of documents without a fact type (``missing_bucket`` answers ``null``).
_UNTYPED = None
#: Documents one scan reads while looking up a procedure's versions.
_VERSION_PAGE = 500


def newest_query(
    filters: SearchFilters, size: int, *, after: ListingKey | None, include_superseded: bool
) -> Body:
    """Documents matching ``filters`` newest first, strictly after ``after`` (no scoring)."""
    check_size(size)
    query: Body = {"filter": filters_clause(filters)}
    if not include_superseded:
        query["must_not"] = [{"prefix": {"tags": SUPERSEDED_BY_TAG}}]
    body: Body = {
        "size": size,
        "query": {"bool": query},
        "sort": [{"timestamp": "desc"}, {"event_id": "desc"}],
        "_source": {"excludes": ["embedding"]},
    }
    if after is not None:
        body["search_after"] = [epoch_ms(after.timestamp), after.event_id]
    return body


def bank_counts_query(bank_ids: Collection[str] | None, size: int, *, after: str | None) -> Body:
    """One composite aggregation page of banks in id order, each with its type counts."""
    check_size(size)
    composite: Body = {"size": max(size, 1), "sources": [{"bank": {"terms": {"field": "bank_id"}}}]}
    if after is not None:
        composite["after"] = {"bank": after}
    query: Body = {"match_all": {}}
    if bank_ids is not None:
        query = {"bool": {"filter": [{"terms": {"bank_id": sorted(set(bank_ids))}}]}}
    types = {"terms": {"field": "fact_type", "missing": "", "size": len(FactType) + 1}}
    return {
        "size": 0,
        "query": query,
        "aggs": {
            "banks": {
                "composite": composite,
                "aggs": {"types": types, "newest": {"max": {"field": "timestamp"}}},
            }
        },
    }


def bank_counts_from(response: Mapping[str, Any], size: int) -> list[BankCounts]:
    """The summaries in a ``bank_counts_query`` answer."""
    found = []
    for bucket in response["aggregations"]["banks"]["buckets"][:size]:
        counts: dict[FactType | None, int] = {}
        for typed in bucket["types"]["buckets"]:
            fact = FactType(typed["key"]) if typed["key"] else _UNTYPED
            counts[fact] = int(typed["doc_count"])
        newest = bucket["newest"].get("value_as_string") or _from_ms(bucket["newest"]["value"])
        found.append(BankCounts(str(bucket["key"]["bank"]), counts, newest))
    return found


def epoch_ms(timestamp: str) -> int:
    """Milliseconds since the epoch of an ISO-8601 timestamp (a ``date`` field's sort value).

    Raises:
        InvalidInputError: naming ``cursor`` when the text is not an aware ISO-8601 time.
    """
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        moment = None
    if moment is None or moment.tzinfo is None:
        rule = "must be a next_cursor returned by the previous page"
        raise InvalidInputError([FieldProblem("cursor", rule)])
    # Whole seconds, then the milliseconds: a float of the whole would round some up.
    whole = int(moment.replace(microsecond=0).timestamp())
    return whole * 1000 + moment.microsecond // 1000


def _from_ms(value: float | None) -> str | None:
    if value is None:
        return None
    return format_timestamp(datetime.fromtimestamp(value / 1000, tz=UTC))


def _listed_document(source: Mapping[str, Any], bank_id: str) -> IndexDocument:
    """A listed document, read without its embedding (pages leave it out of ``_source``)."""
    try:
        doc = IndexDocument.model_validate({**source, "embedding": []})
    except ValidationError as exc:
        where = f"{source.get('event_id')!r} of bank {source.get('bank_id')!r}"
        raise CogsubError(f"stored document {where} is not an IndexDocument: {exc}") from exc
    if doc.bank_id != bank_id:  # the query filters by bank; this only guards its builder
        raise CogsubError(f"opensearch returned a document of bank {doc.bank_id!r}")
    return doc


class _Adapter(Protocol):
    """What the listing calls need of ``OpenSearchMemoryIndex``."""

    _client: Any
    _index: str

    async def scan(
        self, filters: SearchFilters, *, size: int, after: str | None = None
    ) -> list[IndexDocument]: ...


async def _rows_after(
    index: _Adapter,
    filters: SearchFilters,
    size: int,
    after: ListingKey | None,
    include_superseded: bool,
) -> list[IndexDocument]:
    body = newest_query(filters, size, after=after, include_superseded=include_superseded)
    if size == 0 or filters.fact_types == frozenset() or filters.tags_any == frozenset():
        return []
    with translated("list"):
        response = await index._client.search(index=index._index, body=body)
    hits = response["hits"]["hits"]
    return [_listed_document(raw["_source"], filters.bank_id) for raw in hits]


async def _newest_versions(
    index: _Adapter, bank_id: str, docs: Sequence[IndexDocument], *, known: Collection[str]
) -> dict[str, int]:
    """The newest version in the bank of each procedure ``docs`` hold a version of (versions
    are procedures: only the bank's procedures are read)."""
    wanted = {found[0] for doc in docs if (found := procedure_of(doc.tags)) is not None}
    wanted -= set(known)
    if not wanted:
        return {}
    tags = frozenset(f"{PROCEDURE_TAG_PREFIX}{pid}" for pid in wanted)
    procedures = frozenset({FactType.PROCEDURE})
    filters = SearchFilters(bank_id=bank_id, fact_types=procedures, tags_any=tags)
    seen: list[list[str]] = []
    after: str | None = None
    while page := await index.scan(filters, size=_VERSION_PAGE, after=after):
        seen += [doc.tags for doc in page]
        after = page[-1].event_id
    return newest_versions(seen, wanted)


class OpenSearchListing:
    """The port's listing calls, mixed into ``OpenSearchMemoryIndex`` (kept out of its module)."""

    async def list_newest(
        self: _Adapter,
        filters: SearchFilters,
        *,
        size: int,
        after: ListingKey | None = None,
        include_superseded: bool = False,
    ) -> list[IndexDocument]:
        """Documents matching ``filters`` newest first, after the cursor; unless
        ``include_superseded``, without the superseded and without a procedure version
        older than another of the bank (dropped after the read, the page topped up)."""
        kept: list[IndexDocument] = []
        newest: dict[str, int] = {}  # looked up once per procedure for the whole call
        wanted, cursor = size, after
        while True:
            page = await _rows_after(self, filters, wanted, cursor, include_superseded)
            if include_superseded:
                return page
            newest.update(await _newest_versions(self, filters.bank_id, page, known=newest))
            kept += [doc for doc in page if is_newest_version(doc, newest)]
            if len(page) < wanted or len(kept) >= size:
                return kept
            wanted, cursor = size - len(kept), ListingKey(page[-1].timestamp, page[-1].event_id)

    async def bank_counts(
        self: _Adapter,
        bank_ids: Collection[str] | None = None,
        *,
        size: int,
        after: str | None = None,
    ) -> list[BankCounts]:
        """Banks holding documents, in id order after ``after``, summarised."""
        body = bank_counts_query(bank_ids, size, after=after)
        if size == 0 or bank_ids is not None and not bank_ids:
            return []
        with translated("bank counts"):
            response = await self._client.search(index=self._index, body=body)
        return bank_counts_from(response, size)
