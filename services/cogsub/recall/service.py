"""The memory service: retain through the pipeline, recall through hybrid policy-weighted ranking.

Retain publishes an ExperienceEvent to experience.raw and returns once the bus
has it durably (``wait=True``: once the index serves it), so the archive stays
the truth and every memory takes the same path as any experience.

Recall: BM25 and vector candidates (bounded pools) → fusion (contextual by
default: scores with neighbouring turns and query cues, see
:func:`cogsub.recall.ranking.contextual_fuse`; or reciprocal-rank) →
policy-weighted ranking (relevance, importance × decay, recency, reward,
retrieval-count reinforcement, session novelty) → newest procedure versions →
top ``k`` within ``max_tokens`` → texts from the archive. Returned memories get
their retrieval counts bumped in the background (coalesced by
:class:`~cogsub.recall.feedback.RetrievalFeedback`), never on the answer's path.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import islice
from typing import TYPE_CHECKING

import structlog

from cogsub.archive.ports import ArchiveStore
from cogsub.bus.ports import EventBus
from cogsub.core.derived import (
    PROOF_TAG,
    SUPERSEDED_BY_TAG,
    SUPERSEDES_TAG,
    VALID_TO_TAG,
    is_superseded,
    proof_count,
    supersession_key,
    tag_value,
    tag_values,
)
from cogsub.core.documents import SUMMARY_LENGTH, IndexDocument, indexed_text
from cogsub.core.errors import ConflictError, NotFoundError
from cogsub.core.events import ArchivedEvent, EventType, ExperienceEvent, format_timestamp
from cogsub.core.keys import object_key_for
from cogsub.core.memory import (
    FeedbackRequest,
    FeedbackSignal,
    MemoryHit,
    MemoryRecord,
    RecallRequest,
    RecallResponse,
    RetainRequest,
    RetainResult,
)
from cogsub.core.topics import EXPERIENCE_RAW
from cogsub.embeddings.cached import CachedEmbedder
from cogsub.embeddings.ports import Embedder
from cogsub.index.ports import DocumentPatch, MemoryIndex, NeighbourWindow, SearchFilters
from cogsub.recall.archived import Archived, ArchivedReads
from cogsub.recall.facets import recall_by_facets
from cogsub.recall.feedback import RetrievalFeedback
from cogsub.recall.per_document import PerDocument
from cogsub.recall.policy import RankingPolicy
from cogsub.recall.query import analyse_query, question_content, without_names
from cogsub.recall.ranking import (
    Budget,
    Pool,
    Scored,
    contextual_pool,
    estimate_tokens,
    fuse,
    is_current_version,
    procedure_version,
    rank_pool,
)
from cogsub.recall.retain import ProcedureLineage, event_for, new_memory_id, same_content_key
from cogsub.rerank import Blended, Reranking
from cogsub.telemetry.metrics import Metrics
from cogsub.telemetry.tracing import headers_with_context, tracer

if TYPE_CHECKING:  # a protocol only: the dead-letter watch is wired in by the runtime
    from cogsub.deadletters.letters import RejectionLookup

log = structlog.get_logger("cogsub.recall")

MAX_SESSIONS = 1_000
FEEDBACK_WEIGHTS = {FeedbackSignal.RETURNED: 1, FeedbackSignal.USED: 2, FeedbackSignal.HELPFUL: 3}
MAX_IDS_PER_SESSION = 10_000
#: Text hits searched for an identical memory before a retain without an id is stored.
IDENTICAL_POOL = 20
#: An identical retain counts as the memory being met again: one more use, decay restored.
REINFORCED_BY_RETAIN = DocumentPatch(retrieval_count_increment=1, decay_factor=1.0)
#: Whether a candidate lost a conflict, read once per document object (every recall asks).
_superseded = PerDocument(is_superseded)


class SessionNovelty:
    """Which memories each session has already been shown, and how many turns ago."""

    def __init__(self) -> None:
        self._sessions: OrderedDict[tuple[str, str], tuple[int, dict[str, int]]] = OrderedDict()

    def ages(self, bank_id: str, session_id: str | None) -> dict[str, int]:
        if session_id is None or (bank_id, session_id) not in self._sessions:
            return {}
        turn, last = self._sessions[(bank_id, session_id)]
        # ``turn`` is already the next recall's number, so a memory shown on the previous
        # recall has age 0 — the seed's convention (novelty 1 − decay^0 = 0 right after).
        return {memory_id: turn - seen - 1 for memory_id, seen in last.items()}

    def shown(self, bank_id: str, session_id: str | None, memory_ids: Sequence[str]) -> None:
        if session_id is None:
            return
        key = (bank_id, session_id)
        turn, last = self._sessions.pop(key, (0, {}))
        for memory_id in memory_ids:
            last[memory_id] = turn
        while len(last) > MAX_IDS_PER_SESSION:
            last.pop(next(iter(last)))
        self._sessions[key] = (turn + 1, last)
        while len(self._sessions) > MAX_SESSIONS:
            self._sessions.popitem(last=False)


@dataclass(frozen=True)
class ServiceStores:
    """The four ports a ``MemoryService`` works on, for siblings that work on the same ones."""

    bus: EventBus
    archive: ArchiveStore
    index: MemoryIndex
    embedder: Embedder


class MemoryService:
    """retain / recall / get over the four ports."""

    def __init__(
        self,
        *,
        bus: EventBus,
        archive: ArchiveStore,
        index: MemoryIndex,
        embedder: Embedder,
        policy: RankingPolicy | None = None,
        text_pool: int = 75,
        vector_pool: int = 75,
        wait_timeout_s: float = 10.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        metrics: Metrics | None = None,
        rejections: RejectionLookup | None = None,
        reranking: Reranking | None = None,
    ) -> None:
        self._metrics = metrics
        self._rejections = rejections  # dead letters seen lately: a wait ends on its own
        self._bus = bus
        self._archive = archive
        self._index = index
        self._embedder = embedder
        # Questions come again (retries, follow-ups, the same one of several banks).
        self._query_vectors = CachedEmbedder(embedder)
        self._archived = ArchivedReads(archive)  # off recall's path once read
        self.policy = policy or RankingPolicy()
        self._text_pool = text_pool
        self._vector_pool = vector_pool
        self._wait_timeout_s = wait_timeout_s
        self._clock = clock
        self._novelty = SessionNovelty()
        self._feedback = RetrievalFeedback(index)
        self._reranking = reranking  # None: the ranking is the order, no call made

    @property
    def stores(self) -> ServiceStores:
        """Its ports: browsing, history and updates read and write the same memories."""
        return ServiceStores(self._bus, self._archive, self._index, self._embedder)

    async def retain(self, bank_id: str, request: RetainRequest) -> RetainResult:
        """Publish the memory durably; with ``wait`` return once recall can find it."""
        memory_id = request.memory_id or new_memory_id()
        lineage = await self._lineage(bank_id, request.supersedes) if request.supersedes else None
        event = event_for(bank_id, request, memory_id=memory_id, now=self._clock(), lineage=lineage)
        timed = request.timestamp is not None
        if request.memory_id is None and request.supersedes is None:
            kept = await self._identical(bank_id, request)
            if kept is not None:
                return kept
        if request.memory_id is not None:
            # A client-chosen id already held with other content would be dead-lettered as a
            # conflict by ingestion: say so now. The same content again is a retry: done.
            existing = await self._index.get(bank_id, memory_id)
            if _same_memory(existing, event, timed=timed):
                assert existing is not None
                return RetainResult(
                    memory_id=memory_id,
                    bank_id=bank_id,
                    fact_type=existing.fact_type,
                    object_storage_key=existing.object_storage_key,
                    recallable=True,
                    version=_as_int(_as_dict(event.input.structured).get("version")),
                )
        body = event.to_wire_json()
        with tracer().start_as_current_span("memory.retain", attributes={"cog.bank.id": bank_id}):
            await self._bus.publish(
                EXPERIENCE_RAW, body, key=memory_id.encode(), headers=headers_with_context()
            )
        if self._metrics is not None:
            self._metrics.record_retain(request.fact_type)
        recallable = await self._wait_recallable(bank_id, event, timed) if request.wait else False
        return RetainResult(
            memory_id=memory_id,
            bank_id=bank_id,
            fact_type=request.fact_type,
            object_storage_key=object_key_for(event),
            recallable=recallable,
            version=_as_int(_as_dict(event.input.structured).get("version")),
        )

    async def _identical(self, bank_id: str, request: RetainRequest) -> RetainResult | None:
        """An indexed memory of the bank with this very content and type, reinforced; or None.

        Found by text search among the bank's memories of the type, then compared whole
        after normalising whitespace and case (the archive holds what the summary cuts).
        Only a memory retained as this one would be counts: not a derived one (forgetting
        its source would take it), and one with every tag and the session asked for, at
        the stated time if one is stated (the same words at another time are another
        experience, which consolidation counts).
        """
        wanted = same_content_key(request.content)
        types = frozenset({request.fact_type}) if request.fact_type is not None else None
        filters = SearchFilters(bank_id=bank_id, fact_types=types)
        query = request.content[:SUMMARY_LENGTH]  # its summary: what any copy's text starts with
        hits = await self._index.search_text(query, filters, size=IDENTICAL_POOL)
        alike = [h.document for h in hits if _kept_alike(h.document, request)]
        texts = await asyncio.gather(*(self._whole_text(doc) for doc in alike))
        for doc, text in zip(alike, texts, strict=True):
            if text is None or same_content_key(text) != wanted:
                continue
            try:
                await self._index.update(bank_id, doc.event_id, REINFORCED_BY_RETAIN)
            except NotFoundError:
                continue  # forgotten meanwhile: keep the new one instead
            found = procedure_version(doc.tags)
            return RetainResult(
                memory_id=doc.event_id,
                bank_id=bank_id,
                fact_type=doc.fact_type,
                object_storage_key=doc.object_storage_key,
                recallable=True,
                version=found[1] if found else None,
                reinforced=True,
            )
        return None

    async def _whole_text(self, doc: IndexDocument) -> str | None:
        if len(doc.summary) < SUMMARY_LENGTH:
            return doc.summary
        try:
            raw = await self._archive.get(doc.object_storage_key)
        except NotFoundError:
            return None
        return ArchivedEvent.model_validate_json(raw).input.text

    async def _lineage(self, bank_id: str, supersedes: str) -> ProcedureLineage:
        previous = await self._index.get(bank_id, supersedes)
        found = procedure_version(previous.tags) if previous is not None else None
        if found is None:
            raise NotFoundError(f"supersedes: no procedure {supersedes!r} in bank {bank_id!r}")
        return ProcedureLineage(procedure_id=found[0], version=found[1] + 1)

    async def _wait_recallable(self, bank_id: str, event: ExperienceEvent, timed: bool) -> bool:
        """True once the index serves this very event; ConflictError if it serves another;
        the dead letter's RejectedError as soon as ingestion has refused this event."""
        deadline = time.monotonic() + self._wait_timeout_s
        delay = 0.005
        body = event.to_wire_json()  # the bytes retain published: its dead letter holds them
        while time.monotonic() < deadline:
            found = await self._index.get(bank_id, event.event_id)
            if found is not None:
                return _same_memory(found, event, timed=timed)
            if self._rejections is not None:
                rejected = self._rejections.rejection_for(bank_id, event.event_id, body)
                if rejected is not None:
                    raise rejected
            await asyncio.sleep(delay)  # the index has no change feed to await
            delay = min(delay * 2, 0.1)
        return False

    async def recall(self, bank_id: str, request: RecallRequest) -> RecallResponse:
        """The best memories of ``bank_id`` for ``request.query``, with score breakdowns."""
        if self._metrics is None:
            return await self._recalled_by_facets(bank_id, request)
        with self._metrics.timed_recall() as timing:
            response = await self._recalled_by_facets(bank_id, request)
            timing.results = len(response.results)
        return response

    async def _recalled_by_facets(self, bank_id: str, request: RecallRequest) -> RecallResponse:
        return await recall_by_facets(
            self._recall, bank_id, request, record=self._record, prepare=self._embedded_once
        )

    def _record(self, bank_id: str, request: RecallRequest, results: Sequence[MemoryHit]) -> None:
        """What ``request`` put before the agent: shown to its session, returned if it asks."""
        ids = [r.id for r in results]
        self._novelty.shown(bank_id, request.session_id, ids)
        if request.reinforce:
            self._feedback.returned(bank_id, ids)

    def _asked(self, query: str) -> str:
        # Names stay out of the embedded query: every transcript turn names its speaker, so
        # they pull the cosine toward anyone's turns; BM25 and the speaker cue still see them.
        return without_names(query) if self.policy.name_free_vector else query

    def _vector_query(self, query: str) -> str:
        asked = self._asked(query)
        return question_content(asked) if self.policy.vector_query == "content" else asked

    def _content_query(self, query: str) -> str | None:
        """The second text the semantic arm scores against, when the policy asks for one."""
        if self.policy.content_vector == "off":
            return None
        content = question_content(self._asked(query))
        return None if content == self._vector_query(query) else content

    async def _embedded_once(self, queries: Sequence[str]) -> None:
        """Each distinct vector query of ``queries`` embedded (into the cache) once.

        One text a call, as each recall would embed it alone: the same vectors to the bit.
        """
        texts = [self._vector_query(q) for q in queries]
        texts += [c for q in queries if (c := self._content_query(q)) is not None]
        for text in dict.fromkeys(texts):
            await self._query_vectors.embed([text])

    async def _recall(self, bank_id: str, request: RecallRequest) -> RecallResponse:
        """Ranked by the session's novelty, filled; recorded by the caller (``_record``)."""
        filters = SearchFilters(
            bank_id=bank_id,
            fact_types=frozenset(request.types) if request.types is not None else None,
            tags_any=frozenset(request.tags) if request.tags is not None else None,
            since=request.since,
            until=request.until,
        )
        (vector,) = await self._query_vectors.embed([self._vector_query(request.query)])
        content = self._content_query(request.query)
        content_vector = None
        if content is not None:
            (content_vector,) = await self._query_vectors.embed([content])
        contextual = self.policy.fusion != "rrf"
        found = await self._index.recall_candidates(
            request.query,
            vector,
            filters,
            text_pool=self._text_pool,
            vector_pool=self._vector_pool,
            neighbours=self._window() if contextual else None,
            procedure_versions=not request.all_versions,
        )
        if not contextual:
            pool = Pool.of(fuse(found.text, found.vector, k=self.policy.rrf_k))
        else:
            pool = contextual_pool(
                found.text,
                found.vector,
                query_vector=vector,
                analysis=analyse_query(request.query),
                policy=self.policy,
                neighbours=found.neighbours,
                embeddings=found.embeddings,
                content_vector=content_vector,
            )
        ranking = rank_pool(
            pool,
            self.policy,
            now=self._clock(),
            novelty_ages=self._novelty.ages(bank_id, request.session_id),
            prefer_observations=request.prefer_observations,
        )
        ranked: Iterable[Scored] = ranking
        if not request.all_versions:
            newest = found.newest_versions
            ranked = ranking.kept(
                lambda doc: not _superseded(doc) and is_current_version(doc, newest)
            )
        ranked = await self._reranked(request.query, ranked)
        results, used = await self._fill(bank_id, ranked, request)
        return RecallResponse(
            bank_id=bank_id,
            query=request.query,
            results=results,
            candidates=len(pool),
            tokens=used,
        )

    def _window(self) -> NeighbourWindow:
        """The turns around the best hits of each search that neither search returned.

        An answer often shares no words with the question and means little
        alone ("For walking or running?"); the turns beside a hit carry it in.
        Turns further apart than the gap are never linked, so none further is read.
        """
        each_side = self.policy.expand_each_side
        return NeighbourWindow(
            anchors_each=self.policy.expand_top,
            each_side=each_side,
            within_s=each_side * self.policy.neighbour_gap_s,
        )

    def forgotten(self, object_keys: Sequence[str]) -> None:
        """Drop what recall keeps of these archive objects (call after a forget erased them)."""
        self._archived.forgotten(object_keys)

    async def _reranked(self, query: str, ranked: Iterable[Scored]) -> Iterable[Scored]:
        """The head of the ranking blended with the reranker's scores, when one is set.

        The reranker reads the indexed text (summary and detail): the archive stays off
        recall's path.
        """
        if self._reranking is None:
            return ranked
        ranked = list(ranked)  # it weighs every final score
        head = ranked[: self._reranking.max_candidates]
        order = await self._reranking.blended(
            query, [s.final for s in ranked], [indexed_text(s.candidate.document) for s in head]
        )
        if order is None:
            return ranked
        weight = self._reranking.weight
        return [_with_rerank(ranked[b.position], b, weight) for b in order]

    async def _fill(
        self, bank_id: str, ranked: Iterable[Scored], request: RecallRequest
    ) -> tuple[list[MemoryHit], int]:
        """The first ``k`` of ``ranked`` within the budget, read ``k`` at a time (lazily)."""
        budget = Budget(request.max_tokens)
        results: list[MemoryHit] = []
        rest = iter(ranked)
        while len(results) < request.k:
            chunk = list(islice(rest, request.k))
            if not chunk:
                break
            keys = [s.candidate.document.object_storage_key for s in chunk]
            archived = await self._archived.events(keys)
            for item, event in zip(chunk, archived, strict=True):
                if event is None:
                    # An index row without its archive object (forgotten, or a broken store):
                    # skip it rather than fail the whole recall.
                    memory_id = item.candidate.document.event_id
                    log.warning("recall_archive_object_missing", memory_id=memory_id)
                    continue
                hit = await self._explained(bank_id, _hit(item, event))
                if len(results) < request.k and budget.admit(hit.tokens):
                    results.append(hit)
        return results, budget.used

    async def _explained(self, bank_id: str, hit: MemoryHit) -> MemoryHit:
        """A winner of a conflict says why, from the archived supersession records."""
        if not hit.supersedes:
            return hit
        rules = []
        for loser in hit.supersedes[:5]:
            rule = await self._archived.rule(supersession_key(bank_id, loser))
            if rule is not None:
                rules.append(f"supersedes {loser}: {rule}")
        if not rules:
            return hit
        explain = hit.explain.model_copy(update={"resolution": "; ".join(rules)})
        return hit.model_copy(update={"explain": explain})

    async def get_memory(self, bank_id: str, memory_id: str) -> MemoryRecord:
        """One memory of ``bank_id`` with its archived event; NotFoundError otherwise."""
        doc = await self._index.get(bank_id, memory_id)
        if doc is None:
            raise NotFoundError(f"no memory {memory_id!r} in bank {bank_id!r}")
        archived = json.loads(await self._archive.get(doc.object_storage_key))
        return MemoryRecord(
            id=doc.event_id,
            bank_id=doc.bank_id,
            fact_type=doc.fact_type,
            text=archived["input"]["text"],
            timestamp=doc.timestamp,
            tags=doc.tags,
            object_storage_key=doc.object_storage_key,
            importance_score=doc.importance_score,
            retrieval_count=doc.retrieval_count,
            archived_event=archived,
        )

    async def feedback(self, bank_id: str, request: FeedbackRequest) -> int:
        """Apply what the agent did with recalled memories; returns how many were updated.

        ``returned`` counts one retrieval; ``used`` counts two and ``helpful`` three, and
        both restore the memory's decay factor to 1 (it earned its place back).

        Raises:
            NotFoundError: a memory id that is not in the bank (the ones before it count).
        """
        weight = FEEDBACK_WEIGHTS[request.signal]
        refresh = None if request.signal is FeedbackSignal.RETURNED else 1.0
        patch = DocumentPatch(retrieval_count_increment=weight, decay_factor=refresh)
        for memory_id in dict.fromkeys(request.memory_ids):
            await self._index.update(bank_id, memory_id, patch)
        return len(set(request.memory_ids))

    async def drain(self) -> None:
        """Write pending retrieval feedback (call before closing the index)."""
        await self._feedback.drain()


