"""The consolidator under faults: `cogsub consolidator` SIGKILLed while events flow.

The ``consolidator-sigkill`` scenario of ``benchmarks.faults`` runs the embedded
stack: one `cogsub ingest`, one `cogsub serve` and one `cogsub consolidator` on
one data directory. Embedded, not distributed, because its checks need exact
offsets and a killed member's partitions back at once: the embedded log's
committed offsets are exact and a lease whose process is gone is taken over on
the next poll, while of the test brokers Tansu reports wrong end offsets for
multi-record batches and noida-db never evicts a killed member (docs/reliability.md,
findings 3 and 4). Three Python processes instead of six plus three servers also
suit a 2-core machine.

The events are the ingestion suite's, each stating where someone keeps something
("Priya keeps the kayak in the attic."), drawn from a small pool per bank: the
same statement from several events is one fact with several proofs, and
statements about one person cluster into observations that grow, and supersede
their predecessors, as facts arrive. Rounds run every ``SCHEDULE_S`` and on
requests published while events flow, so kills land in extraction batches, in
rounds and between them. After the drain one request per bank asks for a last
round, and the consolidator is stopped (SIGTERM) before counting. It passes when:

- its group has committed both topics to the end (no lag);
- every fact the acknowledged events state is indexed once, with one evidence
  object per stating event and a proof count equal to their number, and no fact
  nothing stated (re-extraction after a kill counts no source twice, loses none);
- no two active observations of a bank share a source (clusters are disjoint, so
  two would mean a successor was written and its predecessor never superseded);
- every derived memory but observations in the archive is indexed, and every
  indexed one announced on ``memory.semantic.updated`` (the writer's archive →
  announce → index order);
- the archive, the truth, rebuilds the same live observations: `cogsub replay`'s
  code run into a fresh index holds exactly the running index's live observations
  of each bank, none sharing a source. A round killed between archiving an
  observation and indexing it leaves one whose cluster may have grown by the next
  round, which then derives another id and never indexes it; those are counted
  apart (``observations_unindexed``), and replay must supersede them by the round's
  rule instead of bringing them back live;
- it dead-lettered exactly the one invalid request, and exited 0 when stopped.

The expected facts come from the offline extractor and ``fact_id`` run here on the
acknowledged events: the oracle is the same deterministic function the worker
applies, so what is checked is that kills neither drop nor repeat its effects.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.fault_counts import Stores, Timeline, is_derived, read_topic
from benchmarks.fault_stack import CONSOLIDATOR_READY, Fleet, ManagedProcess
from benchmarks.ingest import make_events
from cogsub.bus.ports import EventBus
from cogsub.consolidation.facts import fact_id
from cogsub.consolidation.worker import request_payload
from cogsub.core.derived import (
    CONSOLIDATION_PREFIX,
    DERIVED_TAG,
    DerivedKind,
    is_derived_memory_key,
    is_superseded,
    proof_count,
)
from cogsub.core.documents import IndexDocument
from cogsub.core.events import ArchivedEvent, EventType
from cogsub.core.topics import (
    CONSOLIDATION_DLQ,
    CONSOLIDATION_REQUEST,
    EXPERIENCE_ENRICHED,
    MEMORY_SEMANTIC_UPDATED,
)
from cogsub.extraction.offline import OfflineExtractor, states_facts
from cogsub.extraction.ports import ExtractionInput
from cogsub.index.ports import SearchFilters
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.replay import replay

GROUP = "consolidation"  # the settings' default group, which `cogsub consolidator` uses
SCHEDULE_S = 2.0  # between scheduled rounds: several per kill interval
REQUEST_EVERY_S = 3.0  # a round asked for on demand, while events flow
# On the distributed stack a round of a bank takes seconds on 2 cores (osmem, S3 reads):
# rounds every 2 s held ingestion's drain after an index outage at ~160 s instead of ~1 s.
DISTRIBUTED_SCHEDULE_S = 10.0
KILL_SPREAD_S = 2.0  # a kill lands up to this long after the victim's group moved
PROGRESS_WAIT_S = 20.0  # a victim whose group does not move this long is killed anyway
POISON_REQUEST = b'{"bankId": "../not a bank"}'  # an invalid bank id: dead-lettered

NAMES = ("Priya", "Tomas", "Ingrid", "Kwame", "Yuki", "Omar", "Lena", "Diego")
ITEMS = ("ladder", "kayak", "toolbox", "tent", "bicycle")
PLACES = ("garage", "attic", "cellar")

FactKey = tuple[str, str]
"""``(bank id, fact id)``."""


def statement_events(count: int, *, seed: int) -> list[dict[str, Any]]:
    """The ingestion suite's events, each saying where someone keeps something.

    Drawn from 120 statements a bank, so most are stated by several events.
    """
    rng = random.Random(seed)
    events = make_events(count, seed=seed)
    for event in events:
        name, item, place = rng.choice(NAMES), rng.choice(ITEMS), rng.choice(PLACES)
        event["input"] = {"text": f"{name} keeps the {item} in the {place}."}
    return events


async def expected_evidence(events: Sequence[Mapping[str, Any]]) -> dict[FactKey, frozenset[str]]:
    """Per fact the events state, its evidence names (``<event id>-<position>``)."""
    extractor = OfflineExtractor()
    found: dict[FactKey, set[str]] = defaultdict(set)
    for event in events:
        item = ExtractionInput(
            source_event_id=str(event["eventId"]),
            text=str(event["input"]["text"]),
            event_time=datetime.fromisoformat(str(event["timestamp"]).replace("Z", "+00:00")),
            event_type=EventType(event["type"]),
            speaker=None,  # the suite's events name neither a user nor an agent
        )
        if not states_facts(item):
            continue
        bank = str(event["bankId"])
        for position, fact in enumerate(await extractor.extract(item)):
            found[(bank, fact_id(bank, fact))].add(f"{item.source_event_id}-{position}")
    return {key: frozenset(names) for key, names in found.items()}


@dataclass
class FactCounts:
    """How the facts found compare with the facts the acknowledged events state."""

    expected: int = 0
    indexed: int = 0
    missing: int = 0  # stated, not indexed
    unexpected: int = 0  # indexed, stated by no acknowledged event
    evidence_missing: int = 0  # (fact, source) pairs without their evidence object
    evidence_extra: int = 0  # evidence objects no acknowledged event accounts for
    proofs_wrong: int = 0  # facts whose proof count is not their number of evidence objects


def compare_facts(
    expected: Mapping[FactKey, frozenset[str]],
    proofs: Mapping[FactKey, int],
    evidence: Mapping[FactKey, frozenset[str]],
) -> FactCounts:
    """Facts stated vs indexed (with their proof counts) vs evidence objects archived."""
    counts = FactCounts(expected=len(expected), indexed=len(proofs))
    counts.missing = sum(1 for key in expected if key not in proofs)
    counts.unexpected = sum(1 for key in proofs if key not in expected)
    for key in expected.keys() | evidence.keys():
        wanted, held = expected.get(key, frozenset()), evidence.get(key, frozenset())
        counts.evidence_missing += len(wanted - held)
        counts.evidence_extra += len(held - wanted)
    counts.proofs_wrong = sum(
        1 for key, proof in proofs.items() if proof != len(evidence.get(key, ()))
    )
    return counts


def overlapping(observations: Mapping[str, Sequence[frozenset[str]]]) -> int:
    """Active observations sharing a source with another active one of their bank."""
    shared = 0
    for sources in observations.values():
        seen: dict[str, int] = defaultdict(int)
        for found in sources:
            for source in found:
                seen[source] += 1
        shared += sum(1 for found in sources if any(seen[s] > 1 for s in found))
    return shared


def replay_differences(running: Mapping[str, set[str]], replayed: Mapping[str, set[str]]) -> int:
    """Live observation ids one index holds and the other does not, over every bank."""
    banks = running.keys() | replayed.keys()
    return sum(len(running.get(b, set()) ^ replayed.get(b, set())) for b in banks)


@dataclass
class ConsolidatorFigures:
    """What the consolidator did and left behind (``ok``: nothing lost, twice or stuck)."""

    kills: int = 0
    mid_stream: int = 0  # kills that came after the victim's group had committed something
    kill_points: list[str] = field(default_factory=list)
    requests: int = 0  # valid requests published, the final ones included
    rounds: int = 0  # rounds the consolidator processes logged
    final_lag: int | None = None  # the group's, on experience.enriched and the request topic
    facts: FactCounts = field(default_factory=FactCounts)
    observations: int = 0  # active ones
    superseded: int = 0  # observations superseded by a larger one
    overlapping: int = 0
    derived_archived: int = 0
    derived_unindexed: int = 0  # facts (or other kinds) archived, not indexed
    observations_unindexed: int = 0  # archived by a round that died: no defect if replay agrees
    replay_differs: int | None = None  # live observations of one index only (None: not replayed)
    replay_overlapping: int = 0  # live observations sharing a source, in the replayed index
    derived_unannounced: int = 0
    dead_lettered: int = 0
    dead_letters_expected: int = 0
    stopped_cleanly: bool = False

    @property
    def ok(self) -> bool:
        facts = self.facts
        return (
            self.final_lag == 0
            and facts.expected > 0
            and facts.missing == facts.unexpected == 0
            and facts.evidence_missing == facts.evidence_extra == facts.proofs_wrong == 0
            and self.overlapping == 0
            and self.derived_unindexed == 0
            and self.replay_differs == self.replay_overlapping == 0
            and self.derived_unannounced == 0
            and self.dead_lettered == self.dead_letters_expected
            and self.stopped_cleanly
        )

    def summary(self) -> str:
        """The consolidator's figures in one line of the report."""
        facts = self.facts
        return (
            f"consolidator: {self.kills} kills, {self.rounds} rounds, {self.requests} requests; "
            f"facts {facts.indexed} indexed of {facts.expected} stated, evidence "
            f"{facts.evidence_missing} missing / {facts.evidence_extra} extra, "
            f"{facts.proofs_wrong} wrong proof counts; observations {self.observations} active "
            f"({self.superseded} superseded, {self.overlapping} overlapping); "
            f"{self.derived_archived} derived archived, "
            f"{self.derived_unindexed + self.observations_unindexed} unindexed "
            f"({self.observations_unindexed} observations), "
            f"{self.derived_unannounced} unannounced; replayed live observations "
            f"{self.replay_differs} differing, {self.replay_overlapping} overlapping; "
            f"dead letters {self.dead_lettered} "
            f"of {self.dead_letters_expected}; lag {self.final_lag}"
        )

    def problems(self) -> list[str]:
        """One note per guarantee that did not hold."""
        facts, notes = self.facts, []
        if self.final_lag != 0:
            notes.append(f"consolidation group lag {self.final_lag}")
        for what, n in (
            ("facts missing", facts.missing),
            ("facts nothing stated", facts.unexpected),
            ("evidence objects missing", facts.evidence_missing),
            ("evidence objects extra", facts.evidence_extra),
            ("facts with a wrong proof count", facts.proofs_wrong),
            ("active observations sharing a source", self.overlapping),
            ("derived memories (not observations) archived, not indexed", self.derived_unindexed),
            ("derived memories indexed, never announced", self.derived_unannounced),
            (
                "live observations a replay of the archive does not rebuild alike",
                self.replay_differs,
            ),
            ("replayed live observations sharing a source", self.replay_overlapping),
        ):
            if n:
                notes.append(f"{n} {what}")
        if self.replay_differs is None:
            notes.append("the archive was not replayed")
        if self.dead_lettered != self.dead_letters_expected:
            notes.append(
                f"{self.dead_lettered} consolidation dead letters, "
                f"{self.dead_letters_expected} expected"
            )
        if not self.stopped_cleanly:
            notes.append("the consolidator did not exit 0 on SIGTERM")
        return notes


