"""The pure text rules of the offline extractor: segments, filters, perspective, entities."""

from __future__ import annotations

import pytest

from cogsub.extraction.clauses import (
    content_word_count,
    find_entities,
    has_first_person,
    is_question,
    is_statement,
    rewrite_first_person,
    split_clauses,
    split_sentences,
    split_speaker,
    strip_interjections,
)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("Caroline: I went to a support group.", ("Caroline", "I went to a support group.")),
        ("Jane Doe: I own billing", ("Jane Doe", "I own billing")),
        ("Dr. Jane Smith: rest well", ("Dr. Jane Smith", "rest well")),
        ("assistant: I restarted the pod", ("assistant", "I restarted the pod")),
        ("  Mel:   hi there", ("Mel", "hi there")),
        ("agent-7: I booked it", ("agent-7", "I booked it")),
        ("u_42: I moved", ("u_42", "I moved")),
        ("reason: I chose gRPC", (None, "reason: I chose gRPC")),
        ("Note: the deploy failed", (None, "Note: the deploy failed")),
        ("Update: billing is down", (None, "Update: billing is down")),
        ("10:30 standup moved", (None, "10:30 standup moved")),
        ("see https://example.org for more", (None, "see https://example.org for more")),
        ("Caroline:no space after colon", (None, "Caroline:no space after colon")),
        ("The plan is simple: ship it", (None, "The plan is simple: ship it")),
    ],
)
def test_split_speaker(line: str, expected: tuple[str | None, str]) -> None:
    assert split_speaker(line) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I moved. I like it! Do you?", ["I moved.", "I like it!", "Do you?"]),
        ("Dr. Smith owns billing. He left.", ["Dr. Smith owns billing.", "He left."]),
        ("J. R. R. Tolkien wrote it. True.", ["J. R. R. Tolkien wrote it.", "True."]),
        ("We bought apples e.g. Fuji. Then left.", ["We bought apples e.g. Fuji.", "Then left."]),
        ("Version 3.11 shipped. Good.", ["Version 3.11 shipped.", "Good."]),
        ("wait... it works", ["wait... it works"]),
        ('He said "done." Then he left.', ['He said "done."', "Then he left."]),
        ("First line\nSecond line", ["First line", "Second line"]),
        ("  \n\n  ", []),
        ("No terminal punctuation", ["No terminal punctuation"]),
    ],
)
def test_split_sentences(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        (
            "I moved to Berlin last year; my sister still lives in Paris",
            ["I moved to Berlin last year", "my sister still lives in Paris"],
        ),
        (
            "Jane owns the billing service, and Bob runs the payments team",
            ["Jane owns the billing service", "Bob runs the payments team"],
        ),
        (
            "I wanted to deploy billing today, but the deploy pipeline was broken",
            ["I wanted to deploy billing today", "the deploy pipeline was broken"],
        ),
        (
            "I ran a charity race for mental health \u2013 my whole family cheered me on",
            ["I ran a charity race for mental health", "my whole family cheered me on"],
        ),
        # Not full clauses on both sides: kept whole.
        (
            "I went home, and then slept for ten hours",
            ["I went home, and then slept for ten hours"],
        ),
        ("I bought apples, pears, and grapes", ["I bought apples, pears, and grapes"]),
        (
            "I went to the support group, and it was great",
            ["I went to the support group, and it was great"],
        ),
        ("cats; dogs", ["cats; dogs"]),
        (
            "Jane owns billing, and Bob runs payments; Alice leads the search team",
            ["Jane owns billing", "Bob runs payments", "Alice leads the search team"],
        ),
    ],
)
def test_split_clauses_is_conservative(sentence: str, expected: list[str]) -> None:
    assert split_clauses(sentence) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Hi!",
        "Hey Mel!",
        "Thanks so much",
        "Thank you!",
        "lol",
        "Wow, that's great!",
        "Good to see you!",
        "That's really cool.",
        "So cool, love it, amazing!",
        "ok",
        "Totally agree, Mel.",
        "Talk to you soon!",
        "Where do you live?",
        "You moved to Berlin?",
        "It was fun",
        "",
        "   ",
    ],
)
def test_non_facts_are_not_statements(text: str) -> None:
    assert not is_statement(text)


@pytest.mark.parametrize(
    "text",
    [
        "I love hiking",
        "Jane owns the billing service",
        "Acme HQ is in Berlin",
        "I deployed billing on Friday",
        "Thanks to Bob, the billing migration finished early",
    ],
)
def test_facts_are_statements(text: str) -> None:
    assert is_statement(text)


