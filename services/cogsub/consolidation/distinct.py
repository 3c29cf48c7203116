"""Whether two statements may stand for one fact (pure).

Word overlap and embeddings cannot tell "Alice is allergic to peanuts." from
"Bob is allergic to peanuts.": the two score as near-identical, yet neither is
evidence for the other. So before two memories are merged into one observation,
or one is counted as proof of the other, their *details* must agree:

- the named entities (capitalised words; a sentence-initial common word is not one),
- the numbers (versions, amounts, counts, spelled-out numbers up to the thousands),
- the addresses (IPs, e-mails, URLs, host and file names, paths),
- the dates and times ("5 March 2024", "Tuesdays", "3pm", "yesterday"),
- the polarity (a "not", "never", "no", "n't", "without" … on one side only).

Every detail but the names must be equal. A name only has to appear, in any
case, among the other statement's words: "The API team" and "the api team" agree,
and a sentence-initial "Deploy" is matched by a "deploy" elsewhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from cogsub.consolidation.similarity import stem
from cogsub.extraction.dates import resolve_dates

# Relative phrases are kept as written; this fixed day only spells out the absolute ones.
_ANCHOR = datetime(2000, 1, 1, tzinfo=UTC)
_MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_TIMES_OF_DAY = frozenset(
    [
        "today",
        "tonight",
        "tomorrow",
        "yesterday",
        "morning",
        "afternoon",
        "evening",
        "night",
        "noon",
        "midnight",
        "weekend",
        "weekends",
        "weekday",
        "weekdays",
        "daily",
        "weekly",
        "monthly",
        "yearly",
        "annually",
        "spring",
        "summer",
        "autumn",
        "fall",
        "winter",
    ]
)
_NEGATIONS = frozenset(
    [
        "not",
        "no",
        "never",
        "none",
        "nobody",
        "nothing",
        "nowhere",
        "neither",
        "nor",
        "without",
        "cannot",
        "dont",
        "doesnt",
        "didnt",
        "isnt",
        "arent",
        "wasnt",
        "werent",
        "wont",
        "cant",
        "couldnt",
        "shouldnt",
        "wouldnt",
        "hasnt",
        "havent",
        "hadnt",
    ]
)
_NUMBER_WORDS = {
    word: str(value)
    for value, word in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
} | {
    "thirty": "30",
    "forty": "40",
    "fifty": "50",
    "sixty": "60",
    "seventy": "70",
    "eighty": "80",
    "ninety": "90",
    "hundred": "100",
    "thousand": "1000",
    "million": "1000000",
    "dozen": "12",
}
# Capitalised only because a sentence starts with them: never a name.
_COMMON_STARTS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "then",
        "so",
        "to",
        "of",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "into",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "has",
        "have",
        "had",
        "do",
        "does",
        "did",
        "i",
        "me",
        "my",
        "we",
        "us",
        "our",
        "you",
        "your",
        "he",
        "him",
        "his",
        "she",
        "her",
        "it",
        "its",
        "they",
        "them",
        "their",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "what",
        "which",
        "who",
        "whom",
        "when",
        "where",
        "why",
        "how",
        "all",
        "any",
        "some",
        "every",
        "each",
        "both",
        "either",
        "most",
        "more",
        "many",
        "much",
        "few",
        "several",
        "also",
        "just",
        "please",
        "note",
        "remember",
        "yes",
        "ok",
        "okay",
        "after",
        "before",
        "during",
        "since",
        "until",
        "while",
        "because",
        "although",
        "though",
        "once",
        "only",
        "always",
        "usually",
        "never",
        "often",
        "sometimes",
        "now",
        "today",
        "currently",
        "still",
        "new",
        "old",
        "add",
        "ask",
        "avoid",
        "book",
        "bring",
        "build",
        "buy",
        "call",
        "check",
        "clean",
        "close",
        "create",
        "delete",
        "deploy",
        "email",
        "mail",
        "write",
        "send",
        "use",
        "run",
        "release",
        "version",
        "keep",
        "make",
        "move",
        "open",
        "pay",
        "put",
        "read",
        "restart",
        "set",
        "ship",
        "start",
        "stop",
        "store",
        "tell",
        "test",
        "try",
        "turn",
        "update",
        "upload",
        "wait",
        "watch",
    ]
)
# A sentence-initial word with one of these endings is a verb form or a common noun
# ("Shipping", "Backups", "Payments"), not a name.
_COMMON_ENDINGS = ("ing", "ed", "ly", "tion", "ment", "ness", "ity", "ers", "ies", "ups")

_URL = re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s<>\"')]+", re.I)
_EMAIL = re.compile(r"[\w.+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)+", re.I)
_PATH = re.compile(r"(?<![\w/])(?:~|\.{1,2})?/[\w.-]+(?:/[\w.-]*)*", re.I)
_IP = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?::\d+)?(?![\w.]*\w)")
_HOST = re.compile(r"(?<![\w@.-])[a-z0-9][\w-]*(?:\.[a-z0-9][\w-]*)+", re.I)
_CLOCK = re.compile(
    r"(?<![\w:.])(?P<h>[01]?\d|2[0-3])(?::(?P<m>[0-5]\d))?\s*(?P<half>[ap])\.?m\b\.?"
    r"|(?<![\w:.])(?P<h24>[01]?\d|2[0-3]):(?P<m24>[0-5]\d)(?![\w:])"
    r"|(?<![\w:.])(?P<hoc>[01]?\d) o'clock\b",
    re.I,
)
_NUMBER = re.compile(
    r"(?<![\w.])(?P<pre>[a-z]+)?(?P<core>\d+(?:[.,:/-]\d+)*)(?P<post>[a-z]\w*)?", re.I
)
_WORD = re.compile(r"[^\W\d_][\w'’-]*", re.U)
_SENTENCE_BREAK = re.compile(r"(?:^|[.!?:;\"“(\[—–-])$")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")


@dataclass(frozen=True)
class Details:
    """What must agree between two statements before one can stand for the other."""

    names: frozenset[str]
    numbers: frozenset[str]
    addresses: frozenset[str]
    dates: frozenset[str]
    negated: bool
    words: frozenset[str]
    """Every word, lower case and stemmed: where the other side's names are looked for."""

    @property
    def strict(self) -> tuple[frozenset[str], frozenset[str], frozenset[str], bool]:
        """The details that must be equal (equality of these is an equivalence)."""
        return self.numbers, self.addresses, self.dates, self.negated


