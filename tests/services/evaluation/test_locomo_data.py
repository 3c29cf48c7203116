"""Reading LoCoMo's format: session dates, turns as memories, evidence ids, bad files."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from cogsub.core.errors import InvalidInputError
from cogsub.core.events import MAX_ID_LENGTH
from cogsub.evaluation.locomo_data import (
    evidence_ids,
    load_locomo,
    memory_id_for,
    parse_session_time,
    safe_id,
)
from tests.services.evaluation import synthetic


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        ("10:37 am on 27 June, 2023", datetime(2023, 6, 27, 10, 37, tzinfo=UTC)),
        ("12:09 am on 1 Jan 2024", datetime(2024, 1, 1, 0, 9, tzinfo=UTC)),
        ("12:30 pm on 13 Sept, 2023", datetime(2023, 9, 13, 12, 30, tzinfo=UTC)),
        ("2023-05-08T13:56:00", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
    ],
)
def test_session_times(text: str, expected: datetime) -> None:
    assert parse_session_time(text) == expected


def test_unreadable_session_times_raise() -> None:
    with pytest.raises(ValueError):
        parse_session_time("teatime")
    with pytest.raises(ValueError):
        parse_session_time("1:56 pm on 8 Smarch, 2023")


def test_turns_become_timed_memories_in_order(tmp_path: Path) -> None:
    (conversation,) = load_locomo(synthetic.write(tmp_path / "f.json"))
    assert conversation.sample_id == "conv-a" and conversation.speakers == ("Alice", "Bob")
    assert [t.dia_id for t in conversation.turns][:2] == ["D1:1", "D1:2"]
    assert len(conversation.turns) == 8
    first, second = conversation.turns[0], conversation.turns[1]
    assert first.timestamp == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert second.timestamp - first.timestamp == timedelta(seconds=1)
    assert first.content == "Alice: Hi Bob! How was your weekend?"
    heron = conversation.turns[-1]
    assert heron.content == "Bob: Yes, and a heron! [shared a photo of a grey heron on a rock]"
    assert conversation.session_id(heron) == "conv-a:session_2"
    assert conversation.questions[2].evidence == ("D2:2", "D2:3")
    assert [q.category for q in conversation.questions] == [4, 1, 1, 2, 5, 4]


def test_evidence_ids_split_joined_strings_and_drop_junk() -> None:
    assert evidence_ids(["D8:6; D9:17", "D1:3", "D1:3"]) == ("D8:6", "D9:17", "D1:3")
    assert evidence_ids("D1:1,D1:2") == ("D1:1", "D1:2")
    assert evidence_ids(None) == () and evidence_ids([3, None]) == ()


def test_memory_ids_are_safe_ids() -> None:
    assert memory_id_for("conv-26", "D1:3") == "conv-26.D1:3"
    assert safe_id("a b/c..d") == "a_b_c_d"
    assert safe_id("-x") == "_-x"
    assert len(safe_id("x" * 500)) == MAX_ID_LENGTH


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("not json", "not JSON"),
        (json.dumps([{"sample_id": "x"}]), "conversation"),
        (json.dumps([{"conversation": {"session_1": []}}]), "missing session date"),
        (
            json.dumps(
                [{"conversation": {"session_1": [{}], "session_1_date_time": "2023-01-01"}}]
            ),
            "turn without dia_id",
        ),
    ],
)
def test_files_not_in_the_format_are_refused(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(InvalidInputError, match=problem):
        load_locomo(path)
