"""One consolidation round of one bank: observations, corrections, conflicts, decay.

A round reads a bounded slice of the bank (replay order: the most alive, then
the most important memories first), derives what should exist, and writes it
through :class:`DerivedWriter`. Every output's id is a function of its inputs,
so a second round over the same memories writes nothing new, and a round that
crashed half-way is completed by the next one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import structlog

from cogsub.archive.ports import ArchiveStore
from cogsub.consolidation.clusters import Member, clusters, medoid, observation_text
from cogsub.consolidation.containment import contained_observations
from cogsub.consolidation.corrections import (
    TIER_NAMES,
    Contender,
    Tier,
    looks_like_preference,
    plan_repair,
    preference_text,
    resolution,
    winner,
)
from cogsub.consolidation.decay_pass import decay_bank
from cogsub.consolidation.similarity import content_words, similarity
from cogsub.consolidation.writer import DerivedWriter
from cogsub.core.derived import (
    CLUSTER_TAG,
    PROOF_TAG,
    TIER_TAG,
    DerivedKind,
    DerivedMemory,
    consumed_key,
    derived_event,
    derived_id,
    derived_key,
    is_superseded,
    proof_count,
    tag_value,
)
from cogsub.core.documents import IndexDocument
from cogsub.core.errors import NotFoundError, ObjectExistsError
from cogsub.core.events import ArchivedEvent, FactType, format_timestamp
from cogsub.core.memory import (
    PROCEDURE_TAG_PREFIX,
    VERSION_TAG_PREFIX,
    ConsolidationReport,
    procedure_text,
)
from cogsub.index.ports import MemoryIndex, SearchFilters

log = structlog.get_logger("cogsub.consolidation")

SCAN_PAGE = 500


@dataclass(frozen=True)
class ConsolidationPolicy:
    """Bounds and thresholds of a round (see docs/ranking.md)."""

    max_scan: int = 2_000
    max_outputs: int = 200
    cluster_threshold: float = 0.5
    min_cluster: int = 2
    topic_threshold: float = 0.4
    semantic: bool = False
    #: Never group memories that differ in a name, number, address, date or negation.
    by_details: bool = True
    decay_rate: float = 0.9
    decay_floor: float = 0.05
    epoch: timedelta = timedelta(days=1)


@dataclass
class _Progress:
    budget: int
    observations: list[str] = field(default_factory=list)
    preferences: list[str] = field(default_factory=list)
    procedures: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    reinforced: int = 0
    decayed: int = 0
    scanned: int = 0
    complete: bool = True

    def spend(self) -> bool:
        if self.budget <= 0:
            self.complete = False
            return False
        self.budget -= 1
        return True


class ConsolidationRound:
    """Runs rounds for any bank over the archive, the index and a writer."""

    def __init__(
        self,
        *,
        archive: ArchiveStore,
        index: MemoryIndex,
        writer: DerivedWriter,
        policy: ConsolidationPolicy | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self._archive = archive
        self._index = index
        self._writer = writer
        self.policy = policy or ConsolidationPolicy()
        self._clock = clock

    async def run(self, bank_id: str, *, decay: bool = True) -> ConsolidationReport:
        """One bounded round over ``bank_id``; returns what it produced."""
        began = time.perf_counter()
        progress = _Progress(budget=self.policy.max_outputs)
        facts = await self._active(bank_id, {FactType.WORLD, FactType.EXPERIENCE}, progress)
        groups = await self._observations(bank_id, facts, progress)
        await self._corrections(bank_id, progress)
        await self._inferred_preferences(bank_id, facts, groups, progress)
        await self._conflicts(bank_id, progress)
        decay_began = time.perf_counter()
        if decay:
            progress.decayed += await decay_bank(
                self._index,
                self._archive,
                bank_id,
                now=self._clock(),
                epoch_length=self.policy.epoch,
                rate=self.policy.decay_rate,
                floor=self.policy.decay_floor,
            )
        done = time.perf_counter()
        report = ConsolidationReport(
            bank_id=bank_id,
            observations=progress.observations,
            preferences=progress.preferences,
            procedures=progress.procedures,
            superseded=progress.superseded,
            reinforced=progress.reinforced,
            decayed=progress.decayed,
            scanned=progress.scanned,
            complete=progress.complete,
            took_ms=round((done - began) * 1000),
            decay_ms=round((done - decay_began) * 1000),
        )
        log.info("consolidation_round", **report.model_dump(exclude={"bank_id"}), bank_id=bank_id)
        return report

    # -- reading ---------------------------------------------------------------------

    async def _active(
        self, bank_id: str, types: set[FactType], progress: _Progress
    ) -> list[IndexDocument]:
        """Up to ``max_scan`` live (not superseded) memories of ``types``, in replay order.

        Read in that order from the index, so a round costs its slice, not the bank
        (sorting the whole bank made every round slower than the last).
        """
        wanted = self.policy.max_scan + 1  # one more than the slice: is there a rest?
        found: list[IndexDocument] = []
        after: IndexDocument | None = None
        filters = SearchFilters(bank_id=bank_id, fact_types=frozenset(types))
        while len(found) < wanted:
            size = max(SCAN_PAGE, wanted - len(found))
            page = await self._index.scan_in_replay_order(filters, size=size, after=after)
            found += [doc for doc in page if not is_superseded(doc)]
            if len(page) < size:
                break
            after = page[-1]
        if len(found) > self.policy.max_scan:
            progress.complete = False
        found = found[: self.policy.max_scan]
        progress.scanned += len(found)
        return found

    async def _archived(self, doc: IndexDocument) -> ArchivedEvent | None:
        try:
            return ArchivedEvent.model_validate_json(
                await self._archive.get(doc.object_storage_key)
            )
        except NotFoundError:
            log.warning("consolidation_archive_missing", memory_id=doc.event_id)
            return None

    def _member(self, doc: IndexDocument) -> Member:
        return Member(
            memory_id=doc.event_id,
            text=doc.summary,
            words=content_words(doc.summary),
            vector=tuple(doc.embedding),
            timestamp=_parse(doc.timestamp),
            proof=proof_count(doc),
        )

    # -- observations ----------------------------------------------------------------

    def _grouped(self, facts: list[IndexDocument]) -> list[tuple[list[Member], Member]]:
        """The clusters of ``facts``, each with its medoid (CPU work: run it off the loop)."""
        policy = self.policy
        groups = clusters(
            [self._member(d) for d in facts],
            threshold=policy.cluster_threshold,
            semantic=policy.semantic,
            min_size=policy.min_cluster,
            by_details=policy.by_details,
        )
        return [(group, medoid(group, semantic=policy.semantic)) for group in groups]

    async def _observations(
        self, bank_id: str, facts: list[IndexDocument], progress: _Progress
    ) -> list[tuple[list[Member], Member]]:
        # Scoring up to max_scan x max_scan pairs takes a while on a large bank; in a
        # thread, recall and ingestion on the event loop keep going meanwhile.
        groups = await asyncio.to_thread(self._grouped, facts)
        existing = await self._active(bank_id, {FactType.OBSERVATION}, progress)
        # Side by side: each is an archive read of an observation, mostly waiting.
        read = await asyncio.gather(*(self._sources(doc) for doc in existing))
        covered = {doc.event_id: frozenset(got) for doc, got in zip(existing, read, strict=True)}
        ends = {doc.event_id: _parse(doc.timestamp) for doc in existing}
        drafts = {
            derived_id(DerivedKind.OBSERVATION, bank_id, *sorted(m.memory_id for m in g)): (g, c)
            for g, c in groups
        }
        # A new observation a live one holds and more would be superseded at once (and
        # replay would retire it): no write, no budget spent on it.
        held = contained_observations(
            {i: frozenset(m.memory_id for m in g) for i, (g, _) in drafts.items()}, covered
        )
        skipped = {found.loser for found in held}
        wanted: list[DerivedMemory] = []
        standing: list[DerivedMemory] = []  # written already, perhaps by a round that died
        for obs_id, (group, centre) in drafts.items():
            if obs_id in covered:
                standing.append(self._observation(bank_id, obs_id, group, centre, facts))
            elif obs_id not in skipped and progress.spend():
                wanted.append(self._observation(bank_id, obs_id, group, centre, facts))
        # One write for all of them: each write step costs a sync however many it carries.
        written = await self._writer.write(bank_id, wanted)
        created = [m for m, w in zip(wanted, written, strict=True) if w.created]
        if created:
            # Clusters are disjoint: one pass bumps each source once, as one per
            # observation would.
            reinforced = [source for m in created for source in m.sources]
            await self._writer.reinforce(bank_id, reinforced)
            progress.observations += [m.memory_id for m in created]
            progress.reinforced += len(reinforced)
        live = dict(covered)
        for memory in (*wanted, *standing):
            live[memory.memory_id] = frozenset(memory.sources)
            ends[memory.memory_id] = memory.timestamp
        await self._supersede_contained(bank_id, live, ends, progress)
        return groups

    async def _supersede_contained(
        self,
        bank_id: str,
        live: dict[str, frozenset[str]],
        ends: dict[str, datetime],
        progress: _Progress,
    ) -> None:
        """Supersede each of ``live`` another of ``live`` holds, with more sources.

        Losers and winners both among every live observation the round knows (those it
        scanned, wrote or found written), as replay takes them among every live one it
        rebuilds: winners from this round's clusters alone left an older observation
        holding a new one's sources and more live beside it, which replay then retired,
        so the rebuilt index differed from the running one. Standing ones count too: a
        round that died after writing one, before superseding its predecessors, left
        them live, and no later round would write it again.
        """
        for found in contained_observations(live, live):
            await self._supersede(
                bank_id, found.loser, found.winner, ends[found.winner], found.rule, progress
            )

    def _observation(
        self,
        bank_id: str,
        obs_id: str,
        group: list[Member],
        centre: Member,
        facts: list[IndexDocument],
    ) -> DerivedMemory:
        importance = {d.event_id: d.importance_score for d in facts}
        ids = sorted(m.memory_id for m in group)
        first = min(m.timestamp for m in group)
        last = max(m.timestamp for m in group)
        proofs = sum(m.proof for m in group)
        return DerivedMemory(
            memory_id=obs_id,
            kind=DerivedKind.OBSERVATION,
            fact_type=FactType.OBSERVATION,
            text=observation_text(group, centre),
            timestamp=last,
            importance=max(importance.get(i, 0.5) for i in ids),
            sources=tuple(ids),
            tags=(f"{CLUSTER_TAG}{ids[0]}", f"{PROOF_TAG}{proofs}"),
            details={
                "statement": centre.text,
                "proofCount": proofs,
                "firstSeen": format_timestamp(first),
                "lastSeen": format_timestamp(last),
            },
        )

    async def _sources(self, doc: IndexDocument) -> set[str]:
        archived = await self._archived(doc)
        structured = archived.input.structured if archived is not None else None
        sources = structured.get("sources") if isinstance(structured, dict) else None
        return {str(s) for s in sources} if isinstance(sources, list) else set()

    # -- corrections -----------------------------------------------------------------

    async def _corrections(self, bank_id: str, progress: _Progress) -> None:
        corrections = await self._active(bank_id, {FactType.CORRECTION}, progress)
        procedures = await self._procedures(bank_id, progress)
        for doc in sorted(corrections, key=lambda d: (d.timestamp, d.event_id)):
            if await self._archive.exists(consumed_key(bank_id, doc.event_id)):
                continue
            archived = await self._archived(doc)
            if archived is None or not progress.spend():
                continue
            repaired = await self._repair(bank_id, archived, procedures, progress)
            if not repaired:
                await self._distill(bank_id, archived, progress)
            await self._consume(bank_id, doc.event_id, "repair" if repaired else "preference")

    async def _procedures(self, bank_id: str, progress: _Progress) -> dict[str, ArchivedEvent]:
        """The newest live version of each procedure, by procedure id."""
        newest: dict[str, tuple[int, IndexDocument]] = {}
        for doc in await self._active(bank_id, {FactType.PROCEDURE}, progress):
            pid = tag_value(doc.tags, PROCEDURE_TAG_PREFIX)
            version = tag_value(doc.tags, VERSION_TAG_PREFIX)
            if pid is None or version is None or not version.isdigit():
                continue
            if pid not in newest or int(version) > newest[pid][0]:
                newest[pid] = (int(version), doc)
        found = {}
        for pid, (_, doc) in sorted(newest.items()):
            archived = await self._archived(doc)
            if archived is not None:
                found[pid] = archived
        return found

    async def _repair(
        self,
        bank_id: str,
        correction: ArchivedEvent,
        procedures: dict[str, ArchivedEvent],
        progress: _Progress,
    ) -> bool:
        new_id = derived_id(DerivedKind.PROCEDURE, bank_id, correction.event_id)
        done = await self._resume(bank_id, DerivedKind.PROCEDURE, new_id)
        if done is not None:  # written by a round that crashed before marking the correction
            loser = _structured(done).get("supersedes")
            if isinstance(loser, str):
                await self._supersede(
                    bank_id, loser, new_id, done.timestamp, "procedure repaired", progress
                )
            return True
        wanted = tag_value(correction.tags, PROCEDURE_TAG_PREFIX)
        words = content_words(correction.input.text)
        ranked = sorted(
            procedures.items(),
            key=lambda item: -similarity(words, content_words(item[1].input.text)),
        )
        for pid, current in ranked:
            if wanted is not None and pid != wanted:
                continue
            details = _structured(current)
            steps = tuple(_listed(details.get("steps")))
            repair = plan_repair(correction.input.text, steps)
            if repair is None:
                continue
            found = details.get("version")
            version = (found if isinstance(found, int) else 1) + 1
            rationale = details.get("rationale")
            memory = DerivedMemory(
                memory_id=new_id,
                kind=DerivedKind.PROCEDURE,
                fact_type=FactType.PROCEDURE,
                text=procedure_text(
                    list(repair.steps), rationale if isinstance(rationale, str) else None
                ),
                timestamp=max(correction.timestamp, current.timestamp),
                importance=max(correction.importance_score, current.importance_score),
                sources=(correction.event_id, current.event_id),
                tags=(f"{PROCEDURE_TAG_PREFIX}{pid}", f"{VERSION_TAG_PREFIX}{version}"),
                details={
                    "steps": list(repair.steps),
                    "rationale": rationale,
                    "procedureId": pid,
                    "version": version,
                    "supersedes": current.event_id,
                    "repairedBy": correction.event_id,
                    "change": repair.describe(),
                },
            )
            (written,) = await self._writer.write(bank_id, [memory])
            if written.created:
                progress.procedures.append(new_id)
            rule = f"repaired by correction {correction.event_id}: {repair.describe()}"
            await self._supersede(
                bank_id, current.event_id, new_id, memory.timestamp, rule, progress
            )
            procedures[pid] = derived_event(bank_id, memory, key=written.object_storage_key)
            return True
        return False

    async def _distill(self, bank_id: str, correction: ArchivedEvent, progress: _Progress) -> None:
        pref_id = derived_id(DerivedKind.PREFERENCE, bank_id, correction.event_id)
        memory = DerivedMemory(
            memory_id=pref_id,
            kind=DerivedKind.PREFERENCE,
            fact_type=FactType.PREFERENCE,
            text=preference_text(correction.input.text),
            timestamp=correction.timestamp,
            importance=max(0.8, correction.importance_score),
            sources=(correction.event_id,),
            tags=(f"{TIER_TAG}{int(Tier.EXPLICIT)}",),
            details={"tier": TIER_NAMES[Tier.EXPLICIT], "correction": correction.input.text},
            session_id=correction.context.session_id,
        )
        (written,) = await self._writer.write(bank_id, [memory])
        if written.created:
            progress.preferences.append(pref_id)

    async def _consume(self, bank_id: str, correction_id: str, outcome: str) -> None:
        body = json.dumps({"correction": correction_id, "outcome": outcome}).encode()
        with contextlib.suppress(ObjectExistsError):  # a previous round got this far
            await self._archive.put_once(consumed_key(bank_id, correction_id), body)

    async def _resume(
        self, bank_id: str, kind: DerivedKind, memory_id: str
    ) -> ArchivedEvent | None:
        try:
            raw = await self._archive.get(derived_key(bank_id, kind, memory_id))
        except NotFoundError:
            return None
        archived = ArchivedEvent.model_validate_json(raw)
        if await self._index.get(bank_id, memory_id) is None:
            await self._writer.write(bank_id, [_as_memory(archived, kind)])
        return archived

    # -- preferences from patterns, and the conflict rule ----------------------------

    async def _inferred_preferences(
        self,
        bank_id: str,
        facts: list[IndexDocument],
        groups: list[tuple[list[Member], Member]],
        progress: _Progress,
    ) -> None:
        clustered = {m.memory_id for g, _ in groups for m in g}
        wanted: list[DerivedMemory] = []
        for group, centre in groups:
            if looks_like_preference(centre.text):
                ids = sorted(m.memory_id for m in group)
                wanted.append(
                    _inferred(
                        bank_id, Tier.REPEATED, centre.text, ids, max(m.timestamp for m in group)
                    )
                )
        for doc in facts:
            if doc.event_id not in clustered and looks_like_preference(doc.summary):
                wanted.append(
                    _inferred(
                        bank_id, Tier.INFERRED, doc.summary, [doc.event_id], _parse(doc.timestamp)
                    )
                )
        kept = [memory for memory in wanted if progress.spend()]
        written = await self._writer.write(bank_id, kept)
        progress.preferences += [
            m.memory_id for m, w in zip(kept, written, strict=True) if w.created
        ]

    async def _conflicts(self, bank_id: str, progress: _Progress) -> None:
        prefs = await self._active(bank_id, {FactType.PREFERENCE}, progress)
        members = [self._member(d) for d in prefs]
        groups = await asyncio.to_thread(
            clusters,
            members,
            threshold=self.policy.topic_threshold,
            semantic=self.policy.semantic,
            min_size=2,
        )
        by_id = {d.event_id: d for d in prefs}
        for group in groups:
            contenders = [_contender(by_id[m.memory_id]) for m in group]
            won = winner(contenders)
            for lost in contenders:
                if lost is not won:
                    valid_to = max(won.timestamp, lost.timestamp)
                    rule = resolution(won, lost)
                    await self._supersede(
                        bank_id, lost.memory_id, won.memory_id, valid_to, rule, progress
                    )

    async def _supersede(
        self,
        bank_id: str,
        loser: str,
        winner_id: str,
        valid_to: datetime,
        rule: str,
        progress: _Progress,
    ) -> None:
        if await self._writer.supersede(bank_id, loser, winner_id, valid_to=valid_to, rule=rule):
            progress.superseded.append(loser)


def _structured(event: ArchivedEvent) -> dict[str, object]:
    value = event.input.structured
    return dict(value) if isinstance(value, dict) else {}


def _listed(value: object) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _parse(timestamp: str) -> datetime:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00"))


def _contender(doc: IndexDocument) -> Contender:
    tier = tag_value(doc.tags, TIER_TAG)
    return Contender(
        memory_id=doc.event_id,
        tier=Tier(int(tier)) if tier is not None and tier.isdigit() else Tier.EXPLICIT,
        timestamp=_parse(doc.timestamp),
    )


def _inferred(
    bank_id: str, tier: Tier, statement: str, sources: list[str], timestamp: datetime
) -> DerivedMemory:
    return DerivedMemory(
        memory_id=derived_id(DerivedKind.PREFERENCE, bank_id, "inferred", *sources),
        kind=DerivedKind.PREFERENCE,
        fact_type=FactType.PREFERENCE,
        text=statement,
        timestamp=timestamp,
        importance=0.6 if tier is Tier.REPEATED else 0.4,
        sources=tuple(sources),
        tags=(f"{TIER_TAG}{int(tier)}",),
        details={"tier": TIER_NAMES[tier]},
    )


def _as_memory(archived: ArchivedEvent, kind: DerivedKind) -> DerivedMemory:
    details = _structured(archived)
    return DerivedMemory(
        memory_id=archived.event_id,
        kind=kind,
        fact_type=archived.fact_type or FactType.OBSERVATION,
        text=archived.input.text,
        timestamp=archived.timestamp,
        importance=archived.importance_score,
        sources=tuple(_listed(details.get("sources"))),
        tags=tuple(t for t in archived.tags if not t.startswith("derived:")),
        details={k: v for k, v in details.items() if k not in ("kind", "sources")},
    )
