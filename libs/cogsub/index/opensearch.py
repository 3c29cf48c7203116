"""The OpenSearch adapter of the MemoryIndex port (opensearch-py's async client).

Request bodies come from :mod:`cogsub.index.opensearch_queries`; this module
only sends them and turns answers into our types. Vendor exceptions are
translated in :mod:`cogsub.index.opensearch_errors`; conditional updates,
decays and deletes live in :mod:`cogsub.index.opensearch_writes`, recall's
composed requests in :mod:`cogsub.index.opensearch_recall` and listing in
:mod:`cogsub.index.opensearch_listing`.

Writes use ``refresh="wait_for"`` so a document is searchable when the call
returns (the port's contract), without forcing a segment per request.

A document's ``_id`` is ``queries.document_id(bank_id, event_id)`` (``bank|event``),
so the same event id in two banks is two documents; event ids are read back
from ``_source``, never from ``_id``. An index written before that had
``_id = event_id``: its documents are found by searches but not by id (get,
update, delete), and an upsert would add a second copy beside each, so
``ensure`` refuses it (its oldest document tells). Rebuild it from the archive
into a new index version (``cogsub replay --reembed <kind>``, see
docs/operations.md) instead of writing to it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import opensearchpy
import structlog

from cogsub.core.documents import EXPERIENCE_INDEX, IndexDocument
from cogsub.core.errors import (
    CogsubError,
    ConfigurationError,
    FieldProblem,
    InvalidInputError,
    NotFoundError,
)
from cogsub.index import opensearch_queries as queries
from cogsub.index.opensearch_errors import (
    mget_item_error,
    raise_for_failures,
    stored_document,
    translated,
)
from cogsub.index.opensearch_listing import OpenSearchListing
from cogsub.index.opensearch_recall import composed_candidates
from cogsub.index.opensearch_writes import ConditionalWrites
from cogsub.index.ports import (
    Candidates,
    DecayedPage,
    DecayStep,
    DocumentPatch,
    Hit,
    NeighbourWindow,
    SearchFilters,
    check_decay_page_size,
)
from cogsub.index.text_query import join_terms, query_terms

log = structlog.get_logger(__name__)

_INVALID_NAME = "invalid_index_name_exception"
_ALREADY_EXISTS = "resource_already_exists_exception"
#: What an ownership read needs of a document: its bank, and its event id (not in ``_id``).
_OWNER_FIELDS = "bank_id,event_id"


class OpenSearchMemoryIndex(OpenSearchListing):
    """Memory documents in one OpenSearch index: BM25 on ``summary`` and ``detail``, HNSW vectors.

    Args:
        url: One node's URL (``http://127.0.0.1:9200``); or give ``hosts``.
        hosts: Several node URLs for a cluster.
        index: Index name; the seed's ``experience_events`` by default.
        username: Basic-auth user (never logged).
        password: Basic-auth password (never logged).
        verify_certs: Check TLS certificates (turn off only for self-signed test clusters).
        ca_certs: A CA bundle for a private certificate authority.
        timeout: Seconds per request.
        max_retries: Transport retries on connection errors (never on timeouts).
        shards: Primary shards when ``ensure`` creates the index.
        replicas: Replicas when ``ensure`` creates the index.
        bulk_size: Documents per bulk request.
        knn_candidates: Minimum ``k`` of a k-NN query (more candidates, better recall).
        max_update_attempts: Optimistic-concurrency retries of ``update``/``delete``.
        client: An already-built client (then the connection arguments are ignored).

    The caller closes the index with ``close`` (or ``async with``).
    """

    def __init__(
        self,
        *,
        url: str | None = None,
        hosts: Sequence[str] | None = None,
        index: str = EXPERIENCE_INDEX,
        username: str | None = None,
        password: str | None = None,
        verify_certs: bool = True,
        ca_certs: str | None = None,
        timeout: float = 10.0,
        max_retries: int = 2,
        shards: int = 1,
        replicas: int = 0,
        bulk_size: int = 500,
        knn_candidates: int = 100,
        max_update_attempts: int = 50,
        client: opensearchpy.AsyncOpenSearch | None = None,
    ) -> None:
        if client is None:
            if (url is None) == (hosts is None):
                raise ConfigurationError("give exactly one of url= or hosts=")
            if (username is None) != (password is None):
                raise ConfigurationError("give both username= and password=, or neither")
            client = opensearchpy.AsyncOpenSearch(
                hosts=[url] if url is not None else list(hosts or ()),
                http_auth=(username, password) if username is not None else None,
                verify_certs=verify_certs,
                # Turning verification off is an explicit choice; do not warn on every connection.
                ssl_show_warn=verify_certs,
                ca_certs=ca_certs,
                timeout=timeout,
                max_retries=max_retries,
                # A conditional write that timed out may have applied: retrying it
                # would meet a 409, re-read, and apply an increment twice.
                retry_on_timeout=False,
            )
        if bulk_size < 1 or max_update_attempts < 1 or knn_candidates < 1:
            raise ConfigurationError("bulk_size, knn_candidates, max_update_attempts must be >= 1")
        self._client = client
        self._index = index
        self._shards = shards
        self._replicas = replicas
        self._bulk_size = bulk_size
        self._knn_candidates = knn_candidates
        self._dimension: int | None = None
        self._writes = ConditionalWrites(
            client, index, bulk_size=bulk_size, max_attempts=max_update_attempts
        )

    def __repr__(self) -> str:
        # No URL: it may carry credentials.
        return f"OpenSearchMemoryIndex(index={self._index!r})"

    @property
    def index_name(self) -> str:
        """The OpenSearch index this adapter reads and writes."""
        return self._index

    async def __aenter__(self) -> OpenSearchMemoryIndex:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def ensure(self, *, dimension: int) -> None:
        """Create the index for ``dimension``-d vectors, or check the existing one.

        Raises:
            ConfigurationError: the index exists with another embedding dimension, or
                holds documents under their event id alone (see the module docstring).
        """
        body = queries.index_template(dimension, shards=self._shards, replicas=self._replicas)
        self._dimension = None
        with translated("create index", bad_request=ConfigurationError):
            try:
                await self._client.indices.create(index=self._index, body=body)
                log.info("opensearch_index_created", index=self._index, dimension=dimension)
            except opensearchpy.RequestError as exc:
                # Another process may have created it first: then check what it made.
                if exc.error != _ALREADY_EXISTS and not (
                    exc.error == _INVALID_NAME
                    and await self._client.indices.exists_alias(name=self._index)
                ):
                    raise  # (an alias of that name is an index that exists, under another name)
        existing = await self._mapped_dimension()
        if existing is None:
            raise ConfigurationError(f"index {self._index!r} has no knn_vector embedding field")
        if existing != dimension:
            raise ConfigurationError(
                f"index {self._index!r} holds embeddings of dimension {existing}, not {dimension}"
            )
        await self._refuse_event_id_documents()
        self._dimension = existing

    async def _refuse_event_id_documents(self) -> None:
        """Refuse an index written when ``_id`` was the event id alone: by id, this adapter
        would find none of its documents, and an upsert would add a second copy of each."""
        with translated("search"):
            response = await self._client.search(
                index=self._index, body=queries.oldest_document_query()
            )
        if not all(queries.under_document_id(hit) for hit in response["hits"]["hits"]):
            raise ConfigurationError(
                f"index {self._index!r} holds documents under their event id alone (written"
                " before ids named the bank): rebuild it with `cogsub replay --reembed <kind>`"
                " (docs/operations.md)"
            )

    async def upsert(self, documents: Sequence[IndexDocument]) -> None:
        """Index ``documents`` by (``bank_id``, ``event_id``) in bulk; searchable on return.

        Raises:
            ConfigurationError: an embedding whose length is not the index's dimension.
            InvalidInputError: a document the mapping refuses (an unparseable date...),
                or a bank id holding ``queries.ID_SEPARATOR``; nothing is written.
            UnavailableError: the cluster is down or throttling (retry the whole call).
        """
        if not documents:
            return
        dimension = await self._required_dimension()
        for doc in documents:
            if len(doc.embedding) != dimension:
                # The index, not the document, fixes the dimension: a mismatch means
                # the embedder and the index disagree (the same error as in ensure).
                raise ConfigurationError(
                    f"document {doc.event_id!r} has a {len(doc.embedding)}-dimensional"
                    f" embedding; index {self._index!r} holds {dimension}-dimensional vectors"
                )
        # Every batch is built before the first is sent: a refused bank id writes nothing.
        starts = range(0, len(documents), self._bulk_size)
        batches = {
            s: queries.bulk_index_lines(self._index, documents[s : s + self._bulk_size])
            for s in starts
        }
        for start, lines in batches.items():
            with translated("bulk", bad_request=InvalidInputError):
                response = await self._client.bulk(body=lines, refresh=queries.REFRESH)
            raise_for_failures(queries.bulk_failures(response, offset=start))

    async def get(self, bank_id: str, event_id: str) -> IndexDocument | None:
        """The document of ``bank_id`` with ``event_id``, or ``None``."""
        found = await self._writes.versioned(bank_id, event_id)
        return None if found is None else found[0]

    async def present(self, bank_id: str, event_ids: Sequence[str]) -> set[str]:
        """Which of ``event_ids`` are documents of ``bank_id``: an ``mget`` per ``bulk_size``
        ids, of the bank field alone, read in real time (a search would miss fresh writes)."""
        wanted = self._document_ids(bank_id, event_ids)
        found: set[str] = set()
        for start in range(0, len(wanted), self._bulk_size):
            chunk = wanted[start : start + self._bulk_size]
            try:
                with translated("mget"):
                    response = await self._client.mget(
                        index=self._index, body={"ids": chunk}, _source_includes=_OWNER_FIELDS
                    )
            except NotFoundError:  # no index yet: no documents
                return found
            for doc in response["docs"]:
                if "error" in doc:  # absent is not known: the id was not read
                    raise mget_item_error(doc)
                if doc.get("found") and doc["_source"].get("bank_id") == bank_id:
                    found.add(str(doc["_source"]["event_id"]))
        return found

    async def search_text(self, query: str, filters: SearchFilters, *, size: int) -> list[Hit]:
        """BM25 hits on ``summary`` and ``detail`` plus exact tag matches; no terms: no hits."""
        queries.check_size(size)
        terms = query_terms(query)
        if not terms or size == 0:
            return []
        body = queries.text_query(join_terms(terms), filters, size, tag_terms=terms)
        return await self._search(body, filters.bank_id, "search")

    async def search_vector(
        self, vector: Sequence[float], filters: SearchFilters, *, size: int
    ) -> list[Hit]:
        """Approximate nearest neighbours (HNSW, cosine); needs the k-NN plugin.

        Raises:
            InvalidInputError: a vector of the wrong length.
            ConfigurationError: the cluster cannot run k-NN queries.
        """
        queries.check_size(size)
        dimension = await self._required_dimension()
        if len(vector) != dimension:
            raise InvalidInputError([FieldProblem("vector", f"must have {dimension} values")])
        if size == 0:
            return []
        k = max(size, self._knn_candidates)
        body = queries.knn_query(vector, filters, size, k=k)
        return await self._search(
            body, filters.bank_id, "k-NN search", bad_request=ConfigurationError
        )

    async def search_both(
        self,
        query: str,
        vector: Sequence[float],
        filters: SearchFilters,
        *,
        text_size: int,
        vector_size: int,
    ) -> tuple[list[Hit], list[Hit]]:
        """``search_text`` and ``search_vector`` answered by one ``_msearch``.

        Raises:
            InvalidInputError: a vector of the wrong length.
            ConfigurationError: the cluster cannot run k-NN queries.
        """
        queries.check_size(text_size)
        queries.check_size(vector_size)
        searches: list[tuple[str, dict[str, Any]]] = []
        terms = query_terms(query)
        if terms and text_size:
            body = queries.text_query(join_terms(terms), filters, text_size, tag_terms=terms)
            searches.append(("text", body))
        dimension = await self._required_dimension()
        if len(vector) != dimension:
            raise InvalidInputError([FieldProblem("vector", f"must have {dimension} values")])
        if vector_size:
            k = max(vector_size, self._knn_candidates)
            searches.append(("vector", queries.knn_query(vector, filters, vector_size, k=k)))
        kinds = [kind for kind, _ in searches]
        found = dict(zip(kinds, await self._msearch(searches, filters), strict=True))
        return found.get("text", []), found.get("vector", [])

    async def _msearch(
        self, searches: Sequence[tuple[str, dict[str, Any]]], filters: SearchFilters
    ) -> list[list[Hit]]:
        """The hits of each (kind, body) search, sent as one ``_msearch``."""
        if not searches:
            return []
        lines: list[dict[str, Any]] = []
        for _, body in searches:
            lines += [{"index": self._index}, body]
        with translated("recall search"):
            response = await self._client.msearch(body=lines)
        answers = []
        for (kind, _), answer in zip(searches, response["responses"], strict=True):
            if "error" in answer:
                refused = ConfigurationError if kind == "vector" else CogsubError
                raise refused(f"opensearch refused a {kind} search: {answer['error']}")
            hits = []
            for raw in answer["hits"]["hits"]:
                doc = stored_document(raw["_source"])
                if doc.bank_id != filters.bank_id:  # guards the query builder, as _search does
                    raise CogsubError(f"opensearch returned a document of bank {doc.bank_id!r}")
                hits.append(Hit(document=doc, score=float(raw["_score"])))
            answers.append(hits)
        return answers

    async def update(self, bank_id: str, event_id: str, patch: DocumentPatch) -> IndexDocument:
        """Apply ``patch`` with compare-and-set on the version read (``opensearch_writes``)."""
        return await self._writes.update(bank_id, event_id, patch)

    async def update_many(self, bank_id: str, patches: Mapping[str, DocumentPatch]) -> int:
        """``update`` for each patch, side by side; how many were found."""
        return await self._writes.update_many(bank_id, patches)

    async def decay_page(
        self, bank_id: str, step: DecayStep, *, size: int, after: str | None = None
    ) -> DecayedPage:
        """The page's two signals (not its documents), then one ``_bulk`` of partial updates.

        Each update holds only at the version read, so a document another writer
        changed in between is read again and decayed from its new value.

        Raises:
            ConflictError: still losing races after ``max_update_attempts``.
        """
        check_decay_page_size(size)
        body = queries.decay_page_query(bank_id, size, after=after)
        with translated("decay page"):
            response = await self._client.search(index=self._index, body=body)
        hits = response["hits"]["hits"]
        if not hits:
            return DecayedPage(0, None)
        decayed = await self._writes.decay(bank_id, step, hits)
        return DecayedPage(decayed, str(hits[-1]["_source"]["event_id"]))

    async def delete(self, bank_id: str, event_id: str) -> bool:
        """Remove the document if it belongs to ``bank_id``; ``True`` if it did."""
        return await self.delete_many(bank_id, [event_id]) == 1

    async def delete_many(self, bank_id: str, event_ids: Sequence[str]) -> int:
        """Remove the documents ``event_ids`` of ``bank_id``; how many were removed.

        Per ``bulk_size`` ids: one ``mget`` of their ``_id`` in this bank (at which
        version) and one ``_bulk`` of deletes conditional on that version; another
        bank's document of the same event id has another ``_id``, so it is never
        touched. Ids that lost a race are read and tried again.

        Raises:
            ConflictError: still losing races after ``max_update_attempts``.
            UnavailableError: the cluster is down or throttling (call again: idempotent).
        """
        return await self._writes.delete(bank_id, self._document_ids(bank_id, event_ids))

    async def recall_candidates(
        self,
        query_text: str,
        query_vector: Sequence[float],
        filters: SearchFilters,
        *,
        text_pool: int,
        vector_pool: int,
        neighbours: NeighbourWindow | None = None,
        procedure_versions: bool = False,
    ) -> Candidates:
        """Recall's reads, composed of this adapter's calls (not yet one request:
        :mod:`cogsub.index.opensearch_recall` says why)."""
        return await composed_candidates(
            self,
            query_text,
            query_vector,
            filters,
            text_pool=text_pool,
            vector_pool=vector_pool,
            neighbours=neighbours,
            procedure_versions=procedure_versions,
        )

    async def neighbours(
        self,
        filters: SearchFilters,
        anchors: Sequence[IndexDocument],
        *,
        each_side: int,
        within_s: float | None = None,
        exclude: Collection[str] = (),
    ) -> list[IndexDocument]:
        """The session neighbours of each anchor: one ``_msearch`` of two sorted searches each."""
        queries.check_size(each_side)
        placed = [a for a in anchors if a.session_id is not None and a.bank_id == filters.bank_id]
        if each_side == 0 or not placed or frozenset() in (filters.fact_types, filters.tags_any):
            return []
        lines: list[dict[str, Any]] = []
        for anchor in placed:
            for body in queries.neighbour_queries(filters, anchor, each_side, within_s=within_s):
                lines += [{"index": self._index}, body]
        with translated("neighbour search"):
            response = await self._client.msearch(body=lines)
        taken = {*exclude, *(a.event_id for a in placed)}
        found: list[IndexDocument] = []
        for answer in response["responses"]:
            if "error" in answer:
                raise CogsubError(f"opensearch refused a neighbour search: {answer['error']}")
            for raw in answer["hits"]["hits"]:
                doc = stored_document(raw["_source"])
                if doc.bank_id != filters.bank_id:
                    raise CogsubError(f"opensearch returned a document of bank {doc.bank_id!r}")
                if doc.event_id not in taken:
                    taken.add(doc.event_id)
                    found.append(doc)
        return found

    async def scan(
        self, filters: SearchFilters, *, size: int, after: str | None = None
    ) -> list[IndexDocument]:
        """Documents matching ``filters`` sorted by ``event_id``, after the cursor."""
        queries.check_size(size)
        return await self._listed(filters, size, queries.scan_query(filters, size, after=after))

    async def scan_in_replay_order(
        self, filters: SearchFilters, *, size: int, after: IndexDocument | None = None
    ) -> list[IndexDocument]:
        """Documents matching ``filters`` in replay order, after the cursor's place."""
        queries.check_size(size)
        body = queries.replay_order_query(filters, size, after=after)
        return await self._listed(filters, size, body)

    async def _listed(
        self, filters: SearchFilters, size: int, body: queries.Body
    ) -> list[IndexDocument]:
        """The documents a listing query finds (a scan's, not a search's: no scores)."""
        if size == 0 or filters.fact_types == frozenset() or filters.tags_any == frozenset():
            return []
        with translated("scan"):
            response = await self._client.search(index=self._index, body=body)
        docs = [stored_document(raw["_source"]) for raw in response["hits"]["hits"]]
        if any(doc.bank_id != filters.bank_id for doc in docs):
            raise CogsubError("opensearch returned a document of another bank")
        return docs

    async def promote(self, alias: str) -> list[str]:
        """Point ``alias`` at this index, in one atomic alias update; returns what it pointed at.

        Readers and writers that use ``alias`` switch over at once. A concrete index
        named ``alias`` (a deployment from before versioned indices) is deleted in the
        same update, since an alias cannot share its name; versioned indices the alias
        pointed at before are left in place for a rollback.
        """
        with translated("update aliases"):
            concrete = bool(await self._client.indices.exists(index=alias)) and not bool(
                await self._client.indices.exists_alias(name=alias)
            )
            previous: list[str] = []
            if not concrete and await self._client.indices.exists_alias(name=alias):
                previous = sorted(await self._client.indices.get_alias(name=alias))
            actions: list[dict[str, Any]] = [
                {"remove": {"index": name, "alias": alias}} for name in previous
            ]
            if concrete:
                actions.append({"remove_index": {"index": alias}})
            actions.append({"add": {"index": self._index, "alias": alias}})
            await self._client.indices.update_aliases(body={"actions": actions})
        log.info("opensearch_alias_promoted", alias=alias, index=self._index, previous=previous)
        return [alias] if concrete else previous

    async def count(self, bank_id: str | None = None) -> int:
        """Documents in ``bank_id``, or in every bank."""
        body = queries.count_query(bank_id)
        with translated("count"):
            response = await self._client.count(index=self._index, body=body)
        return int(response["count"])

    async def close(self) -> None:
        """Close the client's connections (idempotent)."""
        await self._client.close()

    async def _search(
        self,
        body: dict[str, Any],
        bank_id: str,
        operation: str,
        *,
        bad_request: type[CogsubError] = CogsubError,
    ) -> list[Hit]:
        with translated(operation, bad_request=bad_request):
            response = await self._client.search(index=self._index, body=body)
        hits = []
        for raw in response["hits"]["hits"]:
            doc = stored_document(raw["_source"])
            if doc.bank_id != bank_id:  # the query filters by bank; this only guards its builder
                raise CogsubError(f"opensearch returned a document of bank {doc.bank_id!r}")
            hits.append(Hit(document=doc, score=float(raw["_score"])))
        return hits

    def _document_ids(self, bank_id: str, event_ids: Sequence[str]) -> list[str]:
        """The ``_id`` of each distinct event id in ``bank_id``, in order."""
        # An empty event id is no document's.
        return [queries.document_id(bank_id, e) for e in dict.fromkeys(event_ids) if e]

    async def _mapped_dimension(self) -> int | None:
        """The index's embedding dimension; first, the fields this code added mapped on it."""
        with translated("get mapping"):
            mapping = await self._client.indices.get_mapping(index=self._index)
        dimension = queries.mapped_dimension(mapping, self._index)
        missing = queries.unmapped_fields(mapping, self._index)
        if dimension is not None and missing:  # (an index without vectors is not ours)
            with translated("put mapping", bad_request=ConfigurationError):
                await self._client.indices.put_mapping(
                    index=self._index, body={"properties": missing}
                )
            log.info("opensearch_mapping_extended", index=self._index, fields=sorted(missing))
        return dimension

    async def _required_dimension(self) -> int:
        # Checked before writing: a bulk into a missing index would auto-create
        # it with dynamic mappings and no vector field.
        if self._dimension is None:
            try:
                dimension = await self._mapped_dimension()
            except NotFoundError:
                raise ConfigurationError(
                    f"index {self._index!r} does not exist; call ensure(dimension=...) first"
                ) from None
            if dimension is None:
                raise ConfigurationError(f"index {self._index!r} has no knn_vector embedding")
            self._dimension = dimension
        return self._dimension