async def group_lag(bus: EventBus, *, timeout_s: float = 5.0) -> int | None:
    """The consolidation group's lag on both its topics, or ``None`` when unreadable."""
    try:
        stats = [
            await asyncio.wait_for(bus.topic_stats(topic, group=GROUP), timeout_s)
            for topic in (EXPERIENCE_ENRICHED, CONSOLIDATION_REQUEST)
        ]
    except Exception:  # the store is busy or down: "not readable" is the observation
        return None
    return sum(s.lag for s in stats)


async def committed(bus: EventBus) -> int:
    """How many records of experience.enriched the group has committed."""
    stats = await bus.topic_stats(EXPERIENCE_ENRICHED, group=GROUP)
    return sum(p.committed or 0 for p in stats.partitions)


class ConsolidatorKills:
    """SIGKILL the consolidator at a random point, restart it, ``kills`` times (seeded).

    A point is a random time up to ``KILL_SPREAD_S`` after the victim's group first
    commits something since it was started: it then holds a batch polled and being
    extracted or written, or a round under way.
    """

    def __init__(self, fleet: Fleet, bus: EventBus, *, kills: int, seed: int) -> None:
        self.fleet, self.bus, self.kills = fleet, bus, kills
        self.rng = random.Random(seed)
        self.done = 0
        self.mid_stream = 0
        self.points: list[str] = []  # "t=12.3s consolidator-2 after 40 records"

    async def apply(self, timeline: Timeline) -> None:
        timeline.fault_start = timeline.now()
        for _ in range(self.kills):
            (victim,) = self.fleet.consolidators
            delay_s = self.rng.uniform(0.0, KILL_SPREAD_S)
            await asyncio.to_thread(victim.wait_for, CONSOLIDATOR_READY, 60.0)
            before = await committed(self.bus)
            deadline = time.monotonic() + PROGRESS_WAIT_S
            while time.monotonic() < deadline and victim.alive():
                if await committed(self.bus) > before:
                    self.mid_stream += 1
                    break
                await asyncio.sleep(0.05)  # offsets have no change notification to await
            await asyncio.sleep(delay_s)
            progress = await committed(self.bus) - before
            self.points.append(f"t={timeline.now():.1f}s {victim.name} after {progress} records")
            await asyncio.to_thread(self.fleet.replace, victim)
            self.done += 1
        timeline.fault_clear = timeline.now()

    def release(self) -> None:
        return None


