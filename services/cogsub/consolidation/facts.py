"""Extraction: plain content on ``experience.enriched`` becomes world and experience facts.

Only events retained without a ``fact_type`` are read (typed blocks are stored
verbatim, and consolidation outputs are never re-extracted). Each fact links
back to its (first) source event and archive key, is embedded and indexed like
any memory. A fact's id is a hash of its type and content words, so the same
statement from another event lands on the fact the bank already holds (and with
a semantic embedder, so does a close rewording): every source is one
write-once evidence object, and the proof count is how many there are — it goes
up exactly once per source however often that source is redelivered.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import structlog

from cogsub.archive.ports import ArchiveStore
from cogsub.bulk import put_all, update_all
from cogsub.consolidation.distinct import details, may_merge
from cogsub.consolidation.similarity import content_words, similarity
from cogsub.consolidation.writer import DerivedWriter
from cogsub.core.derived import (
    DERIVED_TAG,
    PROOF_TAG,
    DerivedKind,
    DerivedMemory,
    derived_id,
    evidence_key,
    evidence_prefix,
)
from cogsub.core.errors import CogsubError, FieldProblem, InvalidInputError, ObjectExistsError
from cogsub.core.events import ArchivedEvent, EventType
from cogsub.embeddings.ports import Embedder
from cogsub.extraction.offline import states_facts
from cogsub.extraction.ports import ExtractedFact, ExtractionInput, FactExtractor
from cogsub.index.ports import DocumentPatch, MemoryIndex, SearchFilters

log = structlog.get_logger("cogsub.consolidation")

MERGE_THRESHOLD = 0.85
#: The key part of a negated statement's id (no content word looks like it).
_NEGATED = "~negated"


def fact_id(bank_id: str, fact: ExtractedFact) -> str:
    """The id of a statement in a bank: the same content words give the same fact.

    Content words leave out "not", "never", "n't": a negated statement gets one more
    key part, so "Bob eats meat." is not proof of "Bob doesn't eat meat." (statements
    without a negation keep the ids they always had).
    """
    words = sorted(content_words(fact.text))
    key = words if words else [fact.text]
    if details(fact.text).negated:
        key = [*key, _NEGATED]
    return derived_id(DerivedKind.FACT, bank_id, fact.fact_type.value, *key)


@dataclass
class _Plan:
    """What extraction decided for one event, before anything is written."""

    event_id: str
    bank_id: str
    event: ArchivedEvent
    # What extraction found, before each is decided new or a proof (then emptied).
    candidates: list[tuple[DerivedMemory, list[float]]] = field(default_factory=list)
    new: list[tuple[DerivedMemory, list[float]]] = field(default_factory=list)
    merges: list[tuple[str, int]] = field(default_factory=list)
    skipped: str | None = None


def _raise_retryable(results: Sequence[object]) -> None:
    """Raise the first failure that is not an unusable announcement's own error."""
    for result in results:
        if isinstance(result, BaseException) and (
            not isinstance(result, CogsubError) or result.retryable
        ):
            raise result


