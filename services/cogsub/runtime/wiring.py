"""The one place a process turns settings into adapters.

Embedded and distributed differ only here: services receive ports and never
know which adapter stands behind them.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from cogsub.archive.ports import ArchiveStore
from cogsub.bus.middleware import ConsumerMetrics
from cogsub.bus.ports import EventBus
from cogsub.console.rounds import RoundLog
from cogsub.core.errors import ConfigurationError
from cogsub.core.operations import PipelineLag
from cogsub.core.topics import CONSOLIDATION_REQUEST, EXPERIENCE_ENRICHED, EXPERIENCE_RAW
from cogsub.embeddings.ports import Embedder
from cogsub.index.ports import MemoryIndex
from cogsub.runtime.adapters import (
    build_archive,
    build_bus,
    build_embedder,
    build_index,
    build_reranking,
)
from cogsub.runtime.allocator import keep_heap_trimmed
from cogsub.runtime.settings import (
    ApiSettings,
    ConsolidationSettings,
    EmbedderSettings,
    IngestionSettings,
    Settings,
)
from cogsub.telemetry.lag import LagSampler, LagTarget
from cogsub.telemetry.metrics import Metrics

if TYPE_CHECKING:  # the API, worker and service load only in the processes that run them
    from fastapi import FastAPI

    from cogsub.api.auth import ApiKeys
    from cogsub.consolidation import ConsolidationRound, ConsolidationWorker
    from cogsub.core.memory import ConsolidationReport
    from cogsub.extraction.ports import FactExtractor
    from cogsub.ingestion import BatchOutcome, IngestionWorker
    from cogsub.recall import MemoryService
    from cogsub.recall.answer import ChatModel
    from cogsub.rerank import Reranking


@dataclass
class Stack:
    """The four ports a worker or the API runs on, owned together, and the process's metrics."""

    settings: Settings
    bus: EventBus
    archive: ArchiveStore
    index: MemoryIndex
    embedder: Embedder
    bootstrap: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    metrics: Metrics = field(default_factory=Metrics)

    @property
    def messaging_system(self) -> str:
        """The OpenTelemetry ``messaging.system`` of the bus."""
        return "kafka" if self.settings.backend == "distributed" else "sqlite"

    async def prepare(self) -> None:
        """Create what the adapters need (bucket...) before first use; idempotent."""
        for step in self.bootstrap:
            await step()

    async def aclose(self) -> None:
        """Close every adapter, last opened first."""
        await self.embedder.close()
        await self.index.close()
        await self.archive.close()
        await self.bus.close()


def open_stack(settings: Settings, *, embedder: Embedder | None = None) -> Stack:
    """Adapters for ``settings``; the caller runs ``prepare`` and closes the stack."""
    archive, bootstrap = build_archive(settings)
    stack = Stack(
        settings=settings,
        bus=build_bus(settings),
        archive=archive,
        index=build_index(settings),
        embedder=embedder or build_embedder(settings.embedder),
        bootstrap=[bootstrap] if bootstrap else [],
    )
    if settings.backend == "embedded":  # a remote index keeps its data elsewhere
        from cogsub.index.sqlite import SqliteMemoryIndex

        index = stack.index
        if isinstance(index, SqliteMemoryIndex):
            stack.metrics.measure_index_data(lambda: index.resident_data_bytes)
    return stack


# A bank nobody writes to: counting it is the cheapest question the index can answer.
READINESS_BANK = "cogsub-readiness-probe"
# A key nobody writes: asking whether it exists is one HEAD request (one stat embedded).
READINESS_KEY = "health/readiness-probe"
# Embedded clients poll the log briskly so that `wait=True` returns soon after a retain.
EMBEDDED_POLL_TIMEOUT_S = 0.05


