"""Metrics: what a real worker's batches, a real round and a recall record, read back
through the Prometheus parser; the lag sampler on a real SQLite log; the worker endpoint
over a real loopback socket."""

from __future__ import annotations

import asyncio
import json
import socket
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

from cogsub.archive.filesystem import FilesystemArchive
from cogsub.bus.ports import TopicStats
from cogsub.bus.sqlite import SqliteEventBus
from cogsub.core.errors import ConfigurationError, UnavailableError
from cogsub.core.events import EventType
from cogsub.core.memory import ConsolidationReport
from cogsub.core.topics import EXPERIENCE_RAW, TopicSpec
from cogsub.embeddings.hash import HashEmbedder
from cogsub.extraction.metered import MeteredExtractor
from cogsub.extraction.offline import OfflineExtractor
from cogsub.extraction.ports import ExtractedFact, ExtractionInput, ExtractionRejected
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.ingestion import BatchOutcome, IngestionWorker
from cogsub.telemetry.lag import LagSampler, LagTarget
from cogsub.telemetry.metrics import (
    EXPOSITION_CONTENT_TYPE,
    Metrics,
    StageClock,
    sqlite_memory_bytes,
)
from cogsub.telemetry.metrics_server import serve_metrics


def samples(metrics: Metrics | bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of the exposition by (name, sorted labels)."""
    text = (metrics.exposition() if isinstance(metrics, Metrics) else metrics).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return samples(metrics).get((name, tuple(sorted(labels.items()))))


def event(i: int, *, text: str | None = None) -> bytes:
    return json.dumps(
        {
            "eventId": f"ev-{i:05d}",
            "timestamp": f"2026-05-{1 + i:02d}T10:00:00.000Z",
            "type": "user_input",
            "bankId": "bank-a",
            "input": {"text": text or f"event number {i} about deploying service {i}"},
        }
    ).encode()


@pytest.fixture
async def bus(tmp_path: Path) -> AsyncIterator[SqliteEventBus]:
    opened = SqliteEventBus(tmp_path / "bus.sqlite3")
    yield opened
    await opened.close()


# --- recorders -------------------------------------------------------------------------


async def test_a_real_worker_counts_archived_indexed_and_dead_lettered_events(
    tmp_path: Path, bus: SqliteEventBus
) -> None:
    metrics = Metrics()
    clock = metrics.stage_observer()
    outcomes: list[BatchOutcome] = []
    consumed = 0
    reached = asyncio.Event()
    target = 0

    def on_batch(outcome: BatchOutcome) -> None:
        nonlocal consumed
        metrics.record_batch(outcome)
        outcomes.append(outcome)
        consumed += len(outcome.indexed) + len(outcome.rejected)
        if consumed >= target:
            reached.set()

    archive = FilesystemArchive(tmp_path / "archive")
    index = SqliteMemoryIndex(tmp_path / "index.sqlite3")
    worker = IngestionWorker(
        bus=bus,
        archive=archive,
        index=index,
        embedder=HashEmbedder(),
        poll_timeout_s=0.02,
        observer=clock,
    )
    await worker.prepare()
    for i in range(5):
        await bus.publish(EXPERIENCE_RAW, event(i))
    await bus.publish(EXPERIENCE_RAW, b"{not json")
    stop = asyncio.Event()
    target = 6
    running = asyncio.create_task(worker.run(stop, on_batch=on_batch))
    try:
        await asyncio.wait_for(reached.wait(), 10)
        first_phase = list(outcomes)
        reached.clear()
        target = 7  # the same id with other content: refused as a conflict, never overwritten
        await bus.publish(EXPERIENCE_RAW, event(0, text="something else entirely"))
        await asyncio.wait_for(reached.wait(), 10)
    finally:
        stop.set()
        await running
        await index.close()
        await archive.close()

    assert value(metrics, "cogsub_events_consumed_total") == 7
    assert value(metrics, "cogsub_events_archived_total") == 5
    assert value(metrics, "cogsub_events_indexed_total") == 5
    assert value(metrics, "cogsub_events_dead_lettered_total", kind="invalid") == 1
    assert value(metrics, "cogsub_events_dead_lettered_total", kind="conflict") == 1
    assert value(metrics, "cogsub_events_dead_lettered_total", kind="failed") == 0
    # Every batch that indexed something is timed once, receive to commit, each stage once.
    timed = len([o for o in outcomes if o.indexed])
    with_events = len([o for o in first_phase if o.indexed])
    assert timed == with_events >= 1
    assert value(metrics, "cogsub_ingest_batch_seconds_count") == timed
    for stage in ("archive", "index", "emit", "commit"):
        assert value(metrics, "cogsub_ingest_stage_seconds_count", stage=stage) == timed
    # The conflicting batch got as far as embed, score and key before the archive refused it.
    for stage in ("embed", "score", "key"):
        assert value(metrics, "cogsub_ingest_stage_seconds_count", stage=stage) == timed + 1
    assert value(metrics, "cogsub_ingest_stage_seconds_count", stage="receive") is None
    assert clock.tracked == 1  # only the refused event, which never reaches commit


def test_a_round_counts_by_outcome_and_kind() -> None:
    metrics = Metrics()
    metrics.record_round(
        ConsolidationReport(
            bank_id="bank-a",
            observations=["obs-1", "obs-2"],
            preferences=["pref-1"],
            procedures=["proc-1", "proc-2", "proc-3"],
            superseded=["proc-0"],
            reinforced=4,
            decayed=9,
            scanned=120,
            took_ms=3_500,
            decay_ms=3_000,
        )
    )
    report = ConsolidationReport(bank_id="bank-b", scanned=2_000, complete=False, took_ms=40)
    metrics.record_round(report)

    assert value(metrics, "cogsub_consolidation_rounds_total", outcome="complete") == 1
    assert value(metrics, "cogsub_consolidation_rounds_total", outcome="partial") == 1
    produced = {
        kind: value(metrics, "cogsub_consolidation_outputs_total", kind=kind)
        for kind in ("observation", "preference", "procedure", "superseded")
    }
    assert produced == {"observation": 2, "preference": 1, "procedure": 3, "superseded": 1}
    assert value(metrics, "cogsub_consolidation_updates_total", kind="reinforced") == 4
    assert value(metrics, "cogsub_consolidation_updates_total", kind="decayed") == 9
    assert value(metrics, "cogsub_consolidation_scanned_total") == 2_120
    seconds = "cogsub_consolidation_round_seconds"
    assert value(metrics, f"{seconds}_sum", part="round") == pytest.approx(3.54)
    assert value(metrics, f"{seconds}_sum", part="decay") == pytest.approx(3.0)
    assert value(metrics, f"{seconds}_bucket", part="round", le="0.05") == 1
    assert value(metrics, f"{seconds}_count", part="decay") == 1  # the round that decayed
    assert "bank-a" not in metrics.exposition().decode()  # banks are never label values


def test_recall_latency_and_result_counts_land_in_their_buckets() -> None:
    metrics = Metrics()
    metrics.observe_recall(0.003, 7)
    metrics.observe_recall(1.5, 0)
    with metrics.timed_recall() as timing:
        timing.results = 3

    bucket = "cogsub_recall_seconds_bucket"
    quick = value(metrics, bucket, le="0.0025")
    assert quick in (0, 1)  # the timed block itself may or may not be that quick
    assert value(metrics, bucket, le="0.005") == (quick or 0) + 1
    assert value(metrics, bucket, le="1.0") == 2
    assert value(metrics, bucket, le="2.0") == 3
    assert value(metrics, "cogsub_recall_seconds_count") == 3
    assert value(metrics, "cogsub_recall_results_bucket", le="0.0") == 1
    assert value(metrics, "cogsub_recall_results_bucket", le="3.0") == 2
    assert value(metrics, "cogsub_recall_results_bucket", le="10.0") == 3
    assert value(metrics, "cogsub_recall_results_sum") == 10


def test_a_recall_that_raises_is_not_observed() -> None:
    metrics = Metrics()
    with pytest.raises(UnavailableError), metrics.timed_recall():
        raise UnavailableError("index down")
    assert value(metrics, "cogsub_recall_seconds_count") == 0


def test_retains_count_by_fact_type_and_untyped_as_none() -> None:
    metrics = Metrics()
    metrics.record_retain("procedure")
    metrics.record_retain("procedure")
    metrics.record_retain(None)
    assert value(metrics, "cogsub_retain_total", fact_type="procedure") == 2
    assert value(metrics, "cogsub_retain_total", fact_type="none") == 1
    assert value(metrics, "cogsub_retain_total", fact_type="world") == 0


def test_the_stage_clock_measures_from_the_previous_boundary_and_forgets_the_oldest() -> None:
    metrics = Metrics()
    now = [100.0]
    clock = StageClock(metrics, max_tracked=3, clock=lambda: now[0])
    clock("receive", ["a", "b"])
    now[0] = 100.25
    clock("embed", ["a", "b"])
    now[0] = 101.0
    clock("commit", ["a", "b"])
    assert value(metrics, "cogsub_ingest_stage_seconds_sum", stage="embed") == 0.25
    assert value(metrics, "cogsub_ingest_stage_seconds_sum", stage="commit") == 0.75
    assert value(metrics, "cogsub_ingest_batch_seconds_sum") == 1.0
    assert clock.tracked == 0

    clock("receive", ["c", "d", "e", "f"])  # over the bound: the oldest is dropped
    assert clock.tracked == 3
    clock("commit", ["c"])  # no longer known: nothing is made up
    assert value(metrics, "cogsub_ingest_batch_seconds_count") == 1


def test_stacks_in_one_process_never_share_a_registry() -> None:
    first, second = Metrics(), Metrics()
    first.record_retain("world")
    assert value(first, "cogsub_retain_total", fact_type="world") == 1
    assert value(second, "cogsub_retain_total", fact_type="world") == 0
    default = prometheus_client.generate_latest(prometheus_client.REGISTRY).decode()
    assert "cogsub_" not in default


def test_the_exposition_has_no_creation_time_series_and_names_match() -> None:
    metrics = Metrics()
    names = {name for name, _ in samples(metrics)}
    assert not [n for n in names if n.endswith("_created")]
    assert names <= metrics.series_names()
    assert "cogsub_consumer_lag" in metrics.series_names()
    assert "cogsub_http_request_seconds_bucket" in metrics.series_names()


# --- extraction ------------------------------------------------------------------------


class _Rejecting:
    name = "rejecting"

    async def extract(self, item: ExtractionInput) -> list[ExtractedFact]:
        raise ExtractionRejected(item.source_event_id, "facts must be sentences")

    async def close(self) -> None:
        return None


async def test_rejected_extractions_are_counted_and_still_raised() -> None:
    from datetime import UTC, datetime

    metrics = Metrics()
    item = ExtractionInput(
        source_event_id="ev-1",
        text="I moved to Lisbon in March.",
        event_time=datetime(2026, 5, 1, tzinfo=UTC),
        event_type=EventType.USER_INPUT,
    )
    rejecting = MeteredExtractor(_Rejecting(), metrics)
    with pytest.raises(ExtractionRejected):
        await rejecting.extract(item)
    offline = MeteredExtractor(OfflineExtractor(), metrics)
    assert offline.name == OfflineExtractor().name
    assert await offline.extract(item) == await OfflineExtractor().extract(item)
    await offline.close()
    assert value(metrics, "cogsub_extraction_rejected_total") == 1


# --- consumer lag ----------------------------------------------------------------------


async def _topic_with_lag(bus: SqliteEventBus, topic: str, *, published: int, done: int) -> None:
    await bus.ensure_topics([TopicSpec(topic, 1)])
    for i in range(published):
        await bus.publish(topic, f"record {i}".encode())
    consumer = bus.consumer([topic], group="ingestion")
    try:
        records = await consumer.poll(max_records=done, timeout_s=1.0)
        assert len(records) == done
        await consumer.commit(records)
    finally:
        await consumer.close()


async def test_the_lag_gauge_is_what_the_group_has_not_committed(
    bus: SqliteEventBus, unique_name: str
) -> None:
    await _topic_with_lag(bus, unique_name, published=7, done=3)
    metrics = Metrics()
    behind, never_read, missing = (
        LagTarget(unique_name, "ingestion"),
        LagTarget(unique_name, "replay"),
        LagTarget(f"{unique_name}-missing", "ingestion"),
    )
    sampler = LagSampler(bus=bus, metrics=metrics, targets=[behind, never_read, missing])

    assert await sampler.sample_once() == {behind: 4, never_read: 7, missing: None}
    assert value(metrics, "cogsub_consumer_lag", topic=unique_name, group="ingestion") == 4
    assert value(metrics, "cogsub_consumer_lag", topic=unique_name, group="replay") == 7
    assert not [k for k in samples(metrics) if ("topic", missing.topic) in k[1]]


class _Watched:
    """The real bus, announcing each lag question; ``hang`` makes questions never end."""

    def __init__(self, bus: SqliteEventBus, *, hang: bool = False) -> None:
        self.bus = bus
        self.hang = hang
        self.calls = 0
        self.first_call = asyncio.Event()
        self.second_call = asyncio.Event()

    async def topic_stats(self, topic: str, *, group: str | None = None) -> TopicStats:
        self.calls += 1
        self.first_call.set()
        if self.calls >= 2:
            self.second_call.set()
        if self.hang:
            await asyncio.Event().wait()
        return await self.bus.topic_stats(topic, group=group)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.bus, name)


async def test_the_sampler_refreshes_until_stopped(bus: SqliteEventBus, unique_name: str) -> None:
    await _topic_with_lag(bus, unique_name, published=5, done=2)
    metrics = Metrics()
    watched = _Watched(bus)
    sampler = LagSampler(
        bus=watched,
        metrics=metrics,
        targets=[LagTarget(unique_name, "ingestion")],
        interval_s=0.05,
    )
    stop = asyncio.Event()
    running = asyncio.create_task(sampler.run(stop))
    try:
        await asyncio.wait_for(watched.second_call.wait(), 5)  # the first sample is in
        assert value(metrics, "cogsub_consumer_lag", topic=unique_name, group="ingestion") == 3
    finally:
        stop.set()
        await asyncio.wait_for(running, 2)

    watched = _Watched(bus)
    slow = LagSampler(
        bus=watched,
        metrics=metrics,
        targets=[LagTarget(unique_name, "ingestion")],
        interval_s=600,
    )
    stop = asyncio.Event()
    running = asyncio.create_task(slow.run(stop))
    await asyncio.wait_for(watched.first_call.wait(), 5)
    stop.set()
    await asyncio.wait_for(running, 2)  # a stop cuts the 600 s wait short
    assert watched.calls == 1


async def test_a_lag_question_that_never_answers_is_bounded_and_drops_the_series(
    bus: SqliteEventBus, unique_name: str
) -> None:
    await _topic_with_lag(bus, unique_name, published=2, done=1)
    metrics = Metrics()
    target = LagTarget(unique_name, "ingestion")
    metrics.set_lag(target.topic, target.group, 99)
    hanging = LagSampler(
        bus=_Watched(bus, hang=True),
        metrics=metrics,
        targets=[target],
        timeout_s=0.05,
    )
    assert await asyncio.wait_for(hanging.sample_once(), 2) == {target: None}
    assert value(metrics, "cogsub_consumer_lag", topic=target.topic, group=target.group) is None


def test_the_sampler_refuses_a_busy_loop(bus: SqliteEventBus) -> None:
    with pytest.raises(ConfigurationError):
        LagSampler(bus=bus, metrics=Metrics(), targets=[], interval_s=0)


# --- the worker endpoint ---------------------------------------------------------------


async def test_the_worker_endpoint_serves_the_exposition_on_loopback() -> None:
    metrics = Metrics()
    metrics.set_lag("experience.raw", "ingestion", 12)
    server = serve_metrics(metrics, host="127.0.0.1", port=0)
    try:
        assert server.host == "127.0.0.1" and server.port > 0
        async with httpx.AsyncClient(timeout=5) as client:
            response = await client.get(server.url)
        assert response.status_code == 200
        assert response.headers["content-type"] == EXPOSITION_CONTENT_TYPE
        found = samples(response.content)
        key = ("cogsub_consumer_lag", (("group", "ingestion"), ("topic", "experience.raw")))
        assert found[key] == 12
        assert not [name for name, _ in found if name.endswith("_created")]
    finally:
        await server.aclose()
    async with httpx.AsyncClient(timeout=2) as client:
        with pytest.raises(httpx.ConnectError):
            await client.get(server.url)
    server.stop()  # idempotent


def test_a_port_in_use_is_a_configuration_error() -> None:
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(ConfigurationError, match="cannot serve metrics"):
            serve_metrics(Metrics(), host="127.0.0.1", port=taken.getsockname()[1])
    finally:
        taken.close()


def test_sqlite_memory_follows_what_connections_hold_and_is_exposed() -> None:
    before = sqlite_memory_bytes()
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (x TEXT)")
    conn.executemany("INSERT INTO t VALUES (?)", [("x" * 100,) for _ in range(20_000)])
    holding = sqlite_memory_bytes()
    assert holding > before + 20_000 * 100  # the in-memory database is SQLite's heap
    exposed = {name: value for (name, _), value in samples(Metrics()).items()}
    assert exposed["cogsub_sqlite_memory_bytes"] > 20_000 * 100
    assert exposed["process_resident_memory_bytes"] > exposed["cogsub_sqlite_memory_bytes"]
    conn.close()
    assert sqlite_memory_bytes() < holding - 20_000 * 100
