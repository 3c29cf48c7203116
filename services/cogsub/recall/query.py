"""What a recall query asks for, read from its text alone (pure: no I/O, no model).

Three cues feed ranking (``cogsub.recall.ranking``):

- **names**: capitalised words (``"What did Caroline research?"`` → ``caroline``),
  possessives stripped, so a memory whose speaker is named in the query can be
  preferred over one that only mentions the name;
- **temporal**: the query asks *when* (``when``, ``what year``, ``how long ago``,
  ``since when``...), so memories that carry a time expression are preferred;
- **dates**: calendar days or months named in the query (``"on 1 February, 2023"``,
  ``"October 13, 2023"``, ``"in May 2023"``), so memories from that day or month are
  preferred.

And the matching cues of a memory's text: :func:`speaker_of` (the ``"Name: "``
prefix of a transcript line) and :func:`has_time_expression`.
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date

_MONTHS: dict[str, int] = {}
for _number in range(1, 13):
    _MONTHS[calendar.month_name[_number].lower()] = _number
    _MONTHS[calendar.month_abbr[_number].lower()] = _number
_MONTHS["sept"] = 9
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))

_DAY_MONTH_YEAR = re.compile(
    rf"\b(?P<day>[0-3]?\d)(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<month>{_MONTH})\.?,?\s+(?P<year>\d{{4}})\b",
    re.IGNORECASE,
)
_MONTH_DAY_YEAR = re.compile(
    rf"\b(?P<month>{_MONTH})\.?\s+(?P<day>[0-3]?\d)(?:st|nd|rd|th)?,?\s+(?P<year>\d{{4}})\b",
    re.IGNORECASE,
)
_MONTH_YEAR = re.compile(rf"\b(?P<month>{_MONTH})\.?,?\s+(?P<year>\d{{4}})\b", re.IGNORECASE)
_ISO_DATE = re.compile(r"\b(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})\b")
# "in June", "during the month of July": a month of any year (after the dated patterns).
_MONTH_ALONE = re.compile(
    rf"\b(?:in|during|over)\s+(?:the\s+month\s+of\s+)?(?P<month>{_MONTH})\b", re.IGNORECASE
)
_SEASON = re.compile(
    r"\b(?:in|during|over|this|last)\s+(?:the\s+)?(?P<season>spring|summer|autumn|fall|winter)\b",
    re.IGNORECASE,
)
# Northern-hemisphere months of each season (the conversations recall serves are mostly there).
_SEASON_MONTHS = {
    "spring": (3, 4, 5),
    "summer": (6, 7, 8),
    "autumn": (9, 10, 11),
    "fall": (9, 10, 11),
    "winter": (12, 1, 2),
}

_TEMPORAL_QUESTION = re.compile(
    r"\b(when|what\s+(?:year|month|day|date|time|week|weekend)|which\s+(?:year|month|day|date)"
    r"|how\s+long\s+ago|since\s+when|how\s+long\s+(?:has|have|had|did|was|were))\b",
    re.IGNORECASE,
)
_TIME_WORDS = (
    "yesterday today tonight tomorrow ago last next week weekend weekends month months year"
    " years recently earlier later soon since before after morning afternoon evening night"
    " monday tuesday wednesday thursday friday saturday sunday"
)
# Word lookups, not one big alternation: a regex of ~60 alternatives costs ~30 us a memory.
_TIME_WORD_SET = frozenset(_TIME_WORDS.split()) | frozenset(m for m in _MONTHS if m != "may")
_WORD = re.compile(r"[a-z]+")
_YEAR = re.compile(r"\b(?:19|20)\d\d\b")
_DIGIT = re.compile(r"\d")
# "may" is a month only beside a number ("8 May", "May 2023"); otherwise it is the verb.
_MAY_DATE = re.compile(r"\bmay\s+\d|\d(?:st|nd|rd|th)?\s+may\b")
_NAME = re.compile(r"\b([A-Z][\w'’-]*[\w])")
_POSSESSIVE = re.compile(r"['’]s$")
_SPACES = re.compile(r"\s+")
# Where without_names cut a name, and a list of such places joined by "and", "or", "&", ",".
_CUT = "\x00"
_JOINED_CUTS = re.compile(r"\x00(?:\s*(?:,|&|\band\b|\bor\b)\s*\x00)+")
# A transcript line: "Name: text", the name being one to three capitalised words.
_SPEAKER = re.compile(r"^\s*([A-Z][\w'’.-]*(?:\s+[A-Z][\w'’.-]*){0,2})\s*:\s")
# Capitalised words that open questions or are pronouns; never names.
_NOT_NAMES = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "had",
        "has",
        "have",
        "how",
        "i",
        "if",
        "in",
        "is",
        "it",
        "may",
        "might",
        "must",
        "of",
        "on",
        "or",
        "shall",
        "should",
        "the",
        "their",
        "there",
        "these",
        "they",
        "this",
        "those",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)


@dataclass(frozen=True)
class DateSpan:
    """A calendar day (``day`` set), a whole month, or a month of any year (``year`` None)."""

    year: int | None
    month: int
    day: int | None = None

    def contains(self, when: date) -> bool:
        same_month = when.month == self.month and self.year in (None, when.year)
        return same_month and (self.day is None or when.day == self.day)


@dataclass(frozen=True)
class QueryAnalysis:
    """The cues of one query (see the module docstring)."""

    names: frozenset[str]
    temporal: bool
    dates: tuple[DateSpan, ...]
    listing: bool = False  # asks for several things of a kind (:func:`asks_for_list`)
    subjects: tuple[str, ...] = ()  # names that may be who answers, in order (:func:`subjects`)


def analyse_query(text: str) -> QueryAnalysis:
    """Names, temporal intent and dates of ``text``; cheap (a few regexes)."""
    return QueryAnalysis(
        names=query_names(text),
        temporal=asks_when(text),
        dates=dates_in(text),
        listing=asks_for_list(text),
        subjects=subjects(text),
    )


# Two or more capitalised words joined by "and" / "or" / "&" / ",": "Jon and Gina".
_JOINED_NAMES = re.compile(r"\b[A-Z][\w'’-]*[\w](?:\s*(?:,|\band\b|\bor\b|&)\s*[A-Z][\w'’-]*[\w])+")


def facets(text: str) -> tuple[str, ...]:
    """One query per person of "X and Y" in ``text``, the others left out; () when none.

    "Did Jon and Gina both dance?" asks about two people whose evidence lies in
    different turns; recalled as one query, the turns of neither person win
    (the speaker cue needs one name). Each facet names one of them.
    """
    joined = _JOINED_NAMES.search(text)
    if joined is None:
        return ()
    people = [n for found in _NAME.finditer(joined.group(0)) if (n := _name(found)) is not None]
    if len(set(people)) < 2:
        return ()
    before, after = text[: joined.start()], text[joined.end() :]
    originals = [found.group(1) for found in _NAME.finditer(joined.group(0)) if _name(found)]
    return tuple(dict.fromkeys(f"{before}{name}{after}" for name in originals))


def subjects(text: str) -> tuple[str, ...]:
    """The names of ``text`` in order, possessives left out; () when it joins names by "and".

    "What does Melanie think about Caroline's decision?" asks what Melanie said: the
    first person named, not owning something, is usually the one whose turn answers.
    Names joined by "and" ("Jon and Gina") are all subjects, so none is chosen.
    """
    if _JOINED_NAMES.search(text):
        return ()
    named = (
        _name(found) for found in _NAME.finditer(text) if not _POSSESSIVE.search(found.group(1))
    )
    return tuple(dict.fromkeys(name for name in named if name is not None))


def _name(found: re.Match[str]) -> str | None:
    """The lower-cased name a capitalised word may be (possessive stripped), or ``None``."""
    word = _POSSESSIVE.sub("", found.group(1)).lower()
    if word in _NOT_NAMES or word in _MONTHS or len(word) < 2:
        return None
    return word


def query_names(text: str) -> frozenset[str]:
    """Lower-cased capitalised words of ``text`` that may be names (possessives stripped)."""
    return frozenset(name for found in _NAME.finditer(text) if (name := _name(found)) is not None)


def without_names(text: str) -> str:
    """``text`` without the words :func:`query_names` reads as names (``text`` if nothing is left).

    Recall embeds this for the vector search: every memory of a transcript says
    who is speaking, so a name in the query pulls the cosine toward any turn by
    or to that person rather than toward what the question asks about. The
    name still counts through BM25 and the speaker cue.
    """
    marked = _NAME.sub(lambda found: _CUT if _name(found) else found.group(0), text)
    if marked == text:
        return text  # no names: left exactly as written
    # "Jon and Gina" goes whole: a lone "and" would be all the vector saw of the pair
    kept = _JOINED_CUTS.sub(_CUT, marked).replace(_CUT, "")
    kept = _SPACES.sub(" ", kept).strip()
    return kept if _WORD.search(kept.lower()) else text


def dates_in(text: str) -> tuple[DateSpan, ...]:
    """Every day or month ``text`` names, in order of appearance, without repeats.

    A month without a year ("in June") or a season ("during the summer") is
    that month, or those three months, of any year.
    """
    found: list[tuple[int, DateSpan]] = []
    taken: list[tuple[int, int]] = []
    for pattern in (_ISO_DATE, _DAY_MONTH_YEAR, _MONTH_DAY_YEAR, _MONTH_YEAR, _MONTH_ALONE):
        for match in pattern.finditer(text):
            start, end = match.span("month")
            if any(start < stop and begin < end for begin, stop in taken):
                continue  # already read as a longer date
            span = _span(match)
            if span is not None:
                taken.append(match.span())
                found.append((start, span))
    for match in _SEASON.finditer(text):
        months = _SEASON_MONTHS[match["season"].lower()]
        found.extend((match.start(), DateSpan(None, month)) for month in months)
    return tuple(dict.fromkeys(span for _, span in sorted(found, key=lambda item: item[0])))


def _span(match: re.Match[str]) -> DateSpan | None:
    month_text = match.group("month")
    month = int(month_text) if month_text.isdigit() else _MONTHS[month_text.lower().rstrip(".")]
    year = int(match.group("year")) if "year" in match.re.groupindex else None
    day = int(match.group("day")) if "day" in match.re.groupindex else None
    if not 1 <= month <= 12:
        return None
    if year is not None and day is not None and not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None
    return DateSpan(year, month, day)


def speaker_of(text: str) -> str | None:
    """The lower-cased speaker of a ``"Name: text"`` line, or ``None``."""
    found = _SPEAKER.match(text)
    return found.group(1).lower() if found else None


def has_time_expression(text: str) -> bool:
    """Whether ``text`` (speaker prefix excluded) says when: a relative time, a weekday, a month."""
    speaker = _SPEAKER.match(text)
    said = (text[speaker.end() :] if speaker else text).lower()
    if not _TIME_WORD_SET.isdisjoint(_WORD.findall(said)):
        return True
    # A year and "8 May" both need a digit: one scan for it instead of ~15 us of searches
    # on most memories, which have none (recall asks this of every candidate).
    if _DIGIT.search(said) is None:
        return False
    return bool(_YEAR.search(said) or ("may" in said and _MAY_DATE.search(said)))


# Question scaffolding (:func:`question_content`): a polite lead-in, a leading wh-phrase
# (after an optional preposition), an inverted auxiliary, the question mark.
_LEAD_IN = re.compile(
    r"^(?:do\s+you\s+(?:think|know|remember)|would\s+you\s+say|(?:can|could)\s+you\s+tell\s+me"
    r"|tell\s+me)\b[\s,]*",
    re.IGNORECASE,
)
_WH_PHRASE = re.compile(
    r"^(?:(?:in|on|at|for|with|from|to|of|by|about)\s+)?"
    r"(?:how\s+(?:long\s+ago|long|many|much|often|come)|(?:what|which)\s+(?:kinds?|types?|sorts?)"
    r"\s+of|what|when|where|who|whom|whose|which|why|how)(?:['’]s)?\b\s*",
    re.IGNORECASE,
)
_AUXILIARY = (
    r"(?:am|is|are|was|were|be|been|do|does|did|has|have|had|will|would|shall|should|can|could"
    r"|may|might|must)"
)
# After a wh-phrase the auxiliary comes within three words ("What fields would ...").
# Lower case only: a capitalised "May" there is the month.
_INVERTED_AUXILIARY = re.compile(rf"^((?:\S+\s+){{0,2}}?){_AUXILIARY}\b\s*")
_LEADING_AUXILIARY = re.compile(rf"^{_AUXILIARY}\b\s*", re.IGNORECASE)
_QUESTION_MARKS = re.compile(r"[\s?]+$")


def question_content(text: str) -> str:
    """What ``text`` asks about without its interrogative scaffolding; ``text`` if no question.

    "When did Melanie paint a sunrise?" → "Melanie paint a sunrise". A sentence
    embedder compares statements with statements best: the scaffolding pulls a
    question's vector toward the other questions of a transcript rather than
    toward the turn that answers it. ``text`` is a question when it ends with
    "?", opens with a lead-in ("do you think"), or opens with a wh-phrase followed
    by an auxiliary ("what did ..."); "When deploying, run the tests" is not. Text
    that would be left without a word is kept whole ("Why?").
    """
    rest = text.strip()
    asked = rest.endswith("?")
    rest, lead_in = _stripped(_LEAD_IN, rest)
    rest, wh = _stripped(_WH_PHRASE, rest)
    inverted = False
    if wh:
        rest, after_wh = _stripped(_LEAD_IN, rest)
        if not after_wh:
            rest, inverted = _without_inverted_auxiliary(rest)
    elif asked and not lead_in:
        rest, _ = _stripped(_LEADING_AUXILIARY, rest)
    if not (asked or lead_in or inverted):
        return text
    content = _SPACES.sub(" ", _QUESTION_MARKS.sub("", rest)).strip()
    return content if _WORD.search(content.lower()) else text


def _stripped(pattern: re.Pattern[str], text: str) -> tuple[str, bool]:
    """``text`` without ``pattern``'s match at its start, and whether there was one."""
    found = pattern.match(text)
    return (text[found.end() :], True) if found else (text, False)