def embedded_settings(
    data_dir: Path, *, embedder: Literal["minilm", "hash", "openai"] = "minilm"
) -> Settings:
    """Settings for an embedded stack under ``data_dir``, built from arguments alone.

    ``model_construct`` keeps the environment out of it: the SDK is a library,
    and a library takes explicit arguments (every other field keeps its default).
    """
    return Settings.model_construct(
        backend="embedded",
        data_dir=data_dir,
        embedder=EmbedderSettings(kind=embedder),
        ingestion=IngestionSettings(poll_timeout_s=EMBEDDED_POLL_TIMEOUT_S),
    )


def build_api_keys(settings: ApiSettings) -> ApiKeys | None:
    """The API keys from the settings and the keys file; None when keys are not required.

    Raises:
        ConfigurationError: keys are required (a non-loopback host, or
            ``require_keys=true``) but none are configured, or a key is malformed.
    """
    from cogsub.api.auth import ApiKeys, grants_from_json

    grants: dict[str, list[str]] = dict(settings.keys)
    if settings.keys_file is not None:
        try:
            text = settings.keys_file.read_text()
        except OSError as exc:
            raise ConfigurationError(
                f"cannot read the API keys file {settings.keys_file}: {exc.strerror}"
            ) from None
        grants.update(grants_from_json(text))
    if settings.require_keys is False:
        return None
    if not grants:
        if settings.keys_required():
            raise ConfigurationError(
                f"the API listens on {settings.host}, which is not loopback, so it needs "
                "API keys: set COGSUB_API__KEYS or COGSUB_API__KEYS_FILE "
                "(or COGSUB_API__HOST=127.0.0.1)"
            )
        return None
    return ApiKeys(grants)


def build_worker(stack: Stack) -> IngestionWorker:
    """The ingestion worker over ``stack``, tuned by its settings."""
    from cogsub.ingestion import IngestionWorker

    ingestion = stack.settings.ingestion
    return IngestionWorker(
        bus=stack.bus,
        archive=stack.archive,
        index=stack.index,
        embedder=stack.embedder,
        group=ingestion.group,
        batch_size=ingestion.batch_size,
        poll_timeout_s=ingestion.poll_timeout_s,
        finishing_depth=ingestion.finishing_depth,
        messaging_system=stack.messaging_system,
        observer=stack.metrics.stage_observer(),
        middlewares=[ConsumerMetrics(stack.metrics, group=ingestion.group)],
    )


def build_extractor(settings: ConsolidationSettings) -> FactExtractor | None:
    """The fact extractor the settings name (None: extraction off)."""
    if settings.extractor == "none":
        return None
    if settings.extractor == "offline":
        from cogsub.extraction.offline import OfflineExtractor

        return OfflineExtractor()
    from cogsub.extraction.llm import LLMExtractor

    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    return LLMExtractor(
        base_url=settings.llm_base_url,
        model=settings.llm_model,
        api_key=key,
        timeout_s=settings.llm_timeout_s,
    )


def build_answerer(settings: ConsolidationSettings) -> ChatModel | None:
    """The chat model behind ``/answer``: the LLM extractor's, when that is the one set."""
    if settings.extractor != "llm":
        return None
    from cogsub.recall.answer import ChatAnswerer, ChatSettings

    key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
    return ChatAnswerer(
        ChatSettings(
            base_url=settings.llm_base_url,
            model=settings.llm_model,
            api_key=key,
            timeout_s=settings.llm_timeout_s,
        )
    )


@dataclass
class Consolidation:
    """The consolidation round and worker over a stack (the extractor is theirs to close)."""

    rounds: ConsolidationRound
    worker: ConsolidationWorker
    extractor: FactExtractor | None
    log: RoundLog = field(default_factory=RoundLog)

    async def run_round(self, bank_id: str) -> ConsolidationReport:
        """A round asked for over the API: counted like any other, never beside one of the
        worker's on the same bank (two decay passes would each step the pages they reach),
        and only once what was acknowledged before it is ingested and extracted."""
        await self.worker.prepare()
        return await self.worker.round_of_acknowledged(bank_id)

    async def aclose(self) -> None:
        if self.extractor is not None:
            await self.extractor.close()


