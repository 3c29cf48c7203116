"""Spans across the bus hop: producer → experience.ingest → stage children → downstream headers."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from rich.console import Console

from cogsub.cli.events_file import parse_events_text
from cogsub.cli.publish import publish_events
from cogsub.core import EXPERIENCE_RAW, EXPERIENCE_RAW_DLQ, MEMORY_INDEXED
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