def _without_inverted_auxiliary(text: str) -> tuple[str, bool]:
    found = _INVERTED_AUXILIARY.match(text)
    if found is None:
        return text, False
    return found.group(1) + text[found.end() :], True


# A list question asks for every item of a kind ("Which cities has Jon visited?"): its
# evidence is one turn per item, often in different sessions. Read from the question's
# opening words only; "when" and yes/no questions ask for one thing.
_LIST_AUXILIARY = r"(?:has|have|had|does|do|did|is|are|was|were)"
_LIST_AUXILIARY_WORD = re.compile(_LIST_AUXILIARY)
_LIST_OPENINGS = (
    # "What are some changes ...", "In what ways is ...", "What kinds of art ..."
    re.compile(
        r"^(?:what\s+are\s+some|(?:in\s+)?what\s+ways|(?:what|which)\s+(?:kinds|types|sorts)\s+of)\b"
    ),
    # "What activities does ...", "Which LGBTQ+ events has ...", "How many times has ...":
    # a plural object of up to three words, then the auxiliary.
    re.compile(
        rf"^(?:what|which|how\s+many)\s+(?P<object>(?:\S+\s+){{0,2}}\S+)\s+{_LIST_AUXILIARY}\s"
    ),
    # "What has Melanie painted?", "Where has Melanie camped?": done more than once; not
    # "What has Caroline decided to pursue?", one aim.
    re.compile(r"^(?:what|where)\s+(?:has|have)\s+\S+(?:\s+\S+)?\s+\S+ed\b(?!\s+to\b)"),
)
_IRREGULAR_PLURALS = frozenset(["children", "people", "men", "women", "feet", "mice"])
_NOT_PLURAL_ENDINGS = ("ss", "us", "is", "'s", "’s")
_DURATIONS = frozenset({"seconds", "minutes", "hours", "days", "weeks", "months", "years"})


