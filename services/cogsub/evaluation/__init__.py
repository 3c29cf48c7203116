"""Retrieval evaluations over the real retain and recall paths (LoCoMo)."""

from cogsub.evaluation.cache import CachingEmbedder
from cogsub.evaluation.locomo import DEFAULT_KS, LocomoOptions, evaluate_locomo
from cogsub.evaluation.locomo_data import Conversation, Question, Turn, load_locomo

__all__ = [
    "DEFAULT_KS",
    "CachingEmbedder",
    "Conversation",
    "LocomoOptions",
    "Question",
    "Turn",
    "evaluate_locomo",
    "load_locomo",
]
