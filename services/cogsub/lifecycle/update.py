"""Updating a memory: a new version that supersedes the old one, never a rewrite.

The archive is write-once, so an update is a retain of the new content (through
the pipeline, like any memory) followed by the supersession consolidation
itself writes: a write-once record naming the new version and the rule
``update``, the ``superseded-by:``/``valid-to:`` tags on the old version and a
``supersedes:`` tag on the new one (``DerivedWriter.supersede``). Recall leaves
the old version out from then on; ``GET …/memories/{old}`` and its history
still show it. A procedure's new version is also retained with ``supersedes``,
so it is the next version of the same procedure.

Concurrent updates of one memory race for its write-once supersession record,
claimed before anything is retained: the one stored first wins, the others are
refused naming it, so a line never forks. The old version is superseded only
once the index serves the new one (whatever ``wait`` says), so the new version's
``supersedes:`` tag is written and a refused new version leaves the old one live.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime

from cogsub.consolidation.writer import DerivedWriter
from cogsub.core.derived import (
    CLUSTER_TAG,
    DERIVED_TAG,
    PROOF_TAG,
    SUPERSEDED_BY_TAG,
    SUPERSEDES_TAG,
    TIER_TAG,
    VALID_TO_TAG,
    is_superseded,
    supersession_key,
    tag_value,
)
from cogsub.core.documents import IndexDocument
from cogsub.core.errors import (
    ConflictError,
    FieldProblem,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
)
from cogsub.core.events import ArchivedEvent, FactType
from cogsub.core.history import UPDATE_RULE, MemoryUpdate
from cogsub.core.memory import (
    PROCEDURE_TAG_PREFIX,
    VERSION_TAG_PREFIX,
    RetainContext,
    RetainRequest,
    RetainResult,
    procedure_text,
)
from cogsub.index.ports import SearchFilters, procedure_of
from cogsub.recall import MemoryService
from cogsub.recall.retain import same_content_key

__all__ = ["MemoryUpdater", "SYSTEM_TAG_PREFIXES", "new_version_id", "new_version_request"]

#: Tags the substrate writes itself; a new version gets its own, never the old one's.
SYSTEM_TAG_PREFIXES = (
    PROCEDURE_TAG_PREFIX,
    VERSION_TAG_PREFIX,
    DERIVED_TAG,
    SUPERSEDED_BY_TAG,
    SUPERSEDES_TAG,
    VALID_TO_TAG,
    PROOF_TAG,
    CLUSTER_TAG,
    TIER_TAG,
)


class MemoryUpdater:
    """Makes a new version of a memory and has it supersede the old one."""

    def __init__(
        self, service: MemoryService, *, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    ) -> None:
        self._service = service
        self._stores = service.stores
        self._clock = clock

    async def update(self, bank_id: str, memory_id: str, body: MemoryUpdate) -> RetainResult:
        """Retain ``body`` as the new version of ``memory_id`` and supersede the old one.

        Raises:
            NotFoundError: the bank holds no such memory.
            ConflictError: it was superseded already (update its newest version instead).
            InvalidInputError: the body does not fit the memory's type, or changes nothing.
        """
        old = await self._stores.index.get(bank_id, memory_id)
        if old is None:
            raise NotFoundError(f"no memory {memory_id!r} in bank {bank_id!r}")
        archived = ArchivedEvent.model_validate_json(
            await self._stores.archive.get(old.object_storage_key)
        )
        request = new_version_request(bank_id, old, archived, body)
        new_id = request.memory_id
        assert new_id is not None  # new_version_request always names the new version
        if new_id == memory_id:
            raise InvalidInputError([FieldProblem("memory_id", "must differ from the old one")])
        if tag_value(old.tags, SUPERSEDED_BY_TAG) == new_id:
            # A retry of the update that superseded it: the same new version, once.
            return await self._service.retain(bank_id, request)
        await self._check_newest(bank_id, old)
        writer = DerivedWriter(
            bus=self._stores.bus,
            archive=self._stores.archive,
            index=self._stores.index,
            embedder=self._stores.embedder,
        )
        valid_to = request.timestamp or self._clock()
        record = await writer.claim(bank_id, memory_id, new_id, valid_to=valid_to, rule=UPDATE_RULE)
        if record["supersededBy"] != new_id:
            raise ConflictError(
                f"memory_id: {memory_id!r} was superseded by {record['supersededBy']!r};"
                " update that one"
            )
        result = await self._retain_indexed(bank_id, memory_id, request)
        await writer.supersede(bank_id, memory_id, new_id, valid_to=valid_to, rule=UPDATE_RULE)
        return result

    async def _retain_indexed(
        self, bank_id: str, memory_id: str, request: RetainRequest
    ) -> RetainResult:
        """Retain the new version and return once the index serves it.

        A retain that fails gives the claim on ``memory_id`` up, so the old version stays
        the live one and may be updated again.

        Raises:
            UnavailableError: the new version was not indexed within the wait; the same
                update sent again finishes it (the claim names that version).
        """
        try:
            result = await self._service.retain(bank_id, request.model_copy(update={"wait": True}))
        except Exception:
            await self._stores.archive.delete(supersession_key(bank_id, memory_id))
            raise
        if not result.recallable:
            raise UnavailableError(
                f"memory_id: the new version {result.memory_id!r} is not indexed yet;"
                " send the same update again to finish it"
            )
        return result

    async def _check_newest(self, bank_id: str, old: IndexDocument) -> None:
        """Refuse to fork a line: only its newest version may be updated."""
        winner = tag_value(old.tags, SUPERSEDED_BY_TAG)
        if is_superseded(old):
            raise ConflictError(
                f"memory_id: {old.event_id!r} was superseded by {winner!r}; update that one"
            )
        found = procedure_of(old.tags)
        if found is None:
            return
        tag = f"{PROCEDURE_TAG_PREFIX}{found[0]}"
        filters = SearchFilters(bank_id=bank_id, tags_any=frozenset({tag}))
        versions = await self._stores.index.scan(filters, size=1_000)
        newer = [d for d in versions if (procedure_of(d.tags) or ("", 0))[1] > found[1]]
        if newer:
            raise ConflictError(
                f"memory_id: {old.event_id!r} is version {found[1]}; update the newest version"
                f" {max(newer, key=lambda d: procedure_of(d.tags) or ('', 0)).event_id!r}"
            )


def new_version_request(
    bank_id: str, old: IndexDocument, archived: ArchivedEvent, body: MemoryUpdate
) -> RetainRequest:
    """The retain that makes ``body`` the next version of ``old`` (pure).

    Raises:
        InvalidInputError: naming ``steps`` or ``content`` when the body does not fit the
            memory's type, or when it says exactly what the old version says.
    """
    procedure = procedure_of(old.tags) is not None or old.fact_type is FactType.PROCEDURE
    content, rationale = _new_content(archived, body, procedure=procedure)
    if same_content_key(content) == same_content_key(archived.input.text):
        field = "steps" if procedure else "content"
        raise InvalidInputError([FieldProblem(field, "must change what the memory says")])
    tags = body.tags if body.tags is not None else user_tags(old.tags)
    context = archived.context.model_dump(exclude_none=True)
    return RetainRequest(
        content=content,
        fact_type=old.fact_type,
        tags=tags,
        timestamp=body.timestamp,
        context=RetainContext.model_validate(context),
        memory_id=body.memory_id or new_version_id(bank_id, old.event_id, content),
        steps=body.steps if procedure else None,
        rationale=rationale,
        supersedes=old.event_id if procedure else None,
        wait=body.wait,
    )


def _new_content(
    archived: ArchivedEvent, body: MemoryUpdate, *, procedure: bool
) -> tuple[str, str | None]:
    """The new text (a procedure's from its steps) and rationale; the rationale carries over."""
    structured = archived.input.structured if isinstance(archived.input.structured, dict) else {}
    old_rationale = structured.get("rationale")
    rationale = body.rationale if body.rationale is not None else old_rationale
    rationale = rationale if isinstance(rationale, str) else None
    if procedure:
        if body.content is not None or body.steps is None:
            rule = "a procedure is updated with its steps (and rationale), not content"
            raise InvalidInputError([FieldProblem("steps", rule)])
        return procedure_text(body.steps, rationale), rationale
    if body.steps is not None or body.content is None:
        rule = "required: the new text (steps are for procedures only)"
        raise InvalidInputError([FieldProblem("content", rule)])
    return body.content, body.rationale


def user_tags(tags: list[str]) -> list[str]:
    """The tags a caller gave, without the ones the substrate wrote."""
    return [tag for tag in tags if not tag.startswith(SYSTEM_TAG_PREFIXES)]


def new_version_id(bank_id: str, old_id: str, content: str) -> str:
    """The same update sent twice makes one new version (a retry is a no-op)."""
    digest = hashlib.sha256("\x1f".join(("update", bank_id, old_id, content)).encode())
    return f"upd-{digest.hexdigest()[:24]}"
