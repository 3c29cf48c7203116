"""The driver of one fault scenario: produce around the fault, wait for the drain, count.

A scenario is a :class:`Run`: its `cogsub` processes (a :class:`Fleet`), its
:class:`Fault`, how to open its stores and, for a consolidator scenario, its
events and its :class:`ConsolidatorCheck`. :func:`drive` produces the events at a
steady rate with the fault a quarter of the way in, waits (bounded) until every
acknowledged event is indexed and the group's lag is back to 0, and turns what
the stores hold into a :class:`Row`.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from benchmarks.fault_consolidator import ConsolidatorCheck, ConsolidatorFigures
from benchmarks.fault_counts import (
    Stores,
    Timeline,
    cogsub_status,
    current_lag,
    probe_lag,
    probe_readyz,
    read_worker_logs,
    tally,
)
from benchmarks.fault_stack import INDEXED_MARK, READY_LINE, Fleet, ManagedProcess
from benchmarks.ingest import make_events
from cogsub.bus.ports import EventBus
from cogsub.core import EXPERIENCE_RAW, CogsubError

BANKS = [f"bank-{i}" for i in range(10)]  # the banks benchmarks.ingest.make_events uses
SECONDS_PER_KILL = 6.0  # production is spread over the kill series (rejoin + spread)
KILL_SPREAD_S = 2.0  # a kill lands up to this long after the victim's first progress
PROGRESS_WAIT_S = 20.0  # a victim that owns no partition this long is killed anyway


@dataclass(frozen=True)
class Options:
    """How big and how long each scenario is."""

    events: int = 3000
    outage_s: float = 30.0
    kills: int = 20
    consolidator_kills: int = 10
    seed: int = 2026
    batch_size: int = 50
    drain_timeout_s: float = 180.0
    tmpfs_mb: int = 96

    def production_s(self, scenario: str) -> float:
        """How long producing takes: the fault sits in its middle."""
        if scenario == "sigkill-20":
            return max(2 * self.outage_s, self.kills * SECONDS_PER_KILL)
        if scenario == "consolidator-sigkill":
            return max(2 * self.outage_s, self.consolidator_kills * SECONDS_PER_KILL)
        return max(2 * self.outage_s, self.events / 150)


POISON_EVERY = 300  # one undecodable record after every 300th event
PUBLISH_GIVE_UP_S = 300.0
STATUS_CHARS = 80  # of `cogsub status`'s error in the table
DEATH_CHARS = 140  # of a dead worker's last words in the notes


def bodies_with_poison(
    events: Sequence[dict[str, Any]],
) -> tuple[list[tuple[str | None, bytes]], list[bytes]]:
    """``(event id or None, body)`` to publish in order, and the poison bodies among them."""
    bodies: list[tuple[str | None, bytes]] = []
    poison: list[bytes] = []
    for at, event in enumerate(events):
        bodies.append((str(event["eventId"]), json.dumps(event).encode()))
        if (at + 1) % POISON_EVERY == 0:
            bad = f'{{"poison": {at}'.encode()  # truncated JSON: never decodable
            poison.append(bad)
            bodies.append((None, bad))
    return bodies, poison


@dataclass
class Produced:
    """What the producer got acknowledged (only those count as produced)."""

    acknowledged: list[str] = field(default_factory=list)
    poison_acknowledged: list[bytes] = field(default_factory=list)
    publish_retries: int = 0
    refused: int = 0
    first_error: str = ""
    finished_at: float = 0.0


async def produce(
    bus: EventBus, bodies: Sequence[tuple[str | None, bytes]], *, rate: float, timeline: Timeline
) -> Produced:
    """Publish ``bodies`` at ``rate`` per second, each retried until acknowledged (bounded).

    Publishes overlap (a slow acknowledgement does not slow the schedule down), as
    many independent producers would.
    """
    produced = Produced()
    started = time.monotonic()
    sending: list[asyncio.Task[None]] = []
    for at, (event_id, body) in enumerate(bodies):
        delay = started + at / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)  # the schedule itself, not a synchronisation
        sending.append(asyncio.create_task(_publish(bus, event_id, body, produced)))
    await asyncio.gather(*sending)
    produced.finished_at = timeline.now()
    return produced


async def _publish(bus: EventBus, event_id: str | None, body: bytes, produced: Produced) -> None:
    deadline = time.monotonic() + PUBLISH_GIVE_UP_S
    key = event_id.encode() if event_id is not None else None
    attempt = 0
    while True:
        try:
            await bus.publish(EXPERIENCE_RAW, body, key=key)
        except CogsubError as exc:
            if not exc.retryable or time.monotonic() > deadline:
                produced.refused += 1
                produced.first_error = produced.first_error or f"{type(exc).__name__}: {exc}"[:200]
                return
            produced.publish_retries += 1
            await asyncio.sleep(min(2.0, 0.1 * 2**attempt))
            attempt += 1
            continue
        if event_id is None:
            produced.poison_acknowledged.append(body)
        else:
            produced.acknowledged.append(event_id)
        return


@dataclass
class Row:
    """One scenario's figures (``ok`` when nothing was lost or duplicated and it drained)."""

    scenario: str
    produced: int = 0
    archived: int = 0
    indexed: int = 0
    dead_lettered: int = 0
    dlq_end_offset: int = 0
    announced: int = 0
    duplicates: int = 0
    lost: int = 0
    unfinished: int = 0
    drained: bool = False
    drain_s: float | None = None
    fault_s: float | None = None
    readyz: str = "-"
    status_during: str = "-"
    max_lag: int | None = None
    final_lag: int | None = None
    worker_retries: int = 0
    max_backoff_s: float = 0.0
    worker_deaths: int = 0
    kills: int = 0
    kill_points: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: str | None = None
    consolidator: ConsolidatorFigures | None = None

    @property
    def ok(self) -> bool:
        expected = self.produced - self.dead_lettered
        return (
            self.skipped is None
            and (self.consolidator is None or self.consolidator.ok)
            and self.drained
            and self.lost == 0
            and self.unfinished == 0
            and self.duplicates == 0
            and self.archived == self.indexed == expected
            and self.worker_deaths == 0
        )


