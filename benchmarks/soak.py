"""`make bench-soak`: sustained load on the embedded stack, with recall alongside.

The soak's process runs the ingestion worker and the memory service; consolidation
(extraction and scheduled rounds) runs in a `cogsub consolidator` process on the same
data directory, stopped by its PID at the end (``--consolidator in-process`` runs it in
the soak's process instead, one event loop for everything, as `cogsub run` does).

1. Calibrate: one burst of ``--calibrate`` events (reported beside the maximum, not used
   for it), then the stack kept saturated: a standing backlog of ``--backlog`` events
   published and not yet extracted. Its pace on the store as it was is measured over
   ``--warm-s`` to ``--calibrate-s``; then it stays saturated until the store holds
   ``--prefill`` times the events the soak will add, ``--rounds-first`` bank rounds
   have finished (by default one a bank), and no round has finished for
   ``--calibrate-s`` less ``--warm-s`` seconds; the maximum is the pace over those
   seconds. The pace falls as the store grows, so a maximum measured on a
   near-empty store is not one the soak's store keeps; a round takes extraction's time
   while it runs, which is what the soak's headroom is for. A store no round has been
   through yet is not one the soak runs on either: they come every 300 s.
2. Soak: producers publish at ``--load`` (default 80 %) of that rate for
   ``--duration`` seconds while ``--clients`` recall concurrently.
3. After: the producers stop; the time the backlog takes to drain, and the saturated
   pace again on the store the soak grew (the maximum at the end's size).

Every ``--every`` seconds it samples throughput, consumer lag, resident memory (of
both processes, and of it the index's data and SQLite's bounded caches), recall
latency and the host's idle and stolen CPU. The summary gives throughput against the
calibrated maximum (the baseline measured in the same run), recall p50/p99 and the
verdict (``verdict``): each lag's floor must not rise by more than ``--hold-s``
seconds of production, and memory that is neither index data nor SQLite cache must not
grow by more than ``--memory-mib``. It exits 0 when the load held, 1 when it did not.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample as PromSample

from benchmarks.ingest import make_events
from benchmarks.results import record
from cogsub.core import EXPERIENCE_ENRICHED, EXPERIENCE_RAW
from cogsub.core.memory import RecallRequest
from cogsub.ingestion import BatchOutcome
from cogsub.runtime.allocator import fix_mmap_threshold
from cogsub.runtime.wiring import RunningApi, embedded_settings, running_api
from cogsub.telemetry.logging import configure_logging
from cogsub.telemetry.metrics import Metrics

QUERIES = [
    "who rolled back the billing service",
    "why did p99 latency regress",
    "drain the pods before restart",
    "invoices generated twice",
    "schema migration staging health checks",
    "runbook steps for the release train",
]
BANKS = [f"bank-{i}" for i in range(10)]


@dataclass
class Sample:
    t_s: float
    produced: int
    indexed: int
    ingest_per_s: float
    lag: int
    extraction_lag: int
    rss_mib: float  # both processes' when a consolidator runs beside the soak's, of which
    index_data_mib: float  # what the embedded indexes keep per document: grows with the data
    sqlite_mib: float  # SQLite's heap: page caches, each bounded by its cache_size
    documents: int  # what the index holds: memory that grows with it is the data's
    recalls: int
    recall_p50_ms: float
    recall_p99_ms: float
    rounds: int  # consolidation rounds (of one bank each) finished so far
    round_s: float  # seconds spent in them so far, of which
    decay_s: float  # in their decay passes
    consolidator_rss_mib: float = 0.0
    consolidator_other_mib: float = 0.0  # of other_mib, the consolidator's (where it grows)
    # The host over the sample's interval: CPU nobody here used, and CPU the hypervisor
    # gave to other machines (a soak on a host whose steal rises runs on a slower host).
    idle_pct: float = 0.0
    steal_pct: float = 0.0
    # CPU each process used over the interval, in % of one core (user + system).
    soak_cpu_pct: float = 0.0
    consolidator_cpu_pct: float = 0.0

    @property
    def other_mib(self) -> float:
        """Resident memory that is neither the index's data nor SQLite's bounded caches."""
        return self.rss_mib - self.index_data_mib - self.sqlite_mib


@dataclass
class Counters:
    indexed: int = 0
    produced: int = 0
    latencies_ms: list[float] = field(default_factory=list)

    def on_batch(self, outcome: BatchOutcome) -> None:
        self.indexed += len(outcome.indexed) + len(outcome.rejected)


def cpu_times() -> list[int]:
    """The host's CPU time so far by kind (/proc/stat: user nice system idle iowait irq
    softirq steal ...), in clock ticks."""
    return [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]


def process_cpu_s(pid: int | str = "self") -> tuple[float, float]:
    """User and system CPU seconds a process has used so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick  # utime, stime


