"""A memory's lineage, read from the archive: versions, supersession, sources, evidence, signals.

What consolidation and updates leave behind is enough to trace any memory:

- a derived memory's archived event names its ``kind`` and ``sources`` (a fact
  also its ``sourceEventId``; a repaired procedure ``supersedes`` and
  ``repairedBy``);
- a write-once supersession record per loser names its winner, ``validTo`` and
  the ``rule`` that decided; the winner carries ``supersedes:`` tags;
- one evidence object per (fact, source event) proves a fact again;
- procedure versions share a ``procedure:`` tag and count up in ``version:``;
  an update of any other memory chains versions through supersession records
  whose rule is ``update``.

``MemoryHistorian`` reads those objects; the functions below it turn what was
read into a ``MemoryHistory`` without I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from cogsub.archive.ports import ArchiveStore
from cogsub.core.derived import (
    PROOF_TAG,
    SUPERSEDES_TAG,
    evidence_prefix,
    is_superseded,
    proof_count,
    supersession_key,
    tag_values,
)
from cogsub.core.documents import IndexDocument
from cogsub.core.errors import NotFoundError
from cogsub.core.events import EventType, FactType
from cogsub.core.history import (
    UPDATE_RULE,
    LinkedMemory,
    MemoryHistory,
    MemorySignals,
    MemoryVersion,
    SupersessionRecord,
)
from cogsub.index.ports import MemoryIndex, SearchFilters, procedure_of
from cogsub.lifecycle.archive_reads import read_many
from cogsub.lifecycle.listing import memory_record
from cogsub.lifecycle.provenance import evidence_from

__all__ = [
    "MAX_LINKS",
    "MemoryHistorian",
    "Read",
    "assemble",
    "linked",
    "newer_version_record",
    "record_from",
    "signals_of",
    "version_line",
]

#: Linked memories (sources, evidence, versions) one history reads at most, each.
MAX_LINKS = 200
NEWER_VERSION_RULE = "newer procedure version"
_FACT_TYPE_VALUES = frozenset(fact.value for fact in FactType)
Relation = Literal["source", "evidence", "correction"]


@dataclass(frozen=True)
class Read:
    """One memory as the history read it: its index document and archived event, if any."""

    memory_id: str
    doc: IndexDocument | None
    event: Mapping[str, Any] | None

    @property
    def structured(self) -> Mapping[str, Any]:
        found = (self.event or {}).get("input", {}).get("structured")
        return found if isinstance(found, dict) else {}

    @property
    def derived(self) -> bool:
        return (self.event or {}).get("type") == EventType.CONSOLIDATION_OUTPUT.value

    @property
    def fact_type(self) -> FactType | None:
        if self.doc is not None:
            return self.doc.fact_type
        raw = (self.event or {}).get("factType")
        return FactType(raw) if raw in _FACT_TYPE_VALUES else None


def record_from(body: Mapping[str, Any]) -> SupersessionRecord:
    """A supersession record as the archive keeps it (camelCase)."""
    valid_to = body.get("validTo")
    return SupersessionRecord(
        memory_id=str(body["memoryId"]),
        superseded_by=str(body["supersededBy"]),
        rule=str(body.get("rule") or "unrecorded"),
        valid_to=valid_to if isinstance(valid_to, str) else None,
    )


def newer_version_record(older: IndexDocument, newer: IndexDocument) -> SupersessionRecord:
    """What replaced a procedure version that no record names: the version after it."""
    return SupersessionRecord(
        memory_id=older.event_id,
        superseded_by=newer.event_id,
        rule=NEWER_VERSION_RULE,
        valid_to=newer.timestamp,
    )


def linked(read: Read, relation: Relation) -> LinkedMemory:
    """``read`` as a link, with the raw event it came from when that can be told."""
    origin = read.structured.get("sourceEventId")
    if isinstance(origin, str):
        event_id: str | None = origin
    elif read.event is not None and not read.derived:
        event_id = read.memory_id  # retained as is: the memory is its own event
    else:
        event_id = None
    text = (read.event or {}).get("input", {}).get("text")
    timestamp = read.doc.timestamp if read.doc is not None else (read.event or {}).get("timestamp")
    return LinkedMemory(
        memory_id=read.memory_id,
        relation=relation,
        fact_type=read.fact_type,
        text=text if isinstance(text, str) else None,
        timestamp=timestamp if isinstance(timestamp, str) else None,
        event_id=event_id,
    )


def signals_of(doc: IndexDocument, *, replaced: bool = False) -> MemorySignals:
    """The index's signals; ``replaced``: a record or a newer procedure version says it is
    superseded (a version retained with ``supersedes`` leaves no tag on the one before)."""
    derived_proof = any(t.startswith(PROOF_TAG) for t in doc.tags)
    return MemorySignals(
        importance_score=doc.importance_score,
        decay_factor=doc.decay_factor,
        retrieval_count=doc.retrieval_count,
        reward_score=doc.reward_score,
        confidence=doc.confidence,
        proof_count=proof_count(doc) if derived_proof else None,
        superseded=replaced or is_superseded(doc),
    )


def version_line(
    line: Sequence[Read], replaced: Mapping[str, SupersessionRecord]
) -> list[MemoryVersion]:
    """The versions oldest first, numbered from 1; the current one is the newest still live."""
    versions = []
    for number, read in enumerate(line, start=1):
        record = replaced.get(read.memory_id)
        text = (read.event or {}).get("input", {}).get("text")
        versions.append(
            MemoryVersion(
                memory_id=read.memory_id,
                version=_version_of(read) or number,
                timestamp=read.doc.timestamp if read.doc is not None else None,
                text=text if isinstance(text, str) else None,
                superseded_by=record.superseded_by if record is not None else None,
                current=False,
            )
        )
    live = [v for v in versions if v.superseded_by is None and v.text is not None]
    if live:
        newest = live[-1]
        versions = [v.model_copy(update={"current": v is newest}) for v in versions]
    return versions


def _version_of(read: Read) -> int | None:
    found = procedure_of(read.doc.tags) if read.doc is not None else None
    return found[1] if found is not None else None


def assemble(
    bank_id: str,
    memory: Read,
    *,
    line: Sequence[Read],
    replaced: Mapping[str, SupersessionRecord],
    supersedes: Sequence[SupersessionRecord],
    sources: Sequence[Read],
    evidence: Sequence[Read],
) -> MemoryHistory:
    """The history of ``memory`` from what was read about it (no I/O)."""
    assert memory.doc is not None and memory.event is not None
    corrections = [s for s in sources if s.fact_type is FactType.CORRECTION]
    kind = memory.structured.get("kind") if memory.derived else None
    superseded_by = replaced.get(memory.memory_id)
    return MemoryHistory(
        bank_id=bank_id,
        memory_id=memory.memory_id,
        memory=memory_record(memory.doc, dict(memory.event)),
        kind=kind if isinstance(kind, str) else None,
        versions=version_line(line or [memory], replaced),
        superseded_by=superseded_by,
        supersedes=list(supersedes),
        sources=[linked(s, "source") for s in sources if s not in corrections],
        evidence=[linked(e, "evidence") for e in evidence],
        corrections=[linked(c, "correction") for c in corrections],
        signals=signals_of(memory.doc, replaced=superseded_by is not None),
    )


class MemoryHistorian:
    """Reads what the archive and the index hold about one memory and assembles its history."""

    def __init__(self, *, archive: ArchiveStore, index: MemoryIndex) -> None:
        self._archive = archive
        self._index = index

    async def history(self, bank_id: str, memory_id: str) -> MemoryHistory:
        """The lineage of ``memory_id`` in ``bank_id``.

        Raises:
            NotFoundError: the bank holds no such memory.
        """
        doc = await self._index.get(bank_id, memory_id)
        memory = (await self._reads(bank_id, [doc]))[0] if doc is not None else None
        if memory is None or memory.event is None:
            raise NotFoundError(f"no memory {memory_id!r} in bank {bank_id!r}")
        line = await self._line(bank_id, memory)
        replaced = await self._records(bank_id, [r.memory_id for r in line] or [memory_id])
        _fill_newer_versions(line, replaced)
        losers = await self._records(bank_id, _losers_named_by(memory))
        # A procedure's versions are in ``replaced`` too (some with no record of their own).
        supersedes = {**losers, **replaced}.values()
        sources = await self._linked(bank_id, _sources_of(memory))
        evidence = await self._evidence(bank_id, [memory, *sources])
        return assemble(
            bank_id,
            memory,
            line=line,
            replaced=replaced,
            supersedes=[r for r in supersedes if r.superseded_by == memory_id],
            sources=sources,
            evidence=evidence,
        )

    async def _line(self, bank_id: str, memory: Read) -> list[Read]:
        """The version line of ``memory``: a procedure's versions, or its ``update`` chain."""
        assert memory.doc is not None
        found = procedure_of(memory.doc.tags)
        if found is not None:
            filters = SearchFilters(bank_id=bank_id, tags_any=frozenset({f"procedure:{found[0]}"}))
            docs = await self._index.scan(filters, size=MAX_LINKS)
            versions = [d for d in docs if procedure_of(d.tags) is not None]
            versions.sort(key=lambda d: (procedure_of(d.tags) or ("", 0))[1])
            return await self._reads(bank_id, versions)
        return await self._update_chain(bank_id, memory)

    async def _update_chain(self, bank_id: str, memory: Read) -> list[Read]:
        """Older versions through ``supersedes:`` tags, newer through records, rule ``update``."""
        chain = [memory]
        while len(chain) < MAX_LINKS:
            oldest = chain[0]
            losers = tag_values(oldest.doc.tags if oldest.doc else [], SUPERSEDES_TAG)
            records = await self._records(bank_id, losers)
            older = [r.memory_id for r in records.values() if r.rule == UPDATE_RULE]
            if not older or older[0] in {r.memory_id for r in chain}:
                break
            chain = [*await self._linked(bank_id, older[:1]), *chain]
        while len(chain) < MAX_LINKS:
            record = (await self._records(bank_id, [chain[-1].memory_id])).get(chain[-1].memory_id)
            if record is None or record.rule != UPDATE_RULE:
                break
            if record.superseded_by in {r.memory_id for r in chain}:
                break
            chain += await self._linked(bank_id, [record.superseded_by])
        return chain if len(chain) > 1 else []

    async def _records(self, bank_id: str, losers: Sequence[str]) -> dict[str, SupersessionRecord]:
        """The supersession record of each loser that has one."""
        keys = {supersession_key(bank_id, loser): loser for loser in losers[:MAX_LINKS]}
        bodies = await read_many(self._archive, list(keys))
        return {keys[key]: record_from(json.loads(body)) for key, body in bodies.items()}

    async def _linked(self, bank_id: str, memory_ids: Sequence[str]) -> list[Read]:
        """Each memory id as read now: its document and event, or what is left of them."""
        wanted = list(dict.fromkeys(memory_ids))[:MAX_LINKS]
        docs = [await self._index.get(bank_id, memory_id) for memory_id in wanted]
        found = {r.memory_id: r for r in await self._reads(bank_id, [d for d in docs if d])}
        return [found.get(m, Read(m, None, None)) for m in wanted]

    async def _reads(self, bank_id: str, docs: Sequence[IndexDocument]) -> list[Read]:
        bodies = await read_many(self._archive, [d.object_storage_key for d in docs])
        return [
            Read(d.event_id, d, _json(bodies.get(d.object_storage_key)))
            for d in docs
            if d.bank_id == bank_id
        ]

    async def _evidence(self, bank_id: str, facts: Sequence[Read]) -> list[Read]:
        """The sources named by the evidence objects of ``facts`` (a fact, an observation's)."""
        named: list[str] = []
        for fact in facts:
            prefix = evidence_prefix(bank_id, fact.memory_id)
            async for key in self._archive.list(prefix):
                found = evidence_from(bank_id, key)
                if found is not None:
                    named.append(found.source)
                if len(named) >= MAX_LINKS:
                    break
        return await self._linked(bank_id, named)