class Fault(Protocol):
    """Something that goes wrong for a while; ``apply`` marks its window on the timeline."""

    async def apply(self, timeline: Timeline) -> None: ...

    def release(self) -> None:
        """Undo whatever is still in effect (called in ``finally``)."""
        ...


class Outage:
    """A fault that is injected, held for ``outage_s``, then cleared."""

    def __init__(
        self,
        inject: Callable[[], object],
        clear: Callable[[], object],
        outage_s: float,
        *,
        release: Callable[[], object] | None = None,
    ) -> None:
        self._inject, self._clear, self._outage_s = inject, clear, outage_s
        self._release = release
        self._active = False

    async def apply(self, timeline: Timeline) -> None:
        timeline.fault_start = timeline.now()
        self._active = True
        await asyncio.to_thread(self._inject)
        await asyncio.sleep(self._outage_s)
        await asyncio.to_thread(self._clear)
        self._active = False
        timeline.fault_clear = timeline.now()

    def release(self) -> None:
        """Undo a fault still in effect (when the run failed mid-outage), if it needs undoing."""
        if self._active and self._release is not None:
            self._active = False
            self._release()


class KillSeries:
    """SIGKILL a worker at a random point, restart it, ``kills`` times (seeded)."""

    def __init__(self, fleet: Fleet, *, kills: int, seed: int) -> None:
        self.fleet, self.kills = fleet, kills
        self.rng = random.Random(seed)
        self.done = 0
        self.mid_stream = 0  # kills that came after the victim had indexed something
        self.points: list[str] = []  # "t=12.3s worker-2 after 40 docs" per kill

    async def apply(self, timeline: Timeline) -> None:
        timeline.fault_start = timeline.now()
        for _ in range(self.kills):
            victim = self.rng.choice(self.fleet.workers)
            # A random point in its stream: a random time after it first reports a
            # document indexed since it was chosen (its pipeline then holds batches at
            # every stage: polled, archived, indexed, not yet committed).
            delay_s = self.rng.uniform(0.0, KILL_SPREAD_S)
            await asyncio.to_thread(victim.wait_for, READY_LINE, 60.0)
            before = victim.log_text().count(INDEXED_MARK)
            deadline = time.monotonic() + PROGRESS_WAIT_S
            while time.monotonic() < deadline and victim.alive():
                if victim.log_text().count(INDEXED_MARK) > before:
                    self.mid_stream += 1
                    break
                await asyncio.sleep(0.05)  # progress shows only in its log
            await asyncio.sleep(delay_s)
            progress = victim.log_text().count(INDEXED_MARK) - before
            self.points.append(f"t={timeline.now():.1f}s {victim.name} after {progress} docs")
            await asyncio.to_thread(self.fleet.replace, victim)
            self.done += 1
        timeline.fault_clear = timeline.now()

    def release(self) -> None:
        return None