def cpu_shares(before: Sequence[int], after: Sequence[int]) -> tuple[float, float]:
    """Idle and stolen percentages of the host's CPU time between two ``cpu_times``."""
    spent = [b - a for a, b in zip(before, after, strict=False)][:8]
    total = sum(spent)
    if total <= 0:
        return 0.0, 0.0
    idle, steal = spent[3] + spent[4], spent[7] if len(spent) > 7 else 0
    return round(100 * idle / total, 1), round(100 * steal / total, 1)


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def slope_per_min(points: Sequence[tuple[float, float]]) -> float:
    """Least-squares slope of (seconds, value) points, per minute."""
    if len(points) < 2:
        return 0.0
    n = len(points)
    mx = sum(t for t, _ in points) / n
    my = sum(v for _, v in points) / n
    var = sum((t - mx) ** 2 for t, _ in points)
    return 60 * sum((t - mx) * (v - my) for t, v in points) / var if var else 0.0


def _bodies(count: int, *, start: int, prefix: str) -> list[bytes]:
    events = make_events(count, seed=start + 11)
    for i, event in enumerate(events):
        event["eventId"] = f"{prefix}-{start + i:08d}"
    return [json.dumps(e).encode() for e in events]


async def calibrate(
    running: RunningApi,
    counters: Counters,
    events: int,
    *,
    prefix: str,
    check: Callable[[], None],
) -> float:
    """Events/s the stack ingests and extracts from one burst of ``events``."""
    bodies = _bodies(events, start=0, prefix=prefix)
    # Counted from before the first publish: the worker starts on the burst while the
    # rest is still being published, and those events count too.
    started, before = time.perf_counter(), counters.indexed
    await _publish(running, counters, bodies)
    # Sustainable means the whole pipeline keeps up: ingestion indexed the burst and the
    # consolidation worker extracted it (its lag on experience.enriched is back to 0).
    group = running.stack.settings.consolidation.group
    while (
        counters.indexed - before < len(bodies)
        or (await running.stack.bus.topic_stats(EXPERIENCE_ENRICHED, group=group)).lag
    ):
        await asyncio.sleep(0.05)
        check()  # a dead worker would leave this waiting forever
    return len(bodies) / (time.perf_counter() - started)


@dataclass
class Saturation:
    """What the stack finished while kept saturated."""

    pace: float  # events/s over the last measured window: the maximum
    first_pace: float  # over the first window (--warm-s to --calibrate-s): the store as it was
    events: int  # extracted while saturated (what grew the store)
    seconds: float
    steal_pct: float  # of the host's CPU, while saturated
    rounds: int  # bank rounds the consolidator had finished when the pace was measured


async def saturate(
    running: RunningApi,
    consolidator: Consolidator,
    counters: Counters,
    args: argparse.Namespace,
    *,
    prefix: str,
    prefill: Callable[[float], float] | None = None,
) -> Saturation:
    """Events/s the whole pipeline finishes while a standing backlog keeps it busy.

    ``args.backlog`` events are kept in flight (published, not yet extracted) for
    ``args.calibrate_s`` seconds at least; the pace is the least-squares slope of
    extracted events over the last ``calibrate_s - warm_s`` seconds. With ``prefill``
    it goes on until the events extracted reach ``prefill(pace so far)``: the maximum
    of a store that size, not of the near-empty one (the pace falls as the store
    grows). It also goes on until ``args.rounds_first`` bank rounds have finished, and
    while one finished in that window (``pace_counts``): the maximum is the pace between
    rounds on a store they have been through, and the soak's headroom is what rounds get.
    The backlog is drained before returning, so what comes next starts from no lag.
    """
    group = running.stack.settings.consolidation.group
    window = args.calibrate_s - args.warm_s

    async def extracted() -> int:
        stats = await running.stack.bus.topic_stats(EXPERIENCE_ENRICHED, group=group)
        return stats.end_offset - stats.lag  # what the worker has committed

    base, sent, points = await extracted(), 0, []
    target: float | None = None
    started, cpu, said, rounds, read_at = time.perf_counter(), cpu_times(), 0.0, 0, -1.0
    at_said = (0, consolidator.cpu_s())
    while True:
        done = await extracted() - base
        if (now := time.perf_counter() - started) - read_at >= 1:  # a scrape a second
            rounds, read_at = (await consolidator.round_totals())["rounds"], now
        if now >= args.warm_s:  # when the count was read
            points.append((now, done, rounds))
        if now >= args.calibrate_s:
            if target is None:
                target = 0.0 if prefill is None else prefill(pace_per_s(_paced(points)))
                if done < target or rounds < args.rounds_first:
                    print(
                        f"{prefix}: {pace_per_s(_paced(points)):.0f} events/s on the store as "
                        f"it was; growing it to {target:,.0f} events and "
                        f"{args.rounds_first} bank rounds before the pace counts",
                        flush=True,
                    )
            if pace_counts(points, window, events=target, rounds=args.rounds_first):
                break
            if now - said >= 30:  # a prefill or a round takes minutes: say how far it got
                spent_at = (done, consolidator.cpu_s())
                print(
                    f"{prefix}: {done:,} of {target:,.0f} events, {rounds} of "
                    f"{args.rounds_first} bank rounds, {now:.0f} s, "
                    f"{rounds_in(points, window)} bank rounds in the last {window:.0f} s; "
                    f"{_cpu_per_event(spent_at, at_said)}",
                    flush=True,
                )
                said, at_said = now, spent_at
        if (short := args.backlog - (sent - done)) > 0:
            await _publish(running, counters, _bodies(short, start=sent, prefix=prefix))
            sent += short
        consolidator.raise_if_failed()
        await asyncio.sleep(0.25)
    _, steal = cpu_shares(cpu, cpu_times())
    await _drained(running, consolidator)
    measured = _paced([p for p in points if p[0] >= now - window])
    half = len(measured) // 2
    first, last = pace_per_s(measured[:half]), pace_per_s(measured[half:])
    print(
        f"{prefix}: saturated pace {first:.0f} events/s in the first half of the measured "
        f"time, {last:.0f} in the second ({done:,} events extracted in {now:.0f} s, "
        f"{steal:.0f} % of the host's CPU stolen)",
        flush=True,
    )
    if (pace := pace_per_s(measured)) <= 0:
        # A soak at 80 % of nothing would hold trivially: refuse to go on.
        raise RuntimeError(
            f"nothing was extracted in the {window:.0f} s after --warm-s {args.warm_s}: "
            "no maximum to soak at (a longer --calibrate-s?)"
        )
    early = pace_per_s(_paced([p for p in points if p[0] <= args.calibrate_s]))
    return Saturation(pace, early, done, round(now, 1), steal, rounds)