def test_questions() -> None:
    assert is_question("Did you go?")
    assert is_question('He asked "why?"')
    assert not is_question("I asked why.")


def test_content_words_count_the_speaker() -> None:
    assert content_word_count("I love hiking") == 3
    assert content_word_count("it was so very much the") == 0
    assert content_word_count("Wow, thanks, lol") == 0


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        ("Yeah, I painted that lake", "I painted that lake"),
        ("Wow, Caroline! That's awesome", "That's awesome"),
        ("Hey Caroline, since we last chatted, I moved", "since we last chatted, I moved"),
        ("Thanks so much, I needed that", "I needed that"),
        ("Well, okay, I left early", "I left early"),
        ("Wowza is my cat", "Wowza is my cat"),
        ("I said hey, then left", "I said hey, then left"),
    ],
)
def test_strip_interjections(sentence: str, expected: str) -> None:
    assert strip_interjections(sentence) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I moved to Berlin", "Caroline moved to Berlin"),
        ("my sister lives in Paris", "Caroline's sister lives in Paris"),
        ("My sister lives in Paris", "Caroline's sister lives in Paris"),
        ("I'm keen on counseling", "Caroline is keen on counseling"),
        ("I am keen on counseling", "Caroline is keen on counseling"),
        ("I've adopted a dog", "Caroline has adopted a dog"),
        ("I have two dogs", "Caroline has two dogs"),
        ("I was so happy", "Caroline was so happy"),
        ("I'll go to Rome", "Caroline will go to Rome"),
        ("I'd love to support them", "Caroline would love to support them"),
        ("I'd been there before", "Caroline had been there before"),
        ("I love painting", "Caroline loves painting"),
        ("I really love painting", "Caroline really loves painting"),
        ("I watch movies", "Caroline watches movies"),
        ("I study law", "Caroline studies law"),
        ("I play violin", "Caroline plays violin"),
        ("I do yoga", "Caroline does yoga"),
        ("I don't eat meat", "Caroline doesn't eat meat"),
        ("I haven't decided", "Caroline hasn't decided"),
        ("I went home and I ran", "Caroline went home and Caroline ran"),
        ("I decided to move", "Caroline decided to move"),
        ("I can swim", "Caroline can swim"),
        ("they gave me a medal", "they gave Caroline a medal"),
        ("I did it myself", "Caroline did it themself"),
        ("i moved to Lisbon", "Caroline moved to Lisbon"),
        ("some me-time each day", "some me-time each day"),
        ("I, too, left", "Caroline, too, left"),
        ("I Rome", "Caroline Rome"),
    ],
)
def test_rewrite_first_person(text: str, expected: str) -> None:
    assert rewrite_first_person(text, "Caroline") == expected


def test_rewrite_to_the_user() -> None:
    assert rewrite_first_person("I moved; my cat too", "the user") == (
        "the user moved; the user's cat too"
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I moved", True),
        ("i moved", True),
        ("my cat", True),
        ("they told me", True),
        ("We shipped it", True),
        ("our release", True),
        ("Jane owns billing", False),
        ("The US office opened", False),
        ("Mine shafts are deep", False),
    ],
)
def test_has_first_person(text: str, expected: bool) -> None:
    assert has_first_person(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Jane owns the billing service.", ("Jane",)),
        ("Acme HQ is in Berlin.", ("Acme HQ", "Berlin")),
        ("The Acme team met Jane Doe in New York.", ("Acme", "Jane Doe", "New York")),
        ("Caroline's sister lives in Paris.", ("Caroline", "Paris")),
        # A capitalised first word counts unless it is a stop word or looks like a verb
        # form: the rules cannot tell the imperative "Reach" from a name.
        ("Reach her at jane.doe@acme.io or @jdoe.", ("Reach", "jane.doe@acme.io", "@jdoe")),
        ("p99 latency of billing v2.3.1 doubled.", ("p99", "v2.3.1")),
        ("We run k8s on ec2 and release 1.4.0.", ("k8s", "ec2", "1.4.0")),
        ("We chose gRPC over REST.", ("gRPC", "REST")),
        ("I deployed on Friday in May.", ()),
        ("Taking care of ourselves is vital.", ()),
        ("Painting's a fun way to relax.", ()),
        ("Berlin is big and Berlin is loud.", ("Berlin",)),
        ("It'll be tough for Caroline.", ("Caroline",)),
        ("The user went to a LGBTQ support group.", ("LGBTQ",)),
    ],
)
def test_find_entities(text: str, expected: tuple[str, ...]) -> None:
    assert find_entities(text) == expected