@dataclass
class Run:
    """One scenario wired up: its processes, its fault, and how to open its stores."""

    name: str
    options: Options
    env: dict[str, str]
    fleet: Fleet
    fault: Fault
    open_stores: Callable[[], Stores]
    lag_reliable: bool = True
    notes: list[str] = field(default_factory=list)
    make_events: Callable[..., list[dict[str, Any]]] = make_events  # (count, *, seed)
    consolidator: ConsolidatorCheck | None = None


async def drive(run: Run) -> Row:
    """Produce around the fault, wait for the drain, then count and judge."""
    options, row = run.options, Row(run.name, notes=list(run.notes))
    timeline, stop = Timeline(), asyncio.Event()
    producer_stores, probe_stores = run.open_stores(), run.open_stores()
    probes = [asyncio.create_task(probe_lag(probe_stores.bus, timeline, stop))]
    if run.fleet.api_url is not None:
        probes.append(asyncio.create_task(probe_readyz(run.fleet.api_url, timeline, stop)))
    try:
        events = run.make_events(options.events, seed=options.seed)
        bodies, poison = bodies_with_poison(events)
        duration = options.production_s(run.name)
        producing = asyncio.create_task(
            produce(producer_stores.bus, bodies, rate=len(bodies) / duration, timeline=timeline)
        )
        if run.consolidator is not None:
            run.consolidator.start(producer_stores.bus, producing)
        await asyncio.sleep(duration / 4)
        faulting = asyncio.create_task(run.fault.apply(timeline))
        during = asyncio.create_task(_status_midway(run, timeline))
        await faulting
        produced = await producing
        row.status_during = await during
        row.fault_s = _window(timeline)
        row.drained, row.drain_s = await _wait_drained(run, probe_stores, produced, timeline)
        after = await cogsub_status(run.env)
        row.final_lag = after.get("lag") if after["rc"] == 0 else None
        if after["rc"] != 0:
            row.notes.append(f"status after: {after['error']}")
    finally:
        stop.set()
        await asyncio.gather(*probes, return_exceptions=True)
        run.fault.release()
        if run.consolidator is not None:
            await run.consolidator.stop()
        await producer_stores.aclose()
    row.readyz, row.max_lag = timeline.readyz_summary(), timeline.max_lag_during()
    if timeline.lag_unreadable_during():
        row.notes.append(f"lag unreadable in {timeline.lag_unreadable_during()} samples")
    try:
        acknowledged = len(produced.acknowledged) + len(produced.poison_acknowledged)
        counted = await tally(
            probe_stores, banks=BANKS, expected_raw=acknowledged, expected_dead=len(poison)
        )
        if run.consolidator is not None:
            ids = set(produced.acknowledged)
            stated = [e for e in events if str(e["eventId"]) in ids]
            row.consolidator = await run.consolidator.judge(probe_stores, stated)
            row.notes += row.consolidator.problems()
    finally:
        await probe_stores.aclose()
    row.produced = acknowledged
    row.archived, row.indexed = len(set(counted.archived_ids)), len(set(counted.indexed_ids))
    row.dead_lettered = len(set(counted.dead_letters))
    row.dlq_end_offset = counted.dlq_end_offset
    row.announced = len(set(counted.announced_ids))
    row.duplicates = counted.duplicates()
    row.lost = counted.lost(produced.acknowledged)
    row.unfinished = counted.unfinished(produced.acknowledged)
    unannounced = set(counted.archived_ids) - set(counted.announced_ids)
    if unannounced:
        row.notes.append(f"{len(unannounced)} archived events never announced on memory.indexed")
    stray = set(counted.dead_letters) - set(poison)
    if stray:
        row.notes.append(f"{len(stray)} valid events dead-lettered")
    if counted.index_total != len(counted.indexed_ids) + len(counted.derived_ids):
        row.notes.append(f"index holds {counted.index_total} documents in all banks")
    if produced.publish_retries:
        row.notes.append(f"producer retried {produced.publish_retries} publishes")
    if produced.refused:
        row.notes.append(f"producer gave up on {produced.refused}: {produced.first_error}")
    _judge_workers(run, row)
    return row


