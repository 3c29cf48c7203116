"""LoCoMo's file format, read into plain records (pure: no I/O beyond reading the file).

A LoCoMo file is a JSON list of samples. Each sample has a ``sample_id``, a
``conversation`` (``speaker_a``, ``speaker_b``, ``session_N`` lists of
``{speaker, dia_id, text[, blip_caption]}`` turns, ``session_N_date_time``
strings such as ``"1:56 pm on 8 May, 2023"``) and ``qa`` items
(``{question, answer, evidence: [dia_id, ...], category}``).

The evaluation turns every dialog turn into one memory: ``"Speaker: text"``
(plus the caption of a shared photo, which is part of what was said), timed
at its session's date plus one second per position, so turns keep their order.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cogsub.core.errors import FieldProblem, InvalidInputError
from cogsub.core.events import MAX_ID_LENGTH

ADVERSARIAL_CATEGORY = 5
"""Questions of this category have no answer in the conversation; recall is not scored on them."""

_SESSION_KEY = re.compile(r"session_(\d+)")
_SESSION_TIME = re.compile(
    r"(?P<hour>\d{1,2})[:.](?P<minute>\d{2})\s*(?P<half>[ap])\.?\s*m\.?\s*(?:on\s+)?"
    r"(?P<day>\d{1,2})\s+(?P<month>[a-z]+)\.?,?\s+(?P<year>\d{4})",
    re.IGNORECASE,
)
_MONTHS = {
    name: number
    for number, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9_.:@+-]+")
_EVIDENCE_SPLIT = re.compile(r"[;,\s]+")


@dataclass(frozen=True)
class Turn:
    """One dialog turn, as the memory it becomes."""

    dia_id: str
    speaker: str
    text: str
    session: int
    position: int
    timestamp: datetime
    caption: str | None = None

    @property
    def content(self) -> str:
        """``"Speaker: text"``, with a shared photo's caption after it."""
        said = f"{self.speaker}: {self.text}".strip()
        return f"{said} [shared {self.caption}]" if self.caption else said


@dataclass(frozen=True)
class Question:
    """A question with the dia_ids of the turns that answer it."""

    question: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Conversation:
    """One LoCoMo sample: its turns in order and its questions."""

    sample_id: str
    speakers: tuple[str, ...]
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]

    def session_id(self, turn: Turn) -> str:
        return f"{self.sample_id}:session_{turn.session}"


def parse_session_time(text: str) -> datetime:
    """``"1:56 pm on 8 May, 2023"`` (or an ISO-8601 string) as an aware UTC datetime.

    Raises:
        ValueError: the text is neither form.
    """
    found = _SESSION_TIME.search(text)
    if found is None:
        parsed = datetime.fromisoformat(text.strip())
        return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)
    month = _MONTHS.get(found["month"].lower())
    if month is None:
        raise ValueError(f"unknown month {found['month']!r} in {text!r}")
    hour = int(found["hour"]) % 12 + (12 if found["half"].lower() == "p" else 0)
    return datetime(
        int(found["year"]), month, int(found["day"]), hour, int(found["minute"]), tzinfo=UTC
    )


def safe_id(text: str) -> str:
    """``text`` as a SafeId: refused characters and ``..`` become ``_``, at most 128 long."""
    cleaned = _UNSAFE_ID_CHARS.sub("_", text)
    while ".." in cleaned:
        cleaned = cleaned.replace("..", "_")
    cleaned = cleaned if cleaned[:1].isalnum() or cleaned[:1] == "_" else f"_{cleaned}"
    return cleaned[:MAX_ID_LENGTH]


def memory_id_for(sample_id: str, dia_id: str) -> str:
    """The memory id of a turn: unique per conversation, stable across runs."""
    return safe_id(f"{sample_id}.{dia_id}")


def evidence_ids(raw: object) -> tuple[str, ...]:
    """Evidence dia_ids, also when one string holds several (``"D8:6; D9:17"``)."""
    items = raw if isinstance(raw, list) else [raw] if isinstance(raw, str) else []
    found: list[str] = []
    for item in items:
        if isinstance(item, str):
            found.extend(part for part in _EVIDENCE_SPLIT.split(item) if part)
    return tuple(dict.fromkeys(found))


def load_locomo(path: str | Path) -> list[Conversation]:
    """Every conversation of a LoCoMo-format file.

    Raises:
        InvalidInputError: the file is not in LoCoMo's format.
        OSError: the file cannot be read.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InvalidInputError([FieldProblem(str(path), f"not JSON: {exc}")]) from exc
    samples = data if isinstance(data, list) else [data]
    return [_conversation(sample, index) for index, sample in enumerate(samples)]


def _conversation(sample: Any, index: int) -> Conversation:
    where = f"[{index}]"
    if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
        raise InvalidInputError([FieldProblem(where, "must hold a 'conversation' object")])
    sample_id = str(sample.get("sample_id", f"sample-{index}"))
    conversation: dict[str, Any] = sample["conversation"]
    speakers = tuple(
        str(conversation[key]) for key in ("speaker_a", "speaker_b") if key in conversation
    )
    sessions = sorted(
        int(found[1])
        for key, value in conversation.items()
        if (found := _SESSION_KEY.fullmatch(key)) and isinstance(value, list)
    )
    turns: list[Turn] = []
    for number in sessions:
        turns.extend(_session_turns(conversation, number, f"{where}.conversation"))
    questions = [
        Question(
            question=str(item["question"]),
            evidence=evidence_ids(item.get("evidence")),
            category=int(item.get("category", 0)),
        )
        for item in sample.get("qa", [])
        if isinstance(item, dict) and item.get("question")
    ]
    return Conversation(sample_id, speakers, tuple(turns), tuple(questions))


def _session_turns(conversation: dict[str, Any], number: int, where: str) -> list[Turn]:
    key = f"session_{number}_date_time"
    raw_time = conversation.get(key)
    if not isinstance(raw_time, str):
        raise InvalidInputError([FieldProblem(f"{where}.{key}", "missing session date")])
    try:
        started = parse_session_time(raw_time)
    except ValueError as exc:
        raise InvalidInputError([FieldProblem(f"{where}.{key}", str(exc))]) from exc
    turns = []
    for position, item in enumerate(conversation[f"session_{number}"]):
        if not isinstance(item, dict) or "dia_id" not in item:
            problem = FieldProblem(f"{where}.session_{number}[{position}]", "turn without dia_id")
            raise InvalidInputError([problem])
        caption = item.get("blip_caption")
        turns.append(
            Turn(
                dia_id=str(item["dia_id"]),
                speaker=str(item.get("speaker", "")),
                text=str(item.get("text", "")),
                session=number,
                position=position,
                timestamp=started + timedelta(seconds=position),
                caption=caption if isinstance(caption, str) and caption.strip() else None,
            )
        )
    return turns