def asks_when(text: str) -> bool:
    """Whether ``text`` asks when something happened ("When did ...", "What year ...")."""
    return _TEMPORAL_QUESTION.search(text) is not None


def asks_for_list(text: str) -> bool:
    """Whether ``text`` asks for several things of a kind, each likely said in its own turn.

    "What activities does Melanie partake in?", "Which cities has Jon visited?",
    "What are some ...", "In what ways ...", "What kinds of ...", "How many times has ...",
    "What has X painted?". Not "when" questions, nor yes/no ones ("Did ... ?"), nor a
    singular object ("What career path has Caroline decided to pursue?").
    """
    said = _SPACES.sub(" ", text.strip().lower())
    if asks_when(said):
        return False
    for opening in _LIST_OPENINGS:
        found = opening.match(said)
        if found is None:
            continue
        if "object" not in opening.groupindex:
            return True
        words = found.group("object").split()
        # An auxiliary within the "object" is the question's own ("What did the kids have
        # ..."): the plural after it is the subject of a question about one thing.
        if any(_LIST_AUXILIARY_WORD.fullmatch(word) for word in words):
            return False
        last = words[-1].split("/")[-1]
        # "How many years has ...": a duration is one quantity, said once.
        return _is_plural(last) and last.strip("?,.!") not in _DURATIONS
    return False


def _is_plural(word: str) -> bool:
    """A crude English plural test: "cities", "events", "children"; not "class", "status"."""
    word = word.strip("?,.!")
    if word in _IRREGULAR_PLURALS:
        return True
    return len(word) > 3 and word.endswith("s") and not word.endswith(_NOT_PLURAL_ENDINGS)