def _cpu_per_event(
    now: tuple[int, dict[str, tuple[float, float]]],
    before: tuple[int, dict[str, tuple[float, float]]],
) -> str:
    """CPU ms per event finished between two (events, ``Consolidator.cpu_s``) readings."""
    events = max(1, now[0] - before[0])
    parts = []
    for name, (user, system) in now[1].items():
        was_user, was_system = before[1][name]
        parts.append(
            f"{name} {1000 * (user - was_user) / events:.2f} user + "
            f"{1000 * (system - was_system) / events:.2f} system ms an event"
        )
    return ", ".join(parts)


def pace_counts(
    points: Sequence[tuple[float, int, int]], window: float, *, events: float, rounds: int
) -> bool:
    """Whether the last ``window`` seconds of (seconds, events, rounds so far) points measure
    the maximum: ``events`` extracted, ``rounds`` finished, and none in the window."""
    if not points:
        return False
    _, done, finished = points[-1]
    return done >= events and finished >= rounds and rounds_in(points, window) == 0


def rounds_in(points: Sequence[tuple[float, int, int]], window: float) -> int:
    """Rounds finished within the last ``window`` seconds of (seconds, events, rounds) points."""
    if not points:
        return 0
    since = [rounds for t, _, rounds in points if t >= points[-1][0] - window]
    return since[-1] - since[0]


def _paced(points: Sequence[tuple[float, int, int]]) -> list[tuple[float, float]]:
    return [(t, float(done)) for t, done, _ in points]


def pace_per_s(points: Sequence[tuple[float, float]]) -> float:
    """Events per second from (seconds, events finished) points: their least-squares slope."""
    return slope_per_min(points) / 60


async def _publish(running: RunningApi, counters: Counters, bodies: Sequence[bytes]) -> None:
    for chunk in range(0, len(bodies), 500):
        await asyncio.gather(
            *(running.stack.bus.publish(EXPERIENCE_RAW, b) for b in bodies[chunk : chunk + 500])
        )
    counters.produced += len(bodies)


async def produce(
    running: RunningApi, counters: Counters, rate: float, stop: asyncio.Event
) -> None:
    """Publish at ``rate`` events/s in 50 ms ticks until ``stop``."""
    tick = 0.05
    sent = 0
    started = time.perf_counter()
    while not stop.is_set():
        due = int(rate * (time.perf_counter() - started)) - sent
        if due > 0:
            bodies = _bodies(due, start=sent, prefix="soak")
            await asyncio.gather(*(running.stack.bus.publish(EXPERIENCE_RAW, b) for b in bodies))
            sent += due
            counters.produced += due
        await asyncio.sleep(tick)


async def recall_client(
    running: RunningApi, counters: Counters, seed: int, think_s: float, stop: asyncio.Event
) -> None:
    rng = random.Random(seed)
    while not stop.is_set():
        request = RecallRequest(query=rng.choice(QUERIES), k=10)
        started = time.perf_counter()
        await running.service.recall(rng.choice(BANKS), request)
        counters.latencies_ms.append((time.perf_counter() - started) * 1000)
        await asyncio.sleep(think_s)


