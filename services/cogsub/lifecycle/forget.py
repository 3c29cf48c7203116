"""Forgetting: one memory (and what was derived from it) or a whole bank, with an audit record.

Write-once means "never overwritten", not "never erased": ``ArchiveStore.delete``
is the one way an archived object goes away, and this module is its user.

``forget(bank, id)``: the memory's index document goes first, so recall stops
returning it at once; then the plan (ids and keys to erase, decided from the
bank's consolidation objects by :mod:`cogsub.lifecycle.provenance`) is written
to ``audit/{bank}/pending/``; then the derived memories' documents, every
archive object of the plan, the index repairs of survivors, and last the audit
record, after which the plan is erased. A run interrupted anywhere is completed
by the next ``forget`` of the same id (or by ``forget_bank``).

``forget_bank(bank)`` walks the bank's index documents in bounded batches —
each batch's archive objects first, then the documents (recall already skips a
document whose object is gone, so the memory leaves recall at that moment, and
an interrupted run leaves documents that lead a rerun to whatever remains) —
then erases everything under ``consolidation/{bank}/`` and writes one audit
record. ``audit/{bank}/`` itself is kept: it is the trace of what was erased.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

import structlog
from pydantic import ValidationError

from cogsub.archive.ports import ArchiveStore
from cogsub.core.derived import (
    PROOF_TAG,
    SUPERSEDED_BY_TAG,
    SUPERSEDES_TAG,
    VALID_TO_TAG,
    evidence_prefix,
    is_derived_memory_key,
    with_tags,
)
from cogsub.core.documents import IndexDocument
from cogsub.core.errors import NotFoundError, ObjectExistsError
from cogsub.core.events import DEFAULT_BANK, ArchivedEvent, format_timestamp
from cogsub.core.keys import EVENTS_PREFIX, legacy_object_key_for
from cogsub.index.ports import MemoryIndex, SearchFilters
from cogsub.lifecycle.archive_reads import bounded, chunks, read_many
from cogsub.lifecycle.provenance import (
    Derived,
    Supersession,
    bank_prefix,
    derived_from,
    erasure,
    evidence_from,
    folder_of,
    supersession_from,
)
from cogsub.lifecycle.records import (
    ForgetAction,
    ForgetBankReport,
    ForgetPlan,
    ForgetReport,
    actor_label,
    audit_key,
    audit_of,
    new_stem,
    pending_key,
    pending_prefix,
    plan_for_bank,
)

log = structlog.get_logger("cogsub.lifecycle")

BATCH = 200
BankProgress = Callable[[ForgetBankReport], None]
#: Told the archive keys just erased (``MemoryService.forgotten``: recall's cache of their texts).
Erased = Callable[[Sequence[str]], None]


def owned_by(bank_id: str, key: str) -> bool:
    """Whether a document's ``object_storage_key`` may be erased with ``bank_id``."""
    return key.startswith((EVENTS_PREFIX, bank_prefix(bank_id)))