def _window(timeline: Timeline) -> float | None:
    if timeline.fault_start is None or timeline.fault_clear is None:
        return None
    return round(timeline.fault_clear - timeline.fault_start, 1)


async def _status_midway(run: Run, timeline: Timeline) -> str:
    """`cogsub status --json` half-way through the outage (a third into a kill series)."""
    await asyncio.sleep(max(1.0, run.options.outage_s / 2))
    status = await cogsub_status(run.env)
    if status["rc"] == 0:
        return f"ok, lag {status['lag']}"
    # The message up to the vendor exception's arguments: what failed, and how.
    error = str(status["error"]).removeprefix("cogsub: ").split("(")[0].strip()
    return f"exit {status['rc']}: {error[:STATUS_CHARS]}"


async def _wait_drained(
    run: Run, stores: Stores, produced: Produced, timeline: Timeline
) -> tuple[bool, float | None]:
    """Wait until every acknowledged event is indexed and the group's lag is 0 (bounded).

    With a consolidator, also until it has caught up and done the last rounds it is
    then asked for (``ConsolidatorCheck.settled``).

    Returns whether it drained, and how long after the fault cleared and production
    ended (whichever came later) it took.
    """
    expected = len(set(produced.acknowledged))
    # From when the fault had cleared and the last event was acknowledged, whichever is
    # later: the time the backlog itself took, not the rest of the steady stream.
    cleared = max(timeline.fault_clear or 0.0, produced.finished_at)
    deadline = time.monotonic() + run.options.drain_timeout_s
    while time.monotonic() < deadline:
        try:
            indexed = await asyncio.wait_for(stores.index.count(), 15)
        except Exception:  # still recovering; the next round asks again
            indexed = -1
        lag = await current_lag(stores.bus) if run.lag_reliable else 0
        # The consolidator is asked for its last rounds only once ingestion is done.
        if (
            indexed >= expected
            and lag == 0
            and (run.consolidator is None or await run.consolidator.settled(stores.bus))
        ):
            return True, round(timeline.now() - cleared, 1)
        if run.fleet.workers and len(run.fleet.dead_workers()) == len(run.fleet.workers):
            break  # every worker is gone: nothing will drain
        await asyncio.sleep(0.5)
    return False, None


def _judge_workers(run: Run, row: Row) -> None:
    logs = read_worker_logs([*run.fleet.retired, *run.fleet.workers])
    row.worker_retries, row.max_backoff_s = logs.retries, round(logs.max_delay_s, 2)
    if logs.retries:
        row.notes.append(f"retry attempts up to {logs.max_attempt} in a row")
    if logs.batch_splits:
        row.notes.append(f"{logs.batch_splits} batch splits")
    dead = [*run.fleet.casualties, *run.fleet.dead_workers(), *run.fleet.dead_consolidators()]
    row.worker_deaths = len(dead)
    for worker in dead:
        row.notes.append(f"{worker.name} died (exit {worker.exit_code()}): {_last_words(worker)}")
    if logs.other_warnings:
        top = ", ".join(f"{k}×{n}" for k, n in logs.other_warnings.most_common(4))
        row.notes.append(f"worker warnings: {top}")


def _last_words(process: ManagedProcess) -> str:
    """The error `cogsub` printed on its way out (its ``cogsub: ...`` line), shortened."""
    lines = process.log_text().splitlines()
    said = [line for line in lines if line.startswith("cogsub: ")] or lines[-1:] or [""]
    return " ".join(said[-1].split())[:DEATH_CHARS]