class ConsolidatorCheck:
    """Requests rounds while events flow, asks for the last ones, then counts and judges."""

    def __init__(
        self,
        fleet: Fleet,
        banks: Sequence[str],
        *,
        seed: int,
        kills: ConsolidatorKills | None = None,
        request_every_s: float = REQUEST_EVERY_S,
    ) -> None:
        self.fleet, self.kills, self.banks = fleet, kills, list(banks)
        self.request_every_s = request_every_s
        self.rng = random.Random(seed + 1)
        self.requests = 0
        self.final_asked = False
        self._requesting: asyncio.Task[None] | None = None

    def start(self, bus: EventBus, producing: asyncio.Task[Any]) -> None:
        """Publish the invalid request, then a valid one every few seconds while producing."""
        self._requesting = asyncio.create_task(self._request_while(bus, producing))

    async def _request_while(self, bus: EventBus, producing: asyncio.Task[Any]) -> None:
        await bus.publish(CONSOLIDATION_REQUEST, POISON_REQUEST)
        while not producing.done():
            await asyncio.sleep(self.request_every_s)  # the schedule, not a synchronisation
            bank = self.rng.choice(self.banks)
            await bus.publish(CONSOLIDATION_REQUEST, request_payload(bank), key=bank.encode())
            self.requests += 1

    async def settled(self, bus: EventBus) -> bool:
        """Once the group is caught up, ask each bank for a last round; then wait for those."""
        if self._requesting is not None and not self._requesting.done():
            return False
        if await group_lag(bus) != 0:
            return False
        if not self.final_asked:
            for bank in self.banks:
                await bus.publish(CONSOLIDATION_REQUEST, request_payload(bank), key=bank.encode())
            self.requests += len(self.banks)
            self.final_asked = True
            return False  # committed only once their rounds are done
        return True

    async def stop(self) -> None:
        if self._requesting is not None:
            self._requesting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._requesting

    async def judge(
        self, stores: Stores, acknowledged: Sequence[Mapping[str, Any]]
    ) -> ConsolidatorFigures:
        """Stop the consolidator (SIGTERM), then count what it left behind."""
        await self.stop()
        figures = ConsolidatorFigures(requests=self.requests, dead_letters_expected=1)
        if self.kills is not None:
            figures.kills, figures.mid_stream = self.kills.done, self.kills.mid_stream
            figures.kill_points = self.kills.points
        figures.stopped_cleanly = await asyncio.to_thread(_stop_all, self.fleet.consolidators)
        figures.rounds = sum(
            p.log_text().count('"consolidation_round"') for p in self._consolidator_processes()
        )
        figures.final_lag = await group_lag(stores.bus)
        derived = await _derived_state(stores, self.banks)
        expected = await expected_evidence(acknowledged)
        figures.facts = compare_facts(expected, derived.proofs, derived.evidence)
        figures.observations = sum(len(s) for s in derived.observations.values())
        figures.superseded = derived.superseded_observations
        figures.overlapping = overlapping(derived.observations)
        figures.derived_archived = len(derived.archived)
        unindexed = [kind for key, kind in derived.archived.items() if key not in derived.indexed]
        figures.observations_unindexed = unindexed.count(f"{DerivedKind.OBSERVATION.value}s")
        figures.derived_unindexed = len(unindexed) - figures.observations_unindexed
        announced = await _announced(stores.bus, expected=len(derived.indexed))
        figures.derived_unannounced = len(derived.indexed - announced)
        replayed = await _replayed(stores, self.banks)
        figures.replay_differs = replay_differences(derived.live, replayed.live)
        figures.replay_overlapping = overlapping(replayed.observations)
        dead = await read_topic(stores.bus, CONSOLIDATION_DLQ, expected=1)
        figures.dead_lettered = len(dead)
        return figures

    def _consolidator_processes(self) -> list[ManagedProcess]:
        return [
            p
            for p in [*self.fleet.retired, *self.fleet.consolidators]
            if p.argv[-1] == "consolidator"
        ]


