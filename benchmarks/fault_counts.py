"""What the fault suite observes and counts: stores, probes during the run, worker logs.

Counting reads the stores directly through the project's adapters after the run:
archive keys under ``events/``, every index document of every bank, the dead-letter
topic, ``experience.raw`` itself and the ``memory.indexed`` announcements. During
the run two probes sample: the API's ``/readyz`` (twice a second) and the ingestion
group's lag on experience.raw (every second, the figure `cogsub status` prints);
`cogsub status --json` itself runs during the fault and after the drain.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx

from benchmarks.fault_stack import GROUP, ManagedProcess, cogsub_argv
from cogsub.archive.ports import ArchiveStore
from cogsub.bus.ports import EventBus
from cogsub.core import EVENTS_PREFIX, EXPERIENCE_RAW, EXPERIENCE_RAW_DLQ, MEMORY_INDEXED
from cogsub.core.derived import DERIVED_TAG
from cogsub.core.documents import IndexDocument
from cogsub.index.ports import MemoryIndex, SearchFilters

PROBE_INTERVAL_S = 1.0
READYZ_INTERVAL_S = 0.5


@dataclass
class Stores:
    """The three ports of one stack, opened by the suite to count what landed."""

    bus: EventBus
    archive: ArchiveStore
    index: MemoryIndex

    async def aclose(self) -> None:
        await self.index.close()
        await self.archive.close()
        await self.bus.close()


@dataclass
class Tally:
    """Everything the stores hold after a run."""

    raw_ids: list[str]
    archived_ids: list[str]
    indexed_ids: list[str]
    index_total: int
    dead_letters: list[bytes]
    dlq_end_offset: int
    announced_ids: list[str]
    derived_ids: list[str] = field(default_factory=list)  # consolidation's, not ingestion's

    def duplicates(self) -> int:
        """Archived event ids or indexed ids seen more than once."""
        archived, indexed = Counter(self.archived_ids), Counter(self.indexed_ids)
        return sum(n - 1 for n in archived.values()) + sum(n - 1 for n in indexed.values())

    def unfinished(self, acknowledged: Iterable[str]) -> int:
        """Acknowledged event ids missing from the archive or from the index."""
        archived, indexed = set(self.archived_ids), set(self.indexed_ids)
        return sum(1 for i in set(acknowledged) if i not in archived or i not in indexed)

    def lost(self, acknowledged: Iterable[str]) -> int:
        """Acknowledged event ids found nowhere: not on experience.raw, not archived, not indexed.

        An unfinished event still on experience.raw is delivered again once the group
        moves; a lost one is gone for good.
        """
        found = set(self.raw_ids) | set(self.archived_ids) | set(self.indexed_ids)
        return sum(1 for i in set(acknowledged) if i not in found)


async def tally(
    stores: Stores, *, banks: Sequence[str], expected_raw: int, expected_dead: int
) -> Tally:
    """Count raw records, archive objects, index documents, dead letters and announcements."""
    raw = await read_topic(stores.bus, EXPERIENCE_RAW, expected=expected_raw)
    archived = [_event_id(key) async for key in stores.archive.list(EVENTS_PREFIX)]
    indexed: list[str] = []
    derived: list[str] = []
    for bank in banks:
        after: str | None = None
        while True:
            page = await stores.index.scan(SearchFilters(bank_id=bank), size=500, after=after)
            for doc in page:
                (derived if is_derived(doc) else indexed).append(doc.event_id)
            if len(page) < 500:
                break
            after = page[-1].event_id
    total = await stores.index.count()
    dlq = await stores.bus.topic_stats(EXPERIENCE_RAW_DLQ)
    dead = await read_topic(stores.bus, EXPERIENCE_RAW_DLQ, expected=expected_dead)
    announced = await read_topic(stores.bus, MEMORY_INDEXED, expected=len(set(archived)))
    announced_ids = [str(json.loads(value)["eventId"]) for value in announced]
    raw_ids = [i for i in map(_raw_event_id, raw) if i is not None]
    return Tally(raw_ids, archived, indexed, total, dead, dlq.end_offset, announced_ids, derived)


def is_derived(doc: IndexDocument) -> bool:
    """Whether a consolidator wrote ``doc`` (a fact, an observation...), not ingestion."""
    return any(tag.startswith(DERIVED_TAG) for tag in doc.tags)


def _raw_event_id(value: bytes) -> str | None:
    try:
        body = json.loads(value)
    except ValueError:  # a poison record
        return None
    return str(body["eventId"]) if isinstance(body, dict) and "eventId" in body else None


def _event_id(key: str) -> str:
    return key.rsplit("/", 1)[-1].removesuffix(".json")


async def read_topic(
    bus: EventBus, topic: str, *, expected: int, timeout_s: float = 60.0
) -> list[bytes]:
    """Every record of ``topic`` from the start, read by a fresh group (never committed).

    Stops once ``expected`` distinct values arrived and one more poll found nothing
    new (repeats may follow), or at the timeout.
    """
    consumer = bus.consumer([topic], group=f"faults-reader-{time.monotonic_ns()}")
    values: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            batch = await consumer.poll(max_records=2000, timeout_s=1.0)
            values += [record.value for record in batch]
            if not batch and len(set(values)) >= expected:
                break
    finally:
        await consumer.close()
    return values


@dataclass
class Timeline:
    """Samples taken during the run, with the fault's window, in seconds from the start."""

    started: float = field(default_factory=time.monotonic)
    fault_start: float | None = None
    fault_clear: float | None = None
    readyz: list[tuple[float, int]] = field(default_factory=list)  # 0: no answer
    lag: list[tuple[float, int | None]] = field(default_factory=list)  # None: not readable

    def now(self) -> float:
        return time.monotonic() - self.started

    def _phase(self, at: float) -> str:
        if self.fault_start is None or at < self.fault_start:
            return "before"
        if self.fault_clear is None or at < self.fault_clear:
            return "during"
        return "after"

    def readyz_summary(self) -> str:
        """E.g. ``200×9 → 503×24 → 200×30``: the codes before, during and after the fault."""
        phases: dict[str, Counter[int]] = {p: Counter() for p in ("before", "during", "after")}
        for at, code in self.readyz:
            phases[self._phase(at)][code] += 1
        return " → ".join(_codes(phases[p]) for p in ("before", "during", "after"))

    def max_lag_during(self) -> int | None:
        seen = [lag for at, lag in self.lag if lag is not None and self._phase(at) != "before"]
        return max(seen, default=None)

    def lag_unreadable_during(self) -> int:
        return sum(1 for at, lag in self.lag if lag is None and self._phase(at) == "during")


