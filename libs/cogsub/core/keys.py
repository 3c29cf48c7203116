"""Deterministic archive keys: the same event always lands on the same object."""

from __future__ import annotations

from datetime import UTC

from cogsub.core.events import DEFAULT_BANK, ExperienceEvent

EVENTS_PREFIX = "events/"
#: Below a day's folder: one folder per bank other than the default one. ``banks`` can
#: never be an event's object (those end in ``.json``), so the two never collide.
BANKS_FOLDER = "banks/"


def object_key_for(event: ExperienceEvent) -> str:
    """The seed's ``events/YYYY/MM/DD/{eventId}.json`` from the event's UTC timestamp.

    An event of any bank but the default one goes under ``banks/{bankId}/`` inside
    the day: a memory id is the client's to choose per bank, so two banks may
    both hold ``invoice-7`` and neither can overwrite (or probe) the other's.
    """
    if event.bank_id == DEFAULT_BANK:
        return legacy_object_key_for(event)
    return f"{_day_folder(event)}{BANKS_FOLDER}{event.bank_id}/{event.event_id}.json"


def legacy_object_key_for(event: ExperienceEvent) -> str:
    """Where stores written before per-bank keys kept an event of any bank."""
    return f"{_day_folder(event)}{event.event_id}.json"


def _day_folder(event: ExperienceEvent) -> str:
    # Formatted by hand: strftime's %Y does not zero-pad years before 1000 on every libc.
    day = event.timestamp.astimezone(UTC)
    return f"{EVENTS_PREFIX}{day.year:04d}/{day.month:02d}/{day.day:02d}/"