def build_consolidation(stack: Stack) -> Consolidation:
    """Extraction, rounds and the worker over ``stack``, tuned by its settings."""
    from cogsub.consolidation import (
        ConsolidationPolicy,
        ConsolidationRound,
        ConsolidationWorker,
        DerivedWriter,
        FactStage,
    )

    tuning = stack.settings.consolidation
    semantic = stack.settings.embedder.kind != "hash"  # hash vectors carry no meaning
    policy = ConsolidationPolicy(
        max_scan=tuning.max_scan,
        max_outputs=tuning.max_outputs,
        cluster_threshold=tuning.cluster_threshold,
        topic_threshold=tuning.topic_threshold,
        semantic=semantic,
        decay_rate=tuning.decay_rate,
        decay_floor=tuning.decay_floor,
        epoch=timedelta(hours=tuning.epoch_hours),
    )
    writer = DerivedWriter(
        bus=stack.bus, archive=stack.archive, index=stack.index, embedder=stack.embedder
    )
    rounds = ConsolidationRound(
        archive=stack.archive, index=stack.index, writer=writer, policy=policy
    )
    log = RoundLog()  # read by /v1/operations/consolidation-rounds
    extractor = build_extractor(tuning)
    if extractor is not None:
        from cogsub.extraction.metered import MeteredExtractor

        extractor = MeteredExtractor(extractor, stack.metrics)
    facts = (
        FactStage(
            archive=stack.archive,
            index=stack.index,
            embedder=stack.embedder,
            extractor=extractor,
            writer=writer,
            semantic=semantic,
        )
        if extractor is not None
        else None
    )
    worker = ConsolidationWorker(
        bus=stack.bus,
        rounds=rounds,
        facts=facts,
        group=tuning.group,
        schedule_s=tuning.schedule_s,
        poll_timeout_s=stack.settings.ingestion.poll_timeout_s,
        batch_size=tuning.batch_size,
        on_round=log.beside(stack.metrics.record_round),
        ingestion_group=stack.settings.ingestion.group,
        messaging_system=stack.messaging_system,
        middlewares=[ConsumerMetrics(stack.metrics, group=tuning.group)],
    )
    return Consolidation(rounds=rounds, worker=worker, extractor=extractor, log=log)


def ingestion_lag(settings: Settings) -> list[LagTarget]:
    """What the ingestion group reads."""
    return [LagTarget(EXPERIENCE_RAW, settings.ingestion.group)]


def consolidation_lag(settings: Settings) -> list[LagTarget]:
    """What the consolidation group reads."""
    group = settings.consolidation.group
    return [LagTarget(EXPERIENCE_ENRICHED, group), LagTarget(CONSOLIDATION_REQUEST, group)]


async def claim_groups(stack: Stack, consumed: Sequence[LagTarget]) -> None:
    """Fail now when another process consumes one of these groups on this embedded data directory.

    An embedded group has one live consumer, which takes its lease at its first poll,
    inside a worker task: unchecked, a taken directory showed only after the API was
    announced or the SDK had answered, and its error surfaced at close.
    """
    if stack.settings.backend != "embedded":
        return  # Kafka rebalances a group among its members: a second one is welcome
    topics: dict[str, list[str]] = {}
    for target in consumed:
        topics.setdefault(target.group, []).append(target.topic)
    for group, read in topics.items():
        probe = stack.bus.consumer(read, group=group)
        try:
            await probe.poll(max_records=0, timeout_s=0)  # takes the lease, reads nothing
        except ConfigurationError as exc:
            raise ConfigurationError(
                f"data directory {stack.settings.data_dir} is in use by another process; "
                f"stop it, or use the API it serves: {exc}"
            ) from None
        finally:
            await probe.close()  # gives the lease back for the worker to take


async def stop_and_join(stop: asyncio.Event, *tasks: asyncio.Task[None] | None) -> None:
    """Ask the tasks watching ``stop`` to finish, await every one, then raise the first failure.

    A failed task nobody awaits prints "Task exception was never retrieved" when collected,
    so one failure must not leave the others unawaited.
    """
    stop.set()
    failures: list[Exception] = []
    for task in tasks:
        if task is None:
            continue
        try:
            await task
        except Exception as exc:
            failures.append(exc)
    if failures:
        raise failures[0]


