"""One settings object per process, read from ``COGSUB_*`` environment variables.

Only entrypoints build it; libraries take explicit arguments. Nested fields use
``__`` (``COGSUB_EMBEDDER__KIND=hash``, ``COGSUB_KAFKA__BOOTSTRAP_SERVERS=...``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_serializer, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class EmbedderSettings(BaseModel):
    kind: Literal["minilm", "hash", "openai"] = "minilm"
    hash_dimension: int = Field(default=8, ge=2, le=4096)
    batch_size: int = Field(default=64, ge=1, le=2048)
    threads: int | None = Field(default=None, ge=1, description="onnxruntime intra-op threads")
    openai_base_url: str = "http://127.0.0.1:8080"
    openai_model: str = "text-embedding-3-small"
    openai_api_key: SecretStr | None = None
    openai_dimension: int = Field(default=1536, ge=2, le=4096)


class KafkaSettings(BaseModel):
    bootstrap_servers: str = "127.0.0.1:9092"
    client_id: str = "cogsub"
    replication_factor: int = Field(default=1, ge=1)
    enable_idempotence: bool = True
    session_timeout_ms: int = Field(default=10_000, ge=1_000)
    heartbeat_interval_ms: int = Field(default=3_000, ge=100)
    linger_ms: int = Field(default=5, ge=0)


class S3Settings(BaseModel):
    endpoint_url: str | None = None
    bucket: str = "cogsub-archive"
    prefix: str = Field(default="", description="key prefix inside the bucket, e.g. 'prod/'")
    region: str = "us-east-1"
    access_key_id: str | None = None
    secret_access_key: SecretStr | None = None


class OpenSearchSettings(BaseModel):
    url: str = "http://127.0.0.1:9200"
    index: str = "experience_events"
    username: str | None = None
    password: SecretStr | None = None


class BusSettings(BaseModel):
    """The embedded bus's log retention (Kafka topics keep the broker's own)."""

    retention_s: float | None = Field(
        default=7 * 24 * 3600.0,
        ge=0,
        description="records older than this go once every group has read them; None keeps all",
    )
    trim_every_s: float = Field(default=300.0, gt=0)


class IngestionSettings(BaseModel):
    group: str = "ingestion"
    batch_size: int = Field(default=256, ge=1, le=10_000)
    poll_timeout_s: float = Field(default=0.5, gt=0, le=30)
    finishing_depth: int = Field(
        default=1,
        ge=1,
        le=16,
        description="archived batches indexed and announced at once (commits stay in order)",
    )


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


class RankingSettings(BaseModel):
    """The recall weights operators tune most (the rest live in ``RankingPolicy``)."""

    count_bonus: float = Field(
        default=0.02, ge=0, le=1, description="cb of the reinforcement term cb · log2(1 + count)"
    )
    novelty: float = Field(default=0.04, ge=0, le=1)
    novelty_decay: float = Field(default=0.5, gt=0, lt=1)
    name_free_vector: bool = Field(
        default=True, description="embed the recall query without the names it contains"
    )


class RerankerSettings(BaseModel):
    """An optional cross-encoder behind a ``/rerank`` endpoint (docs/ranking.md, Reranking)."""

    kind: Literal["none", "http"] = "none"
    url: str = Field(default="http://127.0.0.1:8080/rerank", description="the full endpoint URL")
    api: Literal["tei", "cohere"] = Field(
        default="tei", description="request shape: TEI, or Cohere / Jina (which need a model)"
    )
    model: str = ""
    api_key: SecretStr | None = Field(default=None, repr=False)
    timeout_s: float = Field(
        default=1.0, gt=0, le=30, description="a recall waits at most this long, retries included"
    )
    max_retries: int = Field(default=1, ge=0, le=5)
    max_candidates: int = Field(default=50, ge=1, le=1_000, description="best candidates sent")
    weight: float = Field(
        default=0.5, ge=0, le=1, description="w of (1 - w) · final + w · rerank score"
    )


class ConsolidationSettings(BaseModel):
    """Extraction and consolidation rounds (Stage 3) and decay (Stage 9)."""

    extractor: Literal["offline", "llm", "none"] = "offline"
    llm_base_url: str = "http://127.0.0.1:8080/v1"
    llm_model: str = "gpt-4o-mini"
    llm_api_key: SecretStr | None = Field(default=None, repr=False)
    llm_timeout_s: float = Field(default=30.0, gt=0, le=600)
    group: str = "consolidation"
    schedule_s: float = Field(default=300.0, gt=0, description="seconds between scheduled rounds")
    batch_size: int = Field(
        default=256, ge=1, le=10_000, description="announcements extracted together"
    )
    max_scan: int = Field(default=2_000, ge=1, le=100_000)
    max_outputs: int = Field(default=200, ge=1, le=10_000)
    cluster_threshold: float = Field(default=0.5, gt=0, le=1)
    topic_threshold: float = Field(default=0.4, gt=0, le=1)
    decay_rate: float = Field(default=0.9, gt=0, le=1)
    decay_floor: float = Field(default=0.05, ge=0, lt=1)
    epoch_hours: float = Field(default=24.0, gt=0)


class IndexSettings(BaseModel):
    """The embedded index (``COGSUB_INDEX__TEXT_ENGINE``); OpenSearch answers text itself."""

    text_engine: Literal["fts5", "tantivy"] = Field(
        default="tantivy",
        description=(
            "what answers text searches: tantivy beside the file for banks of at least"
            " large_bank documents (FTS5 for smaller ones), or the file's FTS5 tables alone"
        ),
    )
    # The index's own LARGE_BANK (not imported: settings load before any adapter)
    large_bank: int = Field(
        default=20_000,
        ge=0,
        description="documents a bank holds before tantivy indexes it (0: every bank)",
    )
    # The index's own TEXT_CATCH_UP_S
    text_catch_up_s: float = Field(
        default=1.0,
        ge=0,
        description=(
            "seconds between two catch-ups of tantivy with the writes (0: after every"
            " write); the rows of a bank written since are scored by FTS5 until then"
        ),
    )


class MetricsSettings(BaseModel):
    """Where a worker-only process serves ``/metrics`` (an API serves it on its own port)."""

    host: str = "127.0.0.1"
    port: int = Field(default=0, ge=0, le=65_535, description="0: no endpoint (compose sets 9464)")
    lag_interval_s: float = Field(
        default=15.0, ge=1.0, le=3_600, description="seconds between consumer-lag samples"
    )


class ApiSettings(BaseModel):
    """The HTTP API: where it listens, who may call it, and how big a request may be.

    ``keys`` maps an API key to the bank ids it may use (``"*"`` for every bank),
    e.g. ``COGSUB_API__KEYS='{"s3cret": ["alice", "bob"], "ops-key": ["*"]}'``; a key
    may also be given as ``"sha256:<hex digest>"`` so the plain key is never stored.
    ``keys_file`` holds the same JSON object. ``require_keys="auto"`` requires keys
    whenever ``host`` is not a loopback address.
    """

    host: str = "127.0.0.1"
    port: int = Field(default=8470, ge=0, le=65_535)
    # repr=False keeps keys out of every settings repr, error message and log line.
    keys: dict[str, list[str]] = Field(default_factory=dict, repr=False)
    keys_file: Path | None = None
    require_keys: bool | Literal["auto"] = "auto"
    max_body_bytes: int = Field(default=1_048_576, ge=1_024, le=64 * 1_048_576)
    client_key: SecretStr | None = Field(
        default=None, description="the key `cogsub retain/recall` send to the API"
    )
    rate_limit_per_s: float | None = Field(
        default=50.0, gt=0, description="requests per second per API key (None: no limit)"
    )
    rate_limit_burst: int = Field(default=100, ge=1, le=100_000)
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="Host names a keyless loopback API answers besides loopback ones ('*': any)",
    )
    console: bool = Field(
        default=True, description="serve the web console at /ui (a fleet's API may turn it off)"
    )

    @field_validator("keys", mode="before")
    @classmethod
    def _keys_shape(cls, value: object) -> object:
        # Checked here, by position, so that a malformed grant never echoes the key
        # itself in the validation error (pydantic would name it as the location).
        if isinstance(value, dict):
            for n, banks in enumerate(value.values(), start=1):
                if not isinstance(banks, list) or not all(isinstance(b, str) for b in banks):
                    raise ValueError(f"API key #{n} must map to a list of bank ids")
        return value

    @field_serializer("keys")
    def _keys_hashed(self, keys: dict[str, list[str]]) -> dict[str, list[str]]:
        # A dump stays usable (auth accepts "sha256:<hex>") without carrying a key.
        return {
            k if k.startswith("sha256:") else "sha256:" + hashlib.sha256(k.encode()).hexdigest(): v
            for k, v in keys.items()
        }

    @property
    def url(self) -> str:
        """The base URL a client on this machine uses to reach the API."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = "[::1]" if host in ("::", "::1") else host
        return f"http://{host}:{self.port}"

    def keys_required(self) -> bool:
        """Whether requests must carry a key (``auto``: whenever ``host`` is not loopback)."""
        if self.require_keys == "auto":
            return self.host not in LOOPBACK_HOSTS
        return bool(self.require_keys)


