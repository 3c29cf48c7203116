"""The typed text blocks a bank takes verbatim, and where each one is sent.

Reasonings, preferences, corrections and the profile differ only by fact
type: one body (the text, tags, an optional id, ``wait``), one answer (a
``RetainResult``). This table is the one place that says so; the API builds
its routes from it and the SDK its requests, so the two cannot disagree on a
path, a method or an operation id.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from cogsub.core.events import FactType

TextBlockKind = Literal["reasoning", "preference", "correction", "profile"]


@dataclass(frozen=True)
class TextBlock:
    """One typed block: its fact type and its route under ``/v1/banks/{bank_id}``."""

    fact_type: FactType
    resource: str
    method: Literal["POST", "PUT"]
    operation_id: str
    summary: str


TEXT_BLOCKS: Mapping[TextBlockKind, TextBlock] = {
    "reasoning": TextBlock(
        FactType.REASONING,
        "reasonings",
        "POST",
        "retainReasoning",
        "Keep why a decision was made",
    ),
    "preference": TextBlock(
        FactType.PREFERENCE,
        "preferences",
        "POST",
        "retainPreference",
        "Keep a conditional rule for how the user wants things",
    ),
    "correction": TextBlock(
        FactType.CORRECTION,
        "corrections",
        "POST",
        "retainCorrection",
        'Keep a raw "no, do it this way"',
    ),
    # A bank has one profile, replaced as a whole: hence PUT.
    "profile": TextBlock(
        FactType.PROFILE,
        "profile",
        "PUT",
        "updateProfile",
        "Record the user's tools, access and normal patterns",
    ),
}
