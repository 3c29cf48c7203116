"""A retain the API takes and ingestion then refuses, for real: its archive key is taken.

The archive is write-once, so an event whose key already holds other content is
dead-lettered as a conflict by the ingestion worker, whatever else changes.
"""

from __future__ import annotations

from datetime import UTC, datetime

from cogsub.archive.ports import ArchiveStore
from cogsub.core.keys import object_key_for
from cogsub.core.memory import RetainRequest
from cogsub.ingestion.pipeline import archive_body, archived_event_for
from cogsub.recall.retain import event_for

WHEN = "2026-03-04T05:06:07Z"


async def occupy_key(archive: ArchiveStore, bank_id: str, memory_id: str, content: str) -> str:
    """Archive other content where ``content`` retained as ``memory_id`` at WHEN would go."""
    request = RetainRequest(content=content, memory_id=memory_id, timestamp=WHEN)
    now = datetime.now(UTC)
    event = event_for(bank_id, request, memory_id=memory_id, now=now)
    other = event_for(
        bank_id, request.model_copy(update={"content": f"not {content}"}), memory_id=memory_id
    )
    key = object_key_for(event)
    squatter = archived_event_for(other, embedding=[], importance_score=0.0, key=key)
    await archive.put_once(key, archive_body(squatter))
    return key


def retain_body(memory_id: str, content: str) -> dict[str, object]:
    """The JSON body of that retain, waiting for the outcome."""
    return {"content": content, "memory_id": memory_id, "timestamp": WHEN, "wait": True}
