"""Rule-based text handling for the offline extractor: segments, perspective, entities.

Pure functions over strings. The rules are deliberately conservative: a sentence
is only split where both halves stand on their own, and grammar is rewritten only
around the first-person pronouns ("I", "me", "my") of a speaker.
"""

from __future__ import annotations

import calendar
import re

__all__ = [
    "content_word_count",
    "find_entities",
    "has_first_person",
    "is_question",
    "is_statement",
    "split_clauses",
    "rewrite_first_person",
    "split_sentences",
    "split_speaker",
    "strip_interjections",
]


def _lexicon(words: str) -> frozenset[str]:
    """A word set written as one whitespace-separated block (easier to read and edit)."""
    return frozenset(words.split())


_STOP = _lexicon(
    """a about above after again against all also am an and any are as at be because been
    before being below between both but by can can't could couldn't did didn't do does doesn't
    doing don't down during each even few for from further had hadn't has hasn't have haven't
    having he he's her here here's hers herself him himself his how how's if in into is isn't
    it it's its itself just let's like more most much must no nor not now of off on once only
    or other ought our ours ourselves out over own pretty quite really same she she's should
    shouldn't so some such than that that's the their theirs them themselves then there
    there's these they they're they've this those through to too totally under until up us
    very was wasn't we we're we've were weren't what what's when where which while who who's
    whom why will with won't would wouldn't you you'd you'll you're you've your yours
    yourself gonna wanna kinda sorta super since it'll that'll they'll he'll she'll
    they'd he'd she'd it'd"""
)
_INTERJECTIONS = _lexicon(
    """hi hey hello hiya yo wow whoa lol lmao haha hahaha hehe thanks thank thx ok okay yeah
    yep yup yes nope oh ah aw aww awww omg bye goodbye cheers hmm um uh yay sure please sorry
    congrats congratulations"""
)
# Words that only react ("so cool, love it!"); a sentence made of nothing else is dropped.
_REACTIONS = _lexicon(
    """great cool awesome nice amazing wonderful fantastic lovely sweet glad love loved good
    fun neat beautiful brilliant incredible excellent perfect true totally agree agreed exactly
    definitely absolutely"""
)
_FIRST_PERSON_SINGULAR = frozenset({"i", "i'm", "i've", "i'd", "i'll", "me", "my", "myself"})
# Not "us": it is also the upper-cased country ("US").
_FIRST_PERSON = _FIRST_PERSON_SINGULAR | {"we", "we're", "we've", "we'll", "our"}
_SUBJECTS = _lexicon(
    """i i'm i've i'd i'll you he she it we they there this that these those my your his her
    its our their the a an some someone everyone everybody nobody"""
)
_NOT_SPEAKERS = _lexicon(
    """note notes update summary warning error todo re fwd subject ps reminder fyi tip example
    step q a question answer edit important status result output input time date location
    address name email phone source"""
)
_ROLES = frozenset(
    {"user", "human", "customer", "assistant", "agent", "ai", "bot", "model", "system"}
)
_NON_ENTITY_CAPS = (
    _STOP
    | _INTERJECTIONS
    | _REACTIONS
    | _FIRST_PERSON
    | {name.lower() for name in calendar.month_name if name}
    | {name.lower() for name in calendar.day_name}
    | {"hey", "mr", "mrs", "ms", "dr", "today", "yesterday", "tomorrow", "tonight"}
)
_ABBREVIATIONS = _lexicon(
    """mr mrs ms dr prof sr jr st mt vs etc e.g i.e inc ltd co corp no approx dept fig jan feb
    mar apr jun jul aug sep sept oct nov dec u.s a.m p.m"""
)
_ADVERBS = _lexicon(
    """really also just still always never often usually sometimes actually finally recently
    totally truly definitely even only already mostly rarely seriously honestly absolutely
    then now"""
)
# After "I" these stay as they are: past tense, modals, and forms shared by past and present.
_KEEP_VERB = _lexicon(
    """was were had did could would should might must can will shall may went ran saw made got
    took found felt thought bought brought heard met left told said began came gave kept knew
    lost paid put read sent spent won wrote drove ate sat stood built caught taught fell flew
    grew held led meant rode rang sang slept spoke swam threw understood woke wore became broke
    chose drew drank forgot hid hit hurt let quit set shut cut cost shot sold stole struck tore
    fought fed dug hung laid lay lit sought shook spun spread stuck swept swung wept used gotten
    didn't can't couldn't wasn't won't wouldn't shouldn't mustn't gonna wanna"""
)
_IRREGULAR = {
    "am": "is",
    "have": "has",
    "haven't": "hasn't",
    "do": "does",
    "don't": "doesn't",
    "go": "goes",
    "be": "is",
}

