"""Query cues: names, temporal intent, dates; and the matching cues of memory texts."""

from __future__ import annotations

from datetime import date

import pytest

from cogsub.recall.query import (
    DateSpan,
    analyse_query,
    asks_when,
    dates_in,
    facets,
    has_time_expression,
    query_names,
    speaker_of,
    subjects,
    without_names,
)


def test_names_are_capitalised_words_without_question_words_or_possessives() -> None:
    assert query_names("What did Caroline research?") == {"caroline"}
    assert query_names("How do Jon and Gina both like to destress?") == {"jon", "gina"}
    assert query_names("What is Melanie's favourite book?") == {"melanie"}
    assert query_names("When did I meet them in May?") == frozenset()
    assert query_names("what did caroline research") == frozenset()  # no capitals, no names


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What does Melanie think about Caroline's decision?", ("melanie",)),
        ("What does Jon tell Gina he won't do?", ("jon", "gina")),
        ("What was Melanie's reaction?", ()),
        ("Did Jon and Gina both dance?", ()),  # both are subjects: none is chosen
        ("What book did Caroline recommend to Melanie?", ("caroline", "melanie")),
        ("what did caroline say", ()),
    ],
)
def test_subjects_are_names_in_order_without_possessives_or_joined_names(
    query: str, expected: tuple[str, ...]
) -> None:
    assert subjects(query) == expected


@pytest.mark.parametrize(
    ("query", "temporal"),
    [
        ("When did Caroline go to the support group?", True),
        ("What year did Melanie start painting?", True),
        ("How long ago was Caroline's birthday?", True),
        ("Since when has Jon danced?", True),
        ("How long has Gina had her store?", True),
        ("What did Caroline research?", False),
        ("How long is the river?", False),
    ],
)
def test_temporal_intent(query: str, temporal: bool) -> None:
    assert analyse_query(query).temporal is temporal
    assert asks_when(query) is temporal


def test_dates_of_every_common_shape_in_order_without_repeats() -> None:
    text = "on 1 February, 2023 and October 13, 2023, then in May 2023, 2024-02-29 and 1 Feb 2023"
    assert dates_in(text) == (
        DateSpan(2023, 2, 1),
        DateSpan(2023, 10, 13),
        DateSpan(2023, 5),
        DateSpan(2024, 2, 29),
    )


def test_impossible_days_fall_back_to_their_month_and_bare_years_are_ignored() -> None:
    assert dates_in("30 February, 2023") == (DateSpan(2023, 2),)
    assert dates_in("2023-13-01") == ()
    assert dates_in("back in 2019") == ()


def test_a_day_span_contains_only_its_day_and_a_month_span_its_month() -> None:
    day, month = DateSpan(2023, 5, 8), DateSpan(2023, 5)
    assert day.contains(date(2023, 5, 8)) and not day.contains(date(2023, 5, 9))
    assert month.contains(date(2023, 5, 31)) and not month.contains(date(2022, 5, 8))


def test_a_month_without_a_year_or_a_season_is_those_months_of_any_year() -> None:
    assert dates_in("When did Melanie go camping in June?") == (DateSpan(None, 6),)
    assert dates_in("a parade during the summer") == tuple(DateSpan(None, m) for m in (6, 7, 8))
    assert dates_in("over the month of July") == (DateSpan(None, 7),)
    # A month that has its year is read once, as that month of that year.
    assert dates_in("in May 2023") == (DateSpan(2023, 5),)
    assert dates_in("June was great") == ()  # no "in" / "during": not asked as a time
    june = DateSpan(None, 6)
    assert june.contains(date(2021, 6, 30)) and june.contains(date(2023, 6, 1))
    assert not june.contains(date(2023, 7, 1))


def test_a_question_about_several_people_has_one_facet_per_person() -> None:
    assert facets("Did Jon and Gina both dance?") == ("Did Jon both dance?", "Did Gina both dance?")
    assert facets("Did Jon, Gina & Bob dance?") == (
        "Did Jon dance?",
        "Did Gina dance?",
        "Did Bob dance?",
    )
    assert facets("What have Melanie and her kids made?") == ()  # one person
    assert facets("What did Caroline and Caroline say?") == ()
    assert facets("What did When and How say?") == ()  # question words are never names


def test_speaker_is_the_name_before_the_colon_of_a_transcript_line() -> None:
    assert speaker_of("Caroline: I went to a support group.") == "caroline"
    assert speaker_of("Mary Ann Lee: hello") == "mary ann lee"
    assert speaker_of("note: lower-case labels are not speakers") is None
    assert speaker_of("Deploy at 10:30 today") is None
    assert speaker_of("no speaker here") is None


@pytest.mark.parametrize(
    ("text", "says_when"),
    [
        ("Caroline: I went to a support group yesterday.", True),
        ("Jon: Last Friday was wild.", True),
        ("Gina: Back in 2019 I started.", True),
        ("Mel: We met on 8 May at noon.", True),
        ("Mel: May 2023 was busy.", True),
        ("Mel: You may like it.", False),  # the verb, not the month
        ("Friday: it was great", False),  # the speaker's name does not count
        ("Caroline: The support group was powerful.", False),
    ],
)
def test_time_expressions(text: str, says_when: bool) -> None:
    assert has_time_expression(text) is says_when


def test_names_and_possessives_leave_the_query_that_is_embedded() -> None:
    assert without_names("What instruments does Melanie play?") == "What instruments does play?"
    assert without_names("What is Caroline's identity?") == "What is identity?"
    assert without_names("How do Jon and Gina both like to destress?") == (
        "How do both like to destress?"
    )
    assert without_names("What did Jon, Gina & Jean do?") == "What did do?"
    assert without_names("Did Jon or Gina go?") == "Did go?"
    # only names are joined away: an "and" between other words stays
    assert without_names("Did Jon paint and draw?") == "Did paint and draw?"


def test_a_query_without_names_or_with_nothing_else_is_kept_whole() -> None:
    assert without_names("When did I meet them in May?") == "When did I meet them in May?"
    assert without_names("what did caroline research") == "what did caroline research"
    assert without_names("Melanie?") == "Melanie?"
