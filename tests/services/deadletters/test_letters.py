"""The pure parts of dead letters: reading one back, the rejection book, the errors."""

from __future__ import annotations

import pytest

from cogsub.bus.ports import Record
from cogsub.core.errors import ConflictError, InvalidInputError
from cogsub.core.topics import CONSOLIDATION_DLQ, EXPERIENCE_RAW, EXPERIENCE_RAW_DLQ
from cogsub.deadletters.letters import (
    RETRIED_FROM_HEADER,
    DeadLetter,
    Position,
    RejectionBook,
    dead_letter_of,
    rejection_error,
    retried_headers,
    retry_target,
)
from cogsub.ingestion.pipeline import DLQ_KIND_HEADER, DLQ_REASON_HEADER, DLQ_SOURCE_HEADER
from cogsub.sdk import RejectedConflictError, RejectedError, RejectedInputError

BODY = b'{"eventId": "m-1", "bankId": "alice", "input": {"text": "hi"}}'


def _record(
    value: bytes = BODY,
    *,
    kind: bytes = b"conflict",
    source: bytes = b"experience.raw/4/17",
    topic: str = EXPERIENCE_RAW_DLQ,
    offset: int = 3,
) -> Record:
    headers = (
        ("traceparent", b"00-abc"),
        (DLQ_KIND_HEADER, kind),
        (DLQ_REASON_HEADER, b"already archived"),
        (DLQ_SOURCE_HEADER, source),
    )
    return Record(topic, 1, offset, value, b"m-1", headers, 1_700_000_000_000)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_dead_letter_reads_back_where_why_and_whence() -> None:
    letter = dead_letter_of(_record())
    assert letter.at == Position(EXPERIENCE_RAW_DLQ, 1, 3)
    assert (letter.kind, letter.reason) == ("conflict", "already archived")
    assert letter.source == Position(EXPERIENCE_RAW, 4, 17)
    assert (letter.bank_id, letter.event_id) == ("alice", "m-1")
    assert letter.headers == (("traceparent", b"00-abc"),)  # the dead-letter headers are ours


@pytest.mark.parametrize(
    ("value", "ids"),
    [
        (b"not json", (None, None)),
        (b"[1, 2]", (None, None)),
        (b'{"eventId": 7}', ("default", None)),
        (b'{"eventId": "x"}', ("default", "x")),  # the schema's default bank
    ],
)
def test_ids_are_read_leniently_from_what_may_be_invalid(
    value: bytes, ids: tuple[str | None, str | None]
) -> None:
    letter = dead_letter_of(_record(value, source=b"garbage"))
    assert (letter.bank_id, letter.event_id) == ids
    assert letter.source is None


def test_positions_round_trip_and_refuse_anything_else() -> None:
    at = Position.parse("experience.raw.dlq:2:40")
    assert (at.topic, at.partition, at.offset, str(at)) == (
        "experience.raw.dlq",
        2,
        40,
        "experience.raw.dlq:2:40",
    )
    assert Position.parse("experience.raw/2/40") == Position("experience.raw", 2, 40)  # a source
    for text in ("experience.raw.dlq:2", "a:b:c", "x:0:0x", "x:-1:2", "x:1/2", "x:1:2\n"):
        with pytest.raises(InvalidInputError) as caught:
            Position.parse(text, field="after")
        assert caught.value.problems[0].field == "after"


def test_a_letter_goes_back_only_to_a_source_its_topic_is_for() -> None:
    letter = dead_letter_of(_record())
    assert retry_target(letter) == EXPERIENCE_RAW
    assert retried_headers(letter)[-1] == (RETRIED_FROM_HEADER, b"experience.raw.dlq:1:3")
    wrong = dead_letter_of(_record(topic=CONSOLIDATION_DLQ))  # names experience.raw
    for refused in (wrong, dead_letter_of(_record(source=b""))):
        with pytest.raises(InvalidInputError):
            retry_target(refused)


def test_a_conflict_is_a_409_and_anything_else_a_422_both_rejected_errors() -> None:
    conflict = rejection_error(dead_letter_of(_record()))
    assert isinstance(conflict, RejectedConflictError) and isinstance(conflict, ConflictError)
    assert "already archived" in str(conflict) and "experience.raw.dlq:1:3" in str(conflict)
    for kind in (b"invalid", b"failed"):
        error = rejection_error(dead_letter_of(_record(kind=kind)))
        assert isinstance(error, RejectedInputError) and isinstance(error, InvalidInputError)
        assert isinstance(error, RejectedError)
        assert error.problems[0].field == "(ingestion)"


def _letter(value: bytes = BODY, offset: int = 3) -> DeadLetter:
    return dead_letter_of(_record(value, offset=offset))


def test_the_book_answers_only_for_the_very_bytes_rejected() -> None:
    book = RejectionBook(clock=Clock())
    book.note(_letter())
    assert isinstance(book.rejection_for("alice", "m-1", BODY), RejectedConflictError)
    assert book.rejection_for("alice", "m-1", BODY + b" ") is None  # another attempt
    assert book.rejection_for("bob", "m-1", BODY) is None
    assert book.rejection_for("alice", "m-2", BODY) is None


def test_the_book_keeps_raw_rejections_only() -> None:
    book = RejectionBook(clock=Clock())
    book.note(dead_letter_of(_record(topic=CONSOLIDATION_DLQ)))
    book.note(_letter(b"not json"))
    assert len(book) == 0


def test_the_book_forgets_by_age_and_by_count() -> None:
    clock = Clock()
    book = RejectionBook(clock=clock, ttl_s=10.0, max_entries=2)
    bodies = [BODY.replace(b"hi", f"hi {i}".encode()) for i in range(3)]
    for body in bodies:
        book.note(_letter(body))
    assert len(book) == 2 and book.rejection_for("alice", "m-1", bodies[0]) is None
    assert book.rejection_for("alice", "m-1", bodies[2]) is not None
    clock.now += 10.5
    assert book.rejection_for("alice", "m-1", bodies[2]) is None and len(book) == 0


def test_asking_marks_the_book_wanted_and_calls_the_listener() -> None:
    clock = Clock()
    book = RejectionBook(clock=clock)
    calls: list[None] = []
    book.on_ask = lambda: calls.append(None)
    assert not book.asked_within(1.0)
    book.rejection_for("alice", "m-1", BODY)
    assert book.asked_within(1.0) and len(calls) == 1
    clock.now += 2.0
    assert not book.asked_within(1.0)
