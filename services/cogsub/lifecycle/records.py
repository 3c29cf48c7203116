"""What forgetting writes and answers, as data: audit keys, plans, audit records, reports (pure).

Every forget leaves one audit record at ``audit/{bank}/{stamp}-{uuid}.json``: who
asked, what was erased (memory ids and counts), when — never a memory's text.
While a forget runs, its plan waits at ``audit/{bank}/pending/{stamp}-{uuid}.json``
so an interrupted run can be completed by the next call; the plan is erased once
the audit record is written. Both are written once and never overwritten.
The reports a forget answers with are the API's, in :mod:`cogsub.core.lifecycle`.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from cogsub.core.events import format_timestamp
from cogsub.core.lifecycle import ForgetBankReport as ForgetBankReport
from cogsub.core.lifecycle import ForgetReport as ForgetReport

AUDIT_PREFIX = "audit/"
PENDING_FOLDER = "pending/"
FORMAT_VERSION = 1
MAX_ACTOR_LENGTH = 64
ANONYMOUS = "anonymous"
_ACTOR = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:@+-]*")


class ForgetAction(StrEnum):
    FORGET = "forget"
    FORGET_BANK = "forget_bank"


def audit_prefix(bank_id: str) -> str:
    return f"{AUDIT_PREFIX}{bank_id}/"


def pending_prefix(bank_id: str) -> str:
    return f"{audit_prefix(bank_id)}{PENDING_FOLDER}"


def new_stem(now: datetime) -> str:
    """A key stem that sorts by time and never collides: ``20260520T120000.123456Z-<uuid>``."""
    return f"{now.astimezone(UTC):%Y%m%dT%H%M%S.%fZ}-{uuid.uuid4().hex}"


def audit_key(bank_id: str, stem: str) -> str:
    return f"{audit_prefix(bank_id)}{stem}.json"


def pending_key(bank_id: str, stem: str) -> str:
    return f"{pending_prefix(bank_id)}{stem}.json"


def is_audit_record_key(bank_id: str, key: str) -> bool:
    """Whether ``key`` is an audit record of ``bank_id`` (not a pending plan)."""
    rest = key.removeprefix(audit_prefix(bank_id))
    return rest != key and "/" not in rest and rest.endswith(".json")


def actor_label(value: str | None) -> str:
    """``value`` if it is a short safe label, else ``anonymous`` (it ends up in an object)."""
    if value and len(value) <= MAX_ACTOR_LENGTH and _ACTOR.fullmatch(value):
        return value
    return ANONYMOUS


class _Stored(BaseModel):
    """camelCase in the archive, like every other object there; unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

    def to_json(self) -> bytes:
        return self.model_dump_json(by_alias=True).encode()


class ForgetPlan(_Stored):
    """What one forget will erase, written before it starts (ids and keys, never texts)."""

    format_version: int = FORMAT_VERSION
    action: ForgetAction
    bank_id: str
    memory_id: str | None = None
    stem: str
    actor: str
    requested_at: str
    memory_ids: list[str] = Field(default_factory=list)
    object_keys: list[str] = Field(default_factory=list)
    proof_recount: list[str] = Field(
        default_factory=list, description="facts that lose evidence and keep living"
    )
    unsupersede: list[str] = Field(
        default_factory=list, description="memories whose winner is forgotten: live again"
    )
    unlink: dict[str, list[str]] = Field(
        default_factory=dict, description="winner → forgotten losers to drop from its tags"
    )
    scan_archive: bool = False


class AuditRecord(_Stored):
    """The lasting trace of a forget: who, what (ids and counts), when. Never content."""

    format_version: int = FORMAT_VERSION
    action: ForgetAction
    bank_id: str
    memory_id: str | None = None
    memory_ids: list[str] = Field(default_factory=list)
    counts: dict[str, int]
    actor: str
    requested_at: str
    completed_at: str
    resumed: bool = False


def plan_for_bank(bank_id: str, *, actor: str, now: datetime, scan_archive: bool) -> ForgetPlan:
    return ForgetPlan(
        action=ForgetAction.FORGET_BANK,
        bank_id=bank_id,
        stem=new_stem(now),
        actor=actor,
        requested_at=format_timestamp(now),
        scan_archive=scan_archive,
    )


def audit_of(
    plan: ForgetPlan, *, counts: dict[str, int], now: datetime, resumed: bool
) -> AuditRecord:
    return AuditRecord(
        action=plan.action,
        bank_id=plan.bank_id,
        memory_id=plan.memory_id,
        memory_ids=plan.memory_ids,
        counts=counts,
        actor=plan.actor,
        requested_at=plan.requested_at,
        completed_at=format_timestamp(now),
        resumed=resumed,
    )