@contextlib.asynccontextmanager
async def observed(
    stack: Stack, lag: Sequence[LagTarget], *, endpoint: bool
) -> AsyncIterator[None]:
    """Sample ``lag`` into the stack's metrics and, with ``endpoint``, serve ``/metrics``;
    give the C heap's free pages back every ``heap_trim_s`` (see ``cogsub.runtime.allocator``).

    The endpoint is for processes without an API (``COGSUB_METRICS__PORT``, 0: off).
    Use it inside the stack's lifetime: the sampler is stopped before the bus closes.
    """
    from cogsub.telemetry.metrics_server import serve_metrics

    tuning = stack.settings.metrics
    server = (
        serve_metrics(stack.metrics, host=tuning.host, port=tuning.port)
        if endpoint and tuning.port
        else None
    )
    stop = asyncio.Event()
    sampler = LagSampler(
        bus=stack.bus, metrics=stack.metrics, targets=lag, interval_s=tuning.lag_interval_s
    )
    sampling = asyncio.create_task(sampler.run(stop)) if lag else None
    every_s = stack.settings.heap_trim_s
    trimming = asyncio.create_task(keep_heap_trimmed(stop, every_s)) if every_s else None
    try:
        yield
    finally:
        try:
            await stop_and_join(stop, sampling, trimming)
        finally:
            if server is not None:
                await server.aclose()


def build_app(
    stack: Stack,
    service: MemoryService,
    keys: ApiKeys | None,
    consolidation: Consolidation | None = None,
) -> FastAPI:
    """The HTTP API over ``service``, with ``keys``, limits and readiness probes.

    ``/readyz`` asks each port the cheapest question it has: a count of a bank
    nobody writes to, whether a key nobody writes exists, and the end offsets of
    the topic retains go to (on Kafka: the topic's description, then one offsets
    request by a short-lived client that joins no group).
    """
    from cogsub.api import ApiLimits, create_app
    from cogsub.console.rounds import OperationsSources
    from cogsub.deadletters.desk import DeadLetterDesk
    from cogsub.lifecycle import Lifecycle

    async def index_answers() -> None:
        await stack.index.count(READINESS_BANK)

    async def archive_answers() -> None:
        await stack.archive.exists(READINESS_KEY)

    async def bus_answers() -> None:
        await stack.bus.topic_stats(EXPERIENCE_RAW)

    return create_app(
        service=service,
        auth=keys,
        limits=ApiLimits(
            max_body_bytes=stack.settings.api.max_body_bytes,
            # Loopback use without keys is one trusted caller: no rate to keep.
            rate_limit_per_s=stack.settings.api.rate_limit_per_s if keys is not None else None,
            rate_limit_burst=stack.settings.api.rate_limit_burst,
        ),
        readiness={"index": index_answers, "archive": archive_answers, "bus": bus_answers},
        consolidate=consolidation.run_round if consolidation is not None else None,
        answerer=build_answerer(stack.settings.consolidation),
        dead_letter_desk=DeadLetterDesk(stack.bus),
        metrics=stack.metrics,
        lifecycle=Lifecycle(
            archive=stack.archive,
            index=stack.index,
            dimension=stack.embedder.dimension,
            on_erased=service.forgotten,
        ),
        operations=OperationsSources(
            rounds=consolidation.log if consolidation is not None else RoundLog(),
            lag=functools.partial(pipeline_lag, stack),
        ),
        console=stack.settings.api.console,
    )


async def pipeline_lag(stack: Stack) -> PipelineLag:
    """What ingestion and extraction have yet to read (None for a stage the bus left unsaid)."""
    settings = stack.settings

    async def lag_of(targets: Sequence[LagTarget]) -> int | None:
        try:
            stats = [await stack.bus.topic_stats(t.topic, group=t.group) for t in targets]
        except Exception:  # the console shows "unknown"; /readyz reports the bus itself
            return None
        return sum(s.lag for s in stats)

    return PipelineLag(
        ingestion=await lag_of(ingestion_lag(settings)),
        extraction=await lag_of(consolidation_lag(settings)),
    )


