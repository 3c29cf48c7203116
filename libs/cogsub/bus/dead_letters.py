"""Dead letters: a record that can never be processed, kept with why and where it came from.

Every consumer dead-letters with the same three headers, appended after the
record's own, so one tool (``cogsub dlq``) reads the letters of every topic.
"""

from __future__ import annotations

from dataclasses import dataclass

from cogsub.bus.ports import EventBus, Headers, Record

DLQ_KIND_HEADER = "cogsub-dlq-kind"
DLQ_REASON_HEADER = "cogsub-dlq-reason"
DLQ_SOURCE_HEADER = "cogsub-dlq-source"


def source_of(record: Record) -> str:
    """Where a record was read: ``topic/partition/offset``."""
    return f"{record.topic}/{record.partition}/{record.offset}"


def dead_letter_headers(record: Record, kind: str, reason: str) -> Headers:
    """The record's own headers, then why and from where it was dead-lettered."""
    return (
        *record.headers,
        (DLQ_KIND_HEADER, kind.encode()),
        (DLQ_REASON_HEADER, reason.encode()),
        (DLQ_SOURCE_HEADER, source_of(record).encode()),
    )


@dataclass(frozen=True)
class DeadLetter:
    """A record on its way to ``topic``; ``headers`` are what it is published with."""

    topic: str
    record: Record
    kind: str
    reason: str
    headers: Headers

    @classmethod
    def of(cls, topic: str, record: Record, kind: str, reason: str) -> DeadLetter:
        return cls(topic, record, kind, reason, dead_letter_headers(record, kind, reason))


async def send(bus: EventBus, letter: DeadLetter) -> None:
    """Publish ``letter``: the original bytes and key, durably."""
    record = letter.record
    await bus.publish(letter.topic, record.value, key=record.key, headers=letter.headers)
