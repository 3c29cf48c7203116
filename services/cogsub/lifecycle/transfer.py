"""Moving a bank between deployments: export as JSON lines, import without overwriting.

Export walks the bank's index documents (each memory line: the archived object
and the document's index state), then every other object under
``consolidation/{bank}/`` and the bank's audit records; see
:mod:`cogsub.lifecycle.bundle` for the format. Raw events that are archived but
not indexed (a worker mid-batch, a lost index) are not in it: replay first.

Import ``put_once``s each object: an object already there and identical counts
as present, one with other content is a conflict reported by line number and
left untouched. Memories are then indexed with the document the pipeline would
have built (``index_document_for`` with the archived embedding) carrying the
exported tags and signals — unless the target already indexes that memory, whose
live state wins. A memory whose id another bank holds in the index is a
conflict too, and the object this import had just written for it is erased
again. Importing the same file twice changes nothing the second time.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal

import structlog

from cogsub.archive.ports import ArchiveStore
from cogsub.core.derived import (
    PROOF_TAG,
    SUPERSEDED_BY_TAG,
    SUPERSEDES_TAG,
    VALID_TO_TAG,
    evidence_prefix,
    is_derived_memory_key,
    is_superseded,
    with_tags,
)
from cogsub.core.documents import IndexDocument
from cogsub.core.errors import (
    ConfigurationError,
    ConflictError,
    FieldProblem,
    InvalidInputError,
    NotFoundError,
    ObjectExistsError,
)
from cogsub.core.events import ArchivedEvent, format_timestamp
from cogsub.index.ports import MemoryIndex, SearchFilters
from cogsub.lifecycle.archive_reads import bounded, chunks, read_many
from cogsub.lifecycle.bundle import (
    MAX_PROBLEMS,
    ExportObject,
    ExportTrailer,
    ImportReport,
    LineProblem,
    at_current_key,
    body_of,
    checked_memory,
    header_line,
    imported_document,
    object_line,
    parse_body_line,
    parse_header,
    trailer_line,
)
from cogsub.lifecycle.forget import BATCH, owned_by
from cogsub.lifecycle.provenance import bank_prefix, evidence_from, folder_of
from cogsub.lifecycle.records import audit_prefix, is_audit_record_key

log = structlog.get_logger("cogsub.lifecycle")

Lines = AsyncIterable[bytes | str] | Iterable[bytes | str]
Outcome = Literal["created", "present", "conflict"]


@dataclass(frozen=True)
class _Pending:
    number: int
    line: ExportObject
    event: ArchivedEvent | None


@dataclass
class _Tally:
    bank_id: str
    lines: int = 0
    imported: int = 0
    present: int = 0
    conflicts: int = 0
    invalid: int = 0
    indexed: int = 0
    problems: list[LineProblem] = field(default_factory=list)

    def refuse(
        self, number: int, key: str | None, problem: Literal["conflict", "invalid"], reason: str
    ) -> None:
        if problem == "conflict":
            self.conflicts += 1
        else:
            self.invalid += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(LineProblem(line=number, key=key, problem=problem, reason=reason))

    def report(self, *, complete: bool) -> ImportReport:
        return ImportReport(
            bank_id=self.bank_id,
            lines=self.lines,
            imported=self.imported,
            present=self.present,
            conflicts=self.conflicts,
            invalid=self.invalid,
            indexed=self.indexed,
            complete=complete,
            problems=list(self.problems),
        )


class BankTransfer:
    """Export a bank to JSON lines and import such lines into this deployment."""

    def __init__(
        self,
        *,
        archive: ArchiveStore,
        index: MemoryIndex,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        batch_size: int = BATCH,
        dimension: int | None = None,
    ) -> None:
        self._archive = archive
        self._index = index
        self._clock = clock
        self._batch = batch_size
        self._dimension = dimension

    # -- export ----------------------------------------------------------------------

    async def export_bank(
        self, bank_id: str, *, on_progress: Callable[[int], None] | None = None
    ) -> AsyncIterator[bytes]:
        """The bank as JSON lines (each ending in a newline): header, objects, trailer."""
        bank_keys = [k async for k in self._archive.list(bank_prefix(bank_id))]
        audit_keys = [
            k
            async for k in self._archive.list(audit_prefix(bank_id))
            if is_audit_record_key(bank_id, k)
        ]
        expected = {
            "memories": await self._index.count(bank_id),
            "records": len([k for k in bank_keys if not is_derived_memory_key(k)])
            + len(audit_keys),
        }
        yield header_line(bank_id, exported_at=format_timestamp(self._clock()), counts=expected)
        memories = records = skipped = 0
        exported: set[str] = set()
        after: str | None = None
        filters = SearchFilters(bank_id=bank_id)
        while page := await self._index.scan(filters, size=self._batch, after=after):
            after = page[-1].event_id
            docs = [d for d in page if owned_by(bank_id, d.object_storage_key)]
            bodies = await read_many(self._archive, [d.object_storage_key for d in docs])
            for doc in docs:
                line = self._line(doc.object_storage_key, bodies, doc)
                if line is None:
                    skipped += 1
                    continue
                exported.add(doc.object_storage_key)
                memories += 1
                yield line
            if on_progress is not None:
                on_progress(memories + records)
        rest = [k for k in bank_keys if k not in exported] + audit_keys
        for chunk in chunks(rest, self._batch):
            bodies = await read_many(self._archive, chunk)
            for key in chunk:
                line = self._line(key, bodies, None)
                if line is None:
                    skipped += 1
                    continue
                records += 1
                yield line
            if on_progress is not None:
                on_progress(memories + records)
        log.info(
            "bank_exported", bank_id=bank_id, memories=memories, records=records, skipped=skipped
        )
        yield trailer_line(memories=memories, records=records, skipped=skipped)

    @staticmethod
    def _line(key: str, bodies: dict[str, bytes], doc: IndexDocument | None) -> bytes | None:
        body = bodies.get(key)
        line = object_line(key, body, doc) if body is not None else None
        if line is None:  # erased meanwhile, or not a JSON object: nothing to carry
            log.warning("export_object_skipped", key=key)
        return line

    # -- import ----------------------------------------------------------------------

    async def import_bank(
        self,
        lines: Lines,
        *,
        bank_id: str | None = None,
        on_progress: Callable[[ImportReport], None] | None = None,
    ) -> ImportReport:
        """Write an export's objects and index its memories; never overwrites anything.

        Args:
            lines: The export, one JSON line each (bytes or str, newline optional).
            bank_id: The bank the export must be of (default: the header's).
            on_progress: Called after each batch with the counts so far.

        Raises:
            InvalidInputError: no header, another format or version, or another bank.
            ConfigurationError: the export's vectors do not fit this deployment's index.
        """
        tally: _Tally | None = None
        trailer: ExportTrailer | None = None
        batch: list[_Pending] = []
        number = 0
        async for raw in _each(lines):
            number += 1
            if not raw.strip():
                continue
            if tally is None:
                header = parse_header(raw)
                if bank_id is not None and header.bank_id != bank_id:
                    raise InvalidInputError(
                        [
                            FieldProblem(
                                "bank_id",
                                f"the export is of bank {header.bank_id!r}, not {bank_id!r}; "
                                "importing into another bank is not supported",
                            )
                        ]
                    )
                tally = _Tally(bank_id=header.bank_id)
                continue
            pending = self._parsed(tally, number, raw, trailer)
            if isinstance(pending, ExportTrailer):
                trailer = pending
            elif pending is not None:
                batch.append(pending)
            if len(batch) >= self._batch:
                await self._import_batch(tally, batch)
                batch = []
                if on_progress is not None:
                    on_progress(tally.report(complete=False))
        if tally is None:
            raise InvalidInputError([FieldProblem("(header)", "the export is empty")])
        if batch:
            await self._import_batch(tally, batch)
        complete = trailer is not None and trailer.lines == tally.lines
        report = tally.report(complete=complete)
        log.info("bank_imported", **report.model_dump(exclude={"problems"}))
        return report

    @staticmethod
    def _parsed(
        tally: _Tally, number: int, raw: bytes | str, trailer: ExportTrailer | None
    ) -> _Pending | ExportTrailer | None:
        try:
            line = parse_body_line(raw)
        except InvalidInputError as exc:
            tally.lines += 1
            tally.refuse(number, None, "invalid", str(exc))
            return None
        if isinstance(line, ExportTrailer):
            return line
        tally.lines += 1
        if trailer is not None:
            tally.refuse(number, line.key, "invalid", "a line after the trailer")
            return None
        try:
            event = checked_memory(tally.bank_id, line)
        except InvalidInputError as exc:
            tally.refuse(number, line.key, "invalid", str(exc))
            return None
        if event is not None and line.index is None:
            tally.refuse(number, line.key, "invalid", "a memory line needs its index state")
            return None
        if event is not None:
            line, event = at_current_key(line, event)
        return _Pending(number, line, event)

    async def _import_batch(self, tally: _Tally, batch: list[_Pending]) -> None:
        dimensions = {len(p.event.input.embedding) for p in batch if p.event is not None}
        for dimension in sorted(dimensions):
            await self._ensure(dimension)
        outcomes = await bounded(batch, self._put)
        wanted: list[tuple[_Pending, bool, IndexDocument]] = []
        for item, outcome in zip(batch, outcomes, strict=True):
            if outcome == "conflict":
                tally.refuse(item.number, item.line.key, "conflict", "another object is there")
                continue
            if outcome == "created":
                tally.imported += 1
            else:
                tally.present += 1
            if item.event is None or item.line.index is None:
                continue
            created = outcome == "created"
            if not created and await self._index.get(tally.bank_id, item.event.event_id):
                continue  # already indexed here: its live signals win over the export's
            wanted.append((item, created, imported_document(item.event, item.line.index)))
        await self._index_all(tally, wanted)
        for item, outcome in zip(batch, outcomes, strict=True):
            if outcome == "created" and item.event is None:
                await self._follow_record(tally.bank_id, item.line)

    async def _follow_record(self, bank_id: str, line: ExportObject) -> None:
        """A record this import brought back puts its tags back on the memories it names.

        Memories already indexed here kept their live tags; a supersession record or a
        proof that was missing (say, forgotten since the export) must show there again.
        """
        folder = folder_of(bank_id, line.key)
        if folder == "supersessions":
            record = line.object
            loser, winner = str(record.get("memoryId")), str(record.get("supersededBy"))
            doc = await self._index.get(bank_id, loser)
            if doc is not None and not is_superseded(doc):
                tags = [f"{SUPERSEDED_BY_TAG}{winner}", f"{VALID_TO_TAG}{record.get('validTo')}"]
                await self._index.upsert([with_tags(doc, tags)])
            doc = await self._index.get(bank_id, winner)
            if doc is not None and f"{SUPERSEDES_TAG}{loser}" not in doc.tags:
                await self._index.upsert([with_tags(doc, [f"{SUPERSEDES_TAG}{loser}"])])
        elif folder == "evidence" and (proof := evidence_from(bank_id, line.key)) is not None:
            doc = await self._index.get(bank_id, proof.fact)
            found = [k async for k in self._archive.list(evidence_prefix(bank_id, proof.fact))]
            tag = f"{PROOF_TAG}{len(found)}"  # one evidence object per source
            if doc is not None and tag not in doc.tags:
                await self._index.upsert([with_tags(doc, [tag], replace=(PROOF_TAG,))])

    async def _ensure(self, dimension: int) -> None:
        if self._dimension is not None and dimension != self._dimension:
            raise ConfigurationError(
                f"the export's vectors have {dimension} dimensions and this deployment's "
                f"embedder makes {self._dimension}; import into one with the same embedder"
            )
        try:
            await self._index.ensure(dimension=dimension)
        except ConfigurationError as exc:
            raise ConfigurationError(
                f"the export's vectors have {dimension} dimensions and this index cannot take "
                f"them ({exc}); import into a deployment with the same embedder"
            ) from None

    async def _put(self, item: _Pending) -> Outcome:
        key = item.line.key
        try:
            await self._archive.put_once(key, body_of(item.line))
            return "created"
        except ObjectExistsError:
            pass
        except ConflictError:
            return "conflict"  # the key lies under, or over, other objects
        try:
            existing = json.loads(await self._archive.get(key))
        except (NotFoundError, ValueError):
            return "conflict"
        return "present" if existing == item.line.object else "conflict"

    async def _index_all(
        self, tally: _Tally, wanted: list[tuple[_Pending, bool, IndexDocument]]
    ) -> None:
        if not wanted:
            return
        try:
            await self._index.upsert([doc for _, _, doc in wanted])
            tally.indexed += len(wanted)
            return
        except (ConflictError, ConfigurationError, InvalidInputError):
            pass  # one bad document fails the bulk write: find it one by one
        for item, created, doc in wanted:
            try:
                await self._index.upsert([doc])
                tally.indexed += 1
            except (ConflictError, ConfigurationError, InvalidInputError) as exc:
                if created:  # ours, written moments ago: leave no unindexable object behind
                    await self._archive.delete(item.line.key)
                    tally.imported -= 1
                else:
                    tally.present -= 1
                kind: Literal["conflict", "invalid"] = (
                    "conflict" if isinstance(exc, ConflictError) else "invalid"
                )
                tally.refuse(item.number, item.line.key, kind, f"not indexed: {exc}")


async def _each(lines: Lines) -> AsyncIterator[bytes | str]:
    if isinstance(lines, AsyncIterable):
        async for line in lines:
            yield line
    else:
        for line in lines:
            yield line
