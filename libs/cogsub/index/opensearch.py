"""The OpenSearch adapter of the MemoryIndex port (opensearch-py's async client).

Request bodies come from :mod:`cogsub.index.opensearch_queries`; this module
only sends them and turns answers and vendor exceptions into our types. Every
vendor exception is translated in :func:`_translated`, by exception type:

    opensearchpy.ConnectionError / ConnectionTimeout  -> UnavailableError
    TransportError 429 or 5xx                          -> UnavailableError
    AuthenticationException / AuthorizationException  -> ConfigurationError
    NotFoundError (404)                                -> NotFoundError
    ConflictError (409)                                -> ConflictError
    RequestError (400)                                 -> the caller's ``bad_request`` class
    any other OpenSearchException                      -> CogsubError

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

import asyncio
import random
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import opensearchpy
import structlog
from pydantic import ValidationError

from cogsub.core.documents import EXPERIENCE_INDEX, IndexDocument
from cogsub.core.errors import (
    CogsubError,
    ConfigurationError,
    ConflictError,
    FieldProblem,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
)
from cogsub.index import opensearch_queries as queries
from cogsub.index.opensearch_listing import OpenSearchListing
from cogsub.index.opensearch_recall import composed_candidates
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
_REFRESH = "wait_for"
#: Documents ``update_many`` patches at once (each is a get and a conditional index).
_UPDATE_CONCURRENCY = 16
#: What an ownership read needs of a document: its bank, and its event id (not in ``_id``).
_OWNER_FIELDS = "bank_id,event_id"


@contextmanager
def _translated(operation: str, *, bad_request: type[CogsubError] = CogsubError) -> Iterator[None]:
    """Raise our error for any opensearch-py error escaping the block."""
    try:
        yield
    except opensearchpy.ConnectionError as exc:  # ConnectionTimeout and SSLError included
        message = f"opensearch {operation}: cannot reach the cluster ({exc.error})"
        raise UnavailableError(message) from exc
    except (opensearchpy.AuthenticationException, opensearchpy.AuthorizationException) as exc:
        message = f"opensearch {operation}: credentials refused ({exc.status_code})"
        raise ConfigurationError(message) from exc
    except opensearchpy.NotFoundError as exc:
        raise NotFoundError(f"opensearch {operation}: {exc.error}") from exc
    except opensearchpy.ConflictError as exc:
        raise ConflictError(f"opensearch {operation}: {exc.error}") from exc
    except opensearchpy.RequestError as exc:
        detail = f"opensearch {operation} rejected: {exc}"
        if issubclass(bad_request, InvalidInputError):
            raise bad_request([FieldProblem("request", detail)]) from exc
        raise bad_request(detail) from exc
    except opensearchpy.TransportError as exc:
        status = exc.status_code
        message = f"opensearch {operation}: status {status} ({exc.error})"
        if isinstance(status, int) and (status == 429 or status >= 500):
            raise UnavailableError(message) from exc
        raise CogsubError(message) from exc
    except opensearchpy.OpenSearchException as exc:
        raise CogsubError(f"opensearch {operation}: {exc}") from exc


class OpenSearchMemoryIndex(OpenSearchListing):
    """Memory documents in one OpenSearch index: BM25 on ``summary``, HNSW vectors.

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

    _translated = staticmethod(_translated)  # for the OpenSearchListing calls

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
        self._max_update_attempts = max_update_attempts
        self._dimension: int | None = None

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
        with _translated("create index", bad_request=ConfigurationError):
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
        with _translated("search"):
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
            with _translated("bulk", bad_request=InvalidInputError):
                response = await self._client.bulk(body=lines, refresh=_REFRESH)
            _raise_for_failures(queries.bulk_failures(response, offset=start))

    async def get(self, bank_id: str, event_id: str) -> IndexDocument | None:
        """The document of ``bank_id`` with ``event_id``, or ``None``."""
        found = await self._get_versioned(bank_id, event_id)
        return None if found is None else found[0]

    async def present(self, bank_id: str, event_ids: Sequence[str]) -> set[str]:
        """Which of ``event_ids`` are documents of ``bank_id``: an ``mget`` per ``bulk_size``
        ids, of the bank field alone, read in real time (a search would miss fresh writes)."""
        wanted = self._document_ids(bank_id, event_ids)
        found: set[str] = set()
        for start in range(0, len(wanted), self._bulk_size):
            chunk = wanted[start : start + self._bulk_size]
            try:
                with _translated("mget"):
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
        """BM25 hits on ``summary`` plus exact tag matches; no terms (only punctuation): no hits."""
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
        with _translated("recall search"):
            response = await self._client.msearch(body=lines)
        answers = []
        for (kind, _), answer in zip(searches, response["responses"], strict=True):
            if "error" in answer:
                refused = ConfigurationError if kind == "vector" else CogsubError
                raise refused(f"opensearch refused a {kind} search: {answer['error']}")
            hits = []
            for raw in answer["hits"]["hits"]:
                doc = _document(raw["_source"])
                if doc.bank_id != filters.bank_id:  # guards the query builder, as _search does
                    raise CogsubError(f"opensearch returned a document of bank {doc.bank_id!r}")
                hits.append(Hit(document=doc, score=float(raw["_score"])))
            answers.append(hits)
        return answers

    async def update(self, bank_id: str, event_id: str, patch: DocumentPatch) -> IndexDocument:
        """Apply ``patch`` with compare-and-set on ``_seq_no``, retrying lost races.

        Raises:
            NotFoundError: no such document in ``bank_id``.
            InvalidInputError: the patched document breaks a bound (importance > 1...).
            ConflictError: still losing races after ``max_update_attempts``.
        """
        for _ in range(self._max_update_attempts):
            found = await self._get_versioned(bank_id, event_id)
            if found is None:
                raise NotFoundError(f"no document {event_id!r} in bank {bank_id!r}")
            current, seq_no, primary_term = found
            updated = patch.applied_to(current)
            if updated == current:
                return current
            try:
                with _translated("update", bad_request=InvalidInputError):
                    await self._client.index(
                        index=self._index,
                        id=queries.document_id(bank_id, event_id),
                        body=updated.to_source(),
                        if_seq_no=seq_no,
                        if_primary_term=primary_term,
                        refresh=_REFRESH,
                    )
            except ConflictError:
                await _backoff()
                continue
            return updated
        raise ConflictError(
            f"update of {event_id!r} lost {self._max_update_attempts} races in a row"
        )

    async def update_many(self, bank_id: str, patches: Mapping[str, DocumentPatch]) -> int:
        """``update`` for each patch, ``_UPDATE_CONCURRENCY`` at a time; how many were found.

        The compare-and-set of ``update`` is per document, so its updates run side by
        side and share the index's refreshes instead of waiting for one each in turn.
        """
        limit = asyncio.Semaphore(_UPDATE_CONCURRENCY)

        async def one(event_id: str, patch: DocumentPatch) -> bool:
            async with limit:
                try:
                    await self.update(bank_id, event_id, patch)
                except NotFoundError:
                    return False
                return True

        found = await asyncio.gather(*(one(i, p) for i, p in patches.items()))
        return sum(found)

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
        with _translated("decay page"):
            response = await self._client.search(index=self._index, body=body)
        hits = response["hits"]["hits"]
        if not hits:
            return DecayedPage(0, None)
        decayed = await self._decay_hits(bank_id, step, hits)
        return DecayedPage(decayed, str(hits[-1]["_source"]["event_id"]))

    async def _decay_hits(self, bank_id: str, step: DecayStep, hits: list[Any]) -> int:
        decayed = 0
        for _ in range(self._max_update_attempts):
            lines = queries.bulk_decay_lines(self._index, hits, step)
            conflicted: list[str] = []
            for start in range(0, len(lines), 2 * self._bulk_size):
                chunk = lines[start : start + 2 * self._bulk_size]
                with _translated("decay page"):
                    response = await self._client.bulk(body=chunk, refresh=_REFRESH)
                failures = queries.bulk_failures(response)
                # 404: deleted since the page was read (forgotten), so nothing to decay;
                # 409: changed since, so read again and decay what it is now.
                _raise_for_failures([f for f in failures if f.status not in (404, 409)])
                decayed += len(chunk) // 2 - len(failures)
                conflicted += [
                    chunk[2 * f.position]["update"]["_id"] for f in failures if f.status == 409
                ]
            if not conflicted:
                return decayed
            await _backoff()
            hits = await self._decay_signals(bank_id, conflicted)
        raise ConflictError(f"decay of a page lost {self._max_update_attempts} races in a row")

    async def _decay_signals(self, bank_id: str, doc_ids: list[str]) -> list[Any]:
        """The decay signals and versions of documents by ``_id``, read in real time, of this
        bank only.

        A search would answer from the last refresh, which may not hold the write that
        won the race yet: the same stale version, and the same conflict, again.
        """
        with _translated("mget"):
            response = await self._client.mget(
                index=self._index,
                body={"ids": doc_ids},
                _source_includes="bank_id,decay_factor,event_id,timestamp",
            )
        return [
            found
            for found in response["docs"]
            if found.get("found") and found["_source"].get("bank_id") == bank_id
        ]

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
        wanted = self._document_ids(bank_id, event_ids)
        deleted = 0
        for start in range(0, len(wanted), self._bulk_size):
            deleted += await self._delete_chunk(bank_id, wanted[start : start + self._bulk_size])
        return deleted

    async def _delete_chunk(self, bank_id: str, doc_ids: list[str]) -> int:
        deleted = 0
        pending = doc_ids
        for _ in range(self._max_update_attempts):
            versions = await self._bank_versions(bank_id, pending)
            if not versions:
                return deleted
            lines = queries.bulk_delete_lines(self._index, versions)
            with _translated("bulk delete"):
                response = await self._client.bulk(body=lines, refresh=_REFRESH)
            pending, refused = [], []
            for failure in queries.bulk_failures(response):
                if failure.status == 409:  # changed since the mget: read it again
                    pending.append(lines[failure.position]["delete"]["_id"])
                else:
                    refused.append(failure)
            _raise_for_failures(refused)
            deleted += sum(
                1 for item in response["items"] if item.get("delete", {}).get("result") == "deleted"
            )
            if not pending:
                return deleted
            await _backoff()
        raise ConflictError(
            f"delete of {len(pending)} documents lost {self._max_update_attempts} races"
        )

    async def _bank_versions(self, bank_id: str, doc_ids: list[str]) -> dict[str, tuple[int, int]]:
        """``_id -> (_seq_no, _primary_term)`` of this bank's documents among ``doc_ids``."""
        try:
            with _translated("mget"):
                response = await self._client.mget(
                    index=self._index, body={"ids": doc_ids}, _source_includes="bank_id"
                )
        except NotFoundError:  # no index yet: nothing in it to delete
            return {}
        return {
            found["_id"]: (int(found["_seq_no"]), int(found["_primary_term"]))
            for found in response["docs"]
            if found.get("found") and found["_source"].get("bank_id") == bank_id
        }

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
        with _translated("neighbour search"):
            response = await self._client.msearch(body=lines)
        taken = {*exclude, *(a.event_id for a in placed)}
        found: list[IndexDocument] = []
        for answer in response["responses"]:
            if "error" in answer:
                raise CogsubError(f"opensearch refused a neighbour search: {answer['error']}")
            for raw in answer["hits"]["hits"]:
                doc = _document(raw["_source"])
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
        with _translated("scan"):
            response = await self._client.search(index=self._index, body=body)
        docs = [_document(raw["_source"]) for raw in response["hits"]["hits"]]
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
        with _translated("update aliases"):
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
        with _translated("count"):
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
        with _translated(operation, bad_request=bad_request):
            response = await self._client.search(index=self._index, body=body)
        hits = []
        for raw in response["hits"]["hits"]:
            doc = _document(raw["_source"])
            if doc.bank_id != bank_id:  # the query filters by bank; this only guards its builder
                raise CogsubError(f"opensearch returned a document of bank {doc.bank_id!r}")
            hits.append(Hit(document=doc, score=float(raw["_score"])))
        return hits

    def _document_ids(self, bank_id: str, event_ids: Sequence[str]) -> list[str]:
        """The ``_id`` of each distinct event id in ``bank_id``, in order."""
        # An empty event id is no document's.
        return [queries.document_id(bank_id, e) for e in dict.fromkeys(event_ids) if e]

    async def _get_versioned(
        self, bank_id: str, event_id: str
    ) -> tuple[IndexDocument, int, int] | None:
        try:
            with _translated("get"):
                doc_id = queries.document_id(bank_id, event_id)
                response = await self._client.get(index=self._index, id=doc_id)
        except NotFoundError:
            return None
        doc = _document(response["_source"])
        if (doc.bank_id, doc.event_id) != (bank_id, event_id):
            return None
        return doc, int(response["_seq_no"]), int(response["_primary_term"])

    async def _mapped_dimension(self) -> int | None:
        with _translated("get mapping"):
            mapping = await self._client.indices.get_mapping(index=self._index)
        return queries.mapped_dimension(mapping, self._index)

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