@dataclass(frozen=True)
class PlannedBatch:
    """A batch ``plan_many`` read and decided: a plan, or the error, per announcement."""

    results: list[_Plan | CogsubError]


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
        # Batches are planned concurrently but written one at a time: recounts of one
        # fact must not race (the last must see all the evidence), and a fact left at
        # the ``proof:1`` it was born with must get no other proof meanwhile.
        self._writing = asyncio.Lock()

    async def handle(self, payload: bytes) -> ExtractionOutcome:
        """Extract the facts of the event ``payload`` announces (idempotent).

        Raises:
            InvalidInputError: the payload is not an ``experience.enriched`` announcement.
            ExtractionRejected: the extractor's output broke a rule; nothing was written.
        """
        (outcome,) = await self.handle_many([payload])
        if isinstance(outcome, CogsubError):
            raise outcome
        return outcome

    async def handle_many(self, payloads: Sequence[bytes]) -> list[ExtractionOutcome | CogsubError]:
        """Extract a batch of announcements; an unusable one gives its error, not an outcome.

        ``plan_many`` then ``write_planned``: see them. Retryable failures raise for the
        whole batch: every step is idempotent, so the batch is simply done again.
        """
        return await self.write_planned(await self.plan_many(payloads))

    async def plan_many(self, payloads: Sequence[bytes]) -> PlannedBatch:
        """Read, extract and embed a batch of announcements, and decide; nothing is written.

        Only reads: a batch can be planned while the one before it is written. A fact
        that batch creates meanwhile is planned as new here, and its write then finds
        it and counts this source as one more proof.

        Raises:
            CogsubError: a retryable one (a backend is down) for the whole batch.
        """
        read = await asyncio.gather(
            *(self._extract(payload) for payload in payloads), return_exceptions=True
        )
        _raise_retryable(read)
        plans = [p for p in read if isinstance(p, _Plan)]
        known = await self._known_facts(plans)
        decided = await asyncio.gather(
            # A plan with no candidates was not looked up, so its bank's error is not its own.
            *(self._decide(p, known[p.bank_id] if p.candidates else set()) for p in plans),
            return_exceptions=True,
        )
        _raise_retryable(decided)
        failed = {
            id(p): e for p, e in zip(plans, decided, strict=True) if isinstance(e, CogsubError)
        }
        return PlannedBatch(
            [
                failed.get(id(r), r) if isinstance(r, _Plan) else r
                for r in read
                if isinstance(r, _Plan | CogsubError)
            ]
        )

    async def write_planned(self, batch: PlannedBatch) -> list[ExtractionOutcome | CogsubError]:
        """Write what ``plan_many`` decided: the batch's new facts and proofs, together.

        One archive sync, one log commit and one bulk index upsert per batch (across
        banks) are what let extraction keep up with ingestion. Batches are written one
        at a time, in the order they arrive here.
        """
        plans = [p for p in batch.results if isinstance(p, _Plan)]
        async with self._writing:
            if self._semantic:
                await asyncio.gather(*(self._reworded_since_planned(p) for p in plans))
            created, merges = await self._write_batch(plans)
        outcomes: list[ExtractionOutcome | CogsubError] = []
        for result in batch.results:
            if isinstance(result, CogsubError):
                outcomes.append(result)
                continue
            new = tuple(
                m.memory_id for m, _ in result.new if created.get(m.memory_id) == result.event_id
            )
            merges_of = merges.get((result.bank_id, result.event_id), ())
            merged = tuple(t for t in merges_of if t not in new)
            outcomes.append(
                ExtractionOutcome(result.event_id, result.bank_id, new, merged, result.skipped)
            )
        return outcomes

    async def _extract(self, payload: bytes) -> _Plan:
        """The event's facts, embedded, as candidates; what becomes of each is decided later."""
        event = await self._source(payload)
        plan = _Plan(event.event_id, event.bank_id, event)
        if event.fact_type is not None or event.type is EventType.CONSOLIDATION_OUTPUT:
            plan.skipped = "typed or derived"
            return plan
        item = ExtractionInput(
            source_event_id=event.event_id,
            text=event.input.text,
            event_time=event.timestamp,
            event_type=event.type,
            speaker=event.context.user_id or event.context.agent_id,
        )
        if not states_facts(item):
            # Greetings, questions, fillers: nothing states a fact, so no model is asked
            # (an LLM's empty answer is a rejection, and this is not one).
            plan.skipped = "states no facts"
            return plan
        facts = await self._extractor.extract(item)
        vectors = await self._embedder.embed([fact.text for fact in facts]) if facts else []
        plan.candidates = [
            (self._memory(event, fact, position), vector)
            for position, (fact, vector) in enumerate(zip(facts, vectors, strict=True))
        ]
        return plan

    async def _known_facts(self, plans: Sequence[_Plan]) -> dict[str, set[str] | InvalidInputError]:
        """Per bank, which of the batch's candidate facts it holds: one lookup per bank.

        A bank whose lookup the index refused as bad input maps to that error, which its
        announcements then give. Any other failure raises for the whole batch: a backend
        down is retried, and a broken setting (credentials, mapping) is no announcement's
        fault, so it stops the worker rather than dead-letter good announcements.
        """
        wanted: dict[str, list[str]] = {}
        for plan in plans:
            if plan.candidates:
                ids = wanted.setdefault(plan.bank_id, [])
                ids.extend(memory.memory_id for memory, _ in plan.candidates)
        banks = list(wanted)
        found = await asyncio.gather(
            *(self._index.present(b, wanted[b]) for b in banks), return_exceptions=True
        )
        known: dict[str, set[str] | InvalidInputError] = {}
        for bank, result in zip(banks, found, strict=True):
            if isinstance(result, BaseException) and not isinstance(result, InvalidInputError):
                raise result
            known[bank] = result
        return known

    async def _decide(self, plan: _Plan, known: set[str] | InvalidInputError) -> None:
        """Each candidate becomes a new fact or one more proof of a fact the bank holds."""
        if isinstance(known, InvalidInputError):
            raise known
        for position, (memory, vector) in enumerate(plan.candidates):
            # The same statement has the same id: a lookup by id finds it, however large
            # the bank; with a semantic embedder a nearest-neighbour check also catches
            # rewordings. Either way this source becomes one more piece of evidence.
            if memory.memory_id in known:
                plan.merges.append((memory.memory_id, position))
                continue
            fact = ExtractedFact(memory.text, memory.fact_type)
            if self._semantic and (near := await self._near_duplicate(fact, vector, plan.bank_id)):
                plan.merges.append((near, position))
            else:
                plan.new.append((memory, vector))
                plan.merges.append((memory.memory_id, position))
        plan.candidates = []

    async def _write_new(self, plans: Sequence[_Plan]) -> dict[str, str]:
        """Write the planned new facts; the id of each one created, with its source event.

        A fact planned as new that another write created first (an earlier batch, a
        crashed run) is not created here: this source is then one more proof of it.
        """
        # Across banks: a batch holds many, and each write step costs a sync however many
        # memories it carries. The first source of a fact new twice in the batch wins.
        entries: dict[str, tuple[str, DerivedMemory, list[float]]] = {}
        creators: dict[str, str] = {}
        for plan in plans:
            for memory, vector in plan.new:
                entries.setdefault(memory.memory_id, (plan.bank_id, memory, vector))
                creators.setdefault(memory.memory_id, plan.event_id)
        written = await self._writer.write_across(list(entries.values()))
        return {w.memory_id: creators[w.memory_id] for w in written if w.created}

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
            memory_id=fact_id(event.bank_id, fact),
            kind=DerivedKind.FACT,
            fact_type=fact.fact_type,
            text=fact.text,
            timestamp=event.timestamp,
            importance=event.importance_score,
            sources=(event.event_id,),
            # Born with its first proof: a fact this one source states needs no recount.
            tags=(*event.tags[:8], f"{PROOF_TAG}1"),
            details=details,
            session_id=event.context.session_id,
        )

    async def _reworded_since_planned(self, plan: _Plan) -> None:
        """Turn a planned new fact into proof of a rewording written since it was planned.

        The batch before was written while this one was planned, so the search then
        could not see its facts: with a semantic embedder it is done again here, in
        turn. (The same id is caught by the write itself.)
        """
        still_new: list[tuple[DerivedMemory, list[float]]] = []
        for memory, vector in plan.new:
            fact = ExtractedFact(memory.text, memory.fact_type)
            near = await self._near_duplicate(fact, vector, plan.bank_id)
            if near is None or near == memory.memory_id:
                still_new.append((memory, vector))
                continue
            plan.merges = [
                (near if target == memory.memory_id else target, position)
                for target, position in plan.merges
            ]
        plan.new = still_new

    async def _near_duplicate(
        self, fact: ExtractedFact, vector: list[float], bank_id: str
    ) -> str | None:
        """The id of a fact already in the bank that says the same thing, if any."""
        words = content_words(fact.text)
        filters = SearchFilters(
            bank_id=bank_id,
            fact_types=frozenset({fact.fact_type}),
            tags_any=frozenset({f"{DERIVED_TAG}{DerivedKind.FACT.value}"}),
        )
        hits = await self._index.search_text(fact.text, filters, size=5)
        if self._semantic:
            hits += await self._index.search_vector(vector, filters, size=5)
        best: tuple[float, str] | None = None
        for hit in hits:
            doc = hit.document
            score = similarity(
                words, content_words(doc.summary), vector, doc.embedding, semantic=self._semantic
            )
            if (
                score >= self._merge_threshold
                and (best is None or score > best[0])
                and may_merge(fact.text, doc.summary)  # "Bob ..." is no proof of "Alice ..."
            ):
                best = (score, doc.event_id)
        return best[1] if best else None

    async def _write_batch(
        self, plans: Sequence[_Plan]
    ) -> tuple[dict[str, str], dict[tuple[str, str], tuple[str, ...]]]:
        """The new facts, and one evidence object per planned proof; then the recounts.

        Returns the facts created (with the event that created each) and, per source
        event, the facts it is new proof of. Facts and evidence are written side by
        side: a crash between the two leaves either evidence whose fact the
        redelivery writes (and recounts, finding the evidence there) or a fact whose
        evidence it writes.
        """
        wanted = [(plan, target, position) for plan in plans for target, position in plan.merges]
        # Both are awaited to their end before a failure is raised: a retry of the
        # batch must not run beside a write still in flight.
        created, fresh = await asyncio.gather(
            self._write_new(plans),
            self._evidence_all([(p.event, t, n) for p, t, n in wanted]),
            return_exceptions=True,
        )
        if isinstance(created, BaseException):
            raise created
        if isinstance(fresh, BaseException):
            raise fresh
        await self._recount(wanted, fresh, created)
        merged: dict[tuple[str, str], list[str]] = {}
        for (plan, target, _), new in zip(wanted, fresh, strict=True):
            if new:  # by (bank, event): two banks may both have an event ``invoice-7``
                merged.setdefault((plan.bank_id, plan.event_id), []).append(target)
        return created, {source: tuple(targets) for source, targets in merged.items()}

    async def _recount(
        self,
        wanted: Sequence[tuple[_Plan, str, int]],
        fresh: Sequence[bool],
        created: Mapping[str, str],
    ) -> None:
        """Give each fact that got proof its count, recounted from the archive.

        Recounted, not incremented, so a crash between evidence and count is repaired
        by the redelivery; the changed facts go to the index in one bulk update. A
        fact this batch created, with its one proof from this batch, is left as
        written (with ``proof:1``): recounting it cost a listing and a rewrite of the
        row just written, for most facts of a batch.
        """
        proofs_of = Counter(target for _, target, _ in wanted)
        settled = {
            target
            for (_, target, _), new in zip(wanted, fresh, strict=True)
            if new and target in created and proofs_of[target] == 1
        }
        touched = sorted({(p.bank_id, t) for p, t, _ in wanted if t not in settled})
        # Side by side: each recount is an archive listing, mostly waiting.
        counts = await asyncio.gather(*(self._proofs(b, f) for b, f in touched))
        patches: dict[str, dict[str, DocumentPatch]] = {}
        for (bank_id, fact_id), proofs in zip(touched, counts, strict=True):
            # A patch, not a rewrite: a round's decay or reinforcement of the fact,
            # written meanwhile, is kept.
            patches.setdefault(bank_id, {})[fact_id] = DocumentPatch(
                add_tags=(f"{PROOF_TAG}{proofs}",), drop_tags_under=(PROOF_TAG,)
            )
        if patches:
            await update_all(self._index, patches)

    async def _evidence_all(self, proofs: Sequence[tuple[ArchivedEvent, str, int]]) -> list[bool]:
        """One evidence object per (source event, fact, position); True where it is new."""
        items = []
        for event, fact_id, position in proofs:
            record = {"factId": fact_id, "sourceEventId": event.event_id, "position": position}
            key = evidence_key(event.bank_id, fact_id, f"{event.event_id}-{position}")
            items.append((key, json.dumps(record, sort_keys=True).encode()))
        fresh = []
        for outcome in await put_all(self._archive, items):
            if outcome is not None and not isinstance(outcome, ObjectExistsError):
                raise outcome
            fresh.append(outcome is None)
        return fresh

    async def _proofs(self, bank_id: str, fact_id: str) -> int:
        """How many evidence objects the archive holds for the fact."""
        return len([k async for k in self._archive.list(evidence_prefix(bank_id, fact_id))])