@dataclass
class RunningApi:
    """A prepared stack with its memory service, API app and (optionally) a live worker."""

    stack: Stack
    service: MemoryService
    app: FastAPI
    keys: ApiKeys | None
    worker: asyncio.Task[None] | None
    consolidation: asyncio.Task[None] | None = None

    def raise_if_worker_failed(self) -> None:
        """Re-raise what stopped a worker, if one stopped by failing."""
        for task in (self.worker, self.consolidation):
            if task is not None and task.done() and not task.cancelled():
                error = task.exception()
                if error is not None:
                    raise error


@contextlib.asynccontextmanager
async def running_api(
    settings: Settings,
    *,
    with_worker: bool,
    consolidating: bool = True,
    on_batch: Callable[[BatchOutcome], None] | None = None,
    embedder: Embedder | None = None,
) -> AsyncIterator[RunningApi]:
    """Open and prepare the stack, start the worker if asked, and build the app.

    ``with_worker`` starts the ingestion worker and, unless ``consolidating`` is false
    (a `cogsub consolidator` process does it beside this one), the consolidation worker.

    On exit the worker finishes and commits the batches in hand, background
    retrieval feedback lands, and every adapter closes. A worker that failed
    re-raises its error here.
    """
    from cogsub.recall import MemoryService, RankingPolicy

    keys = build_api_keys(settings.api)  # a settings mistake fails before anything opens
    stack = open_stack(settings, embedder=embedder)
    stop = asyncio.Event()
    metrics = stack.metrics

    def report(outcome: BatchOutcome) -> None:
        metrics.record_batch(outcome)
        if on_batch is not None:
            on_batch(outcome)

    worker_task: asyncio.Task[None] | None = None
    consolidation_task: asyncio.Task[None] | None = None
    service: MemoryService | None = None
    reranking: Reranking | None = None
    consolidation: Consolidation | None = None
    watching: asyncio.Task[None] | None = None
    try:
        await stack.prepare()
        worker = build_worker(stack)
        await worker.prepare()  # topics and index exist before the first retain or recall
        consolidation = build_consolidation(stack)
        await consolidation.worker.prepare()
        consumed = [
            *(ingestion_lag(settings) if with_worker else []),
            *(consolidation_lag(settings) if with_worker and consolidating else []),
        ]
        await claim_groups(stack, consumed)  # before anything is served or answered
        if with_worker:
            worker_task = asyncio.create_task(worker.run(stop, on_batch=report))
            if consolidating:
                consolidation_task = asyncio.create_task(consolidation.worker.run(stop))
        ranking = settings.ranking
        policy = RankingPolicy(
            reinforcement=ranking.count_bonus,
            novelty=ranking.novelty,
            novelty_decay=ranking.novelty_decay,
            name_free_vector=ranking.name_free_vector,
        )
        from cogsub.deadletters.watch import watched_rejections

        rejections, watching = await watched_rejections(stack.bus, stop)
        reranking = build_reranking(settings.reranker)
        service = MemoryService(
            bus=stack.bus,
            archive=stack.archive,
            index=stack.index,
            embedder=stack.embedder,
            policy=policy,
            metrics=metrics,
            rejections=rejections,
            reranking=reranking,
        )
        app = build_app(stack, service, keys, consolidation)
        async with observed(stack, consumed, endpoint=False):
            yield RunningApi(stack, service, app, keys, worker_task, consolidation_task)
    finally:
        try:
            await stop_and_join(stop, worker_task, consolidation_task, watching)
        finally:
            if service is not None:
                await service.drain()
            if reranking is not None:
                await reranking.close()
            if consolidation is not None:
                await consolidation.aclose()
            await stack.aclose()