def details(text: str) -> Details:
    """The details of one statement."""
    text = text.replace("’", "'")
    addresses, rest = _take_addresses(text)
    dates, rest = _take_dates(rest)
    numbers, rest = _take_numbers(rest)
    words = [m for m in _WORD.finditer(rest)]
    lowered = [_plain(m.group(0)) for m in words]
    spelled = {_NUMBER_WORDS[w] for w in lowered if w in _NUMBER_WORDS}
    calendar = {w.rstrip("s") for w in lowered if w.rstrip("s") in (*_MONTHS, *_WEEKDAYS)}
    calendar |= {w for w in lowered if w in _TIMES_OF_DAY}
    calendar.discard("may")  # the verb, unless a date rule above took it with its day
    negated = any(w in _NEGATIONS or w.endswith("n't") for w in lowered)
    names = {
        stem(_plain(m.group(0)))
        for m in words
        if _is_name(m.group(0), rest[: m.start()]) and _plain(m.group(0)) not in calendar
    }
    return Details(
        names=frozenset(names - {stem(w) for w in calendar}),
        numbers=frozenset(numbers | spelled),
        addresses=frozenset(addresses),
        dates=frozenset(dates | calendar),
        negated=negated,
        words=frozenset(stem(w) for w in lowered) | frozenset(numbers),
    )