async def soak(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    # SIGTERM cancels the soak like Ctrl-C does: its clean-up stops the consolidator.
    soaking = asyncio.current_task()
    assert soaking is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, soaking.cancel)
    settings = embedded_settings(root, embedder=args.embedder)
    counters = Counters()
    in_process = args.consolidator == "in-process"
    async with (
        running_api(
            settings, with_worker=True, consolidating=in_process, on_batch=counters.on_batch
        ) as running,
        _consolidator(running, root, args) as consolidator,
    ):
        stop, stop_producing = asyncio.Event(), asyncio.Event()
        # The recall clients run from the start: the maximum is measured under the same
        # recall load the soak then adds its producers to.
        tasks = [
            asyncio.create_task(recall_client(running, counters, i, args.think_s, stop))
            for i in range(args.clients)
        ]
        try:
            burst = (
                await calibrate(
                    running,
                    counters,
                    args.calibrate,
                    prefix="burst",
                    check=consolidator.raise_if_failed,
                )
                if args.calibrate
                else None
            )
            calibration = await saturate(
                running,
                consolidator,
                counters,
                args,
                prefix="calib",
                # As many events as the soak will add, times --prefill: the store then
                # grows by at most that much during the soak.
                prefill=lambda pace: args.prefill * (args.rate or args.load * pace) * args.duration,
            )
            maximum = calibration.pace
            counters.latencies_ms.clear()
            rate = args.rate or args.load * maximum
            before = (
                ""
                if burst is None
                else f" (a burst of {args.calibrate} before it: {burst:.0f} events/s, "
                f"{burst / maximum:.2f} times that)"
            )
            print(
                f"calibrated maximum {maximum:.0f} events/s on a store of "
                f"{calibration.events:,} events after {calibration.rounds} bank rounds "
                f"({calibration.first_pace:.0f} on the store as it was){before} with "
                f"{args.clients} recall clients; soaking at {rate:.0f} events/s for "
                f"{args.duration:.0f} s",
                flush=True,
            )
            rounds_before = (await consolidator.round_totals())["rounds"]
            producer = asyncio.create_task(produce(running, counters, rate, stop_producing))
            tasks.append(producer)
            samples = await _sample(running, counters, consolidator, args)
            stop_producing.set()
            await producer
            soak_rounds = (samples[-1].rounds if samples else rounds_before) - rounds_before
            if soak_rounds == 0:
                every_s = running.stack.settings.consolidation.schedule_s
                print(
                    "no consolidation round ran during the soak: its extraction lag says "
                    f"nothing about rounds (they run every {every_s:.0f} s from the "
                    "consolidator's start; a longer --duration takes one in)",
                    flush=True,
                )
            after = await _after_the_soak(running, consolidator, counters, rate, args)
        finally:  # on a failure too: nothing keeps running against a closing stack
            stop.set()
            stop_producing.set()
            ended = await asyncio.gather(*tasks, return_exceptions=True)
        for outcome in ended:
            if isinstance(outcome, BaseException):
                raise outcome
    summary = _summary(samples, calibration, burst, rate, counters, args)
    held = verdict(samples, rate, hold_s=args.hold_s, memory_mib=args.memory_mib)
    return summary | {"soak_rounds": soak_rounds} | after | held


