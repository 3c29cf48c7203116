"""What the API answers when a memory or a bank is forgotten, and when a bank is imported.

One model per answer, shared by the API (its response models and OpenAPI
schemas), the lifecycle service that builds them, the SDK that reads them and
the CLI that prints them, so the two ends cannot drift apart. Snake_case on the
wire, unknown fields refused, like every model of :mod:`cogsub.core.memory`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from cogsub.core.memory import BoundaryModel


class ForgetReport(BoundaryModel):
    """What ``forget`` erased: the memory and everything derived from its content."""

    bank_id: str
    memory_id: str
    forgotten: list[str] = Field(description="the memory id first, then what was derived from it")
    index_documents: int = Field(description="index documents deleted by this call")
    archive_objects: int = Field(description="archive objects erased (memories and bookkeeping)")
    audit_key: str
    resumed: bool = Field(default=False, description="an interrupted forget was completed")


class ForgetBankReport(BoundaryModel):
    """What ``forget_bank`` erased so far (also passed to progress callbacks).

    ``complete`` is true only once every memory and record of the bank is gone;
    a report that does not say so is not complete.
    """

    bank_id: str
    index_documents: int = 0
    memory_objects: int = 0
    consolidation_objects: int = 0
    audit_key: str
    resumed: bool = False
    complete: bool = False


class LineProblem(BoundaryModel):
    """One import line that was not taken: a ``conflict`` or an ``invalid`` line, and why."""

    line: int
    key: str | None
    problem: Literal["conflict", "invalid"]
    reason: str


class ImportReport(BoundaryModel):
    """What an import did, line by line summed up; ``problems`` lists the first few."""

    bank_id: str
    lines: int = Field(description="object lines read (header and trailer not counted)")
    imported: int = Field(description="objects written")
    present: int = Field(description="objects already there, identical")
    conflicts: int = Field(description="objects there with other content, left as they were")
    invalid: int = Field(description="lines that are not a valid object of this bank")
    indexed: int = Field(description="memories made recallable")
    complete: bool = Field(description="the trailer was read and its line count matches")
    problems: list[LineProblem] = Field(default_factory=list)
