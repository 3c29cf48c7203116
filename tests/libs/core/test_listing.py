"""Listing cursors and filters (pure): what a page hands out is what the next one resumes from."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from cogsub.core.errors import InvalidInputError
from cogsub.core.listing import (
    MAX_PAGE_LIMIT,
    ListingKey,
    MemoryListFilters,
    decode_bank_cursor,
    decode_cursor,
    encode_bank_cursor,
    encode_cursor,
)

texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=60)


@given(moment=st.datetimes(timezones=st.timezones()), event_id=texts.filter(bool))
def test_a_memory_cursor_names_the_key_it_was_made_from(moment: datetime, event_id: str) -> None:
    timestamp = moment.isoformat()
    cursor = encode_cursor(ListingKey(timestamp, event_id))
    assert decode_cursor(cursor) == ListingKey(timestamp, event_id)
    assert cursor.isascii() and "=" not in cursor and "/" not in cursor and "+" not in cursor


@given(bank_id=texts.filter(bool))
def test_a_bank_cursor_names_the_bank_it_was_made_from(bank_id: str) -> None:
    assert decode_bank_cursor(encode_bank_cursor(bank_id)) == bank_id


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "@@",
        "not-a-cursor",
        encode_bank_cursor("x"),
        encode_cursor(ListingKey("2026-01-01T00:00:00Z", "a"))[:-3],
        encode_cursor(ListingKey("garbage", "a")),  # forged: well formed, but no time
        encode_cursor(ListingKey("2026-01-01T00:00:00", "a")),  # no timezone
    ],
)
def test_a_cursor_no_page_handed_out_is_refused_naming_the_field(cursor: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        decode_cursor(cursor)
    assert [p.field for p in refused.value.problems] == ["cursor"]


def test_an_empty_bank_cursor_is_refused() -> None:
    with pytest.raises(InvalidInputError) as refused:
        decode_bank_cursor("", field="after")
    assert [p.field for p in refused.value.problems] == ["after"]


def test_keys_order_newest_last_by_time_then_id() -> None:
    keys = [
        ListingKey("2026-01-02", "a"),
        ListingKey("2026-01-01", "z"),
        ListingKey("2026-01-02", "b"),
    ]
    assert sorted(keys, reverse=True) == [keys[2], keys[0], keys[1]]


def test_filters_bound_the_limit_and_need_zoned_times() -> None:
    assert MemoryListFilters().limit == 50
    for fields in ({"limit": 0}, {"limit": MAX_PAGE_LIMIT + 1}, {"since": "2026-01-01T00:00:00"}):
        with pytest.raises(ValidationError):
            MemoryListFilters.model_validate(fields)
