"""A data directory written before memory ids were per bank still recalls, replays and grows.

Before, every raw event was archived at ``events/YYYY/MM/DD/{eventId}.json`` whatever its
bank, and the index (schema 2) held ``event_id`` unique across banks. The test makes such a
directory from one written today — each object moved to its old key, with the old key in
its ``objectStorageKey``, and the index taken back to schema 2 — then runs today's code on it.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from cogsub.archive.filesystem import FilesystemArchive
from cogsub.core.events import ArchivedEvent
from cogsub.core.keys import legacy_object_key_for
from cogsub.core.memory import RecallRequest, RetainRequest
from cogsub.core.topics import EXPERIENCE_RAW
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.index.sqlite import schema as index_schema
from cogsub.lifecycle.forget import Forgetting
from cogsub.replay import replay
from tests.services.recall.stack import live_stack

DERIVED = ("objectStorageKey", "importanceScore")
FACTS = [
    ("bob", "invoice-7", "Invoice 7 is for the kiwi shipment."),
    ("bob", "invoice-8", "Invoice 8 covers the billing audit."),
    ("default", "seed-1", "Acme HQ is in Berlin."),
]


def to_legacy_layout(root: Path) -> None:
    """What the code before per-bank keys would have left for the same retains."""
    moved: dict[str, str] = {}
    for path in sorted((root / "archive" / "events").rglob("*.json")):
        event = ArchivedEvent.model_validate_json(path.read_bytes())
        legacy = legacy_object_key_for(event)
        if legacy == event.object_storage_key:
            continue
        body = json.loads(path.read_bytes())
        body["objectStorageKey"] = legacy
        target = root / "archive" / legacy
        target.write_text(json.dumps(body))
        path.unlink()
        moved[event.object_storage_key] = legacy
    with sqlite3.connect(root / "index.sqlite3") as conn:
        for new, legacy in moved.items():
            conn.execute(
                "UPDATE documents SET body = json_set(body, '$.object_storage_key', ?)"
                " WHERE json_extract(body, '$.object_storage_key') = ?",
                (legacy, new),
            )
        conn.execute("CREATE TABLE old_documents AS SELECT * FROM documents")
        conn.execute("DROP TABLE documents")
        unique = index_schema.DOCUMENT_COLUMNS.replace(
            "event_id TEXT NOT NULL,", "event_id TEXT NOT NULL UNIQUE,"
        )
        conn.execute(f"CREATE TABLE documents ({unique})")
        conn.execute("INSERT INTO documents SELECT * FROM old_documents")
        conn.execute("DROP TABLE old_documents")
        conn.execute("DROP TABLE tombstones")
        conn.execute("CREATE TABLE tombstones (event_id TEXT PRIMARY KEY, seq INTEGER NOT NULL)")
        conn.execute("PRAGMA user_version = 2")
    conn.close()
    assert moved, "the bob memories were under banks/bob/ and moved"


def drop_index(root: Path) -> None:
    for path in root.glob("index.sqlite3*"):
        path.unlink()


async def recalled(root: Path, bank: str, query: str) -> list[tuple[str, str, str]]:
    async with live_stack(root) as stack:
        found = await stack.service.recall(bank, RecallRequest(query=query, reinforce=False))
        return [(hit.id, hit.text, hit.object_storage_key) for hit in found.results]


async def test_an_old_data_directory_recalls_replays_and_takes_ids_per_bank(
    tmp_path: Path,
) -> None:
    async with live_stack(tmp_path) as stack:
        for bank, memory_id, text in FACTS:
            await stack.service.retain(
                bank, RetainRequest(content=text, memory_id=memory_id, wait=True)
            )
    to_legacy_layout(tmp_path)

    hits = await recalled(tmp_path, "bob", "kiwi shipment")
    assert hits[0] == (
        "invoice-7",
        "Invoice 7 is for the kiwi shipment.",
        legacy_object_key_for(
            ArchivedEvent.model_validate_json(
                next((tmp_path / "archive" / "events").rglob("invoice-7.json")).read_bytes()
            )
        ),
    )
    async with live_stack(tmp_path) as stack:
        record = await stack.service.get_memory("bob", "invoice-7")
        assert record.object_storage_key == hits[0][2]  # the old key, read where it lies
        alice = await stack.service.retain(
            "alice", RetainRequest(content="Invoice 7 is paid.", memory_id="invoice-7", wait=True)
        )
        assert alice.recallable and "/banks/alice/" in alice.object_storage_key
        assert (await stack.service.get_memory("bob", "invoice-7")).text.startswith(
            "Invoice 7 is for"
        )

    drop_index(
        tmp_path
    )  # the associative layer is gone; the archive, old keys and new, is the truth
    archive = FilesystemArchive(tmp_path / "archive")
    index = SqliteMemoryIndex(tmp_path / "index.sqlite3")
    try:
        report = await replay(archive, index)
        assert report.indexed == len(FACTS) + 1
        assert await index.count("bob") == 2 and await index.count("alice") == 1
    finally:
        await index.close()
        await archive.close()
    bob = await recalled(tmp_path, "bob", "kiwi shipment")
    assert bob[0][:2] == ("invoice-7", "Invoice 7 is for the kiwi shipment.")
    alice_hits = await recalled(tmp_path, "alice", "invoice paid")
    assert [(hit[0], hit[1]) for hit in alice_hits] == [("invoice-7", "Invoice 7 is paid.")]


async def test_a_memory_archived_at_both_keys_is_forgotten_at_both(tmp_path: Path) -> None:
    """Redelivered after the upgrade, an old event lands at its new key too; forget takes both."""
    async with live_stack(tmp_path) as stack:
        for bank, memory_id, text in FACTS:
            await stack.service.retain(
                bank, RetainRequest(content=text, memory_id=memory_id, wait=True)
            )
    to_legacy_layout(tmp_path)
    async with live_stack(tmp_path) as stack:
        old = await stack.service.get_memory("bob", "invoice-7")
        raw = {k: v for k, v in old.archived_event.items() if k not in DERIVED}
        raw["input"] = {k: v for k, v in raw["input"].items() if k != "embedding"}
        await stack.bus.publish(EXPERIENCE_RAW, json.dumps(raw).encode(), key=b"invoice-7")
        async with asyncio.timeout(10):
            while (doc := await stack.index.get("bob", "invoice-7")) is None or (  # noqa: ASYNC110 - the index has no change feed
                doc.object_storage_key == old.object_storage_key
            ):
                await asyncio.sleep(0.02)
        assert await stack.archive.exists(old.object_storage_key)  # both keys hold it now
        await Forgetting(archive=stack.archive, index=stack.index).forget(
            "bob", "invoice-7", actor="test"
        )
        assert not await stack.archive.exists(old.object_storage_key)
        assert not await stack.archive.exists(doc.object_storage_key)
    drop_index(tmp_path)
    archive = FilesystemArchive(tmp_path / "archive")
    index = SqliteMemoryIndex(tmp_path / "index.sqlite3")
    try:
        await replay(archive, index)
        assert await index.get("bob", "invoice-7") is None  # never back from the archive
        assert await index.get("bob", "invoice-8") is not None
    finally:
        await index.close()
        await archive.close()
