"""The Kafka adapter's producer and consumer tuning."""

from __future__ import annotations

from dataclasses import dataclass

from cogsub.core.errors import ConfigurationError


@dataclass(frozen=True)
class KafkaSettings:
    """Producer and consumer tuning; the defaults suit one broker on loopback and small fleets.

    ``enable_idempotence`` is on in production; turn it off only for brokers without
    idempotent producers (Tansu). An idempotent aiokafka producer retries a batch
    forever, so ``delivery_timeout_ms`` bounds how long ``publish`` waits and how long
    ``close`` tries to flush. Security options are not supported yet.
    """

    linger_ms: int = 5
    max_batch_size: int = 262_144
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000
    request_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 60_000
    enable_idempotence: bool = True
    replication_factor: int = 1

    def __post_init__(self) -> None:
        sizes = (self.max_batch_size, self.session_timeout_ms, self.request_timeout_ms)
        if min(*sizes, self.delivery_timeout_ms) <= 0:
            raise ConfigurationError("kafka batch size and timeouts must be positive")
        if self.linger_ms < 0 or self.replication_factor < 1:
            raise ConfigurationError("linger_ms must be >= 0 and replication_factor >= 1")
        if not 0 < self.heartbeat_interval_ms < self.session_timeout_ms:
            raise ConfigurationError("heartbeat_interval_ms must be below session_timeout_ms")