def _fill_newer_versions(line: Sequence[Read], replaced: dict[str, SupersessionRecord]) -> None:
    """Procedure versions no record names were replaced by the version after them."""
    for older, newer in zip(line, line[1:], strict=False):
        if older.memory_id in replaced or older.doc is None or newer.doc is None:
            continue
        if procedure_of(older.doc.tags) is not None:
            replaced[older.memory_id] = newer_version_record(older.doc, newer.doc)


def _sources_of(memory: Read) -> list[str]:
    listed = memory.structured.get("sources")
    sources = [str(s) for s in listed] if isinstance(listed, list) else []
    repaired_by = memory.structured.get("repairedBy")
    if isinstance(repaired_by, str):
        sources.append(repaired_by)
    return list(dict.fromkeys(sources))


def _losers_named_by(memory: Read) -> list[str]:
    """What ``memory`` says it replaced: ``supersedes:`` tags and a version's ``supersedes``."""
    tagged = tag_values(memory.doc.tags, SUPERSEDES_TAG) if memory.doc is not None else []
    named = memory.structured.get("supersedes")
    return list(dict.fromkeys([*tagged, *([named] if isinstance(named, str) else [])]))


def _json(body: bytes | None) -> dict[str, Any] | None:
    if body is None:
        return None
    found = json.loads(body)
    return found if isinstance(found, dict) else None
