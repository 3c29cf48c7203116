"""`cogsub demo`: the experience-capture seed's Stage 1 demo, on the real pipeline.

The same worker that runs in production ingests the seed's ``rawEvent`` with
the hash embedder; the archive is a directory, the bus and index are
in-process. The artifacts match the seed's list, and ``summary.json`` records
the invariants checked before exit.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cogsub.archive.filesystem import FilesystemArchive
from cogsub.bus.memory import InMemoryEventBus
from cogsub.core import (
    EXPERIENCE_ENRICHED,
    EXPERIENCE_INDEX,
    EXPERIENCE_RAW,
    MEMORY_INDEXED,
    object_key_for,
    validate_event,
)
from cogsub.embeddings.hash import HashEmbedder
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.ingestion import IngestionWorker, Stage

SEED_RAW_EVENT: dict[str, Any] = {
    "eventId": "demo-event-001",
    "timestamp": "2026-05-08T22:31:25.237Z",
    "type": "user_input",
    "context": {"sessionId": "demo-session-001", "traceId": "demo-trace-001"},
    "input": {
        "text": "Design a memory system that preserves complete experience while supporting "
        "fast associative retrieval.",
        "embedding": [],
    },
    "internalState": {
        "confidence": 0.72,
        "activePlan": "Compare object storage truth with OpenSearch retrieval metadata.",
    },
    "action": {
        "tool": "architecture_note",
        "reasoning": "Capture the event before downstream learning changes its priority.",
    },
    "result": {"output": "Experience archived and indexed.", "success": True, "latencyMs": 42},
    "evaluation": {"rewardScore": 0.81, "selfAssessedQuality": 0.76},
    "importanceScore": 0,
    "tags": ["memory", "ingestion", "demo"],
}

ENRICHED_FIELDS = {
    "eventId",
    "timestamp",
    "importanceScore",
    "embeddingDimension",
    "objectStorageKey",
    "tags",
}
INDEXED_FIELDS = {"eventId", "timestamp", "index", "objectStorageKey"}


def run_demo(out: Path) -> dict[str, Any]:
    """Clear ``out``, ingest the seed event, write the artifacts; return the summary."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    return asyncio.run(_demo(out))


async def _demo(out: Path) -> dict[str, Any]:
    trace: list[dict[str, Any]] = []
    started = time.perf_counter()

    def observe(stage: Stage, event_ids: Sequence[str]) -> None:
        if stage is not Stage.COMMIT:
            elapsed = round((time.perf_counter() - started) * 1000, 3)
            trace.append({"stage": stage.value, "eventIds": list(event_ids), "elapsedMs": elapsed})

    bus = InMemoryEventBus()
    archive = FilesystemArchive(out / "object-store")
    index = SqliteMemoryIndex(":memory:")
    worker = IngestionWorker(
        bus=bus, archive=archive, index=index, embedder=HashEmbedder(), observer=observe
    )
    try:
        await worker.prepare()
        await bus.publish(EXPERIENCE_RAW, json.dumps(SEED_RAW_EVENT).encode())
        consumer = bus.consumer([EXPERIENCE_RAW], group="demo-ingestion")
        records = await consumer.poll(max_records=10, timeout_s=1.0)
        await worker.process(records, consumer)
        await consumer.close()
        doc = await index.get("default", SEED_RAW_EVENT["eventId"])
        payloads = await _read_topics(bus)
    finally:
        await index.close()
        await archive.close()
        await bus.close()
    assert doc is not None, "the demo event was not indexed"
    _write(out / EXPERIENCE_INDEX / f"{doc.event_id}.json", doc.to_source())
    _write(out / f"{EXPERIENCE_ENRICHED}.json", payloads[EXPERIENCE_ENRICHED])
    _write(out / f"{MEMORY_INDEXED}.json", payloads[MEMORY_INDEXED])
    _write(out / "ingestion-trace.json", trace)
    summary = check_invariants(out, trace)
    _write(out / "summary.json", summary)
    return summary


async def _read_topics(bus: InMemoryEventBus) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for topic in (EXPERIENCE_ENRICHED, MEMORY_INDEXED):
        consumer = bus.consumer([topic], group="demo-reader")
        records = await consumer.poll(max_records=10, timeout_s=1.0)
        await consumer.close()
        found[topic] = json.loads(records[0].value)
    return found


def check_invariants(out: Path, trace: list[dict[str, Any]]) -> dict[str, Any]:
    """Read the artifacts back and check what the seed's demo asserts."""
    key = object_key_for(validate_event(SEED_RAW_EVENT))
    archived = json.loads((out / "object-store" / key).read_text())
    doc = json.loads((out / EXPERIENCE_INDEX / f"{SEED_RAW_EVENT['eventId']}.json").read_text())
    enriched = json.loads((out / f"{EXPERIENCE_ENRICHED}.json").read_text())
    indexed = json.loads((out / f"{MEMORY_INDEXED}.json").read_text())
    reasoning = SEED_RAW_EVENT["action"]["reasoning"]
    checks = {
        "archiveRetainsReasoning": archived["action"]["reasoning"] == reasoning
        and archived["result"]["output"] == SEED_RAW_EVENT["result"]["output"],
        "archiveHasEmbedding": len(archived["input"]["embedding"]) == len(doc["embedding"])
        and len(doc["embedding"]) > 0,
        "indexPointsAtArchive": doc["object_storage_key"] == key
        and archived["objectStorageKey"] == key,
        "indexOmitsRawEvent": reasoning not in json.dumps(doc)
        and SEED_RAW_EVENT["result"]["output"] not in json.dumps(doc),
        "downstreamPayloadsCompact": set(enriched) == ENRICHED_FIELDS
        and set(indexed) == INDEXED_FIELDS
        and reasoning not in json.dumps([enriched, indexed]),
        "keyIsDeterministic": key == object_key_for(validate_event(SEED_RAW_EVENT))
        and key == "events/2026/05/08/demo-event-001.json",
        "importanceScoreMatchesHeuristic": archived["importanceScore"] == 0.79
        and doc["importance_score"] == 0.79,
        "stagesInOrder": [t["stage"] for t in trace]
        == ["receive", "embed", "score", "key", "archive", "index", "emit"],
    }
    return {
        "eventId": SEED_RAW_EVENT["eventId"],
        "objectStorageKey": key,
        "importanceScore": archived["importanceScore"],
        "embeddingDimension": enriched["embeddingDimension"],
        "invariants": checks,
        "ok": all(checks.values()),
    }


def _write(path: Path, body: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n")
