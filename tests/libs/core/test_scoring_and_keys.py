"""The seed's importance heuristic and the archive key layout, exhaustively."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cogsub.core import EventType, object_key_for, score_importance, validate_event
from cogsub.core.errors import InvalidEventError
from cogsub.core.events import format_timestamp
from cogsub.core.keys import legacy_object_key_for


def event(**overrides: Any) -> Any:
    base: dict[str, Any] = {
        "eventId": "e1",
        "timestamp": "2026-05-08T22:31:25.237Z",
        "type": "user_input",
        "input": {"text": "x"},
    }
    base.update(overrides)
    return validate_event({k: v for k, v in base.items() if v is not None})


def test_seed_demo_event_scores_079() -> None:
    seed = event(
        tags=["memory", "ingestion", "demo"],
        action={"tool": "architecture_note"},
        result={"success": True},
    )
    assert score_importance(seed) == 0.79


def seed_formula(event_type: str, tags: bool, action: bool, success: bool | None) -> float:
    """The seed's JavaScript, transcribed term by term as the test oracle."""
    non_routine = 0.3 if event_type in ("user_input", "system_event") else 1
    outcome = 1 if success is True else 0.1 if success is False else 0.5
    score = non_routine * 0.3 + (0.2 if tags else 0) + (0.2 if action else 0) + outcome * 0.3
    return max(0.0, min(1.0, round(score, 3)))


@pytest.mark.parametrize(
    ("event_type", "tags", "action", "success"),
    list(
        itertools.product(
            [t.value for t in EventType], [False, True], [False, True], [None, True, False]
        )
    ),
)
def test_score_matches_the_seed_for_every_combination(
    event_type: str, tags: bool, action: bool, success: bool | None
) -> None:
    e = event(
        type=event_type,
        tags=["t"] if tags else None,
        action={"tool": "x"} if action else None,
        result={"success": success} if success is not None else None,
    )
    assert score_importance(e) == seed_formula(event_type, tags, action, success)


def test_result_without_success_counts_as_unknown() -> None:
    assert score_importance(event(result={"output": "ok"})) == score_importance(event())


def test_scores_stay_in_unit_interval() -> None:
    top = event(type="tool_result", tags=["a"], action={}, result={"success": True})
    assert score_importance(top) == 1.0
    assert 0 < score_importance(event(result={"success": False})) < 1


def test_key_layout_uses_the_utc_day() -> None:
    assert object_key_for(event()) == "events/2026/05/08/e1.json"
    late = event(timestamp="2026-05-08T23:30:00-02:00")  # already 9 May in UTC
    assert object_key_for(late) == "events/2026/05/09/e1.json"


def test_key_is_deterministic() -> None:
    assert object_key_for(event()) == object_key_for(event())


def test_an_event_of_another_bank_is_kept_under_its_bank() -> None:
    assert object_key_for(event(bankId="bob")) == "events/2026/05/08/banks/bob/e1.json"
    assert object_key_for(event(bankId="bob")) != object_key_for(event(bankId="alice"))
    assert legacy_object_key_for(event(bankId="bob")) == "events/2026/05/08/e1.json"


def test_a_year_before_1000_keeps_four_digits() -> None:
    assert object_key_for(event(timestamp="0999-01-02T00:00:00Z")) == "events/0999/01/02/e1.json"
    assert object_key_for(event(timestamp="0001-01-01T00:00:00Z")).startswith("events/0001/")


def test_a_timestamp_with_no_utc_instant_is_refused() -> None:
    with pytest.raises(InvalidEventError, match="timestamp: must fall between years 1 and 9999"):
        event(timestamp="0001-01-01T00:00:00+05:00")


@given(
    st.datetimes(
        min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
    ),
    st.sampled_from(["default", "bob", "a.json", "banks", "x:y@z"]),
    st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_:@+-]{0,20}", fullmatch=True),
)
def test_every_key_is_one_the_archive_layout_accepts(
    moment: datetime, bank: str, event_id: str
) -> None:
    stamp = format_timestamp(moment)
    key = object_key_for(event(timestamp=stamp, bankId=bank, eventId=event_id))
    day = f"{moment.year:04d}/{moment.month:02d}/{moment.day:02d}"
    folder = "" if bank == "default" else f"banks/{bank}/"
    assert key == f"events/{day}/{folder}{event_id}.json"
    assert validate_event(event(timestamp=stamp).to_wire()).timestamp == moment
