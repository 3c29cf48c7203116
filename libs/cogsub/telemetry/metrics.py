"""Prometheus metrics of every process, kept in a registry of their own.

``Metrics`` owns a private ``CollectorRegistry`` rather than the process-wide
default, so two stacks in one process (tests, an embedded SDK beside a worker)
never collide and each serves only what it measured. Nothing here reads the
environment; entrypoints decide where the exposition is served.

Every label has a small, closed set of values (stage names, rejection kinds,
fact types, route templates, HTTP statuses): never a bank id, event id or raw
path, so the number of series stays bounded however much traffic there is.

The recorders take our own objects structurally (``BatchLike``, the core
``ConsolidationReport``), so this library depends on no service.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.core import Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.registry import Collector

from cogsub.core.events import FactType
from cogsub.core.memory import ConsolidationReport

EXPOSITION_CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
"""The content type of :meth:`Metrics.exposition` (Prometheus text format 0.0.4)."""

# Recall and HTTP answers: from a cached 1 ms hit to a cold 2 s one.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0)
# One batch of up to a few hundred events, MiniLM embedding and S3 writes included.
BATCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
STAGE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0)
RESULT_BUCKETS = (0.0, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 50.0, 100.0)
# A round of one bank: a few ms once its epoch is decayed, tens of seconds for a large pass.
ROUND_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0)

# The label values known up front get a zero series, so rate() sees the first event.
DEAD_LETTER_KINDS = ("invalid", "conflict", "failed")
ROUND_OUTCOMES = ("complete", "partial")
ROUND_PARTS = ("round", "decay")
OUTPUT_KINDS = ("observation", "preference", "procedure", "superseded")
UPDATE_KINDS = ("reinforced", "decayed")
NO_FACT_TYPE = "none"
_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_count", "_sum"),
    "gauge": ("",),
}
UNMATCHED_ROUTE = "unmatched"


_SQLITE_STATUS_MEMORY_USED = 0


@functools.cache
def _sqlite_status() -> Callable[..., int] | None:
    """``sqlite3_status64`` of the SQLite that Python's ``sqlite3`` runs on, if reachable.

    Looked up through the ``_sqlite3`` extension itself, so it is the library (linked in
    or shared) whose connections the process holds, not another copy on the system.
    """
    try:
        import _sqlite3

        return ctypes.CDLL(_sqlite3.__file__).sqlite3_status64
    except (ImportError, OSError, AttributeError):
        return None


def sqlite_memory_bytes() -> int:
    """Heap SQLite holds in this process now: its page caches, statements and schemas.

    Every connection's page cache is bounded by its ``cache_size``; this tells how much
    of those bounds is filled, so a report can tell cache from anything else that grows.
    """
    status = _sqlite_status()
    if status is None:
        return 0
    current, highest = ctypes.c_int64(), ctypes.c_int64()
    if status(_SQLITE_STATUS_MEMORY_USED, ctypes.byref(current), ctypes.byref(highest), 0):
        return 0
    return current.value


class RejectedLike(Protocol):
    """A dead-lettered record: only its kind is counted."""

    @property
    def kind(self) -> str: ...


class BatchLike(Protocol):
    """What one committed ingestion batch did (ingestion's ``BatchOutcome``)."""

    @property
    def indexed(self) -> Sequence[object]: ...

    @property
    def rejected(self) -> Sequence[RejectedLike]: ...


@dataclass
class RecallTiming:
    """Filled in by the caller inside :meth:`Metrics.timed_recall`."""

    results: int = 0


class _WithoutCreated(Collector):
    """A registry's families without their ``*_created`` samples.

    The text format would expose each creation time as one more gauge series per
    counter and histogram, doubling the series; no dashboard here reads them.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():  # fresh objects on every collect
            family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family


class Metrics:
    """Every Cognitive Substrate metric, registered in ``registry`` (never the global one).

    ``exposed`` is what a scrape should read: the registry without creation-time series.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.exposed: Collector = _WithoutCreated(self.registry)
        r = self.registry
        self.events_consumed = Counter(
            "cogsub_events_consumed", "Records of experience.raw in committed batches", registry=r
        )
        self.events_archived = Counter(
            "cogsub_events_archived",
            "Events held by the archive when their batch committed (redeliveries included)",
            registry=r,
        )
        self.events_indexed = Counter(
            "cogsub_events_indexed", "Events written to the index by committed batches", registry=r
        )
        self.events_dead_lettered = Counter(
            "cogsub_events_dead_lettered",
            "Records sent to experience.raw.dlq, by why",
            ["kind"],
            registry=r,
        )
        self.ingest_batch_seconds = Histogram(
            "cogsub_ingest_batch_seconds",
            "From a batch's receive to its commit",
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.ingest_stage_seconds = Histogram(
            "cogsub_ingest_stage_seconds",
            "Time from the previous stage boundary of a batch to this one",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self.consumer_lag = Gauge(
            "cogsub_consumer_lag",
            "Records of a topic the consumer group has not committed yet",
            ["topic", "group"],
            registry=r,
        )
        self.consumer_step_seconds = Histogram(
            "cogsub_consumer_step_seconds",
            "One stage or finish of a consumer group's batch, by outcome (ok or failed)",
            ["group", "step", "outcome"],
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.consumer_records = Counter(
            "cogsub_consumer_records",
            "Records a consumer group's steps handled (retried steps count again)",
            ["group", "step"],
            registry=r,
        )
        self.consumer_dead_letters = Counter(
            "cogsub_consumer_dead_letters",
            "Records a consumer group sent to a dead-letter topic, by source topic and why",
            ["group", "topic", "kind"],
            registry=r,
        )
        self.recall_seconds = Histogram(
            "cogsub_recall_seconds",
            "One recall, query to answer",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.recall_results = Histogram(
            "cogsub_recall_results",
            "Memories one recall returned",
            buckets=RESULT_BUCKETS,
            registry=r,
        )
        self.retains = Counter(
            "cogsub_retain", "Memories retained, by fact type", ["fact_type"], registry=r
        )
        self.consolidation_rounds = Counter(
            "cogsub_consolidation_rounds",
            "Consolidation rounds run (partial: stopped at its bounds)",
            ["outcome"],
            registry=r,
        )
        self.consolidation_outputs = Counter(
            "cogsub_consolidation_outputs",
            "Memories consolidation produced (or superseded), by kind",
            ["kind"],
            registry=r,
        )
        self.consolidation_updates = Counter(
            "cogsub_consolidation_updates",
            "Existing memories a round reinforced or decayed",
            ["kind"],
            registry=r,
        )
        self.consolidation_round_seconds = Histogram(
            "cogsub_consolidation_round_seconds",
            "One consolidation round of a bank, and (part=decay) its decay pass if it decayed",
            ["part"],
            buckets=ROUND_BUCKETS,
            registry=r,
        )
        self.consolidation_scanned = Counter(
            "cogsub_consolidation_scanned", "Memories consolidation rounds read", registry=r
        )
        self.extraction_rejected = Counter(
            "cogsub_extraction_rejected",
            "Extractions whose output broke a rule (sent to consolidation.dlq)",
            registry=r,
        )
        self.http_requests = Counter(
            "cogsub_http_requests",
            "HTTP requests answered, by route template and status",
            ["route", "status"],
            registry=r,
        )
        self.http_request_seconds = Histogram(
            "cogsub_http_request_seconds",
            "HTTP request to the end of its answer, by route template",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.index_resident_data = Gauge(
            "cogsub_index_resident_data_bytes",
            "What the index keeps in this process's memory per document it holds (the "
            "embedded index's vector cache and id map; 0 for a remote index)",
            registry=r,
        )
        self.sqlite_memory = Gauge(
            "cogsub_sqlite_memory_bytes",
            "Heap SQLite holds in this process (page caches bounded by cache_size, statements)",
            registry=r,
        )
        self.sqlite_memory.set_function(sqlite_memory_bytes)
        # process_resident_memory_bytes and the rest (Linux /proc): memory over time is
        # read beside the index's data, which grows with the documents, and SQLite's
        # bounded caches; what is neither must stay flat.
        ProcessCollector(registry=r)
        for kind in DEAD_LETTER_KINDS:
            self.events_dead_lettered.labels(kind)
        for outcome in ROUND_OUTCOMES:
            self.consolidation_rounds.labels(outcome)
        for part in ROUND_PARTS:
            self.consolidation_round_seconds.labels(part)
        for kind in OUTPUT_KINDS:
            self.consolidation_outputs.labels(kind)
        for kind in UPDATE_KINDS:
            self.consolidation_updates.labels(kind)
        for fact_type in (*FactType, NO_FACT_TYPE):
            self.retains.labels(str(fact_type))

    def measure_index_data(self, read: Callable[[], int]) -> None:
        """Read ``cogsub_index_resident_data_bytes`` from ``read`` at every scrape."""
        self.index_resident_data.set_function(read)

    def series_names(self) -> frozenset[str]:
        """Every sample name a query may use (``cogsub_events_consumed_total``, ``..._bucket``)."""
        names: set[str] = set()
        for family in self.registry.collect():
            suffixes = _SUFFIXES.get(family.type, ("",))
            names.update(family.name + suffix for suffix in suffixes)
        return frozenset(names)

    def exposition(self) -> bytes:
        """Everything measured, in the Prometheus text format 0.0.4."""
        return generate_latest(self.exposed)

    def record_batch(self, outcome: BatchLike) -> None:
        """Count one committed ingestion batch (an ``on_batch`` callback).

        Every record of a batch ends either indexed or dead-lettered, so their sum
        is what was consumed; an event is indexed only once the archive holds it.
        """
        indexed = len(outcome.indexed)
        self.events_consumed.inc(indexed + len(outcome.rejected))
        self.events_archived.inc(indexed)
        self.events_indexed.inc(indexed)
        for rejection in outcome.rejected:
            self.events_dead_lettered.labels(str(rejection.kind)).inc()

    def record_round(self, report: ConsolidationReport) -> None:
        """Count one consolidation round and what it produced (an ``on_round`` callback)."""
        self.consolidation_rounds.labels("complete" if report.complete else "partial").inc()
        self.consolidation_round_seconds.labels("round").observe(report.took_ms / 1000)
        if report.decayed:  # a pass that ran: most rounds find their epoch already done
            self.consolidation_round_seconds.labels("decay").observe(report.decay_ms / 1000)
        produced = zip(
            OUTPUT_KINDS,
            (report.observations, report.preferences, report.procedures, report.superseded),
            strict=True,
        )
        for kind, ids in produced:
            self.consolidation_outputs.labels(kind).inc(len(ids))
        self.consolidation_updates.labels("reinforced").inc(report.reinforced)
        self.consolidation_updates.labels("decayed").inc(report.decayed)
        self.consolidation_scanned.inc(report.scanned)

    def record_extraction_rejected(self) -> None:
        self.extraction_rejected.inc()

    def record_retain(self, fact_type: str | None) -> None:
        """Count one retained memory; untyped content counts as ``none``."""
        self.retains.labels(str(fact_type) if fact_type is not None else NO_FACT_TYPE).inc()

    def observe_recall(self, seconds: float, results: int) -> None:
        self.recall_seconds.observe(seconds)
        self.recall_results.observe(results)

    @contextlib.contextmanager
    def timed_recall(self) -> Iterator[RecallTiming]:
        """Time the recall inside the block; set ``results`` on what it yields.

        A recall that raises is not observed: failures show in the HTTP metrics,
        and mixing their latencies in would hide both.
        """
        timing = RecallTiming()
        started = time.perf_counter()
        yield timing
        self.observe_recall(time.perf_counter() - started, timing.results)

    def record_http(self, route: str, status: int, seconds: float) -> None:
        """One answered request; ``route`` is the template (``/v1/banks/{bank_id}/recall``)."""
        self.http_requests.labels(route, str(status)).inc()
        self.http_request_seconds.labels(route).observe(seconds)

    def observe_consumer_step(
        self, *, group: str, step: str, seconds: float, records: int, failed: bool
    ) -> None:
        outcome = "failed" if failed else "ok"
        self.consumer_step_seconds.labels(group, step, outcome).observe(seconds)
        self.consumer_records.labels(group, step).inc(records)

    def count_consumer_dead_letter(self, *, group: str, topic: str, kind: str) -> None:
        self.consumer_dead_letters.labels(group, topic, kind).inc()

    def set_lag(self, topic: str, group: str, lag: int) -> None:
        self.consumer_lag.labels(topic, group).set(lag)

    def forget_lag(self, topic: str, group: str) -> None:
        """Drop a lag series that can no longer be measured, rather than show a stale value."""
        with contextlib.suppress(KeyError):
            self.consumer_lag.remove(topic, group)

    def stage_observer(self, *, max_tracked: int = 10_000) -> StageClock:
        """A ``StageObserver`` for ``IngestionWorker(observer=...)`` timing stages and batches."""
        return StageClock(self, max_tracked=max_tracked)


class StageClock:
    """Turns the worker's stage boundaries into stage and batch latencies.

    The worker calls it as each stage of a batch completes, with the event ids
    the stage covered. A stage's latency is the time since the previous boundary
    the same events passed; a batch's is from ``first_stage`` to ``last_stage``.
    While batches are pipelined, a stage's time includes waiting for the batch
    ahead of it, which is what an operator sees as that stage being slow.
    Events that never reach ``last_stage`` (dead-lettered conflicts) are
    forgotten oldest first beyond ``max_tracked``.
    """

    def __init__(
        self,
        metrics: Metrics,
        *,
        first_stage: str = "receive",
        last_stage: str = "commit",
        max_tracked: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._metrics = metrics
        self._first = first_stage
        self._last = last_stage
        self._max_tracked = max_tracked
        self._clock = clock
        # event id → (when its batch was received, when it passed its latest boundary)
        self._seen: OrderedDict[str, tuple[float, float]] = OrderedDict()

    @property
    def tracked(self) -> int:
        """How many events are between their first and last stage."""
        return len(self._seen)

    def __call__(self, stage: str, event_ids: Sequence[str]) -> None:
        now = self._clock()
        stage = str(stage)
        if stage == self._first:
            for event_id in event_ids:
                self._seen[event_id] = (now, now)
                self._seen.move_to_end(event_id)
            while len(self._seen) > self._max_tracked:
                self._seen.popitem(last=False)
            return
        known = next((self._seen[i] for i in event_ids if i in self._seen), None)
        if known is None:
            return
        started, previous = known
        self._metrics.ingest_stage_seconds.labels(stage).observe(now - previous)
        if stage == self._last:
            self._metrics.ingest_batch_seconds.observe(now - started)
            for event_id in event_ids:
                self._seen.pop(event_id, None)
            return
        for event_id in event_ids:
            if event_id in self._seen:
                self._seen[event_id] = (self._seen[event_id][0], now)
