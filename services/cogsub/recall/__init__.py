"""Typed memory: retain through the pipeline, recall through hybrid policy-weighted ranking."""

from cogsub.recall.policy import RankingPolicy
from cogsub.recall.service import MemoryService

__all__ = ["MemoryService", "RankingPolicy"]