def _same_memory(found: IndexDocument | None, event: ExperienceEvent, *, timed: bool) -> bool:
    """Whether the index already holds ``event`` (False if absent); ConflictError if another.

    Without an explicit timestamp a retry gets a new one, so only the content is compared.
    """
    if found is None:
        return False
    same = found.summary == event.input.text[:SUMMARY_LENGTH] and (
        not timed or found.timestamp == format_timestamp(event.timestamp)
    )
    if not same:
        raise ConflictError(
            f"memory_id: {event.event_id!r} already holds a different memory; "
            "retry with the same content and timestamp, or choose another id"
        )
    return True


def _kept_alike(doc: IndexDocument, request: RetainRequest) -> bool:
    """Whether ``doc`` was kept as ``request`` would be, its text aside (see ``_identical``)."""
    stated = request.timestamp
    return (
        doc.fact_type == request.fact_type
        and doc.event_type != EventType.CONSOLIDATION_OUTPUT
        and not is_superseded(doc)
        and set(request.tags) <= set(doc.tags)
        and request.context.session_id in (None, doc.session_id)
        and (stated is None or doc.timestamp == format_timestamp(stated))
    )


def _as_dict(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _with_rerank(item: Scored, blended: Blended, weight: float) -> Scored:
    """``item`` rescored by the blend, its breakdown still summing to ``final``."""
    weights = {name: (1.0 - weight) * w for name, w in item.weights.items()}
    signals = dict(item.signals)
    if blended.rerank is not None:
        weights["rerank"], signals["rerank"] = weight, blended.rerank
    return Scored(item.candidate, signals, weights, blended.final)


def _hit(item: Scored, event: Archived) -> MemoryHit:
    doc = item.candidate.document
    structured = event.structured
    steps = structured.get("steps")
    version = structured.get("version")
    rationale = structured.get("rationale")
    text = event.text
    return MemoryHit(
        id=doc.event_id,
        text=text,
        fact_type=doc.fact_type,
        event_type=doc.event_type,
        timestamp=doc.timestamp,
        tags=doc.tags,
        # A fact extracted from an event points back at that event; anything else is its own.
        source_event_id=str(structured.get("sourceEventId") or doc.event_id),
        object_storage_key=doc.object_storage_key,
        score=item.final,
        tokens=estimate_tokens(text),
        steps=[str(s) for s in steps] if isinstance(steps, list) else None,
        rationale=rationale if isinstance(rationale, str) else None,
        version=_as_int(version),
        proof_count=proof_count(doc) if tag_value(doc.tags, PROOF_TAG) else None,
        supersedes=tag_values(doc.tags, SUPERSEDES_TAG),
        superseded_by=tag_value(doc.tags, SUPERSEDED_BY_TAG),
        valid_to=tag_value(doc.tags, VALID_TO_TAG),
        explain=item.breakdown,
    )


def _as_int(value: object) -> int | None:
    return value if isinstance(value, int) else None
