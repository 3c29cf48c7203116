"""The LoCoMo retrieval evaluation over the real retain and recall paths.

For each conversation of a LoCoMo-format file, a fresh embedded stack (bus,
archive, index under a temporary directory) runs a live ingestion worker; every
dialog turn is retained through :meth:`MemoryService.retain` (published to
experience.raw, archived and indexed by the worker), timed at its session's
date. Once the index holds every turn, each question outside the adversarial
category is asked three ways against the same index:

- ``pipeline``: :meth:`MemoryService.recall`, the product's recall;
- ``bm25``: the index's BM25 search alone;
- ``vector``: the index's cosine search alone.

A question scores ``recall_any@k`` when one of its evidence turns is in the top
k, and ``recall_all@k`` when all of them are.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.progress import Progress, TaskID

from cogsub.core.errors import UnavailableError
from cogsub.core.memory import RecallRequest, RetainContext, RetainRequest
from cogsub.embeddings.ports import Embedder
from cogsub.evaluation.locomo_data import (
    ADVERSARIAL_CATEGORY,
    Conversation,
    Turn,
    load_locomo,
    memory_id_for,
    safe_id,
)
from cogsub.evaluation.metrics import Scoreboard, percentile
from cogsub.index.ports import MemoryIndex, SearchFilters
from cogsub.ingestion import BatchOutcome, IngestionWorker
from cogsub.recall import MemoryService, RankingPolicy
from cogsub.runtime import Settings
from cogsub.runtime.wiring import build_archive, build_bus, build_index

DEFAULT_KS = (5, 10)
RETAIN_CHUNK = 64
#: How long ingestion may go without indexing anything before the run gives up.
STALL_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class LocomoOptions:
    """What to evaluate and how."""

    ks: tuple[int, ...] = DEFAULT_KS
    limit_conversations: int | None = None
    captions: bool = True
    policy: RankingPolicy | None = None


@dataclass
class _Timings:
    recall_ms: list[float]
    embed_ms: list[float]
    ingest_s: float = 0.0


async def evaluate_locomo(
    path: str | Path,
    *,
    embedder: Embedder,
    options: LocomoOptions | None = None,
    progress: Progress | None = None,
    work_dir: Path | None = None,
) -> dict[str, Any]:
    """Run the evaluation; returns the report (see the module docstring for the arms).

    Args:
        path: A LoCoMo-format JSON file.
        embedder: Used by ingestion and recall alike (wrap it in a CachingEmbedder
            so questions are embedded once for the pipeline and the vector arm).
        options: ks, how many conversations, captions, a ranking policy.
        progress: Where to show progress, if anywhere.
        work_dir: Parent of the per-conversation stacks; a temporary directory by default.
    """
    options = options or LocomoOptions()
    ks = tuple(sorted(set(options.ks)))
    conversations = load_locomo(path)[: options.limit_conversations]
    board = Scoreboard(ks)
    timings = _Timings([], [])
    skipped = 0
    with tempfile.TemporaryDirectory(prefix="cogsub-locomo-", dir=work_dir) as root:
        for conversation in conversations:
            stack_dir = Path(root) / safe_id(conversation.sample_id)
            skipped += await _evaluate_one(
                conversation, stack_dir, embedder, options, ks, board, timings, progress
            )
    report: dict[str, Any] = {
        "dataset": Path(path).name,
        "conversations": len(conversations),
        "turns": sum(len(c.turns) for c in conversations),
        "embedder": embedder.name,
        "k": list(ks),
    }
    report.update(board.report())
    report["skipped_questions"] = skipped
    report["latency_ms"] = {
        "recall_p50": round(percentile(timings.recall_ms, 0.50), 2),
        "recall_p95": round(percentile(timings.recall_ms, 0.95), 2),
        "query_embed_p50": round(percentile(timings.embed_ms, 0.50), 2),
    }
    report["ingest_s"] = round(timings.ingest_s, 2)
    return report


async def _evaluate_one(
    conversation: Conversation,
    stack_dir: Path,
    embedder: Embedder,
    options: LocomoOptions,
    ks: tuple[int, ...],
    board: Scoreboard,
    timings: _Timings,
    progress: Progress | None,
) -> int:
    """Retain one conversation into a fresh stack and score its questions; returns skips."""
    settings = Settings(backend="embedded", data_dir=stack_dir)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    bus, (archive, _), index = build_bus(settings), build_archive(settings), build_index(settings)
    bank_id = safe_id(f"locomo-{conversation.sample_id}")
    turns = {memory_id_for(conversation.sample_id, t.dia_id): t for t in conversation.turns}
    ingested = _Ingested(expected=len(turns))
    worker = IngestionWorker(
        bus=bus, archive=archive, index=index, embedder=embedder, poll_timeout_s=0.05
    )
    stop = asyncio.Event()
    running: asyncio.Task[None] | None = None
    service = MemoryService(
        bus=bus, archive=archive, index=index, embedder=embedder, policy=options.policy
    )
    try:
        await worker.prepare()
        running = asyncio.create_task(worker.run(stop, on_batch=ingested.record))
        began = time.perf_counter()
        await _retain_all(service, bank_id, conversation, options.captions, progress)
        await _until_indexed(ingested, index, bank_id, progress, conversation.sample_id)
        timings.ingest_s += time.perf_counter() - began
        return await _ask_all(
            service, index, embedder, bank_id, conversation, turns, ks, board, timings, progress
        )
    finally:
        stop.set()
        if running is not None:
            await running
        await service.drain()
        await index.close()
        await archive.close()
        await bus.close()


class _Ingested:
    """Counts what the worker indexed, and wakes the waiter at each batch."""

    def __init__(self, *, expected: int) -> None:
        self.expected = expected
        self.indexed = 0
        self.rejected: list[str] = []
        self.changed = asyncio.Event()

    def record(self, outcome: BatchOutcome) -> None:
        self.indexed += len(outcome.indexed)
        self.rejected.extend(rejection.reason for rejection in outcome.rejected)
        self.changed.set()


def _retain_request(conversation: Conversation, turn: Turn, captions: bool) -> RetainRequest:
    content = turn.content if captions else f"{turn.speaker}: {turn.text}"
    return RetainRequest(
        content=content,
        timestamp=turn.timestamp,
        context=RetainContext(session_id=conversation.session_id(turn), user_id=turn.speaker),
        memory_id=memory_id_for(conversation.sample_id, turn.dia_id),
    )


async def _retain_all(
    service: MemoryService,
    bank_id: str,
    conversation: Conversation,
    captions: bool,
    progress: Progress | None,
) -> None:
    task = _task(progress, f"retain {conversation.sample_id}", len(conversation.turns))
    requests = [_retain_request(conversation, turn, captions) for turn in conversation.turns]
    for start in range(0, len(requests), RETAIN_CHUNK):
        chunk = requests[start : start + RETAIN_CHUNK]
        # Concurrent publishes share one bus transaction (group commit).
        await asyncio.gather(*(service.retain(bank_id, request) for request in chunk))
        _advance(progress, task, len(chunk))


async def _until_indexed(
    ingested: _Ingested, index: MemoryIndex, bank_id: str, progress: Progress | None, name: str
) -> None:
    task = _task(progress, f"index {name}", ingested.expected)
    shown = 0
    while ingested.indexed + len(ingested.rejected) < ingested.expected:
        ingested.changed.clear()
        try:
            await asyncio.wait_for(ingested.changed.wait(), timeout=STALL_TIMEOUT_S)
        except TimeoutError:
            raise UnavailableError(
                f"ingestion stalled at {ingested.indexed}/{ingested.expected} memories"
            ) from None
        _advance(progress, task, ingested.indexed - shown)
        shown = ingested.indexed
    if ingested.rejected:
        raise UnavailableError(f"ingestion rejected turns: {ingested.rejected[:3]}")
    count = await index.count(bank_id)
    if count != ingested.expected:
        raise UnavailableError(f"the index holds {count} of {ingested.expected} turns")


async def _ask_all(
    service: MemoryService,
    index: MemoryIndex,
    embedder: Embedder,
    bank_id: str,
    conversation: Conversation,
    turns: dict[str, Turn],
    ks: tuple[int, ...],
    board: Scoreboard,
    timings: _Timings,
    progress: Progress | None,
) -> int:
    known = {turn.dia_id for turn in conversation.turns}
    asked = [q for q in conversation.questions if q.category != ADVERSARIAL_CATEGORY]
    task = _task(progress, f"ask {conversation.sample_id}", len(asked))
    filters = SearchFilters(bank_id=bank_id)
    size = max(ks)
    skipped = 0

    def dia_ids(memory_ids: Sequence[str]) -> list[str]:
        return [turns[m].dia_id for m in memory_ids if m in turns]

    for question in asked:
        _advance(progress, task, 1)
        evidence = [e for e in question.evidence if e in known]
        if not evidence:
            skipped += 1  # no turn of this conversation answers it: nothing to find
            continue
        began = time.perf_counter()
        (vector,) = await embedder.embed([question.question])
        embedded = time.perf_counter()
        response = await service.recall(
            bank_id, RecallRequest(query=question.question, k=size, reinforce=False)
        )
        timings.embed_ms.append((embedded - began) * 1000)
        timings.recall_ms.append((time.perf_counter() - embedded) * 1000)
        text_hits = await index.search_text(question.question, filters, size=size)
        vector_hits = await index.search_vector(vector, filters, size=size)
        category = str(question.category)
        board.add("pipeline", category, dia_ids([r.id for r in response.results]), evidence)
        board.add("bm25", category, dia_ids([h.document.event_id for h in text_hits]), evidence)
        board.add("vector", category, dia_ids([h.document.event_id for h in vector_hits]), evidence)
    return skipped


def _task(progress: Progress | None, description: str, total: int) -> TaskID | None:
    return None if progress is None else progress.add_task(description, total=total)


def _advance(progress: Progress | None, task: TaskID | None, steps: int) -> None:
    if progress is not None and task is not None:
        progress.update(task, advance=steps)
