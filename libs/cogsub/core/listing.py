"""Browsing what a bank holds: bank summaries, memory pages and their cursors.

One set of models for the API, the SDKs and the CLI. A memory page is newest
first, and its cursor is the (timestamp, event_id) of the last memory handed
out: the next page starts strictly after it, so memories written or forgotten
between two pages never shift the ones still to come (no item skipped or
repeated). Cursors are opaque to callers: URL-safe base64 of that key.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime

from pydantic import Field

from cogsub.core.errors import FieldProblem, InvalidInputError
from cogsub.core.events import FactType, Instant, Tag
from cogsub.core.memory import BoundaryModel, MemoryRecord

DEFAULT_PAGE_LIMIT = 50
MAX_PAGE_LIMIT = 200
MAX_BANK_PAGE_LIMIT = 1_000
MAX_CURSOR_LENGTH = 1_024


class BankSummary(BoundaryModel):
    """One bank: how many memories it holds, by type, and when its newest one happened."""

    bank_id: str
    total: int = Field(ge=0)
    counts: dict[FactType, int] = Field(
        description="memories per fact type (types the bank does not hold are left out)"
    )
    newest_at: str | None = Field(description="timestamp of the newest memory; null when empty")


class BankPage(BoundaryModel):
    banks: list[BankSummary]
    next_cursor: str | None = Field(description="pass as `cursor` for the next page; null at end")


class MemoryPage(BoundaryModel):
    memories: list[MemoryRecord] = Field(description="newest first")
    next_cursor: str | None = Field(description="pass as `cursor` for the next page; null at end")


class MemoryListFilters(BoundaryModel):
    """What ``GET /v1/banks/{bank_id}/memories`` narrows a page to."""

    types: list[FactType] | None = None
    tags: list[Tag] | None = Field(default=None, description="any of these tags")
    since: Instant | None = Field(default=None, description="inclusive")
    until: Instant | None = Field(default=None, description="exclusive")
    include_superseded: bool = Field(
        default=False, description="also memories a newer version or a winner superseded"
    )
    cursor: str | None = Field(default=None, max_length=MAX_CURSOR_LENGTH)
    limit: int = Field(default=DEFAULT_PAGE_LIMIT, ge=1, le=MAX_PAGE_LIMIT)


@dataclass(frozen=True, order=True)
class ListingKey:
    """Where a memory sits in a newest-first listing: by time, then by id (descending)."""

    timestamp: str
    event_id: str


def encode_cursor(key: ListingKey) -> str:
    raw = json.dumps([key.timestamp, key.event_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, *, field: str = "cursor") -> ListingKey:
    """The key a cursor of ``encode_cursor`` names.

    Raises:
        InvalidInputError: naming ``field`` when the cursor was not made by ``encode_cursor``.
    """
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        timestamp, event_id = json.loads(raw)
    except (binascii.Error, ValueError, TypeError):
        raise _bad_cursor(field) from None
    if not isinstance(timestamp, str) or not isinstance(event_id, str) or not event_id:
        raise _bad_cursor(field)
    if not _is_aware_time(timestamp):  # a forged key would fail later, naming another field
        raise _bad_cursor(field)
    return ListingKey(timestamp, event_id)


def _is_aware_time(text: str) -> bool:
    try:
        return datetime.fromisoformat(text).tzinfo is not None
    except ValueError:
        return False


def encode_bank_cursor(bank_id: str) -> str:
    return base64.urlsafe_b64encode(bank_id.encode()).decode().rstrip("=")


def decode_bank_cursor(cursor: str, *, field: str = "cursor") -> str:
    """The last bank id of the page a bank cursor ends; banks come in id order.

    Raises:
        InvalidInputError: naming ``field`` for a cursor ``encode_bank_cursor`` did not make.
    """
    try:
        bank_id = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
    except (binascii.Error, ValueError):
        raise _bad_cursor(field) from None
    if not bank_id:
        raise _bad_cursor(field)
    return bank_id


def _bad_cursor(field: str) -> InvalidInputError:
    return InvalidInputError(
        [FieldProblem(field, "must be a next_cursor returned by the previous page")]
    )
