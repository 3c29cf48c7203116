"""Ingestion's spans as a middleware: a root ``experience.ingest`` per event, a child per stage.

The steps only say where a batch is (:class:`~cogsub.ingestion.batch.StageListener`);
this middleware turns that into spans. Stages run once per batch, so each
stage's timing is recorded once and given to every event's child span; a trace
in Tempo then reads as one event's path (embed → archive put → index write →
publish) with the producer's span as parent, across the Kafka hop.

A root is opened once its batch is staged (the parsed events name it), with the
batch's start as its start, and ends once the batch's finish succeeds or fails
for good. A finish that fails retryably leaves it open for the next attempt; a
batch the runtime drops (stopping while it retries) ends its spans when it is
collected. Either way each root ends exactly once.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeAlias, TypeVar

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from cogsub.bus.middleware import FinishInput, Middleware, StageInput
from cogsub.bus.ports import Headers, Record
from cogsub.core.errors import CogsubError
from cogsub.core.events import ArchivedEvent
from cogsub.ingestion.batch import StagedBatch, listening
from cogsub.ingestion.pipeline import Accepted, Stage
from cogsub.telemetry import attributes as attr
from cogsub.telemetry.tracing import context_from_headers, headers_with_context, tracer

T = TypeVar("T")

ROOT = "experience.ingest"

CHILDREN = {
    Stage.EMBED: "experience.embed",
    Stage.ARCHIVE: "experience.archive.put",
    Stage.INDEX: "experience.index.write",
    Stage.EMIT: "experience.publish",
}
"""The stages that get a child span under each event's root, and its name."""

_BatchKey = tuple[str, int, int]
_Ending: TypeAlias = "weakref.finalize[[_BatchKey, BatchSpans], StagedBatch]"


@dataclass(frozen=True)
class SpanNames:
    """What every root says about where it ran."""

    group: str
    messaging_system: str
    index_name: str
    model: str


class IngestionSpans(Middleware):
    """Opens, feeds and ends the spans of every ingestion batch (one per stage, then finish)."""

    def __init__(self, names: SpanNames) -> None:
        self._names = names
        # Batches staged but not finished for good, by their first record; each entry's
        # finalizer is the one way its spans end (called by finish, or when it is collected).
        self._open: dict[_BatchKey, tuple[BatchSpans, _Ending]] = {}

    async def stage(self, call: StageInput, proceed: Callable[[StageInput], Awaitable[T]]) -> T:
        spans = BatchSpans(self._names, tracer(), started_ns=time.time_ns())
        with listening(spans):
            staged = await proceed(call)
        if isinstance(staged, StagedBatch) and call.records:
            spans.open(staged.accepted, staged.stored)
            self._keep(_key(call.records), spans, staged)
        return staged

    async def finish(self, call: FinishInput, proceed: Callable[[FinishInput], Awaitable[T]]) -> T:
        entry = self._open.get(_key(call.records)) if call.records else None
        if entry is None:
            return await proceed(call)
        spans, ending = entry
        try:
            with listening(spans):
                result = await proceed(call)
        except CogsubError as exc:
            if not exc.retryable:
                spans.failed(exc)
                ending()
            raise  # retryable: the runtime finishes again, or drops the batch
        except Exception as exc:
            spans.failed(exc)
            ending()
            raise
        except BaseException:  # cancelled at the end of the stop grace, or the process dies
            ending()
            raise
        ending()
        return result

    def _keep(self, key: _BatchKey, spans: BatchSpans, staged: StagedBatch) -> None:
        stale = self._open.get(key)
        if stale is not None:  # staged again, never finished: the runtime dropped it
            stale[1]()
        ending = weakref.finalize(staged, self._ended, key, spans)
        self._open[key] = (spans, ending)

    def _ended(self, key: _BatchKey, spans: BatchSpans) -> None:
        entry = self._open.get(key)
        if entry is not None and entry[0] is spans:
            del self._open[key]
        spans.end()

    @property
    def open_batches(self) -> int:
        """How many staged batches still hold open spans."""
        return len(self._open)


def _key(records: Sequence[Record]) -> _BatchKey:
    first = records[0]
    return first.topic, first.partition, first.offset


