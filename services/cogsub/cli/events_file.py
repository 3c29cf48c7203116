"""Reading experience events from a JSON array or a JSON-lines file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from cogsub.core import ExperienceEvent, InvalidEventError, validate_event


@dataclass(frozen=True)
class ParsedLine:
    """One input item: its 1-based position, and the event or why it was refused."""

    position: int
    event: ExperienceEvent | None = None
    error: str | None = None


def parse_events_text(text: str) -> Iterator[ParsedLine]:
    """Items of a JSON array, or one per non-blank line of JSON lines."""
    stripped = text.lstrip()
    if stripped.startswith("["):
        try:
            items = json.loads(stripped)
        except json.JSONDecodeError as exc:
            yield ParsedLine(1, error=f"(file): must be a JSON array or JSON lines: {exc}")
            return
        for position, item in enumerate(items, start=1):
            yield _validated(position, item)
        return
    for position, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            yield ParsedLine(position, error=f"(event): must be JSON: {exc}")
            continue
        yield _validated(position, item)


def _validated(position: int, item: object) -> ParsedLine:
    try:
        return ParsedLine(position, event=validate_event(item))
    except InvalidEventError as exc:
        return ParsedLine(position, error=str(exc))
