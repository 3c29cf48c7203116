"""Topic names and their partition counts in the distributed fleet."""

from __future__ import annotations

from dataclasses import dataclass

EXPERIENCE_RAW = "experience.raw"
EXPERIENCE_RAW_DLQ = "experience.raw.dlq"
EXPERIENCE_ENRICHED = "experience.enriched"
MEMORY_INDEXED = "memory.indexed"


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int


STAGE1_TOPICS = (
    TopicSpec(EXPERIENCE_RAW, 12),
    TopicSpec(EXPERIENCE_RAW_DLQ, 3),
    TopicSpec(EXPERIENCE_ENRICHED, 12),
    TopicSpec(MEMORY_INDEXED, 6),
)
