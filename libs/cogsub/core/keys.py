"""Deterministic archive keys: the same event always lands on the same object."""

from __future__ import annotations

from datetime import UTC

from cogsub.core.events import ExperienceEvent

EVENTS_PREFIX = "events/"


def object_key_for(event: ExperienceEvent) -> str:
    """``events/YYYY/MM/DD/{eventId}.json`` from the event's UTC timestamp."""
    day = event.timestamp.astimezone(UTC)
    return f"{EVENTS_PREFIX}{day:%Y/%m/%d}/{event.event_id}.json"
