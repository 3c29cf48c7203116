"""ExperienceEvent: wire names, round-trips, and every bad-input rule."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cogsub.core import (
    ExperienceEvent,
    FactType,
    InvalidEventError,
    format_timestamp,
    parse_event,
    validate_event,
)
from cogsub.core.events import MAX_EVENT_BYTES, MAX_TAGS, MAX_TEXT_LENGTH

SEED: dict[str, Any] = {
    "eventId": "demo-event-001",
    "timestamp": "2026-05-08T22:31:25.237Z",
    "type": "user_input",
    "context": {"sessionId": "demo-session-001", "traceId": "demo-trace-001"},
    "input": {"text": "Design a memory system.", "embedding": []},
    "internalState": {"confidence": 0.72, "activePlan": "Compare."},
    "action": {"tool": "architecture_note", "reasoning": "Capture first."},
    "result": {"output": "Experience archived and indexed.", "success": True, "latencyMs": 42},
    "evaluation": {"rewardScore": 0.81, "selfAssessedQuality": 0.76},
    "importanceScore": 0,
    "tags": ["memory", "ingestion", "demo"],
}


def with_change(path: str, value: Any) -> dict[str, Any]:
    event = copy.deepcopy(SEED)
    *parents, leaf = path.split(".")
    target = event
    for part in parents:
        target = target.setdefault(part, {})
    target[leaf] = value
    return event


def problems(data: object) -> list[str]:
    with pytest.raises(InvalidEventError) as info:
        validate_event(data)
    return [p.field for p in info.value.problems]


def test_seed_event_round_trips_with_wire_names() -> None:
    event = validate_event(SEED)
    assert event.event_id == "demo-event-001"
    assert event.context.session_id == "demo-session-001"
    assert event.internal_state is not None and event.internal_state.active_plan == "Compare."
    wire = event.to_wire()
    assert wire["timestamp"] == "2026-05-08T22:31:25.237Z"
    assert wire["internalState"]["activePlan"] == "Compare."
    assert wire["result"]["latencyMs"] == 42
    assert wire["bankId"] == "default"
    assert "factType" not in wire
    assert validate_event(wire) == event


def test_every_seed_field_is_accepted() -> None:
    full = with_change(
        "context",
        {
            "sessionId": "s",
            "traceId": "t",
            "spanId": "p",
            "userId": "u",
            "agentId": "a",
            "goalId": "g",
            "policyVersion": "v1",
        },
    )
    full["input"]["structured"] = {"k": [1, 2]}
    full["internalState"]["workingMemorySnapshot"] = {"items": ["x"]}
    full["action"]["parameters"] = {"q": "x"}
    full["result"]["errorCode"] = "E1"
    full["evaluation"]["userFeedback"] = "good"
    full["bankId"] = "jane@example.com"
    full["factType"] = "procedure"
    event = validate_event(full)
    assert event.fact_type is FactType.PROCEDURE
    assert event.to_wire()["context"]["policyVersion"] == "v1"


@pytest.mark.parametrize(
    "bad_id",
    [
        "",
        "../etc",
        "a/b",
        "..",
        "a..b",
        "x\x00y",
        "tab\tid",
        ".hidden",
        "x" * 129,
        "sp ace",
        "back\\slash",
    ],
)
def test_event_id_must_be_safe_for_object_keys(bad_id: str) -> None:
    assert problems(with_change("eventId", bad_id)) == ["eventId"]


@pytest.mark.parametrize("good_id", ["a", "demo-event-001", "A_b.c:d@e+f", "x" * 128])
def test_safe_event_ids_are_accepted(good_id: str) -> None:
    assert validate_event(with_change("eventId", good_id)).event_id == good_id


@pytest.mark.parametrize(
    "bad", ["2026-05-08T22:31:25", "2026-05-08", "yesterday", 1715200000, None]
)
def test_timestamp_must_be_timezone_aware_iso(bad: object) -> None:
    assert problems(with_change("timestamp", bad)) == ["timestamp"]


def test_offset_timestamps_are_normalised_to_utc() -> None:
    event = validate_event(with_change("timestamp", "2026-05-09T01:31:25.237+03:00"))
    assert event.to_wire()["timestamp"] == "2026-05-08T22:31:25.237Z"


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("type", "chat", "type"),
        ("input.text", "x" * (MAX_TEXT_LENGTH + 1), "input.text"),
        ("input.text", 5, "input.text"),
        ("tags", ["t"] * (MAX_TAGS + 1), "tags"),
        ("tags", [""], "tags[0]"),
        ("input.embedding", [0.1] * 4097, "input.embedding"),
        ("input.embedding", [float("nan")], "input.embedding[0]"),
        ("importanceScore", 1.5, "importanceScore"),
        ("evaluation.rewardScore", -0.1, "evaluation.rewardScore"),
        ("internalState.confidence", 2, "internalState.confidence"),
        ("result.latencyMs", -1, "result.latencyMs"),
        ("factType", "gossip", "factType"),
        ("bankId", "../other", "bankId"),
        ("surprise", 1, "surprise"),
        ("context.sessionid", "typo", "context.sessionid"),
    ],
)
def test_each_rule_names_its_field(path: str, value: object, field: str) -> None:
    assert problems(with_change(path, value)) == [field]


def test_missing_required_fields_are_named() -> None:
    assert sorted(problems({"eventId": "x"})) == ["input", "timestamp", "type"]


def test_rejection_message_names_field_and_rule() -> None:
    with pytest.raises(
        InvalidEventError, match=r"evaluation\.rewardScore: .*less than or equal to 1"
    ):
        validate_event(with_change("evaluation.rewardScore", 3))


@pytest.mark.parametrize("raw", [b"not json", b"\xff\xfe", b"[1, 2]", b"null", b'"text"'])
def test_non_objects_are_refused(raw: bytes) -> None:
    with pytest.raises(InvalidEventError, match=r"^\(event\): must be"):
        parse_event(raw)


def test_oversized_events_are_refused_before_parsing() -> None:
    with pytest.raises(InvalidEventError, match="at most"):
        parse_event(b" " * (MAX_EVENT_BYTES + 1))


def test_events_are_immutable() -> None:
    event = validate_event(SEED)
    with pytest.raises(Exception, match="frozen"):
        event.tags = []  # type: ignore[misc]


@given(st.binary(max_size=512))
def test_parse_event_never_raises_anything_but_invalid_event(raw: bytes) -> None:
    try:
        parse_event(raw)
    except InvalidEventError as exc:
        assert exc.problems


@given(
    st.dictionaries(
        st.text(max_size=12), st.one_of(st.none(), st.integers(), st.text(max_size=8)), max_size=6
    )
)
def test_validate_event_never_crashes_on_arbitrary_objects(data: dict[str, object]) -> None:
    with pytest.raises(InvalidEventError):
        validate_event({**data, "eventId": "../x"})


def test_format_timestamp_keeps_microseconds_when_needed() -> None:
    event = validate_event(with_change("timestamp", "2026-05-08T22:31:25.123456Z"))
    assert format_timestamp(event.timestamp) == "2026-05-08T22:31:25.123456Z"
    assert json.loads(event.model_dump_json(by_alias=True))["timestamp"].endswith(".123456Z")


def test_experience_event_is_importable_from_core() -> None:
    assert ExperienceEvent.__module__ == "cogsub.core.events"