def difference(a: Details, b: Details) -> str | None:
    """The first kind of detail in which ``a`` and ``b`` disagree, or None when they agree."""
    if a.negated != b.negated:
        return "negation"
    for kind, mine, theirs in (
        ("number", a.numbers, b.numbers),
        ("address", a.addresses, b.addresses),
        ("date", a.dates, b.dates),
    ):
        if mine != theirs:
            return kind
    if not a.names <= b.words or not b.names <= a.words:
        return "entity"
    return None


def may_merge(a: str, b: str) -> bool:
    """Whether statements ``a`` and ``b`` may be one fact: every detail agrees."""
    return difference(details(a), details(b)) is None


def _plain(word: str) -> str:
    word = word.lower()
    return word[:-2] if word.endswith("'s") else word


def _is_name(word: str, before: str) -> bool:
    """A capitalised (or inner-capital, "iPhone") word that is not capitalised by position."""
    if not (word[0].isupper() or any(c.isupper() for c in word[1:])):
        return False
    plain = _plain(word)
    if _SENTENCE_BREAK.search(before.rstrip(" ")) is None:
        return plain != "i"
    common = plain in _COMMON_STARTS or (len(plain) >= 6 and plain.endswith(_COMMON_ENDINGS))
    return not common


def _take(pattern: re.Pattern[str], text: str) -> tuple[list[str], str]:
    """The matches of ``pattern`` (lower case, trailing punctuation off), and the text without."""
    found = [m.group(0).lower().rstrip(".,;:!?") for m in pattern.finditer(text)]
    return found, pattern.sub(" ", text)


def _take_addresses(text: str) -> tuple[set[str], str]:
    found: set[str] = set()
    for pattern in (_URL, _EMAIL, _IP, _PATH):
        taken, text = _take(pattern, text)
        found.update(taken)
    hosts, _ = _take(_HOST, text)
    # A dotted word with a letter in its last part is a host or file name ("api.acme.io",
    # "prod.yaml"); "e.g." and a number with decimals are not.
    for host in hosts:
        parts = host.split(".")
        if re.search(r"[a-z]", parts[-1]) and max(len(p) for p in parts) > 1:
            found.add(host)
            text = text.replace(host, " ", 1) if host in text else _drop_ci(text, host)
    return found, text


def _drop_ci(text: str, part: str) -> str:
    at = text.lower().find(part)
    return text if at < 0 else text[:at] + " " + text[at + len(part) :]


def _take_dates(text: str) -> tuple[set[str], str]:
    found: set[str] = set()
    pieces: list[str] = []
    cursor = 0
    for mention in resolve_dates(text, _ANCHOR):
        pieces.append(text[cursor : mention.start])
        cursor = mention.end
        phrase = " ".join(mention.phrase.lower().split())
        found.add(phrase if mention.relative else mention.day.isoformat())
    text = "".join(pieces) + " " + text[cursor:]
    found.update(_clock(match) for match in _CLOCK.finditer(text))
    return found, _CLOCK.sub(" ", text)


def _take_numbers(text: str) -> tuple[set[str], str]:
    found: set[str] = set()
    text = _THOUSANDS.sub("", text)
    for match in _NUMBER.finditer(text):
        pre, core = (match["pre"] or "").lower(), match["core"]
        # "p99", "k8s", "ec2" are codes, whole; "v2.1" is the version 2.1; "3rd" is 3.
        found.add(match.group(0).lower() if pre and pre != "v" else core.rstrip(".,:/-"))
    return found, _NUMBER.sub(" ", text)


def _clock(match: re.Match[str]) -> str:
    """A time of day as ``HH:MM`` on a 24-hour clock: "3pm", "3:00 p.m." and "15:00" agree."""
    if match["h24"]:
        return f"{int(match['h24']):02d}:{match['m24']}"
    if match["hoc"]:
        return f"{int(match['hoc']):02d}:00"
    hour = int(match["h"]) % 12 + (12 if match["half"].lower() == "p" else 0)
    return f"{hour:02d}:{match['m'] or '00'}"