async def _after_the_soak(
    running: RunningApi,
    consolidator: Consolidator,
    counters: Counters,
    rate: float,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """How long the backlog took to drain, and the saturated pace on the grown store.

    The calibration ran on a store near empty, and the pace moves as the store grows,
    so the rate soaked at is also compared with the maximum at the end's size.
    """
    started = time.perf_counter()
    await _drained(running, consolidator)
    drain_s = time.perf_counter() - started
    rounds_before = (await consolidator.round_totals())["rounds"]
    end = await saturate(running, consolidator, counters, args, prefix="end")
    # A scheduled round may fall in it: the pace is then the store's with a round beside.
    rounds = (await consolidator.round_totals())["rounds"] - rounds_before
    print(
        f"drained in {drain_s:.1f} s; saturated on the grown store: {end.pace:.0f} events/s "
        f"({rounds} bank rounds meanwhile, {end.steal_pct:.0f} % of the host's CPU stolen)",
        flush=True,
    )
    return {
        "drain_s": round(drain_s, 1),
        "end_calibrated_max_events_per_s": round(end.pace, 1),
        "end_calibration_rounds": rounds,
        "end_calibration_steal_pct": end.steal_pct,
        "ratio_target_to_end_max": round(rate / end.pace, 3),
    }


async def _drained(running: RunningApi, consolidator: Consolidator) -> None:
    """Wait until ingestion and extraction have nothing left to read."""
    groups = (
        (EXPERIENCE_RAW, running.stack.settings.ingestion.group),
        (EXPERIENCE_ENRICHED, running.stack.settings.consolidation.group),
    )
    while any([(await running.stack.bus.topic_stats(t, group=g)).lag for t, g in groups]):
        await asyncio.sleep(0.1)
        consolidator.raise_if_failed()


async def _sample(
    running: RunningApi, counters: Counters, consolidator: Consolidator, args: argparse.Namespace
) -> list[Sample]:
    group = running.stack.settings.ingestion.group
    samples: list[Sample] = []
    started, cpu, used = time.perf_counter(), cpu_times(), consolidator.cpu_s()
    last_t, last_indexed, last_recalls = 0.0, counters.indexed, 0
    print(
        f"{'t_s':>6} {'ingest/s':>9} {'lag':>7} {'extract lag':>11} {'rss_mib':>8} "
        f"{'data':>6} {'sqlite':>6} {'other':>6} {'recall p50':>11} {'p99':>8} {'rounds':>6} "
        f"{'round_s':>8} {'decay_s':>8} {'idle%':>6} {'steal%':>6} {'cpu%':>5} {'cons%':>5}"
    )
    while (now := time.perf_counter() - started) < args.duration:
        await asyncio.sleep(min(args.every, args.duration - now))
        consolidator.raise_if_failed()
        t = time.perf_counter() - started
        window = counters.latencies_ms[last_recalls:]
        stats = await running.stack.bus.topic_stats(EXPERIENCE_RAW, group=group)
        behind = await running.stack.bus.topic_stats(
            EXPERIENCE_ENRICHED, group=running.stack.settings.consolidation.group
        )
        own = memory_from(running.stack.metrics.registry.get_sample_value)
        beside = await consolidator.readings()
        consolidator_rss = beside["rss_mib"]
        consolidator_other = beside["rss_mib"] - beside["index_data_mib"] - beside["sqlite_mib"]
        memory = {name: round(own[name] + beside.pop(name), 1) for name in MEMORY}
        idle, steal = cpu_shares(cpu, cpu := cpu_times())
        was, used = used, consolidator.cpu_s()
        busy = {name: 100 * (sum(used[name]) - sum(was[name])) / (t - last_t) for name in used}
        sample = Sample(
            t_s=round(t, 1),
            produced=counters.produced,
            indexed=counters.indexed,
            ingest_per_s=round((counters.indexed - last_indexed) / (t - last_t), 1),
            lag=stats.lag,
            extraction_lag=behind.lag,
            **memory,
            consolidator_rss_mib=round(consolidator_rss, 1),
            consolidator_other_mib=round(consolidator_other, 1),
            documents=await running.stack.index.count(),
            recalls=len(window),
            recall_p50_ms=round(percentile(window, 0.5), 2),
            recall_p99_ms=round(percentile(window, 0.99), 2),
            idle_pct=idle,
            steal_pct=steal,
            soak_cpu_pct=round(busy["soak"], 1),
            consolidator_cpu_pct=round(busy.get("consolidator", 0.0), 1),
            **beside,
        )
        samples.append(sample)
        print(
            f"{sample.t_s:>6} {sample.ingest_per_s:>9} {sample.lag:>7} "
            f"{sample.extraction_lag:>11} {sample.rss_mib:>8} {sample.index_data_mib:>6} "
            f"{sample.sqlite_mib:>6} {sample.other_mib:>6.1f} {sample.recall_p50_ms:>11} "
            f"{sample.recall_p99_ms:>8} {sample.rounds:>6} {sample.round_s:>8} "
            f"{sample.decay_s:>8} {sample.idle_pct:>6} {sample.steal_pct:>6} "
            f"{sample.soak_cpu_pct:>5.0f} {sample.consolidator_cpu_pct:>5.0f}",
            flush=True,
        )
        last_t, last_indexed, last_recalls = t, counters.indexed, len(counters.latencies_ms)
    return samples


class Consolidator:
    """Where consolidation runs: in the soak's process, or in a `cogsub consolidator` of its own."""

    def __init__(
        self,
        running: RunningApi,
        process: asyncio.subprocess.Process | None = None,
        metrics_url: str = "",
    ) -> None:
        self._running, self._process, self._url = running, process, metrics_url
        self._scraped = False

    def cpu_s(self) -> dict[str, tuple[float, float]]:
        """User and system CPU seconds so far of the soak's process and, apart, of this one."""
        spent = {"soak": process_cpu_s()}
        if self._process is not None:
            spent["consolidator"] = process_cpu_s(self._process.pid)
        return spent

    def raise_if_failed(self) -> None:
        """Re-raise a failed worker of the soak's process; raise if the consolidator exited."""
        self._running.raise_if_worker_failed()
        if self._process is not None and self._process.returncode is not None:
            raise RuntimeError(f"cogsub consolidator exited with {self._process.returncode}")

    async def ready(self, timeout_s: float = 60.0) -> None:
        """Wait until the consolidator serves its metrics: it has opened the stack."""
        deadline = time.monotonic() + timeout_s
        while self._process is not None and not self._scraped:
            self.raise_if_failed()
            with contextlib.suppress(httpx.HTTPError):
                await self.round_totals()
            if time.monotonic() > deadline:
                raise RuntimeError(f"cogsub consolidator not serving {self._url} in {timeout_s} s")
            await asyncio.sleep(0.2)

    async def round_totals(self) -> dict[str, Any]:
        readings = await self.readings()
        return {name: readings[name] for name in ("rounds", "round_s", "decay_s")}

    async def readings(self) -> dict[str, Any]:
        """Its round totals and, in a process of its own, that process's memory (MiB)."""
        if self._process is None:  # its memory is the soak process's own
            return _round_totals(self._running.stack.metrics) | dict.fromkeys(MEMORY, 0.0)
        async with httpx.AsyncClient(timeout=5.0) as client:
            response = await client.get(self._url)
        response.raise_for_status()
        self._scraped = True
        page = _samples_of(response.text)  # parsed once for both readings
        unlabelled = {sample.name: sample.value for sample in page if not sample.labels}
        return _round_totals_in(page) | memory_from(unlabelled.get)


@contextlib.asynccontextmanager
async def _consolidator(
    running: RunningApi, root: Path, args: argparse.Namespace
) -> AsyncIterator[Consolidator]:
    """Start `cogsub consolidator` on the soak's data when asked; stop it by its PID."""
    if args.consolidator == "in-process":
        yield Consolidator(running)
        return
    port = _free_loopback_port()
    # The soak's settings ignore the environment (embedded_settings): so must the child's,
    # or a COGSUB_* variable in the shell would give the two processes different stacks.
    env = {k: v for k, v in os.environ.items() if not k.startswith("COGSUB_")} | {
        "COGSUB_METRICS__HOST": "127.0.0.1",
        "COGSUB_METRICS__PORT": str(port),
        "COGSUB_LOG_LEVEL": "warning",
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "import sys; from cogsub.cli import main; sys.exit(main())",
        "--data-dir",
        str(root),
        "--embedder",
        args.embedder,
        "consolidator",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
    )
    try:
        consolidator = Consolidator(running, process, f"http://127.0.0.1:{port}/metrics")
        await consolidator.ready()  # its start-up is not counted in the first burst
        yield consolidator
    finally:
        await _stop(process)


async def _stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM (it finishes and commits the batch in hand), then SIGKILL if it lingers."""
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), timeout=60)
    except TimeoutError:
        print("cogsub consolidator did not stop in 60 s: killed", file=sys.stderr, flush=True)
        process.kill()
        await process.wait()
    except BaseException:  # interrupted while waiting: never leave it running
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        raise


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# Each process's memory from its metrics: all of it, what its index keeps per document,
# and SQLite's heap (page caches bounded by their cache_size).
MEMORY = {
    "rss_mib": "process_resident_memory_bytes",
    "index_data_mib": "cogsub_index_resident_data_bytes",
    "sqlite_mib": "cogsub_sqlite_memory_bytes",
}


def memory_from(value: Callable[[str], float | None]) -> dict[str, float]:
    """``MEMORY`` in MiB, each series read through ``value`` (absent: 0)."""
    return {name: (value(series) or 0.0) / 2**20 for name, series in MEMORY.items()}


def _samples_of(text: str) -> list[PromSample]:
    """Every sample of a process's ``/metrics`` page."""
    return [sample for family in text_string_to_metric_families(text) for sample in family.samples]


def _round_totals_from_text(text: str) -> dict[str, Any]:
    """``_round_totals`` of a process's ``/metrics`` page."""
    return _round_totals_in(_samples_of(text))


def _round_totals_in(page: Sequence[PromSample]) -> dict[str, Any]:
    values: dict[tuple[str, str], float] = {}
    for sample in page:
        if sample.name.startswith("cogsub_consolidation_round_seconds_"):
            suffix = sample.name.rsplit("_", 1)[1]
            values[(suffix, sample.labels.get("part", ""))] = sample.value
    return {
        "rounds": int(values.get(("count", "round"), 0)),
        "round_s": round(values.get(("sum", "round"), 0.0), 1),
        "decay_s": round(values.get(("sum", "decay"), 0.0), 1),
    }


def _round_totals(metrics: Metrics) -> dict[str, Any]:
    def total(suffix: str, part: str) -> float:
        name = f"cogsub_consolidation_round_seconds_{suffix}"
        return metrics.registry.get_sample_value(name, {"part": part}) or 0.0

    return {
        "rounds": int(total("count", "round")),
        "round_s": round(total("sum", "round"), 1),
        "decay_s": round(total("sum", "decay"), 1),
    }


def quarters(values: Sequence[float]) -> tuple[Sequence[float], Sequence[float], Sequence[float]]:
    """The first quarter, the second and the last of ``values`` (one each at least)."""
    size = max(1, len(values) // 4)
    return values[:size], values[size : 2 * size] or values[:size], values[-size:]


def verdict(
    samples: Sequence[Sample], rate: float, *, hold_s: float, memory_mib: float
) -> dict[str, Any]:
    """Whether the load held, by named checks, each with the figures it compared.

    A lag held when its floor (the least lag) over the last quarter of the soak is at
    most ``hold_s`` seconds of production above its floor over the first: a round may
    raise it for a while, but it must come back down. Memory held when what is neither
    the index's data (which grows with the documents) nor SQLite's bounded caches grew
    by at most ``memory_mib`` from the second quarter to the last (means: page caches
    fill in the first minutes; a queue or cache without a bound keeps growing).
    """
    checks: dict[str, dict[str, Any]] = {}
    allowed = round(rate * hold_s)
    for name in ("lag", "extraction_lag"):
        first, _, last = quarters([getattr(s, name) for s in samples])
        start, end = min(first, default=0), min(last, default=0)
        checks[name] = {"floor_start": start, "floor_end": end, "allowed_growth": allowed}
        checks[name]["held"] = end - start <= allowed
    _, second, last = quarters([s.other_mib for s in samples])
    grown = (sum(last) / len(last) - sum(second) / len(second)) if samples else 0.0
    checks["other_memory"] = {
        "grown_mib": round(grown, 1),
        "allowed_mib": memory_mib,
        "held": grown <= memory_mib,
    }
    return {"held": all(c["held"] for c in checks.values()), "checks": checks}


def describe(result: dict[str, Any]) -> str:
    """The verdict in one line per check."""
    lines = [f"load {'HELD' if result['held'] else 'NOT HELD'}:"]
    for name, check in result["checks"].items():
        mark = "held" if check["held"] else "NOT held"
        if "floor_start" in check:
            lines.append(
                f"  {name}: floor {check['floor_start']:,} in the first quarter, "
                f"{check['floor_end']:,} in the last (at most +{check['allowed_growth']:,}): "
                f"{mark}"
            )
        else:
            lines.append(
                f"  {name}: {check['grown_mib']:+.1f} MiB from the second quarter to the last "
                f"(at most +{check['allowed_mib']}): {mark}"
            )
    return "\n".join(lines)


def _summary(
    samples: list[Sample],
    calibration: Saturation,
    burst: float | None,
    rate: float,
    counters: Counters,
    args: argparse.Namespace,
) -> dict[str, Any]:
    late = samples[len(samples) // 2 :]
    throughput = sum(s.ingest_per_s for s in samples) / max(1, len(samples))
    maximum = calibration.pace
    return {
        "embedder": args.embedder,
        "consolidator": args.consolidator,
        "duration_s": args.duration,
        "calibrated_max_events_per_s": round(maximum, 1),
        # The same saturation's first --calibrate-s, on the store as it was before the
        # prefill: how much faster the near-empty store runs.
        "calibration_first_events_per_s": round(calibration.first_pace, 1),
        "calibration_store_events": calibration.events,
        "calibration_saturated_s": calibration.seconds,
        "calibration_steal_pct": calibration.steal_pct,
        "calibration_rounds": calibration.rounds,
        # The same stack's burst, just before: how far a burst overstates the pace.
        "calibration_burst_events_per_s": None if burst is None else round(burst, 1),
        "target_events_per_s": round(rate, 1),
        "mean_ingest_events_per_s": round(throughput, 1),
        "ratio_to_calibrated_max": round(throughput / maximum, 3),
        "lag_max": max((s.lag for s in samples), default=0),
        "lag_end": samples[-1].lag if samples else 0,
        "lag_trend_per_min": round(slope_per_min([(s.t_s, s.lag) for s in late]), 1),
        "extraction_lag_max": max((s.extraction_lag for s in samples), default=0),
        "extraction_lag_trend_per_min": round(
            slope_per_min([(s.t_s, s.extraction_lag) for s in late]), 1
        ),
        "rss_start_mib": samples[0].rss_mib if samples else 0,
        "rss_end_mib": samples[-1].rss_mib if samples else 0,
        "consolidator_rss_end_mib": samples[-1].consolidator_rss_mib if samples else 0,
        "rss_trend_mib_per_min": round(slope_per_min([(s.t_s, s.rss_mib) for s in late]), 2),
        "index_data_end_mib": samples[-1].index_data_mib if samples else 0,
        "sqlite_end_mib": samples[-1].sqlite_mib if samples else 0,
        "other_start_mib": round(samples[0].other_mib, 1) if samples else 0,
        "other_end_mib": round(samples[-1].other_mib, 1) if samples else 0,
        "consolidator_other_start_mib": samples[0].consolidator_other_mib if samples else 0,
        "consolidator_other_end_mib": samples[-1].consolidator_other_mib if samples else 0,
        "documents_end": samples[-1].documents if samples else 0,
        # Growth per document added over the same window: flat per document means
        # what grows is the data the embedded index keeps in memory, not a backlog.
        "rss_bytes_per_document_added": _per_document(late),
        # What is neither the index's data nor SQLite's bounded caches (both processes):
        # queues, batches and other caches must keep this flat.
        "other_trend_mib_per_min": round(slope_per_min([(s.t_s, s.other_mib) for s in late]), 2),
        "steal_pct_mean": round(sum(s.steal_pct for s in samples) / max(1, len(samples)), 1),
        "idle_pct_mean": round(sum(s.idle_pct for s in samples) / max(1, len(samples)), 1),
        # Rounds compete with extraction for the worker: their share of the run is the
        # time extraction did not have.
        "rounds": samples[-1].rounds if samples else 0,
        "round_s_total": samples[-1].round_s if samples else 0,
        "decay_s_total": samples[-1].decay_s if samples else 0,
        "recalls": len(counters.latencies_ms),
        "recall_p50_ms": round(percentile(counters.latencies_ms, 0.5), 2),
        "recall_p99_ms": round(percentile(counters.latencies_ms, 0.99), 2),
        "samples": [asdict(s) for s in samples],
    }


def _per_document(samples: Sequence[Sample]) -> float:
    if len(samples) < 2 or samples[-1].documents == samples[0].documents:
        return 0.0
    grown_mib = samples[-1].rss_mib - samples[0].rss_mib
    return round(grown_mib * 2**20 / (samples[-1].documents - samples[0].documents), 1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--duration",
        type=float,
        default=360.0,
        help="soak seconds (the default takes in the first consolidation round and its drain)",
    )
    parser.add_argument("--load", type=float, default=0.8, help="share of the calibrated max")
    parser.add_argument(
        "--calibrate", type=int, default=5_000, help="events in the burst reported (0: none)"
    )
    parser.add_argument(
        "--calibrate-s", type=float, default=75.0, help="seconds the stack is kept saturated"
    )
    parser.add_argument(
        "--warm-s", type=float, default=15.0, help="of those, seconds before the pace counts"
    )
    parser.add_argument(
        "--backlog", type=int, default=3_000, help="events kept in flight while saturated"
    )
    parser.add_argument(
        "--rate",
        type=float,
        help="soak at this many events/s instead of --load × the calibrated max (which is "
        "still measured and reported): two trees compared at one rate",
    )
    parser.add_argument(
        "--prefill",
        type=float,
        default=1.0,
        help="before the maximum counts, saturate until the store holds this many times the "
        "events the soak will add (0: measure on the store as it is, a near-empty one)",
    )
    parser.add_argument(
        "--rounds-first",
        type=int,
        default=len(BANKS),
        help="before the maximum counts, saturate until this many bank rounds have finished "
        "(the default: one for each bank; 0: count on a store no round has been through)",
    )
    parser.add_argument(
        "--hold-s",
        type=float,
        default=5.0,
        help="a lag held if its floor grew by at most this many seconds of production",
    )
    parser.add_argument(
        "--memory-mib",
        type=float,
        default=16.0,
        help="memory held if what is neither index data nor SQLite cache grew at most this",
    )
    parser.add_argument("--clients", type=int, default=2, help="concurrent recall clients")
    parser.add_argument("--think-s", type=float, default=0.1, help="pause between recalls")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--embedder", choices=["hash", "minilm"], default="hash")
    parser.add_argument(
        "--consolidator",
        choices=["in-process", "process"],
        default="process",
        help="consolidate in a `cogsub consolidator` process of its own on the same data "
        "(the default: a worker per process, as a fleet runs), or in the soak's process "
        "beside ingestion and the API (as `cogsub run` does)",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    if args.calibrate < 0:
        parser.error(f"--calibrate must be 0 or more events, not {args.calibrate}")
    if args.prefill < 0:
        parser.error(f"--prefill must be 0 or more, not {args.prefill}")
    if args.rounds_first < 0:
        parser.error(f"--rounds-first must be 0 or more, not {args.rounds_first}")
    if args.hold_s < 0 or args.memory_mib < 0:
        parser.error("--hold-s and --memory-mib must be 0 or more")
    if args.backlog < 1:
        parser.error(f"--backlog must be at least 1 event, not {args.backlog}")
    if not 0 <= args.warm_s < args.calibrate_s - 1:
        parser.error(
            f"--warm-s must leave more than a second of --calibrate-s ({args.calibrate_s}) "
            f"to measure, not {args.warm_s}"
        )
    configure_logging(format="console", level="warning")
    fix_mmap_threshold()  # as every `cogsub` process does: the soak's process hosts the stack
    with tempfile.TemporaryDirectory(prefix="cogsub-soak-") as root:
        try:
            summary = asyncio.run(soak(args, Path(root)))
        except asyncio.CancelledError:
            print("soak stopped by SIGTERM; removing its store…", file=sys.stderr, flush=True)
            return 143
        record("soak", summary, argv)
        if args.json:
            print(json.dumps(summary))
        else:
            for name, value in summary.items():
                if name not in ("samples", "checks"):
                    print(f"{name:>32}: {value}")
        print(describe(summary), file=sys.stderr if args.json else sys.stdout, flush=True)
        # Hundreds of thousands of archive files: removing them takes a while.
        print("removing the soak's store…", file=sys.stderr, flush=True)
    return 0 if summary["held"] else 1


if __name__ == "__main__":
    sys.exit(main())
