"""Pure ingestion steps: receive, the archived shape, sameness, dead-letter headers."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from cogsub.bus.ports import Record
from cogsub.core import EXPERIENCE_RAW_DLQ, validate_event
from cogsub.core.documents import (
    IndexDocument,
    enriched_payload_for,
    enriched_payload_json,
    indexed_payload_for,
    indexed_payload_json,
)
from cogsub.ingestion.pipeline import (
    DLQ_KIND_HEADER,
    DLQ_REASON_HEADER,
    DLQ_SOURCE_HEADER,
    Accepted,
    Rejection,
    RejectionKind,
    archive_body,
    archived_event_for,
    dead_letter_for,
    first_of_each_id,
    receive,
    same_experience,
)
from tests.libs.core.test_events import SEED, with_change


def record(body: object, offset: int = 0) -> Record:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return Record(
        topic="experience.raw",
        partition=2,
        offset=offset,
        value=raw,
        headers=(("traceparent", b"00-abc-def-01"),),
    )


def test_receive_accepts_valid_and_names_bad_fields() -> None:
    assert isinstance(receive(record(SEED), dimension=8), Accepted)
    bad = receive(record(with_change("eventId", "../x")), dimension=8)
    assert isinstance(bad, Rejection) and bad.kind is RejectionKind.INVALID
    assert bad.reason.startswith("eventId:")


def test_receive_refuses_embedding_of_the_wrong_dimension() -> None:
    bad = receive(record(with_change("input.embedding", [0.5] * 3)), dimension=8)
    assert isinstance(bad, Rejection)
    assert "input.embedding: must be empty or have 8 dimensions, got 3" in bad.reason
    assert isinstance(
        receive(record(with_change("input.embedding", [0.5] * 8)), dimension=8), Accepted
    )


def test_archived_event_keeps_everything_and_adds_the_derived_fields() -> None:
    event = validate_event(SEED)
    archived = archived_event_for(event, embedding=[0.1, 0.2], importance_score=0.79, key="k")
    body = json.loads(archive_body(archived))
    assert body["action"]["reasoning"] == SEED["action"]["reasoning"]
    assert body["input"]["embedding"] == [0.1, 0.2]
    assert body["importanceScore"] == 0.79 and body["objectStorageKey"] == "k"
    expected = {**SEED, "bankId": "default"}
    for name, value in expected.items():
        if name not in ("input", "importanceScore"):
            assert body[name] == value, name


def test_same_experience_ignores_only_derived_fields() -> None:
    event = validate_event(SEED)
    archived = archived_event_for(event, embedding=[0.3], importance_score=0.79, key="k")
    assert same_experience(event, archived)
    changed = validate_event(with_change("input.text", "something else"))
    assert not same_experience(changed, archived)
    other_tags = validate_event(with_change("tags", ["x"]))
    assert not same_experience(other_tags, archived)


def test_a_supplied_embedding_is_part_of_the_content() -> None:
    supplied = validate_event(with_change("input.embedding", [0.6, 0.8]))
    archived = archived_event_for(supplied, embedding=[0.6, 0.8], importance_score=0.1, key="k")
    assert same_experience(supplied, archived)
    other = validate_event(with_change("input.embedding", [0.8, 0.6]))
    assert not same_experience(other, archived)


def test_dead_letters_keep_original_headers_then_say_why_and_where() -> None:
    rejection = Rejection(
        record(b"nope", offset=41), RejectionKind.INVALID, "(event): must be JSON"
    )
    letter = dead_letter_for(rejection)
    assert (letter.topic, letter.kind) == (EXPERIENCE_RAW_DLQ, "invalid")
    assert letter.record is rejection.record
    headers = letter.headers
    assert headers[0] == ("traceparent", b"00-abc-def-01")
    assert dict(headers)[DLQ_KIND_HEADER] == b"invalid"
    assert dict(headers)[DLQ_REASON_HEADER] == b"(event): must be JSON"
    assert dict(headers)[DLQ_SOURCE_HEADER] == b"experience.raw/2/41"


def test_first_of_each_id_keeps_order_and_splits_repeats() -> None:
    items = [
        Accepted(record(SEED, i), validate_event(with_change("eventId", name)))
        for i, name in enumerate(["a", "b", "a", "c", "b"])
    ]
    firsts, repeats = first_of_each_id(items)
    assert [i.event.event_id for i in firsts] == ["a", "b", "c"]
    assert [i.record.offset for i in repeats] == [2, 4]


_TEXT = st.text(st.characters(codec="utf-8"), max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    summary=_TEXT,
    key=_TEXT,
    tags=st.lists(_TEXT.filter(bool), max_size=4),
    score=st.integers(0, 1000).map(lambda thousandths: round(thousandths / 1000, 3)),
    index=_TEXT,
)
def test_announcement_bytes_are_the_models_wire_json(
    summary: str, key: str, tags: list[str], score: float, index: str
) -> None:
    doc = IndexDocument.model_construct(
        event_id="ev-1",
        timestamp="2026-05-08T22:31:25.237Z",
        event_type="user_input",
        session_id=None,
        summary=summary,
        embedding=[0.5] * 8,
        importance_score=score,
        reward_score=0.5,
        confidence=0.5,
        object_storage_key=key,
        tags=tags,
        bank_id="b",
    )
    assert enriched_payload_json(doc) == enriched_payload_for(doc).to_wire_json()
    indexed = indexed_payload_json(doc, index=index)
    assert indexed == indexed_payload_for(doc, index=index).to_wire_json()
