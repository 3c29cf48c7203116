"""Dead letters as the operator and the retain path see them (pure: no I/O).

A worker that cannot take a record republishes its original bytes to a
dead-letter topic with three headers: the kind (``invalid``, ``conflict``,
``failed``...), the reason and the source position (``topic/partition/offset``).
:func:`dead_letter_of` reads that back; :class:`RejectionBook` remembers the
recent ones of ``experience.raw`` so that a ``wait=True`` retain learns of its
own rejection as soon as it happens; :func:`rejection_error` is what it raises.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from cogsub.bus.dead_letters import DLQ_KIND_HEADER, DLQ_REASON_HEADER, DLQ_SOURCE_HEADER
from cogsub.bus.ports import Headers, Record
from cogsub.core.errors import (
    CogsubError,
    FieldProblem,
    InvalidInputError,
    RejectedConflictError,
    RejectedError,
    RejectedInputError,
)
from cogsub.core.topics import (
    CONSOLIDATION_DLQ,
    CONSOLIDATION_REQUEST,
    EXPERIENCE_ENRICHED,
    EXPERIENCE_RAW,
    EXPERIENCE_RAW_DLQ,
)

#: Each dead-letter topic, and the topics its letters may be sent back to.
RETRY_TARGETS: Mapping[str, frozenset[str]] = {
    EXPERIENCE_RAW_DLQ: frozenset({EXPERIENCE_RAW}),
    CONSOLIDATION_DLQ: frozenset({EXPERIENCE_ENRICHED, CONSOLIDATION_REQUEST}),
}
DLQ_TOPICS = tuple(RETRY_TARGETS)
#: On a retried record: the dead letter it came from.
RETRIED_FROM_HEADER = "cogsub-dlq-retried-from"
_DLQ_HEADERS = frozenset({DLQ_KIND_HEADER, DLQ_REASON_HEADER, DLQ_SOURCE_HEADER})
# Topic names never hold ":" or "/": either separates (the source header uses "/").
_POSITION = re.compile(r"^([A-Za-z0-9._-]{1,100})([:/])(\d{1,9})\2(\d{1,18})$")


@dataclass(frozen=True, order=True)
class Position:
    """Where a record is: ``topic:partition:offset`` in text (a safe id, fit for a URL)."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"{self.topic}:{self.partition}:{self.offset}"

    @classmethod
    def parse(cls, text: str, *, field: str = "id") -> Position:
        """``topic:partition:offset`` (or with ``/``); ``InvalidInputError`` naming ``field``."""
        found = _POSITION.fullmatch(text)
        if found is None:
            rule = "must be topic:partition:offset, e.g. experience.raw.dlq:0:12"
            raise InvalidInputError([FieldProblem(field, rule)])
        return cls(found[1], int(found[3]), int(found[4]))


@dataclass(frozen=True)
class DeadLetter:
    """One dead-lettered record: where it is, why, where from, and its original bytes."""

    at: Position
    timestamp_ms: int
    kind: str
    reason: str
    source: Position | None
    value: bytes
    key: bytes | None
    headers: Headers
    """The original record's headers, without the dead-letter ones."""
    bank_id: str | None
    event_id: str | None


def _text(value: bytes | None) -> str:
    return value.decode("utf-8", "replace") if value is not None else ""


def _ids(value: bytes) -> tuple[str | None, str | None]:
    """The bank and event id a raw event names, read leniently: it may be invalid."""
    try:
        body = json.loads(value)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(body, dict):
        return None, None
    event_id = body.get("eventId")
    bank_id = body.get("bankId", "default")  # the event schema's default bank
    return (
        bank_id if isinstance(bank_id, str) else None,
        event_id if isinstance(event_id, str) else None,
    )


def dead_letter_of(record: Record) -> DeadLetter:
    """The dead letter ``record`` (read from a dead-letter topic) holds."""
    source_text = _text(record.header(DLQ_SOURCE_HEADER))
    try:
        source: Position | None = Position.parse(source_text)
    except InvalidInputError:
        source = None
    bank_id, event_id = _ids(record.value)
    return DeadLetter(
        at=Position(record.topic, record.partition, record.offset),
        timestamp_ms=record.timestamp_ms,
        kind=_text(record.header(DLQ_KIND_HEADER)) or "unknown",
        reason=_text(record.header(DLQ_REASON_HEADER)),
        source=source,
        value=record.value,
        key=record.key,
        headers=tuple((k, v) for k, v in record.headers if k not in _DLQ_HEADERS),
        bank_id=bank_id,
        event_id=event_id,
    )


