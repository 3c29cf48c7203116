"""``Lifecycle``: forget, forget a bank, export and import, over the archive and the index."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

from cogsub.archive.ports import ArchiveStore
from cogsub.index.ports import MemoryIndex
from cogsub.lifecycle.bundle import ImportReport
from cogsub.lifecycle.forget import BATCH, BankProgress, Erased, Forgetting
from cogsub.lifecycle.records import ForgetBankReport, ForgetReport
from cogsub.lifecycle.transfer import BankTransfer, Lines


class Lifecycle:
    """What happens to a bank's memories beyond retain and recall.

    Args:
        archive: The truth layer; objects are erased from it for good.
        index: The associative layer.
        clock: The time written into plans and audit records.
        batch_size: Index documents and archive objects handled per step.
        dimension: The deployment's embedding dimension; an import of other vectors is
            refused before anything is written (None: whatever the index accepts).
        on_erased: Told the archive keys a forget erased (the memory service's
            ``forgotten``, so recall keeps none of their texts).
    """

    def __init__(
        self,
        *,
        archive: ArchiveStore,
        index: MemoryIndex,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        batch_size: int = BATCH,
        dimension: int | None = None,
        on_erased: Erased | None = None,
    ) -> None:
        self._forgetting = Forgetting(
            archive=archive, index=index, clock=clock, batch_size=batch_size, on_erased=on_erased
        )
        self._transfer = BankTransfer(
            archive=archive, index=index, clock=clock, batch_size=batch_size, dimension=dimension
        )

    async def forget(self, bank_id: str, memory_id: str, *, actor: str) -> ForgetReport:
        """Erase a memory and what was derived from its content; see :class:`Forgetting`.

        Raises:
            NotFoundError: neither the index nor the archive holds it in this bank.
        """
        return await self._forgetting.forget(bank_id, memory_id, actor=actor)

    async def forget_bank(
        self,
        bank_id: str,
        *,
        actor: str,
        scan_archive: bool = False,
        on_progress: BankProgress | None = None,
    ) -> ForgetBankReport:
        """Erase every memory and consolidation object of a bank; idempotent when rerun."""
        return await self._forgetting.forget_bank(
            bank_id, actor=actor, scan_archive=scan_archive, on_progress=on_progress
        )

    def export_bank(
        self, bank_id: str, *, on_progress: Callable[[int], None] | None = None
    ) -> AsyncIterator[bytes]:
        """The bank as JSON lines; see :mod:`cogsub.lifecycle.bundle`."""
        return self._transfer.export_bank(bank_id, on_progress=on_progress)

    async def import_bank(
        self,
        lines: Lines,
        *,
        bank_id: str | None = None,
        on_progress: Callable[[ImportReport], None] | None = None,
    ) -> ImportReport:
        """Write an export's objects (never overwriting) and index its memories."""
        return await self._transfer.import_bank(lines, bank_id=bank_id, on_progress=on_progress)