def _codes(counts: Counter[int]) -> str:
    if not counts:
        return "-"
    return ", ".join(
        (str(code) if code else "no answer") + (f"×{n}" if n > 1 else "")
        for code, n in sorted(counts.items())
    )


async def probe_readyz(url: str, timeline: Timeline, stop: asyncio.Event) -> None:
    """GET ``/readyz`` twice a second until ``stop``; 0 records a request that failed."""
    async with httpx.AsyncClient(base_url=url, timeout=5.0, trust_env=False) as http:
        while not stop.is_set():
            at = timeline.now()
            try:
                code = (await http.get("/readyz")).status_code
            except httpx.HTTPError:
                code = 0
            timeline.readyz.append((at, code))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), READYZ_INTERVAL_S)


async def probe_lag(bus: EventBus, timeline: Timeline, stop: asyncio.Event) -> None:
    """Sample the ingestion group's lag on experience.raw every second until ``stop``."""
    while not stop.is_set():
        timeline.lag.append((timeline.now(), await current_lag(bus)))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), PROBE_INTERVAL_S)


async def current_lag(bus: EventBus, *, timeout_s: float = 5.0) -> int | None:
    """The group's lag on experience.raw, or ``None`` when the bus cannot say now."""
    try:
        stats = await asyncio.wait_for(bus.topic_stats(EXPERIENCE_RAW, group=GROUP), timeout_s)
    except Exception:  # a down broker or a full disk: "not readable" is the observation
        return None
    return stats.lag


async def cogsub_status(env: dict[str, str], *, timeout_s: float = 45.0) -> dict[str, Any]:
    """Run `cogsub status --json`: its exit code, raw-topic lag and counts, or its error."""
    process = await asyncio.create_subprocess_exec(
        *cogsub_argv("status", "--json"),
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout_s)
    except TimeoutError:
        process.kill()
        await process.wait()
        return {"rc": None, "error": f"no answer in {timeout_s:.0f} s"}
    if process.returncode != 0:
        lines = err.decode(errors="replace").strip().splitlines()
        return {"rc": process.returncode, "error": lines[-1][:160] if lines else ""}
    report = json.loads(out.decode().strip().splitlines()[-1])
    raw = report["topics"][EXPERIENCE_RAW]
    return {
        "rc": 0,
        "lag": raw["lag"],
        "end_offset": raw["end_offset"],
        "archived": report["archived"],
        "indexed": report["indexed"],
    }


@dataclass
class WorkerLogs:
    """What the workers said about the fault: retries, splits, dead letters, crashes."""

    retries: int = 0
    max_attempt: int = 0
    max_delay_s: float = 0.0
    batch_splits: int = 0
    dead_lettered: int = 0
    tracebacks: int = 0
    other_warnings: Counter[str] = field(default_factory=Counter)


def read_worker_logs(processes: Iterable[ManagedProcess]) -> WorkerLogs:
    """Parse the JSON log lines of ``processes`` (progress lines are skipped)."""
    logs = WorkerLogs()
    for process in processes:
        for line in process.log_text().splitlines():
            if "Traceback (most recent call last)" in line:
                logs.tracebacks += 1
            if not line.startswith("{"):
                continue
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            event = str(entry.get("event", ""))
            if event == "ingestion_step_retry":
                logs.retries += 1
                logs.max_attempt = max(logs.max_attempt, int(entry.get("attempt", 0)) + 1)
                logs.max_delay_s = max(logs.max_delay_s, float(entry.get("delay_s", 0.0)))
            elif event == "ingestion_batch_split":
                logs.batch_splits += 1
            elif event == "event_dead_lettered":
                logs.dead_lettered += 1
            elif entry.get("level") in ("warning", "error", "critical"):
                logs.other_warnings[event] += 1
            if entry.get("exception"):
                logs.tracebacks += 1
    return logs