class Settings(BaseSettings):
    """Everything a Cognitive Substrate process can be told from outside."""

    model_config = SettingsConfigDict(
        env_prefix="COGSUB_",
        env_nested_delimiter="__",
        extra="ignore",
        hide_input_in_errors=True,  # inputs may be keys or passwords
    )

    backend: Literal["embedded", "distributed"] = "embedded"
    data_dir: Path = Path("data")
    log_format: Literal["auto", "console", "json"] = "auto"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    bus: BusSettings = Field(default_factory=BusSettings)
    s3: S3Settings = Field(default_factory=S3Settings)
    opensearch: OpenSearchSettings = Field(default_factory=OpenSearchSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    ingestion: IngestionSettings = Field(default_factory=IngestionSettings)
    consolidation: ConsolidationSettings = Field(default_factory=ConsolidationSettings)
    ranking: RankingSettings = Field(default_factory=RankingSettings)
    reranker: RerankerSettings = Field(default_factory=RerankerSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    metrics: MetricsSettings = Field(default_factory=MetricsSettings)
    heap_trim_s: float = Field(
        default=30.0,
        ge=0,
        description="seconds between giving the C heap's free pages back to the system (0: never)",
    )

    @property
    def bus_path(self) -> Path:
        return self.data_dir / "bus.sqlite3"

    @property
    def archive_root(self) -> Path:
        return self.data_dir / "archive"

    @property
    def index_path(self) -> Path:
        return self.data_dir / "index.sqlite3"
