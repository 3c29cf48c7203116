"""Calendar days named in a piece of text, resolved against the event's time.

Pure functions, no clock reads: "yesterday" means the day before the event's own
local date (``event_time.date()`` in the event's offset), never before today.

Rules (each documented so tests can pin them):

- ``today``, ``tonight``, ``this morning/afternoon/evening`` → the event day;
  ``yesterday``, ``last night`` → one day before; ``tomorrow`` → one day after.
- ``N days/weeks/months/years ago`` (digits, ``a``/``an``, words one..ten).
- ``last week`` → seven days before; ``last month``/``last year`` → the same day of
  the previous month/year, clamped (31 March → 28/29 February); ``next ...`` alike.
- ``last weekend`` → Saturday of the previous Monday-to-Sunday week.
- ``last <weekday>`` → the most recent such day strictly before the event day;
  ``this <weekday>`` → that day of the event's Monday-to-Sunday week;
  ``next <weekday>`` → that day of the following week.
- ``on <weekday>`` → the most recent such day on or before the event day, or on or
  after it when the text speaks of the future ("will", "'ll", "going to", "gonna").
- Absolute dates: ``7 May 2023``, ``7 May, 2023``, ``May 7, 2023``, ``May 7th``,
  ``7th of May``, ``2023-05-07``; a day and month without a year take the event's year.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

__all__ = ["DateMention", "annotate_dates", "format_day", "resolve_dates"]

_MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.lower(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}

_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_WEEKDAY = r"(?P<weekday>" + "|".join(_WEEKDAYS) + r")"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{4})"
_COUNT = r"(?P<count>\d{1,3}|" + "|".join(_NUMBERS) + r")"
# Lower-case "may", "mar" and "march" are usually verbs ("it may 2x the cost").
_VERB_MONTHS = frozenset({"may", "mar", "march"})
_FUTURE = re.compile(r"\b(?:will|going\s+to|gonna|plan(?:s|ning)?\s+to)\b|'ll\b", re.I)


@dataclass(frozen=True)
class DateMention:
    """One phrase that names a day: where it is, what it says and which day it is."""

    start: int
    end: int
    phrase: str
    day: date
    relative: bool
    """True when the phrase needs the event time to mean anything ("yesterday")."""


def format_day(day: date) -> str:
    """The stable written form used in fact texts: ``7 May 2023``."""
    return f"{day.day} {calendar.month_name[day.month]} {day.year}"


def _add_months(day: date, months: int) -> date:
    """The same day ``months`` later (or earlier), clamped to the month's last day."""
    index = day.year * 12 + (day.month - 1) + months
    year, month = divmod(index, 12)
    last = calendar.monthrange(year, month + 1)[1]
    return date(year, month + 1, min(day.day, last))


def _week_start(day: date) -> date:
    return day - timedelta(days=day.weekday())


Resolver = Callable[[re.Match[str], date, str], date | None]


def _fixed(offset_days: int) -> Resolver:
    return lambda _match, today, _text: today + timedelta(days=offset_days)


def _ago(match: re.Match[str], today: date, _text: str) -> date:
    raw = match["count"].lower()
    count = _NUMBERS[raw] if raw in _NUMBERS else int(raw)
    unit = match["unit"].lower()
    if unit.startswith("day"):
        return today - timedelta(days=count)
    if unit.startswith("week"):
        return today - timedelta(weeks=count)
    if unit.startswith("month"):
        return _add_months(today, -count)
    return _add_months(today, -12 * count)


def _shifted_period(match: re.Match[str], today: date, _text: str) -> date:
    sign = -1 if match["which"].lower() == "last" else 1
    unit = match["unit"].lower()
    if unit == "week":
        return today + timedelta(weeks=sign)
    if unit == "month":
        return _add_months(today, sign)
    return _add_months(today, 12 * sign)


def _last_weekend(_match: re.Match[str], today: date, _text: str) -> date:
    return _week_start(today) - timedelta(days=2)


def _named_weekday(match: re.Match[str], today: date, _text: str) -> date:
    target = _WEEKDAYS[match["weekday"].lower()]
    which = match["which"].lower()
    if which == "last":
        back = (today.weekday() - target) % 7 or 7
        return today - timedelta(days=back)
    start = _week_start(today) + timedelta(days=target)
    return start if which == "this" else start + timedelta(weeks=1)


def _on_weekday(match: re.Match[str], today: date, text: str) -> date:
    target = _WEEKDAYS[match["weekday"].lower()]
    if _FUTURE.search(text):
        return today + timedelta(days=(target - today.weekday()) % 7)
    return today - timedelta(days=(today.weekday() - target) % 7)


def _absolute(match: re.Match[str], today: date, _text: str) -> date | None:
    groups = match.groupdict()
    if groups.get("month") in _VERB_MONTHS:
        return None
    month = _MONTHS[groups["month"].lower()] if groups.get("month") else int(groups["month_n"])
    year = int(groups["year"]) if groups.get("year") else today.year
    try:
        return date(year, month, int(groups["day"]))
    except ValueError:
        return None