def _stop_all(processes: Sequence[ManagedProcess]) -> bool:
    """SIGTERM each by PID; True when every one exited 0."""
    for process in processes:
        process.stop()
    return all(p.exit_code() == 0 for p in processes)


@dataclass
class _Derived:
    """What the consolidator's outputs look like in the index and the archive."""

    proofs: dict[FactKey, int] = field(default_factory=dict)
    evidence: dict[FactKey, frozenset[str]] = field(default_factory=dict)
    observations: dict[str, list[frozenset[str]]] = field(default_factory=dict)
    live: dict[str, set[str]] = field(default_factory=dict)  # bank -> live observation ids
    superseded_observations: int = 0
    archived: dict[FactKey, str] = field(default_factory=dict)  # (bank, id) -> "facts", ...
    indexed: set[FactKey] = field(default_factory=set)


async def _derived_state(stores: Stores, banks: Sequence[str]) -> _Derived:
    found = _Derived()
    for bank in banks:
        docs = await _scan_derived(stores, bank)
        active: list[frozenset[str]] = []
        found.live[bank] = set()
        for doc in docs:
            found.indexed.add((bank, doc.event_id))
            if f"{DERIVED_TAG}{DerivedKind.FACT.value}" in doc.tags:
                found.proofs[(bank, doc.event_id)] = proof_count(doc)
            elif f"{DERIVED_TAG}{DerivedKind.OBSERVATION.value}" in doc.tags:
                if is_superseded(doc):
                    found.superseded_observations += 1
                else:
                    found.live[bank].add(doc.event_id)
                    active.append(await _sources(stores, doc.object_storage_key))
        found.observations[bank] = active
        evidence: dict[FactKey, set[str]] = defaultdict(set)
        async for key in stores.archive.list(f"{CONSOLIDATION_PREFIX}{bank}/"):
            parts = key.removeprefix(f"{CONSOLIDATION_PREFIX}{bank}/").split("/")
            if parts[0] == "evidence" and len(parts) == 3:
                evidence[(bank, parts[1])].add(parts[2].removesuffix(".json"))
            elif is_derived_memory_key(key):
                found.archived[(bank, parts[-1].removesuffix(".json"))] = parts[0]
        found.evidence.update({k: frozenset(v) for k, v in evidence.items()})
    return found


