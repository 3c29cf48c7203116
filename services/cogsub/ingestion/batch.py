"""The stages one batch goes through, split where the worker pipelines them.

``stage`` runs receive → embed → score → key → archive; ``finish`` sends the
batch's dead letters, then runs index → emit. The worker may stage batch N+1
while batch N finishes, and commits in order, so the slowest store sets the
pace instead of the sum of all of them.

Nothing here makes a span or counts a letter: the stages a batch goes through
are told to the :class:`StageListener` a middleware installs for the call
(:func:`listening`), which also gives the headers an announcement carries, and
dead letters go through the runtime's chain like every consumer's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Protocol

from cogsub.archive.ports import ArchiveStore
from cogsub.bulk import Outgoing, publish_all, put_all
from cogsub.bus.dead_letters import DeadLetter
from cogsub.bus.ports import EventBus, Headers, Record
from cogsub.core.documents import (
    IndexDocument,
    enriched_payload_json,
    index_document_for,
    indexed_payload_json,
)
from cogsub.core.errors import ObjectExistsError
from cogsub.core.events import ArchivedEvent
from cogsub.core.importance import score_importance
from cogsub.core.keys import object_key_for
from cogsub.core.topics import EXPERIENCE_ENRICHED, MEMORY_INDEXED
from cogsub.embeddings.ports import Embedder
from cogsub.index.ports import MemoryIndex
from cogsub.ingestion.pipeline import (
    Accepted,
    Rejection,
    RejectionKind,
    Stage,
    archive_body,
    archived_event_for,
    dead_letter_for,
    first_of_each_id,
    receive,
    same_experience,
)

StageObserver = Callable[[Stage, Sequence[str]], None]
"""Called as each stage of a batch completes, with the event ids it covered."""

SendLetter = Callable[[DeadLetter], Awaitable[None]]
"""Sends a dead letter through the consumer runtime (``Subscriber.dead_letter``)."""


class StageListener(Protocol):
    """Hears one batch's stages begin and end, and names what its announcements carry."""

    def started(self, stage: Stage, event_ids: Sequence[str]) -> None: ...

    def ended(
        self, stage: Stage, event_ids: Sequence[str], error: BaseException | None = None
    ) -> None:
        """``stage`` is over for ``event_ids``; ``error`` is why, when it failed."""
        ...

    def headers_for(self, event_id: str) -> Headers:
        """The headers of the event's announcements (its trace context, say)."""
        ...


_LISTENER: ContextVar[StageListener | None] = ContextVar("ingestion_stage_listener", default=None)


@contextmanager
def listening(listener: StageListener) -> Iterator[None]:
    """Tell ``listener`` of the stages run inside the block (in this task and those it starts).

    A context variable rather than a field of the steps, because batches are
    staged and finished side by side and each call has its own listener.
    """
    token = _LISTENER.set(listener)
    try:
        yield
    finally:
        _LISTENER.reset(token)


@contextmanager
def reported(stage: Stage, event_ids: Sequence[str]) -> Iterator[None]:
    """Tell the call's listener, if any, that ``stage`` runs for ``event_ids`` in the block."""
    listener = _LISTENER.get()
    if listener is None:
        yield
        return
    listener.started(stage, event_ids)
    try:
        yield
    except BaseException as exc:
        listener.ended(stage, event_ids, exc)
        raise
    listener.ended(stage, event_ids)


def announcement_headers(event_id: str) -> Headers:
    """The headers the call's listener gives the event's announcements (none without one)."""
    listener = _LISTENER.get()
    return listener.headers_for(event_id) if listener is not None else ()


@dataclass
class BatchOutcome:
    """What one batch did, for progress output and tests."""

    indexed: list[IndexDocument] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)


@dataclass
class StagedBatch:
    """A batch whose events are archived, and how many of its letters a finish has sent.

    The count lets a finish the runtime retries go on where the last attempt stopped,
    instead of sending a letter twice.
    """

    records: Sequence[Record]
    accepted: list[Accepted]
    stored: list[ArchivedEvent]
    outcome: BatchOutcome
    letters_sent: int = 0