_CONTRACTIONS = {"i'm": " is", "i've": " has", "i'll": " will"}

_WORD = re.compile(r"[A-Za-z0-9]+(?:['-][A-Za-z0-9]+)*")
_SPEAKER = re.compile(
    r"^\s*(?P<name>[A-Za-z][\w.@'-]{0,39}(?: [A-Z][\w'-]{0,39}){0,2})\s*:\s+(?P<rest>\S.*)$",
    re.S,
)
_SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*(?=\s)")
_INTERJECTION_PREFIX = re.compile(
    r"^(?:(?i:hi|hey|hello|hiya|yo|wow|whoa|yeah|yep|yup|yes|nope|oh|ah|aw+|ok|okay|well"
    r"|lol|haha\w*|omg|thanks|thank you|um+|uh+|hmm+|sure|cool|awesome|great)"
    r"(?:\s+(?i:so much|a lot))?(?:,?\s+[A-Z][\w'-]*)?\s*[,!.:;]+\s*)+"
)
_CLAUSE_SEPARATORS = ("; ", ", and ", ", but ", " \u2013 ", " \u2014 ", " - ")
_TOKENS = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*|[^A-Za-z]+")
_ENTITY = re.compile(
    r"[\w.+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+"  # e-mail address
    r"|(?<![\w@])@\w{1,39}"  # @handle
    r"|\bv\d+(?:\.\d+)+\b|\b\d+\.\d+\.\d+\b"  # version number
    r"|\b[A-Za-z]+\d+[A-Za-z\d]*\b"  # p99, k8s, ec2
    r"|\b[a-z]+[A-Z]\w*"  # gRPC, iPhone
    r"|\b[A-Z][\w&'-]*(?: [A-Z][\w&'-]*)*"  # capitalised run: Acme HQ, New York
)


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def split_speaker(line: str) -> tuple[str | None, str]:
    """``("Caroline", "I went ...")`` from ``"Caroline: I went ..."``; else ``(None, line)``.

    A speaker is one to three capitalised words, a role ("user", "assistant") or an
    id ("agent-7", "u_42"); labels such as "Note:" or "reason:" are not speakers.
    """
    match = _SPEAKER.match(line)
    if match is None:
        return None, line
    name = match["name"]
    if name.lower() in _NOT_SPEAKERS:
        return None, line
    # A plain lower-case word ("reason: ...") is a label; roles and ids ("agent-7") speak.
    if name[0].islower() and name.isalpha() and name not in _ROLES:
        return None, line
    return name, match["rest"]


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text``, split after ``.``, ``!`` or ``?`` and at line breaks.

    A full stop after an abbreviation ("Dr.", "e.g.") or an initial ("J.") does not
    end a sentence, nor does one followed by a lower-case word.
    """
    sentences: list[str] = []
    for line in text.splitlines():
        start = 0
        for match in _SENTENCE_END.finditer(line):
            end = match.end()
            rest = line[end:].lstrip()
            if rest and rest[0].islower():
                continue
            before = line[start : match.start()].split()
            last = before[-1].lstrip("(\"'").lower() if before else ""
            if match.group(0).startswith(".") and (
                last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha())
            ):
                continue
            sentences.append(line[start:end].strip())
            start = end
        sentences.append(line[start:].strip())
    return [s for s in sentences if s]


def is_question(sentence: str) -> bool:
    """Whether the sentence asks rather than states."""
    return sentence.rstrip().rstrip("\"')]").endswith("?")


def strip_interjections(sentence: str) -> str:
    """Drop a leading "Wow, ", "Yeah, ", "Hey Caroline, " (and repeats of them)."""
    return _INTERJECTION_PREFIX.sub("", sentence, count=1)


def content_word_count(text: str) -> int:
    """Words that carry meaning: not stop words nor interjections.

    First-person pronouns count, since they stand for the speaker ("I love hiking").
    """
    return sum(
        1
        for word in _words(text)
        if word in _FIRST_PERSON_SINGULAR or (word not in _STOP and word not in _INTERJECTIONS)
    )


def is_statement(clause: str) -> bool:
    """Whether ``clause`` can be a fact: not a question, greeting, reaction or fragment."""
    if is_question(clause):
        return False
    words = _words(clause)
    if all(w in _STOP or w in _INTERJECTIONS or w in _REACTIONS for w in words):
        return False
    return content_word_count(clause) >= 3


def _full_clause(text: str, *, needs_subject: bool) -> bool:
    words = text.split()
    if len(words) < 3 or not is_statement(text):
        return False
    if not needs_subject:
        return True
    first = words[0].strip("\"'(")
    return first.lower() in _SUBJECTS or (first[:1].isupper() and first.lower() not in _STOP)


def split_clauses(sentence: str) -> list[str]:
    """``sentence`` cut at "; ", ", and", ", but" or a spaced dash, where both halves
    are full clauses (a subject and at least three content words each)."""
    for separator in _CLAUSE_SEPARATORS:
        at = sentence.find(separator)
        while at != -1:
            left, right = sentence[:at], sentence[at + len(separator) :]
            if _full_clause(left, needs_subject=False) and _full_clause(
                right, needs_subject=separator != "; "
            ):
                return split_clauses(left) + split_clauses(right)
            at = sentence.find(separator, at + 1)
    return [sentence]


def has_first_person(text: str) -> bool:
    """Whether the speaker talks about themselves ("I", "me", "my", "we", "our")."""
    return any(word in _FIRST_PERSON for word in _words(text))


def _third_person(verb: str) -> str:
    low = verb.lower()
    if low in _IRREGULAR:
        return _IRREGULAR[low]
    if low in _KEEP_VERB or low.endswith("ed") or "'" in low or not low.isalpha():
        return verb
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if len(low) > 1 and low.endswith("y") and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def rewrite_first_person(text: str, subject: str) -> str:
    """``text`` told about ``subject`` instead of "I": "I'm in Berlin" → "Caroline is in Berlin".

    Handles "I" (with the following verb put in the third person, skipping adverbs),
    "I'm", "I've", "I'd", "I'll", "me", "my" and "myself". ``subject`` is a name or
    "the user"; "my" becomes "<subject>'s".
    """
    tokens = _TOKENS.findall(text)
    out = list(tokens)

    def next_word(index: int) -> int | None:
        # Only a word separated by plain spaces continues the same phrase.
        if index + 2 < len(tokens) and tokens[index + 1].strip(" ") == "":
            return index + 2
        return None

    for i, token in enumerate(tokens):
        before = tokens[i - 1] if i else ""
        after = tokens[i + 1] if i + 1 < len(tokens) else ""
        if before.endswith("-") or after.startswith("-"):
            continue  # "me-time" is a compound, not a pronoun
        low = token.lower()
        if low == "i":
            out[i] = subject
            j = next_word(i)
            skipped = 0
            while j is not None and skipped < 3 and tokens[j].lower() in _ADVERBS:
                j = next_word(j)
                skipped += 1
            if j is not None and tokens[j].islower():
                out[j] = _third_person(tokens[j])
        elif low in _CONTRACTIONS:
            out[i] = subject + _CONTRACTIONS[low]
        elif low == "i'd":
            j = next_word(i)
            perfect = j is not None and tokens[j].lower() in {"been", "had", "already", "never"}
            out[i] = subject + (" had" if perfect else " would")
        elif low == "me":
            out[i] = subject
        elif low == "my":
            out[i] = subject + "'s"
        elif low == "myself":
            out[i] = "themself"
    return "".join(out)


def find_entities(text: str) -> tuple[str, ...]:
    """Names, e-mails, @handles, versions and codes like "p99", in order, without repeats.

    A capitalised run loses its leading and trailing stop words ("The", "My"); a
    single sentence-initial word that looks like a verb form ("Taking", "Excited")
    is capitalised by position, not by being a name, and is left out.
    """
    found: list[str] = []
    seen: set[str] = set()
    for match in _ENTITY.finditer(text):
        value = match.group(0)
        if value[0].isupper() and "@" not in value:
            raw = value.split(" ")
            words = [w.removesuffix("'s") for w in raw]
            while words and words[0].lower() in _NON_ENTITY_CAPS:
                words.pop(0)
            while words and words[-1].lower() in _NON_ENTITY_CAPS:
                words.pop()
            initial = match.start() == 0 and len(raw) == 1
            if initial and words and words[0].lower().endswith(("ing", "ed", "ly")):
                continue
            value = " ".join(words)
            if len(value) < 2 or "'" in value:
                continue
        key = value.casefold()
        if key not in seen:
            seen.add(key)
            found.append(value)
    return tuple(found)
