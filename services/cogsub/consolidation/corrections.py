"""Distilling corrections: preference text, procedure repairs and the conflict rule (pure).

A correction is the raw "no — do it this way". Consolidation turns it into one of:

- a **procedure repair** when it names a step of a procedure the bank holds
  ("drain the pod before restart" → a new step before the step that restarts);
- otherwise a **preference**: the instruction without the "no —" that framed it.

Preferences compete when they are about the same thing. The conflict rule:
explicit (a correction or a stated preference) > a repeated pattern (an
observation) > a one-off inference (a single fact), ties broken by recency.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from enum import IntEnum, StrEnum

from cogsub.consolidation.similarity import containment, content_words

_LEAD = re.compile(
    r"^\s*(?:(?:no|nope|wrong|incorrect|not quite|actually|correction|careful|stop)\b"
    r"[\s,.:;!—–-]*)+",
    re.IGNORECASE,
)
_BEFORE = re.compile(r"^(?P<new>.+?)\s+(?:before|prior to|ahead of)\s+(?P<anchor>.+)$", re.I)
_AFTER = re.compile(r"^(?P<new>.+?)\s+(?:after|once|following)\s+(?P<anchor>.+)$", re.I)
_INSTEAD = re.compile(r"^(?P<new>.+?)\s+(?:instead of|rather than|not)\s+(?P<anchor>.+)$", re.I)
_NOT_BUT = re.compile(r"^(?:don't|do not|never|not)\s+(?P<anchor>.+?)[,;]\s*(?P<new>.+)$", re.I)
_SKIP = re.compile(r"^(?:don't|do not|never|skip|no need to)\s+(?P<anchor>.+)$", re.I)
_PREFERENCE_CUES = re.compile(
    r"\b(prefer|prefers|preferred|likes?|loves?|hates?|wants?|always|usually|never|"
    r"would rather|favou?rite)\b",
    re.IGNORECASE,
)
MIN_ANCHOR_MATCH = 0.5


class Tier(IntEnum):
    """How much a preference's origin is trusted (higher wins a conflict)."""

    INFERRED = 1
    REPEATED = 2
    EXPLICIT = 3


TIER_NAMES = {
    Tier.EXPLICIT: "explicit correction",
    Tier.REPEATED: "repeated pattern",
    Tier.INFERRED: "one-off inference",
}


class RepairAction(StrEnum):
    INSERT_BEFORE = "insert_before"
    INSERT_AFTER = "insert_after"
    REPLACE = "replace"
    REMOVE = "remove"


@dataclass(frozen=True)
class Repair:
    """A change to one step of a procedure, and the new step list it gives."""

    action: RepairAction
    step_index: int
    new_step: str | None
    steps: tuple[str, ...]

    def describe(self) -> str:
        step = self.step_index + 1
        if self.action is RepairAction.REMOVE:
            return f"removed step {step}"
        if self.action is RepairAction.REPLACE:
            return f"replaced step {step} with {self.new_step!r}"
        where = "before" if self.action is RepairAction.INSERT_BEFORE else "after"
        return f"inserted {self.new_step!r} {where} step {step}"


def instruction(text: str) -> str:
    """The instruction a correction gives: its text without the "no —" framing."""
    body = _LEAD.sub("", text.strip()).strip()
    body = body.rstrip(" .!")
    return (body[:1].upper() + body[1:]) if body else text.strip()


def preference_text(correction_text: str) -> str:
    return instruction(correction_text) + "."


def looks_like_preference(text: str) -> bool:
    """Whether a fact states a preference or habit ("prefers", "always", ...)."""
    return _PREFERENCE_CUES.search(text) is not None


def plan_repair(correction_text: str, steps: tuple[str, ...]) -> Repair | None:
    """The repair ``correction_text`` asks of ``steps``, or ``None`` if it names no step."""
    said = instruction(correction_text)
    for pattern, action in (
        (_NOT_BUT, RepairAction.REPLACE),
        (_INSTEAD, RepairAction.REPLACE),
        (_BEFORE, RepairAction.INSERT_BEFORE),
        (_AFTER, RepairAction.INSERT_AFTER),
        (_SKIP, RepairAction.REMOVE),
    ):
        found = pattern.match(said)
        if found is None:
            continue
        index = _matching_step(found.group("anchor"), steps)
        if index is None:
            continue
        new = found.groupdict().get("new")
        return _applied(action, index, _step_text(new) if new else None, steps)
    return None


def _matching_step(anchor: str, steps: tuple[str, ...]) -> int | None:
    words = content_words(anchor)
    scored = [(containment(words, content_words(step)), -i) for i, step in enumerate(steps)]
    if not scored:
        return None
    best, negative_index = max(scored)
    return -negative_index if best >= MIN_ANCHOR_MATCH else None


def _step_text(text: str) -> str:
    text = text.strip().rstrip(" .!")
    return text[:1].upper() + text[1:]


def _applied(action: RepairAction, index: int, new: str | None, steps: tuple[str, ...]) -> Repair:
    out = list(steps)
    if action is RepairAction.INSERT_BEFORE:
        out.insert(index, new or "")
    elif action is RepairAction.INSERT_AFTER:
        out.insert(index + 1, new or "")
    elif action is RepairAction.REPLACE:
        out[index] = new or out[index]
    else:
        del out[index]
    return Repair(action=action, step_index=index, new_step=new, steps=tuple(out))


@dataclass(frozen=True)
class Contender:
    """A preference competing for a topic."""

    memory_id: str
    tier: Tier
    timestamp: datetime


def winner(contenders: list[Contender]) -> Contender:
    """The conflict rule: highest tier, then the most recent, then the larger id (stable)."""
    return max(contenders, key=lambda c: (c.tier, c.timestamp, c.memory_id))


def resolution(won: Contender, lost: Contender) -> str:
    """Why ``won`` beat ``lost``, in words for ``explain``."""
    if won.tier != lost.tier:
        return f"{TIER_NAMES[won.tier]} outranks {TIER_NAMES[lost.tier]}"
    return f"newer {TIER_NAMES[won.tier]} replaces an older one (recency tie-break)"