@dataclass(frozen=True)
class BatchSteps:
    """The ports and names every stage needs."""

    bus: EventBus
    archive: ArchiveStore
    index: MemoryIndex
    embedder: Embedder
    index_name: str
    send_letter: SendLetter
    observer: StageObserver | None = None

    def receive_all(self, records: Sequence[Record]) -> list[Accepted | Rejection]:
        """Parse and validate every record (pure; safe to run ahead of the batch)."""
        return [receive(record, dimension=self.embedder.dimension) for record in records]

    async def stage(
        self,
        records: Sequence[Record],
        vectors: Mapping[str, list[float]],
        received: Sequence[Accepted | Rejection] | None = None,
    ) -> StagedBatch:
        """Validate, embed, score, key and archive; nothing is announced yet.

        ``received`` is ``receive_all(records)`` when the caller already ran it.
        """
        outcome = BatchOutcome()
        accepted: list[Accepted] = []
        for item in received if received is not None else self.receive_all(records):
            if isinstance(item, Accepted):
                accepted.append(item)
            else:
                outcome.rejected.append(item)
        self.observe(Stage.RECEIVE, [a.event.event_id for a in accepted])
        firsts, repeats = first_of_each_id(accepted)
        ids = [a.event.event_id for a in firsts]
        with reported(Stage.EMBED, ids):
            embeddings = await self._embed(firsts, vectors)
        archived = self._derive(firsts, embeddings)
        with reported(Stage.ARCHIVE, ids):
            stored = await self._archive_all(firsts, archived, outcome)
            # A repeat of an id in the same batch meets the archive like any redelivery.
            repeated = self._derive(repeats, embeddings | await self._embed(repeats, vectors))
            await self._archive_all(repeats, repeated, outcome)
        self.observe(Stage.ARCHIVE, [a.event_id for a in stored])
        return StagedBatch(records=records, accepted=accepted, stored=stored, outcome=outcome)

    async def finish(self, staged: StagedBatch) -> BatchOutcome:
        """Dead-letter what staging refused, then index the archived events and announce them.

        The letters go first and one at a time: each is sent before the commit, and a
        retried finish skips those already sent.
        """
        rejected = staged.outcome.rejected
        for rejection in rejected[staged.letters_sent :]:
            await self.send_letter(dead_letter_for(rejection))
            staged.letters_sent += 1
        docs = [_document(a) for a in staged.stored]
        ids = [d.event_id for d in docs]
        with reported(Stage.INDEX, ids):
            if docs:
                await self.index.upsert(docs)
        self.observe(Stage.INDEX, ids)
        await self.announce(docs)
        return BatchOutcome(indexed=docs, rejected=list(rejected))

    async def _embed(
        self, items: Sequence[Accepted], ready: Mapping[str, list[float]]
    ) -> dict[tuple[str, str], list[float]]:
        """Vectors by (bank, event id): computed ahead, or one batched call for the rest."""
        missing = [a.event for a in items if not a.event.input.embedding]
        todo = list(dict.fromkeys(e.input.text for e in missing if e.input.text not in ready))
        computed = await self.embedder.embed(todo) if todo else []
        by_text = {**ready, **dict(zip(todo, computed, strict=True))}
        if items:
            self.observe(Stage.EMBED, [a.event.event_id for a in items])
        return {(e.bank_id, e.event_id): by_text[e.input.text] for e in missing}

    def _derive(
        self, items: Sequence[Accepted], vectors: Mapping[tuple[str, str], list[float]]
    ) -> list[ArchivedEvent]:
        """Score and key every event, and shape what the archive keeps."""
        events = [a.event for a in items]
        ids = [e.event_id for e in events]
        scores = [score_importance(e) for e in events]
        keys = [object_key_for(e) for e in events]
        if items:
            self.observe(Stage.SCORE, ids)
            self.observe(Stage.KEY, ids)
        return [
            archived_event_for(
                e,
                embedding=vectors.get((e.bank_id, e.event_id), list(e.input.embedding)),
                importance_score=score,
                key=key,
            )
            for e, score, key in zip(events, scores, keys, strict=True)
        ]

    async def _archive_all(
        self, items: Sequence[Accepted], archived: Sequence[ArchivedEvent], outcome: BatchOutcome
    ) -> list[ArchivedEvent]:
        """Write each event once; on redelivery the stored object is the truth to index from."""
        results = await put_all(
            self.archive, [(a.object_storage_key, archive_body(a)) for a in archived]
        )
        taken: list[int] = []
        for at, result in enumerate(results):
            if isinstance(result, ObjectExistsError):
                taken.append(at)
            elif result is not None:
                raise result
        bodies = await asyncio.gather(
            *(self.archive.get(archived[at].object_storage_key) for at in taken)
        )
        existing = {
            at: ArchivedEvent.model_validate_json(body)
            for at, body in zip(taken, bodies, strict=True)
        }
        stored: list[ArchivedEvent] = []
        for at, (item, fresh) in enumerate(zip(items, archived, strict=True)):
            found = existing.get(at)
            if found is None:  # written just now from this very event: nothing to compare
                stored.append(fresh)
            elif same_experience(item.event, found):
                stored.append(found)
            else:
                outcome.rejected.append(_conflict(item, found.object_storage_key))
        return stored

    async def announce(self, docs: Sequence[IndexDocument]) -> None:
        """Publish experience.enriched and memory.indexed per doc.

        The whole batch's records go out in one bus call where the bus offers one.
        """
        records: list[Outgoing] = []
        for doc in docs:
            key = doc.event_id.encode()
            headers = announcement_headers(doc.event_id)
            enriched = enriched_payload_json(doc)
            indexed = indexed_payload_json(doc, index=self.index_name)
            records += [
                (EXPERIENCE_ENRICHED, enriched, key, headers),
                (MEMORY_INDEXED, indexed, key, headers),
            ]
        ids = [d.event_id for d in docs]
        with reported(Stage.EMIT, ids):
            await publish_all(self.bus, records)
        self.observe(Stage.EMIT, ids)

    def observe(self, stage: Stage, event_ids: Sequence[str]) -> None:
        if self.observer is not None:
            self.observer(stage, event_ids)


def _document(archived: ArchivedEvent) -> IndexDocument:
    return index_document_for(
        archived,
        embedding=list(archived.input.embedding),
        importance_score=archived.importance_score,
        object_storage_key=archived.object_storage_key,
    )


def _conflict(item: Accepted, key: str) -> Rejection:
    reason = (
        f"eventId: {item.event.event_id!r} is already archived at {key} with different "
        "content; an archived event is never overwritten"
    )
    return Rejection(item.record, RejectionKind.CONFLICT, reason)