async def _replayed(stores: Stores, banks: Sequence[str]) -> _Derived:
    """The consolidator's outputs as `cogsub replay` rebuilds them from the archive alone.

    Into a fresh embedded index whatever the stack's: the archive is what is judged.
    """
    with tempfile.TemporaryDirectory(prefix="faults-replay-") as scratch:
        rebuilt = SqliteMemoryIndex(Path(scratch) / "index.sqlite3")
        try:
            await replay(stores.archive, rebuilt)
            return await _derived_state(Stores(stores.bus, stores.archive, rebuilt), banks)
        finally:
            await rebuilt.close()


async def _scan_derived(stores: Stores, bank: str) -> list[IndexDocument]:
    docs: list[IndexDocument] = []
    after: str | None = None
    while True:
        page = await stores.index.scan(SearchFilters(bank_id=bank), size=500, after=after)
        docs += [d for d in page if is_derived(d)]
        if len(page) < 500:
            return docs
        after = page[-1].event_id


async def _sources(stores: Stores, key: str) -> frozenset[str]:
    archived = ArchivedEvent.model_validate_json(await stores.archive.get(key))
    structured = archived.input.structured
    sources = structured.get("sources") if isinstance(structured, dict) else None
    return frozenset(str(s) for s in sources) if isinstance(sources, list) else frozenset()


async def _announced(bus: EventBus, *, expected: int) -> set[FactKey]:
    values = await read_topic(bus, MEMORY_SEMANTIC_UPDATED, expected=expected)
    bodies = [json.loads(value) for value in values]
    return {(str(b["bankId"]), str(b["memoryId"])) for b in bodies}
