"""Spans across the bus hop: producer → experience.ingest → stage children → downstream headers."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rich.console import Console

from cogsub.bus.dead_letters import DLQ_KIND_HEADER
from cogsub.cli.events_file import parse_events_text
from cogsub.cli.publish import publish_events
from cogsub.core import EXPERIENCE_RAW, EXPERIENCE_RAW_DLQ, MEMORY_INDEXED, UnavailableError
from cogsub.ingestion import RetryPolicy
from cogsub.telemetry import context_from_headers, tracer
from cogsub.telemetry.tracing import add_trace_ids
from tests.services.ingestion.harness import Harness, event_body


async def _ingest(harness: Harness, lines: list[str], poison: bytes) -> None:
    bus = harness.bus()
    await publish_events(bus, list(parse_events_text("\n".join(lines))), Console(quiet=True))
    await bus.publish(EXPERIENCE_RAW, poison)  # a producer that skipped validation
    await harness.drain(harness.worker(bus=bus), bus)


async def test_one_trace_spans_producer_ingestion_and_downstream(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    harness = Harness(tmp_path)
    try:
        await _ingest(harness, [json.dumps(event_body(1))], b"{poison")
        (indexed,) = await harness.read_topic(MEMORY_INDEXED)
        (dead,) = await harness.read_topic(EXPERIENCE_RAW_DLQ)
    finally:
        await harness.close()

    finished = spans.get_finished_spans()
    (producer,) = [s for s in finished if s.kind is trace.SpanKind.PRODUCER]
    ingest = [s for s in finished if s.name == "experience.ingest"]
    (root,) = [s for s in ingest if s.attributes and s.attributes.get("cog.event.id") == "ev-00001"]
    assert root.parent is not None and root.parent.span_id == producer.context.span_id
    assert root.context.trace_id == producer.context.trace_id
    attributes = dict(root.attributes or {})
    assert attributes["cog.event.type"] == "tool_result"
    assert attributes["cog.session.id"] == "s-1"
    assert attributes["cog.embedding.dim"] == 8
    assert attributes["cog.importance.score"] == 1.0
    assert attributes["cog.memory.index"] == "experience_events"
    assert attributes["messaging.destination.name"] == "experience.raw"
    assert attributes["messaging.consumer.group.name"] == "ingestion"
    assert "messaging.kafka.offset" in attributes

    children = {s.name for s in finished if s.parent and s.parent.span_id == root.context.span_id}
    assert children == {
        "experience.embed",
        "experience.archive.put",
        "experience.index.write",
        "experience.publish",
    }

    downstream = context_from_headers(indexed.headers)
    assert downstream is not None
    carried = trace.get_current_span(downstream).get_span_context()
    assert carried.trace_id == producer.context.trace_id
    assert carried.span_id == root.context.span_id

    (failed,) = [s for s in ingest if s is not root]
    assert failed.status.status_code is trace.StatusCode.ERROR
    assert (failed.attributes or {})["cog.dlq.kind"] == "invalid"
    dead_context = context_from_headers(dead.headers)
    assert dead_context is not None
    assert trace.get_current_span(dead_context).get_span_context().span_id == failed.context.span_id


async def test_the_events_own_trace_ids_are_the_fallback_parent(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    body = event_body(2)
    body["context"] = {"traceId": "4bf92f3577b34da6a3ce929d0e0e4736", "spanId": "00f067aa0ba902b7"}
    harness = Harness(tmp_path)
    try:
        await harness.publish([body])  # no traceparent header on this record
        bus = harness.bus()
        await harness.drain(harness.worker(bus=bus), bus)
    finally:
        await harness.close()
    (root,) = [s for s in spans.get_finished_spans() if s.name == "experience.ingest"]
    assert format(root.context.trace_id, "032x") == "4bf92f3577b34da6a3ce929d0e0e4736"
    assert root.parent is not None and format(root.parent.span_id, "016x") == "00f067aa0ba902b7"


async def test_ids_that_are_not_w3c_start_a_new_trace(
    tmp_path: Path, spans: InMemorySpanExporter
) -> None:
    harness = Harness(tmp_path)
    try:
        await harness.publish([{**event_body(3), "context": {"traceId": "demo-trace-001"}}])
        bus = harness.bus()
        await harness.drain(harness.worker(bus=bus), bus)
    finally:
        await harness.close()
    (root,) = [s for s in spans.get_finished_spans() if s.name == "experience.ingest"]
    assert root.parent is None


def test_log_lines_carry_the_current_trace_and_span(spans: InMemorySpanExporter) -> None:
    assert add_trace_ids(None, "info", {"event": "x"}) == {"event": "x"}
    with tracer().start_as_current_span("work") as span:
        line = add_trace_ids(None, "info", {"event": "x"})
    assert line["trace_id"] == format(span.get_span_context().trace_id, "032x")
    assert line["span_id"] == format(span.get_span_context().span_id, "016x")


class _IndexDown:
    """A real index whose upserts are unavailable while ``failures`` last (None: always)."""

    def __init__(self, index: Any, failures: int | None = None) -> None:
        self._index, self.failures = index, failures

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)

    async def upsert(self, docs: Sequence[Any]) -> None:
        if self.failures is None or self.failures > 0:
            self.failures = None if self.failures is None else self.failures - 1
            raise UnavailableError("index down")
        await self._index.upsert(docs)


class _RefusesOne:
    """A real index that refuses for good any write holding ``event_id``."""

    def __init__(self, index: Any, event_id: str) -> None:
        self._index, self._event_id = index, event_id

    def __getattr__(self, name: str) -> Any:
        return getattr(self._index, name)

    async def upsert(self, docs: Sequence[Any]) -> None:
        if any(d.event_id == self._event_id for d in docs):
            raise ValueError(f"the index refuses {self._event_id}")
        await self._index.upsert(docs)


def _roots(spans: InMemorySpanExporter) -> list[ReadableSpan]:
    return [
        s
        for s in spans.get_finished_spans()
        if s.name == "experience.ingest" and s.attributes and "cog.event.id" in s.attributes
    ]


def _ended_twice(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "ended span" in r.getMessage()]


async def test_a_retried_finish_ends_each_root_once_with_a_child_per_attempt(
    tmp_path: Path, spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    harness = Harness(tmp_path)
    try:
        await harness.publish([event_body(i) for i in range(3)])
        bus = harness.bus()
        worker = harness.worker(
            bus=bus,
            wrap_index=lambda index: _IndexDown(index, failures=1),
            retry=RetryPolicy(0.001, 0.01),
        )
        await worker.prepare()
        stop = asyncio.Event()
        # The running runtime retries the finish alone (``process`` redoes stage and finish).
        await asyncio.wait_for(worker.run(stop, on_batch=lambda _: stop.set()), timeout=10)
    finally:
        await harness.close()

    roots = _roots(spans)
    assert sorted(str((s.attributes or {})["cog.event.id"]) for s in roots) == [
        "ev-00000",
        "ev-00001",
        "ev-00002",
    ]
    assert all(s.status.status_code is trace.StatusCode.UNSET for s in roots)
    root = roots[0]
    writes = [
        s
        for s in spans.get_finished_spans()
        if s.name == "experience.index.write"
        and s.parent
        and s.parent.span_id == root.context.span_id
    ]
    assert [w.status.status_code for w in writes] == [
        trace.StatusCode.ERROR,
        trace.StatusCode.UNSET,
    ]
    assert _ended_twice(caplog) == []


async def test_a_batch_split_after_its_finish_failed_ends_every_root_once(
    tmp_path: Path, spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    harness = Harness(tmp_path)
    try:
        await harness.publish([event_body(i) for i in range(3)])
        bus = harness.bus()
        worker = harness.worker(bus=bus, wrap_index=lambda i: _RefusesOne(i, "ev-00001"))
        await harness.drain(worker, bus)
        (dead,) = await harness.dead_letters()
    finally:
        await harness.close()

    assert dead.header(DLQ_KIND_HEADER) == b"failed"
    by_id: dict[str, list[trace.StatusCode]] = {}
    for root in _roots(spans):
        event_id = str((root.attributes or {})["cog.event.id"])
        by_id.setdefault(event_id, []).append(root.status.status_code)
    # The batch failed as a whole, then was done record by record.
    error, ok = trace.StatusCode.ERROR, trace.StatusCode.UNSET
    assert by_id == {"ev-00000": [error, ok], "ev-00001": [error, error], "ev-00002": [error, ok]}
    assert _ended_twice(caplog) == []


async def test_a_batch_dropped_while_its_finish_retries_still_ends_its_spans(
    tmp_path: Path, spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    harness = Harness(tmp_path)
    try:
        await harness.publish([event_body(i) for i in range(3)])
        bus = harness.bus()
        worker = harness.worker(
            bus=bus,
            wrap_index=lambda index: _IndexDown(index),
            retry=RetryPolicy(0.01, 0.02),
        )
        await worker.prepare()
        stop = asyncio.Event()
        running = asyncio.create_task(worker.run(stop))
        await asyncio.sleep(0.3)  # staged, and its finish is retrying by now
        stop.set()
        await asyncio.wait_for(running, timeout=10)
        assert (await bus.topic_stats(EXPERIENCE_RAW, group="ingestion")).lag == 3
    finally:
        await harness.close()
    gc.collect()  # the dropped batch's last references are in reference cycles

    roots = _roots(spans)
    assert sorted(str((s.attributes or {})["cog.event.id"]) for s in roots) == [
        "ev-00000",
        "ev-00001",
        "ev-00002",
    ]
    assert _ended_twice(caplog) == []
