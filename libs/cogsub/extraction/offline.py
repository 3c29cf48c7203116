"""The offline extractor: deterministic rules, no model, no network.

It cuts content into sentences and conservative clauses, drops what states nothing
(questions, greetings, thanks, reactions, fragments), decides each clause's
perspective and resolves its dates against the event time:

- a first-person clause of the agent (an ``agent_action`` event, or a turn whose
  speaker is the agent) is an ``experience`` fact, kept in the first person;
- everything else is a ``world`` fact; a user's "I"/"my"/"me" is rewritten to the
  speaker's name ("Caroline moved to Berlin", "Caroline's sister"), or to "the
  user" when nobody is named;
- a relative date is spelled out after its phrase ("yesterday (7 May 2023)") so
  keyword search and readers see the day; the first date of a clause is its
  ``occurred_on``.

The same input always gives the same facts: nothing here reads a clock or draws
a random number.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import datetime

from cogsub.core.events import EventType, FactType
from cogsub.extraction.clauses import (
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
from cogsub.extraction.dates import annotate_dates, resolve_dates
from cogsub.extraction.ports import ExtractedFact, ExtractionInput

__all__ = ["MAX_FACT_LENGTH", "OfflineExtractor", "extract_facts", "states_facts"]

MAX_FACT_LENGTH = 2000
"""Longest fact text (characters); a longer clause is cut at a word boundary."""

# Longer texts are extracted off the event loop (measured ~1.2 ms per KiB).
_INLINE_CHARS = 4096
# Turn prefixes that name the agent itself, or an anonymous user.
_AGENT_SPEAKERS = frozenset({"assistant", "agent", "ai", "bot", "model"})
_USER_SPEAKERS = frozenset({"user", "human", "customer", "me"})
_MARK = "\x00"
# Curly quotes read as straight ones; a NUL in the input would collide with _MARK.
_NORMALISE = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', _MARK: None}
)


def _is_agent(prefix: str | None, item: ExtractionInput) -> bool:
    if prefix is not None and prefix.lower() in _AGENT_SPEAKERS:
        return True
    if item.event_type is not EventType.AGENT_ACTION:
        return False
    # In the agent's own event an unnamed line, or one under its own name, is the agent.
    return prefix is None or prefix == item.speaker


def _subject(speaker: str | None) -> str:
    name = " ".join((speaker or "").translate(_NORMALISE).split())
    if not name or name.lower() in _USER_SPEAKERS:
        return "the user"
    return name


def _finish(text: str) -> str:
    """Capitalised, one terminal full stop, at most MAX_FACT_LENGTH characters."""
    text = " ".join(text.split()).rstrip(" ,;:!.-\u2013\u2014")
    if len(text) >= MAX_FACT_LENGTH:
        cut = text[: MAX_FACT_LENGTH - 1]
        text = cut.rsplit(" ", 1)[0] if " " in cut else cut
    return text[:1].upper() + text[1:] + "."


def _fact(clause: str, *, speaker: str | None, agent: bool, event_time: datetime) -> ExtractedFact:
    mentions = resolve_dates(clause, event_time)
    text = annotate_dates(clause, mentions)
    first_person = has_first_person(clause)
    if agent and first_person:
        fact_type = FactType.EXPERIENCE
    else:
        fact_type = FactType.WORLD
        if first_person:
            # Fenced by a marker while entities are found, so the inserted name never
            # fuses with a capitalised neighbour ("Gives me" → "Gives Jon").
            text = rewrite_first_person(text, f"{_MARK}{_subject(speaker)}{_MARK}")
    return ExtractedFact(
        text=_finish(text.replace(_MARK, "")),
        fact_type=fact_type,
        occurred_on=mentions[0].day if mentions else None,
        entities=find_entities(text),
    )


def extract_facts(item: ExtractionInput) -> list[ExtractedFact]:
    """The facts ``item`` states, in order of appearance, without repeats.

    Lines may carry their own "Name: " speaker prefix (a transcript); a line
    without one continues the previous speaker, starting from ``item.speaker``.
    Never raises on odd text: what it cannot read it leaves out.
    """
    facts: list[ExtractedFact] = []
    seen: set[str] = set()
    for clause, speaker, agent in _statements(item):
        fact = _fact(clause, speaker=speaker, agent=agent, event_time=item.event_time)
        key = fact.text.casefold()
        if key not in seen:
            seen.add(key)
            facts.append(fact)
    return facts


def states_facts(item: ExtractionInput) -> bool:
    """Whether ``extract_facts`` finds any fact in ``item``, without building them.

    The same reading stopped at the first statement: what a fact costs beyond it
    (dates resolved, entities found) is most of extraction's time.
    """
    return next(_statements(item), None) is not None


def _statements(item: ExtractionInput) -> Iterator[tuple[str, str | None, bool]]:
    """Each clause that states something, with its speaker and whether an agent said it."""
    prefix: str | None = None
    for line in item.text.translate(_NORMALISE).splitlines():
        named, body = split_speaker(line)
        if named is not None:
            prefix = named
        speaker = prefix if prefix is not None else item.speaker
        agent = _is_agent(prefix, item)
        for sentence in split_sentences(body):
            if is_question(sentence):
                continue
            for clause in split_clauses(strip_interjections(sentence)):
                if is_statement(clause):
                    yield clause, speaker, agent


class OfflineExtractor:
    """FactExtractor by rules alone: deterministic, instant, and good enough to start.

    Content with nothing to state ("Hi!", "Thanks so much") gives an empty list.
    """

    @property
    def name(self) -> str:
        """``offline``."""
        return "offline"

    async def extract(self, item: ExtractionInput) -> list[ExtractedFact]:
        """The facts ``item`` states.

        A turn takes ~0.15 ms and runs inline; a long text (up to ~40 ms for 32 KiB)
        runs in a worker thread so the event loop keeps serving meanwhile.
        """
        if len(item.text) > _INLINE_CHARS:
            return await asyncio.to_thread(extract_facts, item)
        return extract_facts(item)

    async def close(self) -> None:
        """Nothing to release."""

    def __repr__(self) -> str:
        return "OfflineExtractor()"
