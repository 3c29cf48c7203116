"""One epoch's decay pass over a bank, in the index, resumable after a crash.

The pure rule (what an epoch is, what a step does) is :mod:`cogsub.consolidation.decay`;
this is the I/O that applies it: the index decays the bank ``DECAY_PAGE``
memories at a time, in place (``MemoryIndex.decay_page``), and the archive
holds the epoch's marker and the pass's records of where it is.
"""

from __future__ import annotations

import contextlib
import json
import time
from datetime import datetime, timedelta

from cogsub.archive.ports import ArchiveStore
from cogsub.consolidation.decay import epoch_of, epoch_start
from cogsub.core.derived import decay_page_key, decay_pages_prefix, epoch_key
from cogsub.core.errors import ObjectExistsError
from cogsub.index.ports import DecayStep, MemoryIndex

#: Seconds between a pass's records of where it is (see :func:`decay_bank`).
DECAY_RECORD_EVERY_S = 5.0
#: Memories per decay page: each page is one index write (a transaction and a sync).
DECAY_PAGE = 5_000


async def decay_bank(
    index: MemoryIndex,
    archive: ArchiveStore,
    bank_id: str,
    *,
    now: datetime,
    epoch_length: timedelta,
    rate: float,
    floor: float,
) -> int:
    """One epoch of decay for the whole bank, at most once per epoch; how many it decayed.

    Reading each memory out to patch it spent most of a round's time under load,
    hence pages in place. Once ``DECAY_RECORD_EVERY_S`` have passed, the pass
    records where it is in the archive (the cursor after the last page), so a
    pass cut short (a stopping worker, a crash) resumes there: only what came
    after that record, not the bank, is decayed twice. Each record is a durable
    archive write, so not one per page. The records go once the epoch's marker
    is written.
    """
    epoch = epoch_of(now, epoch_length)
    marker = epoch_key(bank_id, epoch)
    if await archive.exists(marker):
        return 0
    # Newer memories than the epoch's start: nobody could have used them yet.
    step = DecayStep(rate=rate, floor=floor, before=epoch_start(epoch, epoch_length))
    pages, after = await _resumes_after(archive, bank_id, epoch)
    decayed = 0
    recorded_at = time.monotonic()
    while True:
        page = await index.decay_page(bank_id, step, size=DECAY_PAGE, after=after)
        if page.last is None:
            break
        after, decayed = page.last, decayed + page.decayed
        if time.monotonic() - recorded_at >= DECAY_RECORD_EVERY_S:
            pages.append(decay_page_key(bank_id, epoch, len(pages) + 1))
            with contextlib.suppress(ObjectExistsError):  # a concurrent pass recorded it
                await archive.put_once(pages[-1], json.dumps({"after": after}).encode())
            recorded_at = time.monotonic()
    with contextlib.suppress(ObjectExistsError):  # another worker finished the same epoch
        await archive.put_once(marker, json.dumps({"epoch": epoch}).encode())
    for key in pages:
        await archive.delete(key)
    return decayed


async def _resumes_after(
    archive: ArchiveStore, bank_id: str, epoch: int
) -> tuple[list[str], str | None]:
    """The epoch's recorded pages, and the cursor after the last of them."""
    pages = [key async for key in archive.list(decay_pages_prefix(bank_id, epoch))]
    if not pages:
        return [], None
    record = json.loads(await archive.get(pages[-1]))
    return pages, str(record["after"])
