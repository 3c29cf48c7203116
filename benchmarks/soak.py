"""`make bench-soak`: sustained load on the embedded stack, with recall alongside.

The soak's process runs the ingestion worker and the memory service; consolidation
(extraction and scheduled rounds) runs in a `cogsub consolidator` process on the same
data directory, stopped by its PID at the end (``--consolidator in-process`` runs it in
the soak's process instead, one event loop for everything, as `cogsub run` does).

1. Calibrate: one burst of ``--calibrate`` events (reported beside the maximum, not used
   for it), then the stack kept saturated for ``--calibrate-s`` seconds: a standing
   backlog of ``--backlog`` events published and not yet extracted. The maximum is the
   pace extraction finishes events at once warm (after ``--warm-s``). A burst ends
   inside the page cache, before writeback and checkpoints catch up; the saturated pace
   is what the stack keeps up, and the burst's ratio to it is printed.
2. Soak: producers publish at ``--load`` (default 80 %) of that rate for
   ``--duration`` seconds while ``--clients`` recall concurrently.
3. After: the producers stop; the time the backlog takes to drain, and the saturated
   pace again on the store the soak grew (the maximum at the end's size).

Every ``--every`` seconds it samples throughput, consumer lag, resident memory (of
both processes) and
recall latency. The summary gives throughput against the calibrated maximum (the
baseline measured in the same run), recall p50/p99, and the trends that must stay
flat: lag (events per minute, least squares over the second half) and resident
memory (MiB per minute over the same window).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import resource
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

from benchmarks.ingest import make_events
from cogsub.core import EXPERIENCE_ENRICHED, EXPERIENCE_RAW
from cogsub.core.memory import RecallRequest
from cogsub.ingestion import BatchOutcome
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
    rss_mib: float
    vectors_mib: float  # the embedded index's vector matrix, which grows with the data
    documents: int  # what the index holds: memory that grows with it is the data's
    recalls: int
    recall_p50_ms: float
    recall_p99_ms: float
    rounds: int  # consolidation rounds (of one bank each) finished so far
    round_s: float  # seconds spent in them so far, of which
    decay_s: float  # in their decay passes
    # Of rss_mib, which is both processes' when a consolidator runs beside the soak's.
    consolidator_rss_mib: float = 0.0


@dataclass
class Counters:
    indexed: int = 0
    produced: int = 0
    latencies_ms: list[float] = field(default_factory=list)

    def on_batch(self, outcome: BatchOutcome) -> None:
        self.indexed += len(outcome.indexed) + len(outcome.rejected)


def rss_mib(pid: int | str = "self") -> float:
    """Resident set size now (Linux /proc), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


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


