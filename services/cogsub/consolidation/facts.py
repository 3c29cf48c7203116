"""Extraction: plain content on ``experience.enriched`` becomes world and experience facts.

Only events retained without a ``fact_type`` are read (typed blocks are stored
verbatim, and consolidation outputs are never re-extracted). Each fact links
back to its source event and archive key, is embedded and indexed like any
memory, and a near-duplicate of a fact the bank already holds is merged into it
— one write-once evidence object per source, so the proof count goes up exactly
once however often the source is redelivered.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import structlog

from cogsub.archive.ports import ArchiveStore
from cogsub.consolidation.similarity import content_words, similarity
from cogsub.consolidation.writer import DerivedWriter
from cogsub.core.derived import (
    DERIVED_TAG,
    PROOF_TAG,
    DerivedKind,
    DerivedMemory,
    derived_id,
    derived_key,
    evidence_key,
    evidence_prefix,
    with_tags,
)
from cogsub.core.errors import FieldProblem, InvalidInputError, ObjectExistsError
from cogsub.core.events import ArchivedEvent, EventType
from cogsub.embeddings.ports import Embedder
from cogsub.extraction.offline import extract_facts
from cogsub.extraction.ports import ExtractedFact, ExtractionInput, FactExtractor
from cogsub.index.ports import MemoryIndex, SearchFilters

log = structlog.get_logger("cogsub.consolidation")

MERGE_THRESHOLD = 0.85


@dataclass(frozen=True)
class ExtractionOutcome:
    source_event_id: str
    bank_id: str
    created: tuple[str, ...] = ()
    merged: tuple[str, ...] = ()
    skipped: str | None = None


class FactStage:
    """Turns one enriched announcement into facts in the bank."""

    def __init__(
        self,
        *,
        archive: ArchiveStore,
        index: MemoryIndex,
        embedder: Embedder,
        extractor: FactExtractor,
        writer: DerivedWriter,
        semantic: bool,
        merge_threshold: float = MERGE_THRESHOLD,
    ) -> None:
        self._archive = archive
        self._index = index
        self._embedder = embedder
        self._extractor = extractor
        self._writer = writer
        self._semantic = semantic
        self._merge_threshold = merge_threshold

    async def handle(self, payload: bytes) -> ExtractionOutcome:
        """Extract the facts of the event ``payload`` announces (idempotent).

        Raises:
            InvalidInputError: the payload is not an ``experience.enriched`` announcement.
            ExtractionRejected: the extractor's output broke a rule; nothing was written.
        """
        event = await self._source(payload)
        if event.fact_type is not None or event.type is EventType.CONSOLIDATION_OUTPUT:
            return ExtractionOutcome(event.event_id, event.bank_id, skipped="typed or derived")
        item = ExtractionInput(
            source_event_id=event.event_id,
            text=event.input.text,
            event_time=event.timestamp,
            event_type=event.type,
            speaker=event.context.user_id or event.context.agent_id,
        )
        if not extract_facts(item):
            # Greetings, questions, fillers: nothing states a fact, so no model is asked
            # (an LLM's empty answer is a rejection, and this is not one).
            return ExtractionOutcome(event.event_id, event.bank_id, skipped="states no facts")
        facts = await self._extractor.extract(item)
        created: list[str] = []
        merged: list[str] = []
        for position, fact in enumerate(facts):
            memory = self._memory(event, fact, position)
            key = derived_key(event.bank_id, DerivedKind.FACT, memory.memory_id)
            # A fact this source already produced (a redelivery) is completed, never merged.
            target = (
                None
                if await self._archive.exists(key)
                else await self._near_duplicate(fact, event.bank_id)
            )
            if target is None:
                (written,) = await self._writer.write(event.bank_id, [memory])
                if written.created:
                    created.append(memory.memory_id)
            elif await self._merge(event, target, position):
                merged.append(target)
        return ExtractionOutcome(event.event_id, event.bank_id, tuple(created), tuple(merged))

    async def _source(self, payload: bytes) -> ArchivedEvent:
        try:
            announced = json.loads(payload)
            key = announced["objectStorageKey"]
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidInputError(
                [FieldProblem("objectStorageKey", "an experience.enriched payload needs one")]
            ) from exc
        return ArchivedEvent.model_validate_json(await self._archive.get(str(key)))

    def _memory(self, event: ArchivedEvent, fact: ExtractedFact, position: int) -> DerivedMemory:
        details: dict[str, object] = {
            "sourceEventId": event.event_id,
            "sourceObjectKey": event.object_storage_key,
            "extractor": self._extractor.name,
            "entities": list(fact.entities),
            "occurredOn": fact.occurred_on.isoformat() if fact.occurred_on else None,
        }
        return DerivedMemory(
            memory_id=derived_id(DerivedKind.FACT, event.bank_id, event.event_id, str(position)),
            kind=DerivedKind.FACT,
            fact_type=fact.fact_type,
            text=fact.text,
            timestamp=event.timestamp,
            importance=event.importance_score,
            sources=(event.event_id,),
            tags=tuple(event.tags[:8]),
            details=details,
            session_id=event.context.session_id,
        )

    async def _near_duplicate(self, fact: ExtractedFact, bank_id: str) -> str | None:
        """The id of a fact already in the bank that says the same thing, if any."""
        words = content_words(fact.text)
        filters = SearchFilters(
            bank_id=bank_id,
            fact_types=frozenset({fact.fact_type}),
            tags_any=frozenset({f"{DERIVED_TAG}{DerivedKind.FACT.value}"}),
        )
        (vector,) = await self._embedder.embed([fact.text])
        hits = await self._index.search_text(fact.text, filters, size=5)
        if self._semantic:
            hits += await self._index.search_vector(vector, filters, size=5)
        best: tuple[float, str] | None = None
        for hit in hits:
            doc = hit.document
            score = similarity(
                words, content_words(doc.summary), vector, doc.embedding, semantic=self._semantic
            )
            if score >= self._merge_threshold and (best is None or score > best[0]):
                best = (score, doc.event_id)
        return best[1] if best else None

    async def _merge(self, event: ArchivedEvent, fact_id: str, position: int) -> bool:
        """Record ``event`` as more proof of ``fact_id``; True if it was new proof."""
        record = {"factId": fact_id, "sourceEventId": event.event_id, "position": position}
        key = evidence_key(event.bank_id, fact_id, f"{event.event_id}-{position}")
        try:
            await self._archive.put_once(key, json.dumps(record, sort_keys=True).encode())
            new = True
        except ObjectExistsError:
            new = False
        # Recounted from the archive every time, so a crash between the evidence write
        # and the index update is repaired by the redelivery.
        proofs = 1 + len(
            [k async for k in self._archive.list(evidence_prefix(event.bank_id, fact_id))]
        )
        doc = await self._index.get(event.bank_id, fact_id)
        if doc is not None and f"{PROOF_TAG}{proofs}" not in doc.tags:
            await self._index.upsert(
                [with_tags(doc, [f"{PROOF_TAG}{proofs}"], replace=(PROOF_TAG,))]
            )
        return new
