"""Fill in the searchable text past the summary (``detail``) of memories indexed without it.

An index written before ``detail`` was indexed holds memories whose later words no
search finds. A replay would re-derive them, but it also starts their usage signals
(``retrieval_count``, ``decay_factor``) afresh; this reads each admitted archived
memory's text and writes only the detail into the document the index already holds,
its signals and tags as they are. Memories not indexed are left alone (a replay
indexes them). Idempotent and resumable like a replay: a document whose detail is
already right is not written again.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog

from cogsub.archive.ports import ArchiveStore
from cogsub.core.documents import IndexDocument, detail_of
from cogsub.core.events import ArchivedEvent
from cogsub.index.ports import MemoryIndex
from cogsub.replay.rebuild import ReplayFilter, ReplayReport, archived_batches

log = structlog.get_logger("cogsub.replay")


async def fill_detail(
    archive: ArchiveStore,
    index: MemoryIndex,
    *,
    only: ReplayFilter | None = None,
    after_key: str | None = None,
    on_progress: Callable[[ReplayReport], None] | None = None,
) -> ReplayReport:
    """Write the detail of every admitted, indexed memory that lacks it (``indexed``: how many).

    A signal written to a document between this reading it and writing it back is lost
    (one retrieval count, say): run it while no recall or feedback changes the bank, or
    accept that.
    """
    only = only or ReplayFilter()
    report = ReplayReport()
    async for keys in archived_batches(archive, only, after_key, report):
        bodies = await archive.get_many(keys)
        events = [ArchivedEvent.model_validate_json(bodies[key]) for key in keys if key in bodies]
        filled = [doc for event in events if (doc := await _filled(index, event, only))]
        if filled:
            await index.upsert(filled)
        report.indexed += len(filled)
        report.last_key = keys[-1]
        log.info("replay_detail_filled", filled=len(filled), last_key=report.last_key)
        if on_progress is not None:
            on_progress(report)
    return report


async def _filled(
    index: MemoryIndex, event: ArchivedEvent, only: ReplayFilter
) -> IndexDocument | None:
    """``event``'s indexed document with its detail, if it is indexed and lacks it."""
    detail = detail_of(event.input.text)
    if not detail or not only.admits(event):
        return None
    doc = await index.get(event.bank_id, event.event_id)
    if doc is None or doc.detail == detail:
        return None
    return doc.model_copy(update={"detail": detail})
