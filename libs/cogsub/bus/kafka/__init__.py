"""The Kafka adapter of the EventBus port, on aiokafka.

Publishing uses one idempotent ``acks=all`` producer per bus; ``publish`` returns
once the broker has acknowledged the record, and concurrent publishes share
batches (``linger_ms``, ``max_batch_size``). Topics are never auto-created:
``publish`` and ``consumer`` check a cached view of the cluster's topics and raise
``NotFoundError`` for one that ``ensure_topics`` (or an operator) did not create.

Consumers commit by hand (no auto-commit; a new group starts at the earliest
offset; only committed transactions are read). Per partition it owns, a consumer
tracks the highest offset the caller passed to ``commit`` ("done") and the highest
the broker acknowledged. When a rebalance takes partitions away, the listener
commits the done offsets not yet acknowledged (a commit that failed with
``UnavailableError`` or raced the rebalance), and never anything the caller did
not pass to ``commit``. Tracking restarts whenever a partition is revoked or
assigned. ``commit`` skips partitions this member no longer owns (and logs it).
Records fetched but not committed go again to the partition's next owner
(at-least-once). Every member id aiokafka abandons is left at the broker, and a
member whose group coordination died is dropped with ``UnavailableError`` so that
the caller's retry joins a new one (:mod:`cogsub.bus.kafka.group_repairs`).

Every aiokafka exception is translated in :func:`kafka_errors`.

Modules: :mod:`.bus` (producer, admin, topics, stats), :mod:`.consumer` (a group
member and its commits), :mod:`.reader` (group-less reads), :mod:`.errors`,
:mod:`.settings`, :mod:`.clients` (what they share) and :mod:`.group_repairs`.
"""

from cogsub.bus.kafka.bus import KafkaEventBus
from cogsub.bus.kafka.clients import stop_consumer
from cogsub.bus.kafka.consumer import KafkaConsumer
from cogsub.bus.kafka.errors import kafka_errors
from cogsub.bus.kafka.settings import KafkaSettings

__all__ = ["KafkaConsumer", "KafkaEventBus", "KafkaSettings", "kafka_errors", "stop_consumer"]