async def saturate(
    running: RunningApi,
    consolidator: Consolidator,
    counters: Counters,
    args: argparse.Namespace,
    *,
    prefix: str,
) -> float:
    """Events/s the whole pipeline finishes while a standing backlog keeps it busy.

    For ``args.calibrate_s`` seconds, ``args.backlog`` events are kept in flight
    (published, not yet extracted); the pace is the least-squares slope of extracted
    events over the time after ``args.warm_s``. The backlog is drained before returning,
    so what comes next starts from no lag.
    """
    group = running.stack.settings.consolidation.group

    async def extracted() -> int:
        stats = await running.stack.bus.topic_stats(EXPERIENCE_ENRICHED, group=group)
        return stats.end_offset - stats.lag  # what the worker has committed

    base, sent, points = await extracted(), 0, []
    started = time.perf_counter()
    while time.perf_counter() - started < args.calibrate_s:
        done = await extracted() - base
        if (now := time.perf_counter() - started) >= args.warm_s:  # when the count was read
            points.append((now, done))
        if (short := args.backlog - (sent - done)) > 0:
            await _publish(running, counters, _bodies(short, start=sent, prefix=prefix))
            sent += short
        consolidator.raise_if_failed()
        await asyncio.sleep(0.25)
    await _drained(running, consolidator)
    half = len(points) // 2
    first, last = pace_per_s(points[:half]), pace_per_s(points[half:])
    print(
        f"{prefix}: saturated pace {first:.0f} events/s in the first half of the measured "
        f"time, {last:.0f} in the second",
        flush=True,
    )
    if (pace := pace_per_s(points)) <= 0:
        # A soak at 80 % of nothing would hold trivially: refuse to go on.
        raise RuntimeError(
            f"nothing was extracted in the {args.calibrate_s - args.warm_s:.0f} s after "
            f"--warm-s {args.warm_s}: no maximum to soak at (a longer --calibrate-s?)"
        )
    return pace


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
            maximum = await saturate(running, consolidator, counters, args, prefix="calib")
            counters.latencies_ms.clear()
            rate = args.rate or args.load * maximum
            before = (
                ""
                if burst is None
                else f" (a burst of {args.calibrate} before it: {burst:.0f} events/s, "
                f"{burst / maximum:.2f} times that)"
            )
            print(
                f"calibrated maximum {maximum:.0f} events/s, saturated for "
                f"{args.calibrate_s:.0f} s{before} with {args.clients} recall clients; "
                f"soaking at {rate:.0f} events/s for {args.duration:.0f} s",
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
    summary = _summary(samples, maximum, burst, rate, counters, args)
    return summary | {"soak_rounds": soak_rounds} | after


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
        f"drained in {drain_s:.1f} s; saturated on the grown store: {end:.0f} events/s "
        f"({rounds} bank rounds meanwhile)",
        flush=True,
    )
    return {
        "drain_s": round(drain_s, 1),
        "end_calibrated_max_events_per_s": round(end, 1),
        "end_calibration_rounds": rounds,
        "ratio_target_to_end_max": round(rate / end, 3),
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
    started = time.perf_counter()
    last_t, last_indexed, last_recalls = 0.0, counters.indexed, 0
    print(
        f"{'t_s':>6} {'ingest/s':>9} {'lag':>7} {'extract lag':>11} {'rss_mib':>8} "
        f"{'vectors':>8} {'recall p50':>11} {'p99':>8} {'rounds':>6} {'round_s':>8} {'decay_s':>8}"
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
        sample = Sample(
            t_s=round(t, 1),
            produced=counters.produced,
            indexed=counters.indexed,
            ingest_per_s=round((counters.indexed - last_indexed) / (t - last_t), 1),
            lag=stats.lag,
            extraction_lag=behind.lag,
            rss_mib=round(rss_mib() + (beside := consolidator.rss_mib()), 1),
            consolidator_rss_mib=round(beside, 1),
            vectors_mib=round(getattr(running.stack.index, "cached_vector_bytes", 0) / 2**20, 1),
            documents=await running.stack.index.count(),
            recalls=len(window),
            recall_p50_ms=round(percentile(window, 0.5), 2),
            recall_p99_ms=round(percentile(window, 0.99), 2),
            **await consolidator.round_totals(),
        )
        samples.append(sample)
        print(
            f"{sample.t_s:>6} {sample.ingest_per_s:>9} {sample.lag:>7} "
            f"{sample.extraction_lag:>11} {sample.rss_mib:>8} {sample.vectors_mib:>8} "
            f"{sample.recall_p50_ms:>11} {sample.recall_p99_ms:>8} {sample.rounds:>6} "
            f"{sample.round_s:>8} {sample.decay_s:>8}",
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

    def raise_if_failed(self) -> None:
        """Re-raise a failed worker of the soak's process; raise if the consolidator exited."""
        self._running.raise_if_worker_failed()
        if self._process is not None and self._process.returncode is not None:
            raise RuntimeError(f"cogsub consolidator exited with {self._process.returncode}")

    def rss_mib(self) -> float:
        return 0.0 if self._process is None else rss_mib(self._process.pid)

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
        if self._process is None:
            return _round_totals(self._running.stack.metrics)
        async with httpx.AsyncClient(timeout=5.0) as client:
            response = await client.get(self._url)
        response.raise_for_status()
        self._scraped = True
        return _round_totals_from_text(response.text)


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


def _round_totals_from_text(text: str) -> dict[str, Any]:
    """``_round_totals`` of a process's ``/metrics`` page."""
    values: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
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


def _summary(
    samples: list[Sample],
    maximum: float,
    burst: float | None,
    rate: float,
    counters: Counters,
    args: argparse.Namespace,
) -> dict[str, Any]:
    late = samples[len(samples) // 2 :]
    throughput = sum(s.ingest_per_s for s in samples) / max(1, len(samples))
    return {
        "embedder": args.embedder,
        "consolidator": args.consolidator,
        "duration_s": args.duration,
        "calibrated_max_events_per_s": round(maximum, 1),
        "calibration_saturated_s": args.calibrate_s,
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
        "vectors_end_mib": samples[-1].vectors_mib if samples else 0,
        "documents_end": samples[-1].documents if samples else 0,
        # Growth per document added over the same window: flat per document means
        # what grows is the data the embedded index keeps in memory, not a backlog.
        "rss_bytes_per_document_added": _per_document(late),
        # What is not the data itself: queues, batches and caches must keep this flat.
        # (The vectors are the soak process's cache; the consolidator's is not counted.)
        "rss_less_vectors_trend_mib_per_min": round(
            slope_per_min([(s.t_s, s.rss_mib - s.vectors_mib) for s in late]), 2
        ),
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
    if args.backlog < 1:
        parser.error(f"--backlog must be at least 1 event, not {args.backlog}")
    if not 0 <= args.warm_s < args.calibrate_s - 1:
        parser.error(
            f"--warm-s must leave more than a second of --calibrate-s ({args.calibrate_s}) "
            f"to measure, not {args.warm_s}"
        )
    configure_logging(format="console", level="warning")
    with tempfile.TemporaryDirectory(prefix="cogsub-soak-") as root:
        try:
            summary = asyncio.run(soak(args, Path(root)))
        except asyncio.CancelledError:
            print("soak stopped by SIGTERM; removing its store…", file=sys.stderr, flush=True)
            return 143
        if args.json:
            print(json.dumps(summary))
        else:
            for name, value in summary.items():
                if name != "samples":
                    print(f"{name:>32}: {value}")
        # Hundreds of thousands of archive files: removing them takes a while.
        print("removing the soak's store…", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
