"""Each port's adapter as the settings name it: the only code that knows which stands behind a port.

Distributed adapters' client libraries are imported only when chosen, so the
embedded stack runs without them installed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from cogsub.archive.ports import ArchiveStore
from cogsub.bus.ports import EventBus
from cogsub.embeddings.ports import Embedder
from cogsub.index.ports import MemoryIndex
from cogsub.runtime.settings import EmbedderSettings, RerankerSettings, Settings

if TYPE_CHECKING:
    from cogsub.rerank import Reranking


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


def build_reranking(settings: RerankerSettings) -> Reranking | None:
    """Recall's reranking step, or None when no reranker is configured (no work at all)."""
    if settings.kind == "none":
        return None
    from cogsub.rerank import HttpReranker, Reranking

    key = settings.api_key.get_secret_value() if settings.api_key else None
    reranker = HttpReranker(
        settings.url,
        model=settings.model,
        api_key=key,
        api=settings.api,
        timeout_s=settings.timeout_s,
        max_retries=settings.max_retries,
    )
    return Reranking(
        reranker,
        weight=settings.weight,
        max_candidates=settings.max_candidates,
        deadline_s=settings.timeout_s,
    )


def build_bus(settings: Settings) -> EventBus:
    if settings.backend == "embedded":
        from cogsub.bus.sqlite import SqliteEventBus

        settings.data_dir.mkdir(parents=True, exist_ok=True)
        return SqliteEventBus(
            settings.bus_path,
            retention_s=settings.bus.retention_s,
            trim_every_s=settings.bus.trim_every_s,
        )
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
        return SqliteMemoryIndex(
            settings.index_path,
            text_engine=settings.index.text_engine,
            large_bank=settings.index.large_bank,
            text_catch_up_s=settings.index.text_catch_up_s,
        )
    from cogsub.index.opensearch import OpenSearchMemoryIndex

    os_ = settings.opensearch
    password = os_.password.get_secret_value() if os_.password else None
    return OpenSearchMemoryIndex(
        url=os_.url, index=os_.index, username=os_.username, password=password
    )