def _document(source: Mapping[str, Any]) -> IndexDocument:
    try:
        return IndexDocument.model_validate(source)
    except ValidationError as exc:
        where = f"{source.get('event_id')!r} of bank {source.get('bank_id')!r}"
        raise CogsubError(f"stored document {where} is not an IndexDocument: {exc}") from exc


# Item errors of an mget that a later read may not meet: the shard or node, not the id.
_TRANSIENT_ITEM_ERRORS = frozenset(
    {
        "no_shard_available_action_exception",
        "unavailable_shards_exception",
        "node_not_connected_exception",
        "node_disconnected_exception",
        "circuit_breaking_exception",
        "rejected_execution_exception",
        "opensearch_rejected_execution_exception",
        "timeout_exception",
    }
)


def mget_item_error(doc: Mapping[str, Any]) -> CogsubError:
    """The error for an ``mget`` item that holds one: retryable where a shard could not answer."""
    error = doc.get("error")
    kind = str(error.get("type", "")) if isinstance(error, Mapping) else str(error)
    reason = error.get("reason", "") if isinstance(error, Mapping) else ""
    message = f"opensearch mget of {doc.get('_id')!r}: {kind} ({reason})"
    return UnavailableError(message) if kind in _TRANSIENT_ITEM_ERRORS else CogsubError(message)


def _raise_for_failures(failures: list[queries.BulkFailure]) -> None:
    """Raise for refused bulk items: retryable first, so a redelivery can fix them."""
    if not failures:
        return
    retryable = [f for f in failures if f.retryable]
    first = (retryable or failures)[0]
    summary = (
        f"opensearch bulk: {len(retryable or failures)} documents refused, first "
        f"documents[{first.position}] status {first.status} ({first.error_type}: {first.reason})"
    )
    if retryable:
        raise UnavailableError(summary)
    if all(f.status == 400 for f in failures):
        raise InvalidInputError(
            [
                FieldProblem(f"documents[{f.position}]", f"{f.error_type}: {f.reason}")
                for f in failures
            ]
        )
    if all(f.status == 409 for f in failures):
        raise ConflictError(summary)
    raise CogsubError(summary)


async def _backoff() -> None:
    # Jitter spreads out writers that lost the same race, so they do not collide again.
    await asyncio.sleep(random.uniform(0.0, 0.005))
