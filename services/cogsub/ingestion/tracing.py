"""Spans for one ingestion batch: a root ``experience.ingest`` per event, children per stage.

Stages run once per batch, so each stage's timing is recorded once and given
to every event's child span; a trace in Tempo then reads as one event's path
(embed → archive put → index write → publish) with the producer's span as
parent, across the Kafka hop.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from cogsub.bus.ports import Record
from cogsub.core.documents import IndexDocument
from cogsub.core.events import ExperienceEvent
from cogsub.telemetry import attributes as attr
from cogsub.telemetry.tracing import context_from_headers, tracer


class BatchTrace:
    """The open spans of one batch; ``end`` closes them all."""

    def __init__(self, *, group: str, messaging_system: str) -> None:
        self._group = group
        self._system = messaging_system
        self._started_ns = time.time_ns()
        self._tracer = tracer()  # looked up once per batch, not once per span
        self._roots: dict[str, Span] = {}
        self._recording: dict[str, Span] = {}  # the roots whose children are kept
        self._others: list[Span] = []

    def _root(self, record: Record, name: str, context: Context | None) -> Span:
        return self._tracer.start_span(
            name,
            context=context,
            kind=SpanKind.CONSUMER,
            start_time=self._started_ns,
            attributes={
                attr.MESSAGING_SYSTEM: self._system,
                attr.MESSAGING_DESTINATION_NAME: record.topic,
                attr.MESSAGING_OPERATION_TYPE: "process",
                attr.MESSAGING_OPERATION_NAME: "process",
                attr.MESSAGING_CONSUMER_GROUP_NAME: self._group,
                attr.MESSAGING_DESTINATION_PARTITION_ID: str(record.partition),
                attr.MESSAGING_KAFKA_OFFSET: record.offset,
            },
        )

    def begin(self, record: Record, event: ExperienceEvent) -> None:
        """Open the event's root span, child of the producer's context when it has one."""
        if event.event_id in self._roots:
            return
        parent = context_from_headers(
            record.headers, trace_id=event.context.trace_id, span_id=event.context.span_id
        )
        span = self._root(record, "experience.ingest", parent)
        span.set_attributes(
            {
                attr.COG_EVENT_ID: event.event_id,
                attr.COG_EVENT_TYPE: event.type.value,
                attr.COG_BANK_ID: event.bank_id,
                attr.MESSAGING_KAFKA_MESSAGE_KEY: event.event_id,
            }
        )
        if event.context.session_id:
            span.set_attribute(attr.COG_SESSION_ID, event.context.session_id)
        if event.fact_type:
            span.set_attribute(attr.COG_FACT_TYPE, event.fact_type.value)
        self._roots[event.event_id] = span
        if span.is_recording():
            self._recording[event.event_id] = span

    def rejected(self, record: Record, kind: str, reason: str) -> Context:
        """A failed root span for a dead-lettered record; its context goes on the DLQ record."""
        parent = context_from_headers(record.headers)
        span = self._root(record, "experience.ingest", parent)
        span.set_attributes({attr.COG_DLQ_KIND: kind, attr.COG_DLQ_REASON: reason[:512]})
        span.set_status(Status(StatusCode.ERROR, kind))
        self._others.append(span)
        return trace.set_span_in_context(span)

    @contextmanager
    def stage(self, name: str, event_ids: Sequence[str]) -> Iterator[None]:
        """Time the block and give each event a child span ``name`` covering it.

        Only recording roots get children: a child of a root that records
        nothing (no SDK, or not sampled) would record nothing either.
        """
        started = time.time_ns()
        try:
            yield
        finally:
            if self._recording:
                ended = time.time_ns()
                for event_id in event_ids:
                    root = self._recording.get(event_id)
                    if root is not None:
                        context = trace.set_span_in_context(root)
                        child = self._tracer.start_span(name, context=context, start_time=started)
                        child.end(ended)

    def indexed(self, doc: IndexDocument, *, index_name: str, model: str) -> None:
        root = self._recording.get(doc.event_id)
        if root is not None:
            root.set_attributes(
                {
                    attr.COG_EMBEDDING_DIM: len(doc.embedding),
                    attr.COG_EMBEDDING_MODEL: model,
                    attr.COG_IMPORTANCE_SCORE: doc.importance_score,
                    attr.COG_OBJECT_KEY: doc.object_storage_key,
                    attr.COG_MEMORY_INDEX: index_name,
                }
            )

    def context_for(self, event_id: str) -> Context | None:
        root = self._roots.get(event_id)
        return trace.set_span_in_context(root) if root is not None else None

    def end(self) -> None:
        for span in [*self._roots.values(), *self._others]:
            span.end()