def _pattern(body: str) -> re.Pattern[str]:
    # The look-arounds keep "12 May 20234" or "x2023-05-07" from matching halfway.
    return re.compile(r"(?<![\w-])(?:" + body + r")(?![\w-])", re.I)


# Every name and abbreviation of a month starts with one of these; a weekday, with its name.
_MONTH_CUES = tuple(sorted({name[:3] for name in _MONTHS}))
_WEEKDAY_CUES = tuple(_WEEKDAYS)

# (pattern, resolver, relative, cues). Longer phrasings come first so "May 7th, 2023"
# wins over "May 7th" when both start at the same place (ties break on list order).
# A rule can only match a text holding one of its cues (lower-case substrings it
# cannot match without), so most rules are skipped for most texts: thirteen scans
# with look-arounds per clause had been most of offline extraction's time.
_RULES: tuple[tuple[re.Pattern[str], Resolver, bool, tuple[str, ...]], ...] = (
    (_pattern(r"(?P<year>\d{4})-(?P<month_n>[01]\d)-(?P<day>[0-3]\d)"), _absolute, False, ("-",)),
    (
        _pattern(_DAY + r"\s+(?:of\s+)?" + _MONTH + r",?\s+" + _YEAR),
        _absolute,
        False,
        _MONTH_CUES,
    ),
    (_pattern(_MONTH + r"\s+" + _DAY + r",?\s+" + _YEAR), _absolute, False, _MONTH_CUES),
    (_pattern(_DAY + r"\s+(?:of\s+)?" + _MONTH), _absolute, False, _MONTH_CUES),
    (_pattern(_MONTH + r"\s+" + _DAY), _absolute, False, _MONTH_CUES),
    (
        _pattern(r"today|tonight|this\s+(?:morning|afternoon|evening)"),
        _fixed(0),
        True,
        ("today", "tonight", "this"),
    ),
    (_pattern(r"yesterday|last\s+night"), _fixed(-1), True, ("yesterday", "last")),
    (_pattern(r"tomorrow"), _fixed(1), True, ("tomorrow",)),
    (
        _pattern(_COUNT + r"\s+(?P<unit>days?|weeks?|months?|years?)\s+ago"),
        _ago,
        True,
        ("ago",),
    ),
    (_pattern(r"last\s+weekend"), _last_weekend, True, ("weekend",)),
    (
        _pattern(r"(?P<which>last|next)\s+(?P<unit>week|month|year)"),
        _shifted_period,
        True,
        ("last", "next"),
    ),
    (_pattern(r"(?P<which>last|this|next)\s+" + _WEEKDAY), _named_weekday, True, _WEEKDAY_CUES),
    (_pattern(r"(?:on\s+)" + _WEEKDAY), _on_weekday, True, _WEEKDAY_CUES),
)


def _may_match(cues: tuple[str, ...], lowered: str | None) -> bool:
    """Whether a rule with ``cues`` can match the text ``lowered`` is the lower case of.

    ``None`` (a text that is not ASCII) tries every rule: under ``re.I`` a few
    non-ASCII letters match ASCII ones ("\u212a" is "k"), which a substring test would miss.
    """
    return lowered is None or any(cue in lowered for cue in cues)


def resolve_dates(text: str, event_time: datetime) -> tuple[DateMention, ...]:
    """Every day-naming phrase in ``text``, in order of appearance, none overlapping.

    Args:
        text: One clause or sentence.
        event_time: When the event happened; its own local date anchors relative
            phrases (a tz-aware time keeps its offset, it is not moved to UTC).

    Returns:
        The mentions, first to last; impossible dates ("30 February") are skipped.
    """
    today = event_time.date()
    lowered = text.lower() if text.isascii() else None
    found: list[tuple[int, int, int, DateMention]] = []
    for rank, (pattern, resolve, relative, cues) in enumerate(_RULES):
        if not _may_match(cues, lowered):
            continue
        for match in pattern.finditer(text):
            try:
                day = resolve(match, today, text)
            except (OverflowError, ValueError):
                # Arithmetic past year 1 or 9999: no such calendar day.
                continue
            if day is None:
                continue
            mention = DateMention(match.start(), match.end(), match.group(0), day, relative)
            found.append((match.start(), -(match.end() - match.start()), rank, mention))
    chosen: list[DateMention] = []
    taken_until = -1
    for start, _length, _rank, mention in sorted(found, key=lambda row: row[:3]):
        if start >= taken_until:
            chosen.append(mention)
            taken_until = mention.end
    return tuple(chosen)


def annotate_dates(text: str, mentions: tuple[DateMention, ...]) -> str:
    """``text`` with `` (7 May 2023)`` after every relative mention.

    An annotation already present (the same text extracted twice) is not repeated.
    """
    parts: list[str] = []
    cursor = 0
    for mention in mentions:
        parts.append(text[cursor : mention.end])
        cursor = mention.end
        if not mention.relative:
            continue
        note = f" ({format_day(mention.day)})"
        if not text.startswith(note, mention.end):
            parts.append(note)
    parts.append(text[cursor:])
    return "".join(parts)
