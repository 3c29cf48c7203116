"""The IngestionSpans middleware on its own: when roots open, stay open and end (no stores)."""

from __future__ import annotations

import gc
import json
from collections.abc import Sequence

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from cogsub.bus.middleware import FinishInput, StageInput
from cogsub.bus.ports import Record
from cogsub.core import UnavailableError
from cogsub.ingestion.batch import BatchOutcome, StagedBatch, announcement_headers, reported
from cogsub.ingestion.pipeline import Accepted, Stage, receive
from cogsub.ingestion.tracing import IngestionSpans, SpanNames
from cogsub.telemetry.tracing import context_from_headers
from tests.services.ingestion.harness import event_body

NAMES = SpanNames("ingestion", "sqlite", "experience_events", "hash")


def _records(count: int) -> list[Record]:
    return [
        Record("experience.raw", 0, i, json.dumps(event_body(i)).encode()) for i in range(count)
    ]


def _staged(records: Sequence[Record]) -> StagedBatch:
    accepted = [a for a in (receive(r, dimension=8) for r in records) if isinstance(a, Accepted)]
    return StagedBatch(records, accepted, [], BatchOutcome())


def _ingest_roots(spans: InMemorySpanExporter) -> list[str]:
    return sorted(
        str((s.attributes or {}).get("cog.event.id"))
        for s in spans.get_finished_spans()
        if s.name == "experience.ingest"
    )


async def _stage(middleware: IngestionSpans, records: Sequence[Record]) -> StagedBatch:
    staged = _staged(records)

    async def stage(_: StageInput) -> StagedBatch:
        return staged

    return await middleware.stage(StageInput("ingestion", records), stage)


async def test_roots_stay_open_across_a_retryable_finish_and_end_with_it(
    spans: InMemorySpanExporter,
) -> None:
    middleware = IngestionSpans(NAMES)
    records = _records(2)
    staged = await _stage(middleware, records)
    attempts: list[bytes] = []

    async def finish(_: FinishInput) -> None:
        attempts.append(dict(announcement_headers("ev-00001"))["traceparent"])
        if len(attempts) == 1:
            raise UnavailableError("index busy")

    call = FinishInput("ingestion", records)
    with pytest.raises(UnavailableError):
        await middleware.finish(call, finish)
    assert _ingest_roots(spans) == []  # still open: the runtime finishes again
    await middleware.finish(call, finish)
    assert _ingest_roots(spans) == ["ev-00000", "ev-00001"]
    assert middleware.open_batches == 0
    # Both attempts announced under the same root.
    assert attempts[0] == attempts[1]
    (root,) = [
        s
        for s in spans.get_finished_spans()
        if (s.attributes or {}).get("cog.event.id") == "ev-00001"
    ]
    carried = context_from_headers((("traceparent", attempts[0]),))
    assert carried is not None
    assert trace.get_current_span(carried).get_span_context().span_id == root.context.span_id
    assert staged.records == records


async def test_a_finish_that_fails_for_good_marks_and_ends_the_roots(
    spans: InMemorySpanExporter,
) -> None:
    middleware = IngestionSpans(NAMES)
    records = _records(1)
    staged = await _stage(middleware, records)  # held, as the runtime holds it through finish

    async def finish(_: FinishInput) -> None:
        raise ValueError("refused")

    with pytest.raises(ValueError):
        await middleware.finish(FinishInput("ingestion", records), finish)
    (root,) = [s for s in spans.get_finished_spans() if s.name == "experience.ingest"]
    assert root.status.status_code is trace.StatusCode.ERROR
    assert root.status.description == "ValueError"
    assert middleware.open_batches == 0
    assert staged.letters_sent == 0


async def test_staging_the_same_records_again_ends_the_dropped_batchs_roots(
    spans: InMemorySpanExporter,
) -> None:
    middleware = IngestionSpans(NAMES)
    records = _records(1)
    first = await _stage(middleware, records)
    second = await _stage(middleware, records)  # redelivered: the first was never finished
    assert _ingest_roots(spans) == ["ev-00000"]
    assert middleware.open_batches == 1
    assert first is not second


async def test_stages_over_before_the_roots_open_become_their_children(
    spans: InMemorySpanExporter,
) -> None:
    middleware = IngestionSpans(NAMES)
    records = _records(2)

    async def stage(_: StageInput) -> StagedBatch:
        with reported(Stage.EMBED, ["ev-00000", "ev-00001"]):
            pass
        with pytest.raises(UnavailableError), reported(Stage.ARCHIVE, ["ev-00001"]):
            raise UnavailableError("archive busy")
        return _staged(records)

    await middleware.stage(StageInput("ingestion", records), stage)

    async def finish(_: FinishInput) -> None:
        return None

    await middleware.finish(FinishInput("ingestion", records), finish)
    finished = spans.get_finished_spans()
    roots = {
        s.context.span_id: (s.attributes or {})["cog.event.id"]
        for s in finished
        if s.name == "experience.ingest"
    }
    children = sorted(
        (str(roots[s.parent.span_id]), s.name, s.status.status_code.name)
        for s in finished
        if s.parent is not None and s.parent.span_id in roots
    )
    assert children == [
        ("ev-00000", "experience.embed", "UNSET"),
        ("ev-00001", "experience.archive.put", "ERROR"),
        ("ev-00001", "experience.embed", "UNSET"),
    ]


async def test_a_result_that_is_not_a_staged_batch_passes_through(
    spans: InMemorySpanExporter,
) -> None:
    middleware = IngestionSpans(NAMES)
    records = _records(1)

    async def stage(_: StageInput) -> str:
        return "planned"

    assert await middleware.stage(StageInput("ingestion", records), stage) == "planned"
    assert middleware.open_batches == 0
    assert spans.get_finished_spans() == ()


async def test_a_staged_batch_the_runtime_drops_ends_its_roots_when_collected(
    spans: InMemorySpanExporter,
) -> None:
    middleware = IngestionSpans(NAMES)
    staged: StagedBatch | None = await _stage(middleware, _records(2))
    assert _ingest_roots(spans) == [] and middleware.open_batches == 1
    staged = None  # stopping while its finish retried: it is never finished
    gc.collect()
    assert staged is None
    assert _ingest_roots(spans) == ["ev-00000", "ev-00001"]
    assert middleware.open_batches == 0
