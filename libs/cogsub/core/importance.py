"""The ingestion-time importance prior (experience-capture seed, exactly).

Consolidation refines it later from richer signals; ingestion supplies only
this fast heuristic.
"""

from __future__ import annotations

from cogsub.core.events import EventType, ExperienceEvent

_ROUTINE_TYPES = frozenset({EventType.USER_INPUT, EventType.SYSTEM_EVENT})


def score_importance(event: ExperienceEvent) -> float:
    """Non-routine type .3, tags .2, action .2, success .3; rounded to 3 places, in [0, 1]."""
    non_routine = 0.3 if event.type in _ROUTINE_TYPES else 1.0
    has_tags = 1.0 if event.tags else 0.0
    has_action = 1.0 if event.action is not None else 0.0
    success = event.result.success if event.result is not None else None
    outcome = 1.0 if success is True else 0.1 if success is False else 0.5
    score = non_routine * 0.3 + has_tags * 0.2 + has_action * 0.2 + outcome * 0.3
    return max(0.0, min(1.0, round(score, 3)))