class BatchSpans:
    """The spans of one batch: hears its stages (a ``StageListener``) and holds its roots."""

    def __init__(self, names: SpanNames, spans_from: Tracer, *, started_ns: int) -> None:
        self._names = names
        self._tracer = spans_from  # looked up once per batch, not once per span
        self._started_ns = started_ns
        self._opened = False
        self._ended = False
        self._roots: dict[str, Span] = {}
        self._recording: dict[str, Span] = {}  # the roots whose children are kept
        self._began: dict[Stage, int] = {}
        # Stages over before the roots open (staging), given to them once they do.
        self._waiting: list[tuple[str, Sequence[str], int, int, BaseException | None]] = []

    def started(self, stage: Stage, event_ids: Sequence[str]) -> None:
        self._began[stage] = time.time_ns()

    def ended(
        self, stage: Stage, event_ids: Sequence[str], error: BaseException | None = None
    ) -> None:
        name = CHILDREN.get(stage)
        if name is None:
            return
        now = time.time_ns()
        timing = (name, event_ids, self._began.pop(stage, now), now, error)
        if self._opened:
            self._children(*timing)
        else:
            self._waiting.append(timing)

    def headers_for(self, event_id: str) -> Headers:
        root = self._roots.get(event_id)
        return headers_with_context((), trace.set_span_in_context(root)) if root else ()

    def open(self, accepted: Sequence[Accepted], stored: Sequence[ArchivedEvent]) -> None:
        """A root per event id, child of the producer's context; then the stages so far."""
        archived = {a.event_id: a for a in stored}
        for item in accepted:
            event_id = item.event.event_id
            if event_id not in self._roots:
                self._roots[event_id] = self._root(item, archived.get(event_id))
        self._recording = {k: s for k, s in self._roots.items() if s.is_recording()}
        self._opened = True
        waiting, self._waiting = self._waiting, []
        for timing in waiting:
            self._children(*timing)

    def failed(self, error: BaseException) -> None:
        for span in self._roots.values():
            span.set_status(Status(StatusCode.ERROR, type(error).__name__))

    def end(self) -> None:
        if self._ended:
            return
        self._ended = True
        for span in self._roots.values():
            span.end()

    def _root(self, item: Accepted, archived: ArchivedEvent | None) -> Span:
        record, event = item.record, item.event
        parent = context_from_headers(
            record.headers, trace_id=event.context.trace_id, span_id=event.context.span_id
        )
        span = self._tracer.start_span(
            ROOT,
            context=parent,
            kind=SpanKind.CONSUMER,
            start_time=self._started_ns,
            attributes=self._messaging(record),
        )
        if not span.is_recording():
            return span
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
        if archived is not None:  # what staging made of it (a conflict has none)
            span.set_attributes(
                {
                    attr.COG_EMBEDDING_DIM: len(archived.input.embedding),
                    attr.COG_EMBEDDING_MODEL: self._names.model,
                    attr.COG_IMPORTANCE_SCORE: archived.importance_score,
                    attr.COG_OBJECT_KEY: archived.object_storage_key,
                    attr.COG_MEMORY_INDEX: self._names.index_name,
                }
            )
        return span

    def _messaging(self, record: Record) -> dict[str, str | int]:
        return {
            attr.MESSAGING_SYSTEM: self._names.messaging_system,
            attr.MESSAGING_DESTINATION_NAME: record.topic,
            attr.MESSAGING_OPERATION_TYPE: "process",
            attr.MESSAGING_OPERATION_NAME: "process",
            attr.MESSAGING_CONSUMER_GROUP_NAME: self._names.group,
            attr.MESSAGING_DESTINATION_PARTITION_ID: str(record.partition),
            attr.MESSAGING_KAFKA_OFFSET: record.offset,
        }

    def _children(
        self,
        name: str,
        event_ids: Sequence[str],
        started: int,
        ended: int,
        error: BaseException | None,
    ) -> None:
        """A child ``name`` of each event's root covering ``started``-``ended``.

        Only recording roots get children: a child of a root that records
        nothing (no SDK, or not sampled) would record nothing either.
        """
        for event_id in event_ids:
            root = self._recording.get(event_id)
            if root is None:
                continue
            context = trace.set_span_in_context(root)
            child = self._tracer.start_span(name, context=context, start_time=started)
            if error is not None:
                child.set_status(Status(StatusCode.ERROR, type(error).__name__))
            child.end(ended)