class Forgetting:
    """Erases memories of a bank from the index and the archive, and audits it."""

    def __init__(
        self,
        *,
        archive: ArchiveStore,
        index: MemoryIndex,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        batch_size: int = BATCH,
        on_erased: Erased | None = None,
    ) -> None:
        self._archive = archive
        self._index = index
        self._clock = clock
        self._batch = batch_size
        self._on_erased = on_erased

    # -- one memory ------------------------------------------------------------------

    async def forget(self, bank_id: str, memory_id: str, *, actor: str) -> ForgetReport:
        """Erase ``memory_id`` of ``bank_id`` and everything derived from its content.

        Raises:
            NotFoundError: neither the index nor the archive holds the memory in this bank
                (never known, already forgotten, or another bank's).
        """
        actor = actor_label(actor)
        for plan in await self._pending(bank_id):
            if plan.action is ForgetAction.FORGET and memory_id in plan.memory_ids:
                return await self._complete(plan, resumed=True, deleted=0)
        doc = await self._index.get(bank_id, memory_id)
        deleted = 0
        if doc is not None:
            # Out of recall before anything else; planning reads the bank's derived objects.
            deleted += await self._index.delete(bank_id, memory_id)
        plan = await self._plan(bank_id, memory_id, doc, actor)
        await self._archive.put_once(pending_key(bank_id, plan.stem), plan.to_json())
        return await self._complete(plan, resumed=False, deleted=deleted)

    async def _plan(
        self, bank_id: str, memory_id: str, doc: IndexDocument | None, actor: str
    ) -> ForgetPlan:
        keys = [k async for k in self._archive.list(bank_prefix(bank_id))]
        wanted = [
            k for k in keys if is_derived_memory_key(k) or folder_of(bank_id, k) == "supersessions"
        ]
        bodies = await read_many(self._archive, wanted)
        derived: list[Derived] = []
        supersessions: list[Supersession] = []
        for key, body in bodies.items():
            if (found := derived_from(key, body)) is not None:
                derived.append(found)
            elif (record := supersession_from(key, body)) is not None:
                supersessions.append(record)
        evidence = [e for k in keys if (e := evidence_from(bank_id, k)) is not None]
        is_derived = any(d.memory_id == memory_id for d in derived)
        seed_key: str | None = None
        if not is_derived:
            if doc is not None:
                key = doc.object_storage_key
                seed_key = key if owned_by(bank_id, key) else None
            else:
                seed_key = await self._find_raw(bank_id, memory_id)
            if doc is None and seed_key is None:
                raise NotFoundError(f"no memory {memory_id!r} in bank {bank_id!r}")
        decided = erasure(
            bank_id,
            memory_id,
            seed_key=seed_key,
            derived=derived,
            supersessions=supersessions,
            evidence=evidence,
            keys=keys,
        )
        twin = await self._legacy_twin(bank_id, memory_id, seed_key) if seed_key else None
        now = self._clock()
        return ForgetPlan(
            action=ForgetAction.FORGET,
            bank_id=bank_id,
            memory_id=memory_id,
            stem=new_stem(now),
            actor=actor,
            requested_at=format_timestamp(now),
            memory_ids=list(decided.memory_ids),
            object_keys=[*decided.object_keys, *([twin] if twin else [])],
            proof_recount=list(decided.proof_recount),
            unsupersede=list(decided.unsupersede),
            unlink=decided.unlink,
        )

    async def _legacy_twin(self, bank_id: str, memory_id: str, seed_key: str) -> str | None:
        """The same raw event at its pre-per-bank key, when an upgraded store holds both.

        An event redelivered after the upgrade is archived again at its new key; left at
        the old one, a replay would bring the forgotten memory back.
        """
        try:
            event = ArchivedEvent.model_validate_json(await self._archive.get(seed_key))
        except (NotFoundError, ValidationError):
            return None
        legacy = legacy_object_key_for(event)
        if legacy == seed_key:
            return None
        try:
            found = json.loads(await self._archive.get(legacy))
        except (NotFoundError, ValueError):
            return None
        mine = isinstance(found, dict) and found.get("bankId", DEFAULT_BANK) == bank_id
        return legacy if mine and found.get("eventId") == memory_id else None

    async def _find_raw(self, bank_id: str, memory_id: str) -> str | None:
        """The raw event's archive key when the index no longer has it (a full listing)."""
        suffix = f"/{memory_id}.json"
        async for key in self._archive.list(EVENTS_PREFIX):
            if not key.endswith(suffix):
                continue
            try:
                found = json.loads(await self._archive.get(key))
            except (NotFoundError, ValueError):
                continue
            if isinstance(found, dict) and found.get("bankId", "default") == bank_id:
                return key
        return None

    async def _complete(self, plan: ForgetPlan, *, resumed: bool, deleted: int) -> ForgetReport:
        bank_id = plan.bank_id
        deleted += await self._index.delete_many(bank_id, plan.memory_ids)
        await self._erase(plan.object_keys)
        await self._repair(plan)
        folders = [folder_of(bank_id, k) for k in plan.object_keys]
        counts = {
            "memories": len(plan.memory_ids),
            "archiveObjects": len(plan.object_keys),
            "evidence": folders.count("evidence"),
            "supersessions": folders.count("supersessions"),
            "repaired": len(plan.proof_recount) + len(plan.unsupersede) + len(plan.unlink),
        }
        key = await self._audit(plan, counts, resumed=resumed)
        log.info(
            "memory_forgotten",
            bank_id=bank_id,
            memory_id=plan.memory_id,
            cascaded=len(plan.memory_ids) - 1,
            archive_objects=len(plan.object_keys),
            resumed=resumed,
        )
        return ForgetReport(
            bank_id=bank_id,
            memory_id=plan.memory_id or "",
            forgotten=plan.memory_ids,
            index_documents=deleted,
            archive_objects=len(plan.object_keys),
            audit_key=key,
            resumed=resumed,
        )

    async def _repair(self, plan: ForgetPlan) -> None:
        """Survivors lose what pointed at forgotten memories; each step is idempotent."""
        bank_id = plan.bank_id
        for fact_id in plan.proof_recount:
            # Every source of a fact, its first included, is one evidence object.
            proofs = [k async for k in self._archive.list(evidence_prefix(bank_id, fact_id))]
            recounted = [f"{PROOF_TAG}{len(proofs)}"] if proofs else []
            await self._retag(bank_id, fact_id, add=recounted, replace=(PROOF_TAG,))
        for loser in plan.unsupersede:
            await self._retag(bank_id, loser, replace=(SUPERSEDED_BY_TAG, VALID_TO_TAG))
        for winner, losers in plan.unlink.items():
            drop = frozenset(f"{SUPERSEDES_TAG}{loser}" for loser in losers)
            await self._retag(bank_id, winner, drop=drop)

    async def _retag(
        self,
        bank_id: str,
        memory_id: str,
        *,
        add: Sequence[str] = (),
        replace: tuple[str, ...] = (),
        drop: frozenset[str] = frozenset(),
    ) -> None:
        doc = await self._index.get(bank_id, memory_id)
        if doc is None:
            return
        kept = doc.model_copy(update={"tags": [t for t in doc.tags if t not in drop]})
        changed = with_tags(kept, list(add), replace=replace)
        if changed.tags != doc.tags:
            await self._index.upsert([changed])

    # -- a whole bank ----------------------------------------------------------------

    async def forget_bank(
        self,
        bank_id: str,
        *,
        actor: str,
        scan_archive: bool = False,
        on_progress: BankProgress | None = None,
    ) -> ForgetBankReport:
        """Erase every memory of ``bank_id`` and its consolidation objects; one audit record.

        Args:
            bank_id: The bank to erase.
            actor: Who asked (an API key's digest prefix, ``cli``…), for the audit record.
            scan_archive: Also read every raw event in the archive to find the bank's
                events the index does not hold (slow: a full archive read).
            on_progress: Called after each batch with the counts so far.
        """
        actor = actor_label(actor)
        pending = await self._pending(bank_id)
        for plan in pending:
            if plan.action is ForgetAction.FORGET:
                await self._complete(plan, resumed=True, deleted=0)
        found = next((p for p in pending if p.action is ForgetAction.FORGET_BANK), None)
        if found is None:
            plan = plan_for_bank(bank_id, actor=actor, now=self._clock(), scan_archive=scan_archive)
            await self._archive.put_once(pending_key(bank_id, plan.stem), plan.to_json())
        else:
            plan = found
        report = ForgetBankReport(
            bank_id=bank_id, audit_key=audit_key(bank_id, plan.stem), resumed=found is not None
        )
        after: str | None = None
        filters = SearchFilters(bank_id=bank_id)
        while page := await self._index.scan(filters, size=self._batch, after=after):
            after = page[-1].event_id
            keys = [d.object_storage_key for d in page if owned_by(bank_id, d.object_storage_key)]
            await self._erase(keys)
            deleted = await self._index.delete_many(bank_id, [d.event_id for d in page])
            report = report.model_copy(
                update={
                    "index_documents": report.index_documents + deleted,
                    "memory_objects": report.memory_objects + len(keys),
                }
            )
            _tell(on_progress, report)
        if plan.scan_archive or scan_archive:
            report = await self._erase_unindexed(bank_id, report, on_progress)
        remaining = [k async for k in self._archive.list(bank_prefix(bank_id))]
        for chunk in chunks(remaining, self._batch):
            await self._erase(chunk)
            report = report.model_copy(
                update={"consolidation_objects": report.consolidation_objects + len(chunk)}
            )
            _tell(on_progress, report)
        counts = {
            "indexDocuments": report.index_documents,
            "memoryObjects": report.memory_objects,
            "consolidationObjects": report.consolidation_objects,
        }
        await self._audit(plan, counts, resumed=report.resumed)
        report = report.model_copy(update={"complete": True})
        log.info("bank_forgotten", **report.model_dump())
        return report

    async def _erase_unindexed(
        self, bank_id: str, report: ForgetBankReport, on_progress: BankProgress | None
    ) -> ForgetBankReport:
        keys = [k async for k in self._archive.list(EVENTS_PREFIX)]
        for chunk in chunks(keys, self._batch):
            bodies = await read_many(self._archive, chunk)
            mine = [k for k, body in bodies.items() if _bank_of(body) == bank_id]
            await self._erase(mine)
            report = report.model_copy(update={"memory_objects": report.memory_objects + len(mine)})
            _tell(on_progress, report)
        return report

    # -- shared ----------------------------------------------------------------------

    async def _pending(self, bank_id: str) -> list[ForgetPlan]:
        plans = []
        keys = [k async for k in self._archive.list(pending_prefix(bank_id))]
        for key, body in (await read_many(self._archive, keys)).items():
            try:
                plans.append(ForgetPlan.model_validate_json(body))
            except ValidationError:
                log.warning("forget_plan_unreadable", key=key)
        return plans

    async def _audit(self, plan: ForgetPlan, counts: dict[str, int], *, resumed: bool) -> str:
        key = audit_key(plan.bank_id, plan.stem)
        record = audit_of(plan, counts=counts, now=self._clock(), resumed=resumed)
        with contextlib.suppress(ObjectExistsError):  # a run that stopped right after it
            await self._archive.put_once(key, record.to_json())
        await self._archive.delete(pending_key(plan.bank_id, plan.stem))
        return key

    async def _erase(self, keys: Sequence[str]) -> None:
        try:
            await bounded(keys, self._archive.delete)
        finally:
            # Even when a delete failed: what recall keeps of the others is gone too, and
            # a text recall kept of the failed one goes with the rerun's erase.
            if self._on_erased is not None and keys:
                self._on_erased(keys)


def _tell(on_progress: BankProgress | None, report: ForgetBankReport) -> None:
    if on_progress is not None:
        on_progress(report)


def _bank_of(body: bytes) -> str | None:
    try:
        found = json.loads(body)
    except ValueError:
        return None
    return str(found.get("bankId", "default")) if isinstance(found, dict) else None
