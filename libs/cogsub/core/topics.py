"""Topic names and their partition counts in the distributed fleet."""

from __future__ import annotations

from dataclasses import dataclass

EXPERIENCE_RAW = "experience.raw"
EXPERIENCE_RAW_DLQ = "experience.raw.dlq"
EXPERIENCE_ENRICHED = "experience.enriched"
MEMORY_INDEXED = "memory.indexed"
CONSOLIDATION_REQUEST = "consolidation.request"
MEMORY_SEMANTIC_UPDATED = "memory.semantic.updated"
CONSOLIDATION_DLQ = "consolidation.dlq"


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

# Consolidation (Stage 3): rounds are requested per bank and announce what they wrote.
CONSOLIDATION_TOPICS = (
    TopicSpec(CONSOLIDATION_REQUEST, 3),
    TopicSpec(MEMORY_SEMANTIC_UPDATED, 3),
    TopicSpec(CONSOLIDATION_DLQ, 3),
)