def retry_target(letter: DeadLetter) -> str:
    """The topic ``letter`` goes back to; ``InvalidInputError`` when it cannot go back."""
    allowed = RETRY_TARGETS.get(letter.at.topic, frozenset())
    if letter.source is None or letter.source.topic not in allowed:
        rule = f"names no source topic it may go back to ({', '.join(sorted(allowed))})"
        raise InvalidInputError([FieldProblem("id", f"{letter.at}: {rule}")])
    return letter.source.topic


def retried_headers(letter: DeadLetter) -> Headers:
    """The original headers, and which dead letter the record was retried from."""
    return (*letter.headers, (RETRIED_FROM_HEADER, str(letter.at).encode()))


def rejection_error(letter: DeadLetter) -> RejectedError:
    """What a ``wait=True`` retain raises for its dead letter: 409 conflict, else 422."""
    message = f"ingestion rejected it ({letter.kind}): {letter.reason} [dead letter {letter.at}]"
    if letter.kind == "conflict":
        return RejectedConflictError(message)
    error = RejectedInputError([FieldProblem("(ingestion)", f"{letter.kind}: {letter.reason}")])
    error.args = (message,)
    return error


class RejectionLookup(Protocol):
    """What the memory service asks while a ``wait=True`` retain waits."""

    def rejection_for(self, bank_id: str, event_id: str, body: bytes) -> CogsubError | None:
        """The error to answer with if ingestion dead-lettered exactly ``body``."""
        ...


def _digest(body: bytes) -> bytes:
    return hashlib.sha256(body).digest()


class RejectionBook:
    """The recent dead letters of ``experience.raw``, by bank, event id and exact bytes.

    Matching the bytes, not just the id, keeps a rejection of one attempt from
    answering for another (a retry without a timestamp has new bytes). Entries
    live ``ttl_s``: long enough for any waiting retain to see them, short enough
    that a record resent unchanged after the operator fixed the cause is not
    answered with the old rejection for long. At most ``max_entries`` are kept.
    """

    def __init__(
        self,
        *,
        max_entries: int = 10_000,
        ttl_s: float = 120.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._entries: OrderedDict[tuple[str, str, bytes], tuple[float, DeadLetter]] = OrderedDict()
        self._max_entries = max_entries
        self._ttl_s = ttl_s
        self._clock = clock
        self._asked_at = float("-inf")
        self.on_ask: Callable[[], None] | None = None
        """Called on every question: the watch wakes up to read at once."""

    def __len__(self) -> int:
        return len(self._entries)

    def note(self, letter: DeadLetter) -> None:
        """Remember ``letter`` if it is a raw event's rejection that names its ids."""
        if letter.at.topic != EXPERIENCE_RAW_DLQ or letter.event_id is None:
            return
        if letter.bank_id is None:
            return
        key = (letter.bank_id, letter.event_id, _digest(letter.value))
        self._entries[key] = (self._clock(), letter)
        self._entries.move_to_end(key)
        self._forget_old()

    def rejection_for(self, bank_id: str, event_id: str, body: bytes) -> CogsubError | None:
        """The rejection of exactly ``body`` in ``bank_id``, if one was seen lately."""
        self._asked_at = self._clock()
        if self.on_ask is not None:
            self.on_ask()
        self._forget_old()
        found = self._entries.get((bank_id, event_id, _digest(body)))
        return rejection_error(found[1]) if found is not None else None

    def asked_within(self, seconds: float) -> bool:
        """Whether a retain asked in the last ``seconds``: someone is waiting."""
        return self._clock() - self._asked_at <= seconds

    def _forget_old(self) -> None:
        oldest_kept = self._clock() - self._ttl_s
        while self._entries:
            noted_at, _ = next(iter(self._entries.values()))
            if noted_at >= oldest_kept and len(self._entries) <= self._max_entries:
                return
            self._entries.popitem(last=False)
