"""The FactExtractor port: plain content in, world and experience facts out.

Contract every adapter keeps:

- ``extract`` returns the facts one piece of content states, each a short
  self-contained sentence typed ``world`` (about the user and their world) or
  ``experience`` (the agent's own first-person episode).
- Relative dates ("yesterday", "last Friday") are resolved against the
  event's time: ``occurred_on`` is a calendar day, or ``None`` if the content
  dates nothing.
- Output that is invalid or off-schema raises ``ExtractionRejected`` naming
  the source event id and the rule; a caller then changes nothing. The LLM
  adapter also rejects an empty answer (a model that silently returns nothing
  must not pass for "no facts"); the offline adapter returns ``[]`` for content
  that states nothing, and callers use it to skip such content before asking
  a model.
- A backend that is down or throttling raises ``UnavailableError`` (retryable).
- The offline extractor is deterministic: the same input gives the same facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Protocol

from cogsub.core.errors import CogsubError
from cogsub.core.events import EventType, FactType

EXTRACTED_TYPES = frozenset({FactType.WORLD, FactType.EXPERIENCE})


@dataclass(frozen=True)
class ExtractionInput:
    """What an extractor reads: the content and where it came from."""

    source_event_id: str
    text: str
    event_time: datetime
    event_type: EventType
    speaker: str | None = None
    """Who said it, when the event says (``context.userId`` / ``agentId``)."""


@dataclass(frozen=True)
class ExtractedFact:
    """One fact stated by the content."""

    text: str
    fact_type: FactType
    occurred_on: date | None = None
    entities: tuple[str, ...] = ()


class ExtractionRejected(CogsubError):
    """The extractor's output broke a rule; nothing may be stored from it."""

    def __init__(self, source_event_id: str, rule: str) -> None:
        self.source_event_id = source_event_id
        self.rule = rule
        super().__init__(f"extraction of {source_event_id!r} rejected: {rule}")


class FactExtractor(Protocol):
    """Turns plain content into typed facts."""

    @property
    def name(self) -> str:
        """A stable identifier (``offline``, ``llm:<model>``), stored beside each fact."""
        ...

    async def extract(self, item: ExtractionInput) -> list[ExtractedFact]:
        """The facts ``item`` states."""
        ...

    async def close(self) -> None:
        """Release clients."""
        ...
