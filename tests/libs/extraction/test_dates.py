"""resolve_dates / annotate_dates: every rule of the dates module, pinned by a table."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogsub.extraction.dates import annotate_dates, format_day, resolve_dates

# Monday 8 May 2023, 13:56 UTC (LoCoMo's first session).
MONDAY = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
WEDNESDAY = datetime(2023, 5, 10, 9, 0, tzinfo=UTC)


def at(year: int, month: int, day: int) -> datetime:
    return datetime(year, month, day, 12, 0, tzinfo=UTC)


def first_day(text: str, when: datetime = MONDAY) -> date | None:
    mentions = resolve_dates(text, when)
    return mentions[0].day if mentions else None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I went yesterday", date(2023, 5, 7)),
        ("Yesterday was long", date(2023, 5, 7)),
        ("I am busy today", date(2023, 5, 8)),
        ("the gig is tonight", date(2023, 5, 8)),
        ("I ran this morning", date(2023, 5, 8)),
        ("we met this afternoon", date(2023, 5, 8)),
        ("dinner this evening", date(2023, 5, 8)),
        ("I slept badly last night", date(2023, 5, 7)),
        ("see you tomorrow", date(2023, 5, 9)),
        ("3 days ago", date(2023, 5, 5)),
        ("three days ago", date(2023, 5, 5)),
        ("a day ago", date(2023, 5, 7)),
        ("ten days ago", date(2023, 4, 28)),
        ("one week ago", date(2023, 5, 1)),
        ("2 weeks ago", date(2023, 4, 24)),
        ("two weeks ago", date(2023, 4, 24)),
        ("a month ago", date(2023, 4, 8)),
        ("an hour ago and two years ago", date(2021, 5, 8)),
        ("last week", date(2023, 5, 1)),
        ("next week", date(2023, 5, 15)),
        ("last month", date(2023, 4, 8)),
        ("next month", date(2023, 6, 8)),
        ("last year", date(2022, 5, 8)),
        ("next year", date(2024, 5, 8)),
        ("LAST WEEK", date(2023, 5, 1)),
        ("last weekend", date(2023, 5, 6)),
        # Weekdays, event on a Monday.
        ("last Friday", date(2023, 5, 5)),
        ("last Sunday", date(2023, 5, 7)),
        ("last Monday", date(2023, 5, 1)),  # strictly before the event day
        ("this Monday", date(2023, 5, 8)),
        ("this Friday", date(2023, 5, 12)),
        ("next Monday", date(2023, 5, 15)),
        ("next Friday", date(2023, 5, 19)),
        ("I deployed on Friday", date(2023, 5, 5)),
        ("I deployed on Monday", date(2023, 5, 8)),  # on or before: the event day itself
        ("I will deploy on Friday", date(2023, 5, 12)),
        ("I'll call on Monday", date(2023, 5, 8)),
        ("we're going to meet on Sunday", date(2023, 5, 14)),
        # Absolute dates.
        ("7 May 2023", date(2023, 5, 7)),
        ("on 7 May, 2023", date(2023, 5, 7)),
        ("May 7, 2023", date(2023, 5, 7)),
        ("May 7th, 2023", date(2023, 5, 7)),
        ("May 7th", date(2023, 5, 7)),
        ("the 7th of May", date(2023, 5, 7)),
        ("2023-05-07", date(2023, 5, 7)),
        ("Sept 3", date(2023, 9, 3)),
        ("Jan. 2, 2024", date(2024, 1, 2)),
        ("on December 25", date(2023, 12, 25)),
        ("1 March 1999", date(1999, 3, 1)),
    ],
)
def test_resolves_against_a_monday_event(text: str, expected: date) -> None:
    assert first_day(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("last Monday", date(2023, 5, 8)),
        ("last Wednesday", date(2023, 5, 3)),
        ("last Thursday", date(2023, 5, 4)),
        ("this Monday", date(2023, 5, 8)),
        ("this Sunday", date(2023, 5, 14)),
        ("next Tuesday", date(2023, 5, 16)),
        ("on Tuesday", date(2023, 5, 9)),
        ("on Wednesday", date(2023, 5, 10)),
        ("on Thursday", date(2023, 5, 4)),
        ("I will be there on Thursday", date(2023, 5, 11)),
        ("last weekend", date(2023, 5, 6)),
    ],
)
def test_weekdays_against_a_wednesday_event(text: str, expected: date) -> None:
    assert first_day(text, WEDNESDAY) == expected


@pytest.mark.parametrize(
    ("when", "text", "expected"),
    [
        (at(2023, 3, 31), "last month", date(2023, 2, 28)),
        (at(2024, 3, 31), "last month", date(2024, 2, 29)),
        (at(2023, 1, 31), "next month", date(2023, 2, 28)),
        (at(2023, 5, 31), "next month", date(2023, 6, 30)),
        (at(2023, 1, 15), "last month", date(2022, 12, 15)),
        (at(2023, 12, 31), "next month", date(2024, 1, 31)),
        (at(2023, 5, 31), "3 months ago", date(2023, 2, 28)),
        (at(2024, 2, 29), "last year", date(2023, 2, 28)),
        (at(2024, 2, 29), "next year", date(2025, 2, 28)),
        (at(2024, 2, 29), "four years ago", date(2020, 2, 29)),
        (at(2023, 1, 1), "yesterday", date(2022, 12, 31)),
        (at(2023, 1, 2), "last week", date(2022, 12, 26)),
        (at(2023, 5, 7), "last weekend", date(2023, 4, 29)),  # on a Sunday: the one before
        (at(2024, 12, 30), "on March 1", date(2024, 3, 1)),  # no year: the event's year
    ],
)
def test_month_and_year_arithmetic_clamps(when: datetime, text: str, expected: date) -> None:
    assert first_day(text, when) == expected


@pytest.mark.parametrize(
    "text",
    [
        "30 February 2023",
        "2023-02-30",
        "2023-13-01",
        "it may 5x the cost",
        "we march 3 miles",
        "120230-05-07",
        "May 2023",
        "a few days ago",
        "someday",
        "Fridays are quiet",
        "",
    ],
)
def test_names_no_day(text: str) -> None:
    assert resolve_dates(text, MONDAY) == ()


def test_uses_the_event_s_own_local_date() -> None:
    # 00:30 in Berlin on 8 May is still 7 May in UTC: "yesterday" is 7 May, not 6 May.
    berlin = datetime(2023, 5, 8, 0, 30, tzinfo=timezone(timedelta(hours=2)))
    assert first_day("yesterday", berlin) == date(2023, 5, 7)
    assert first_day("yesterday", berlin.astimezone(UTC)) == date(2023, 5, 6)


def test_mentions_in_order_with_positions() -> None:
    text = "I met Jane yesterday and will see her on 12 May 2023, then tomorrow"
    mentions = resolve_dates(text, MONDAY)
    assert [(m.phrase, m.day, m.relative) for m in mentions] == [
        ("yesterday", date(2023, 5, 7), True),
        ("12 May 2023", date(2023, 5, 12), False),
        ("tomorrow", date(2023, 5, 9), True),
    ]
    assert all(text[m.start : m.end] == m.phrase for m in mentions)


def test_longest_phrase_wins_an_overlap() -> None:
    (mention,) = resolve_dates("on May 7th, 2023 we shipped", MONDAY)
    assert mention.phrase == "May 7th, 2023"


def test_arithmetic_past_the_calendar_is_skipped() -> None:
    assert resolve_dates("yesterday", datetime(1, 1, 1, tzinfo=UTC)) == ()
    assert resolve_dates("tomorrow and next year", datetime(9999, 12, 31, tzinfo=UTC)) == ()


def test_format_day() -> None:
    assert format_day(date(2023, 5, 7)) == "7 May 2023"
    assert format_day(date(2024, 12, 25)) == "25 December 2024"


def test_annotate_spells_out_relative_dates_only() -> None:
    text = "Caroline went yesterday and again on 7 May 2023"
    annotated = annotate_dates(text, resolve_dates(text, MONDAY))
    assert annotated == "Caroline went yesterday (7 May 2023) and again on 7 May 2023"


def test_annotate_is_idempotent() -> None:
    once = annotate_dates("went yesterday", resolve_dates("went yesterday", MONDAY))
    twice = annotate_dates(once, resolve_dates(once, MONDAY))
    assert once == twice == "went yesterday (7 May 2023)"


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(max_size=200)
    | st.lists(
        st.sampled_from(
            [
                "yesterday",
                "last",
                "next",
                "Friday",
                "May",
                "7th",
                "2023",
                "ago",
                "3",
                "days",
                "on",
                "this",
                "week",
                "month",
                "year",
                "weekend",
                "-",
                ",",
                "2023-05-07",
                "of",
            ]
        ),
        max_size=12,
    ).map(" ".join),
    when=st.datetimes(timezones=st.timezones()),
)
def test_never_raises_and_mentions_do_not_overlap(text: str, when: datetime) -> None:
    mentions = resolve_dates(text, when)
    assert mentions == resolve_dates(text, when)
    ends = -1
    for mention in mentions:
        assert mention.start >= ends
        assert text[mention.start : mention.end] == mention.phrase
        ends = mention.end
    annotate_dates(text, mentions)


# Phrases each rule matches (so a wrong cue shows), and words found around them.
_PHRASES = [
    "2023-05-07",
    "7 May 2023",
    "7th of Sept., 2023",
    "May 7, 2023",
    "31 March",
    "Dec 3rd",
    "today",
    "Tonight",
    "this evening",
    "Yesterday",
    "last night",
    "tomorrow",
    "a week ago",
    "3 days ago",
    "two Weeks ago",
    "last weekend",
    "next month",
    "last year",
    "this Sunday",
    "next tuesday",
    "Last Saturday",
    "on Wednesday",
    "on thursday",
    "this Monday",
    "next Friday",
]
_DATE_WORDS = st.sampled_from(
    [
        *_PHRASES,
        "yesterday",
        "LAST",
        "night",
        "next",
        "this",
        "Friday",
        "mondays",
        "on",
        "May",
        "may",
        "Sept",
        "7th",
        "2023",
        "ago",
        "three",
        "days",
        "week",
        "weekend",
        "of",
        ",",
        "-",
        "will",
        "x",
    ]
)


@pytest.mark.parametrize("phrase", _PHRASES)
def test_every_rule_is_tried_where_its_phrase_is(phrase: str) -> None:
    text = f"We talked {phrase} about it"
    found = resolve_dates(text, WEDNESDAY)
    assert [m.phrase for m in found] == [phrase]
    assert found == resolve_dates(f"{text} \u00e9", WEDNESDAY)


@settings(max_examples=300, deadline=None)
@given(
    # ASCII words: a text that is not ASCII is scanned by every rule either way.
    words=st.lists(
        _DATE_WORDS | st.text(alphabet=st.characters(max_codepoint=127), max_size=6),
        max_size=14,
    ),
    joiner=st.sampled_from([" ", "  ", "-", ", ", "\n"]),
    when=st.datetimes(timezones=st.timezones()),
)
def test_rules_skipped_for_a_text_without_their_cues_would_not_have_matched(
    words: list[str], joiner: str, when: datetime
) -> None:
    # An ASCII text is only scanned by the rules whose cues it holds; any other text by
    # every rule. A non-ASCII word appended after a space changes no mention before it,
    # so the two readings of one text must agree.
    text = joiner.join(words)
    every_rule = resolve_dates(f"{text} \u00e9", when)
    assert resolve_dates(text, when) == every_rule


@pytest.mark.parametrize("text", ["todays plan", "xtonight we go", "Mathis evening", "tonights"])
def test_a_phrase_inside_a_longer_word_is_not_a_date(text: str) -> None:
    # Every alternative of a rule is bounded, not only its first and last.
    assert resolve_dates(text, WEDNESDAY) == ()
