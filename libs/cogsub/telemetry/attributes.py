"""Span attribute names: the project's ``cog.*`` beside OpenTelemetry's messaging conventions."""

from __future__ import annotations

from typing import Final

COG_EVENT_ID: Final = "cog.event.id"
COG_EVENT_TYPE: Final = "cog.event.type"
COG_SESSION_ID: Final = "cog.session.id"
COG_BANK_ID: Final = "cog.bank.id"
COG_FACT_TYPE: Final = "cog.fact.type"
COG_EMBEDDING_DIM: Final = "cog.embedding.dim"
COG_EMBEDDING_MODEL: Final = "cog.embedding.model"
COG_IMPORTANCE_SCORE: Final = "cog.importance.score"
COG_OBJECT_KEY: Final = "cog.archive.key"
COG_MEMORY_INDEX: Final = "cog.memory.index"
COG_BATCH_SIZE: Final = "cog.batch.size"
COG_DLQ_KIND: Final = "cog.dlq.kind"
COG_DLQ_REASON: Final = "cog.dlq.reason"
COG_REDELIVERED: Final = "cog.redelivered"

# OpenTelemetry messaging semantic conventions, so stock Tempo/Grafana views work.
MESSAGING_SYSTEM: Final = "messaging.system"
MESSAGING_DESTINATION_NAME: Final = "messaging.destination.name"
MESSAGING_OPERATION_TYPE: Final = "messaging.operation.type"
MESSAGING_OPERATION_NAME: Final = "messaging.operation.name"
MESSAGING_CONSUMER_GROUP_NAME: Final = "messaging.consumer.group.name"
MESSAGING_DESTINATION_PARTITION_ID: Final = "messaging.destination.partition.id"
MESSAGING_KAFKA_OFFSET: Final = "messaging.kafka.offset"
MESSAGING_KAFKA_MESSAGE_KEY: Final = "messaging.kafka.message.key"
