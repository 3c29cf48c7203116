"""The one place a process turns settings into adapters.

Embedded and distributed differ only here: services receive ports and never
know which adapter stands behind them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from cogsub.archive.ports import ArchiveStore
from cogsub.bus.ports import EventBus
from cogsub.embeddings.ports import Embedder
from cogsub.index.ports import MemoryIndex
from cogsub.runtime.settings import EmbedderSettings, Settings


@dataclass
class Stack:
    """The four ports a worker or the API runs on, owned together."""

    settings: Settings
    bus: EventBus
    archive: ArchiveStore
    index: MemoryIndex
    embedder: Embedder
    bootstrap: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

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


def build_embedder(settings: EmbedderSettings) -> Embedder:
    """The embedder the settings name."""
    if settings.kind == "hash":
        from cogsub.embeddings.hash import HashEmbedder

        return HashEmbedder(dimension=settings.hash_dimension)
    if settings.kind == "minilm":
        from cogsub.embeddings.minilm import MiniLMEmbedder

        return MiniLMEmbedder(batch_size=settings.batch_size, intra_op_num_threads=settings.threads)
    from cogsub.embeddings.openai import OpenAIEmbedder

    key = settings.openai_api_key.get_secret_value() if settings.openai_api_key else None
    return OpenAIEmbedder(
        base_url=settings.openai_base_url,
        model=settings.openai_model,
        api_key=key,
        dimension=settings.openai_dimension,
    )


def build_bus(settings: Settings) -> EventBus:
    if settings.backend == "embedded":
        from cogsub.bus.sqlite import SqliteEventBus

        settings.data_dir.mkdir(parents=True, exist_ok=True)
        return SqliteEventBus(settings.bus_path)
    from cogsub.bus.kafka import KafkaEventBus
    from cogsub.bus.kafka import KafkaSettings as KafkaTuning

    kafka = settings.kafka
    tuning = KafkaTuning(
        linger_ms=kafka.linger_ms,
        session_timeout_ms=kafka.session_timeout_ms,
        heartbeat_interval_ms=kafka.heartbeat_interval_ms,
        enable_idempotence=kafka.enable_idempotence,
        replication_factor=kafka.replication_factor,
    )
    return KafkaEventBus(
        bootstrap_servers=kafka.bootstrap_servers, client_id=kafka.client_id, settings=tuning
    )


def build_archive(settings: Settings) -> tuple[ArchiveStore, Callable[[], Awaitable[None]] | None]:
    """The archive, and its bootstrap step if it has one."""
    if settings.backend == "embedded":
        from cogsub.archive.filesystem import FilesystemArchive

        return FilesystemArchive(settings.archive_root), None
    from cogsub.archive.s3 import S3Archive

    s3 = settings.s3
    secret = s3.secret_access_key.get_secret_value() if s3.secret_access_key else None
    archive = S3Archive(
        bucket=s3.bucket,
        prefix=s3.prefix,
        endpoint_url=s3.endpoint_url,
        region=s3.region,
        access_key_id=s3.access_key_id,
        secret_access_key=secret,
    )
    return archive, archive.ensure_bucket


def build_index(settings: Settings) -> MemoryIndex:
    if settings.backend == "embedded":
        from cogsub.index.sqlite import SqliteMemoryIndex

        settings.data_dir.mkdir(parents=True, exist_ok=True)
        return SqliteMemoryIndex(settings.index_path)
    from cogsub.index.opensearch import OpenSearchMemoryIndex

    os_ = settings.opensearch
    password = os_.password.get_secret_value() if os_.password else None
    return OpenSearchMemoryIndex(
        url=os_.url, index=os_.index, username=os_.username, password=password
    )


def open_stack(settings: Settings, *, embedder: Embedder | None = None) -> Stack:
    """Adapters for ``settings``; the caller runs ``prepare`` and closes the stack."""
    archive, bootstrap = build_archive(settings)
    return Stack(
        settings=settings,
        bus=build_bus(settings),
        archive=archive,
        index=build_index(settings),
        embedder=embedder or build_embedder(settings.embedder),
        bootstrap=[bootstrap] if bootstrap else [],
    )
