"""OfflineExtractor end to end: perspective, speakers, dates in the text, determinism."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogsub.core.events import EventType, FactType
from cogsub.extraction import (
    EXTRACTED_TYPES,
    ExtractedFact,
    ExtractionInput,
    FactExtractor,
    OfflineExtractor,
    extract_facts,
    states_facts,
)
from cogsub.extraction.offline import MAX_FACT_LENGTH

MONDAY = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def item(
    text: str,
    *,
    event_type: EventType = EventType.USER_INPUT,
    speaker: str | None = None,
    when: datetime = MONDAY,
) -> ExtractionInput:
    return ExtractionInput("evt-1", text, when, event_type, speaker)


def texts(facts: list[ExtractedFact]) -> list[str]:
    return [fact.text for fact in facts]


async def test_a_locomo_turn_becomes_a_dated_world_fact() -> None:
    extractor = OfflineExtractor()
    facts = await extractor.extract(
        item("Caroline: I went to a LGBTQ support group yesterday and it was so powerful.")
    )
    assert facts == [
        ExtractedFact(
            text=(
                "Caroline went to a LGBTQ support group yesterday (7 May 2023) "
                "and it was so powerful."
            ),
            fact_type=FactType.WORLD,
            occurred_on=date(2023, 5, 7),
            entities=("Caroline", "LGBTQ"),
        )
    ]


async def test_is_a_fact_extractor() -> None:
    extractor: FactExtractor = OfflineExtractor()
    assert extractor.name == "offline"
    await extractor.close()


@pytest.mark.parametrize(
    ("speaker", "expected"),
    [
        ("Caroline", "Caroline moved to Berlin."),
        (None, "The user moved to Berlin."),
        ("  ", "The user moved to Berlin."),
        ("user", "The user moved to Berlin."),
    ],
)
def test_the_speaker_replaces_i(speaker: str | None, expected: str) -> None:
    (fact,) = extract_facts(item("I moved to Berlin.", speaker=speaker))
    assert fact.text == expected
    assert fact.fact_type is FactType.WORLD


def test_possessive_of_the_speaker() -> None:
    facts = extract_facts(item("Caroline: My sister lives in Paris with my two cats."))
    assert texts(facts) == ["Caroline's sister lives in Paris with Caroline's two cats."]
    assert facts[0].entities == ("Caroline", "Paris")


def test_the_inserted_name_is_its_own_entity() -> None:
    (fact,) = extract_facts(item("Jon: Gives me a visual of my progress at Acme Corp."))
    assert fact.text == "Gives Jon a visual of Jon's progress at Acme Corp."
    assert fact.entities == ("Gives", "Jon", "Acme Corp")


def test_a_prefix_wins_over_the_item_speaker() -> None:
    (fact,) = extract_facts(item("Melanie: I painted a lake sunrise.", speaker="u-42"))
    assert fact.text == "Melanie painted a lake sunrise."


def test_agent_first_person_is_experience_kept_first_person() -> None:
    facts = extract_facts(
        item(
            "I deployed billing on Friday and rolled back once. The billing service runs on "
            "Kubernetes.",
            event_type=EventType.AGENT_ACTION,
            speaker="agent-7",
        )
    )
    assert facts == [
        ExtractedFact(
            "I deployed billing on Friday (5 May 2023) and rolled back once.",
            FactType.EXPERIENCE,
            date(2023, 5, 5),
            (),
        ),
        ExtractedFact(
            "The billing service runs on Kubernetes.", FactType.WORLD, None, ("Kubernetes",)
        ),
    ]


def test_a_transcript_splits_perspective_by_turn() -> None:
    transcript = "\n".join(
        [
            "User: I own the billing service.",
            "Assistant: I restarted the billing pods this morning.",
            "Jane: My team ships on Fridays.",
            "I also run the on-call rota.",
        ]
    )
    facts = extract_facts(item(transcript))
    assert [(f.fact_type, f.text) for f in facts] == [
        (FactType.WORLD, "The user owns the billing service."),
        (FactType.EXPERIENCE, "I restarted the billing pods this morning (8 May 2023)."),
        (FactType.WORLD, "Jane's team ships on Fridays."),
        (FactType.WORLD, "Jane also runs the on-call rota."),
    ]


def test_someone_quoted_in_an_agent_event_is_not_the_agent() -> None:
    facts = extract_facts(
        item(
            "Caroline: I adopted a dog last week.\nagent-7: I booked the vet for her dog.",
            event_type=EventType.AGENT_ACTION,
            speaker="agent-7",
        )
    )
    assert [(f.fact_type, f.text, f.occurred_on) for f in facts] == [
        (FactType.WORLD, "Caroline adopted a dog last week (1 May 2023).", date(2023, 5, 1)),
        (FactType.EXPERIENCE, "I booked the vet for her dog.", None),
    ]


def test_a_user_event_is_never_experience() -> None:
    facts = extract_facts(item("I deployed billing and rolled back once.", speaker="Jane"))
    assert [f.fact_type for f in facts] == [FactType.WORLD]
    assert facts[0].text == "Jane deployed billing and rolled back once."


def test_greetings_questions_and_reactions_give_nothing() -> None:
    text = (
        "Caroline: Hey Mel! Good to see you! How have you been? Thanks so much. lol. "
        "Wow, that's great!"
    )
    assert extract_facts(item(text)) == []
    assert extract_facts(item("")) == []


def test_interjections_are_stripped_and_clauses_split() -> None:
    facts = extract_facts(
        item(
            "Melanie: Yeah, I painted that lake sunrise last year! Jane owns the billing "
            "service, and Bob runs the payments team. Do you paint?"
        )
    )
    assert [(f.text, f.occurred_on) for f in facts] == [
        ("Melanie painted that lake sunrise last year (8 May 2022).", date(2022, 5, 8)),
        ("Jane owns the billing service.", None),
        ("Bob runs the payments team.", None),
    ]


def test_absolute_dates_are_not_repeated_in_the_text() -> None:
    (fact,) = extract_facts(item("Jane joined Acme on 3 March 2021."))
    assert fact.text == "Jane joined Acme on 3 March 2021."
    assert fact.occurred_on == date(2021, 3, 3)
    assert fact.entities == ("Jane", "Acme")


def test_the_first_date_of_a_clause_is_its_day() -> None:
    (fact,) = extract_facts(item("I booked flights yesterday for the trip on 20 May 2023."))
    assert fact.occurred_on == date(2023, 5, 7)


def test_repeated_sentences_give_one_fact() -> None:
    facts = extract_facts(
        item("Jane owns billing now. Jane owns billing now!\nJane owns billing now.")
    )
    assert texts(facts) == ["Jane owns billing now."]


def test_long_clauses_are_cut_at_a_word() -> None:
    (fact,) = extract_facts(item("Jane owns " + "billing " * 600))
    assert len(fact.text) <= MAX_FACT_LENGTH
    assert fact.text.endswith("billing.")


async def test_a_long_text_gives_the_same_facts_off_the_loop() -> None:
    lines = [f"Caroline: I visited museum number {i} yesterday." for i in range(200)]
    source = item("\n".join(lines))
    assert len(source.text) > 4096
    facts = await OfflineExtractor().extract(source)
    assert facts == extract_facts(source)
    assert len(facts) == 200
    assert facts[7].text == "Caroline visited museum number 7 yesterday (7 May 2023)."


def test_curly_apostrophes_read_like_straight_ones() -> None:
    (fact,) = extract_facts(item("I\u2019m moving to Lisbon next month.", speaker="Caroline"))
    assert fact.text == "Caroline is moving to Lisbon next month (8 June 2023)."


_VOCABULARY = [
    "I",
    "I'm",
    "my",
    "me",
    "we",
    "Caroline:",
    "Assistant:",
    "went",
    "to",
    "Berlin",
    "yesterday",
    "last",
    "Friday",
    "on",
    "Monday",
    "3",
    "days",
    "ago",
    "May",
    "7th",
    ",",
    "and",
    ", and",
    ", but",
    ";",
    " - ",
    ".",
    "!",
    "?",
    "\n",
    "Hi!",
    "Thanks",
    "lol",
    "wow",
    "p99",
    "@jdoe",
    "a@b.io",
    "v1.2.3",
    "the",
    "billing",
    "service",
    "owns",
    "Jane",
    "next",
    "month",
    "'",
]


@settings(max_examples=150, deadline=None)
@given(
    text=st.text(max_size=300) | st.lists(st.sampled_from(_VOCABULARY), max_size=40).map(" ".join),
    speaker=st.none() | st.text(max_size=20),
    event_type=st.sampled_from(list(EventType)),
    when=st.datetimes(timezones=st.timezones()),
)
def test_never_raises_and_is_deterministic(
    text: str, speaker: str | None, event_type: EventType, when: datetime
) -> None:
    source = ExtractionInput("evt-h", text, when, event_type, speaker)
    first = asyncio.run(OfflineExtractor().extract(source))
    assert first == extract_facts(source)
    assert states_facts(source) is bool(first)  # the cheap check extraction's gate uses
    for fact in first:
        assert 1 < len(fact.text) <= MAX_FACT_LENGTH
        assert fact.text.endswith(".")
        assert fact.fact_type in EXTRACTED_TYPES
        assert all(isinstance(entity, str) and entity for entity in fact.entities)
        assert len(set(fact.entities)) == len(fact.entities)
    assert len({fact.text.casefold() for fact in first}) == len(first)
