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

With ``folds`` the report also scores each conversation on its own, as the
held-out fold of leave-one-conversation-out, and the spread of each rate across
folds. With several candidate policies, every conversation is asked with each
(one ingestion, one index) and each fold is scored with the candidate that did
best on the other conversations (:mod:`cogsub.evaluation.folds`); the overall
rates are then those of the held-out folds.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from rich.progress import Progress, TaskID

from cogsub.core.errors import UnavailableError
from cogsub.core.memory import RecallRequest, RetainContext, RetainRequest
from cogsub.embeddings.ports import Embedder
from cogsub.evaluation.folds import Answered, choose, spread
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
from cogsub.runtime.adapters import build_archive, build_bus, build_index

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
    folds: bool = False
    #: Policies to choose among per fold (on the other conversations); ``policy`` when empty.
    candidates: tuple[RankingPolicy, ...] = ()

    def policies(self) -> tuple[RankingPolicy, ...]:
        return self.candidates or (self.policy or RankingPolicy(),)


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
    timings = _Timings([], [])
    runs: dict[str, list[list[Answered]]] = {}
    skipped = 0
    with tempfile.TemporaryDirectory(prefix="cogsub-locomo-", dir=work_dir) as root:
        for number, conversation in enumerate(conversations):
            stack_dir = Path(root) / safe_id(f"{number}-{conversation.sample_id}")
            answered, skips = await _evaluate_one(
                conversation, stack_dir, embedder, options, ks, timings, progress
            )
            runs[_fold_name(runs, conversation.sample_id)] = answered
            skipped += skips
    report: dict[str, Any] = {
        "dataset": Path(path).name,
        "conversations": len(conversations),
        "turns": sum(len(c.turns) for c in conversations),
        "embedder": embedder.name,
        "k": list(ks),
    }
    folds = _held_out(runs, ks)
    overall = Scoreboard(ks)
    for _, _, held_out in folds:
        for item in held_out:
            item.record(overall)
    report.update(overall.report())
    report["skipped_questions"] = skipped
    report["latency_ms"] = {
        "recall_p50": round(percentile(timings.recall_ms, 0.50), 2),
        "recall_p95": round(percentile(timings.recall_ms, 0.95), 2),
        "query_embed_p50": round(percentile(timings.embed_ms, 0.50), 2),
    }
    report["ingest_s"] = round(timings.ingest_s, 2)
    if len(options.policies()) > 1:
        report["candidates"] = [_overrides(policy) for policy in options.policies()]
        report["candidate_rates"] = _candidate_rates(runs, ks)
    if options.folds:
        report.update(_folds_report(folds, ks))
    return report


def _fold_name(runs: dict[str, list[list[Answered]]], sample_id: str) -> str:
    """``sample_id``, made unique when a file repeats one."""
    name, copy = sample_id, 1
    while name in runs:
        copy += 1
        name = f"{sample_id}#{copy}"
    return name


def _held_out(
    runs: dict[str, list[list[Answered]]], ks: tuple[int, ...]
) -> list[tuple[str, int, list[Answered]]]:
    """(conversation, candidate chosen on the others, what that candidate answered there)."""
    chosen = [(name, choose(runs, name, max(ks))) for name in runs]
    return [(name, c, runs[name][c]) for name, c in chosen]


def _folds_report(
    folds: list[tuple[str, int, list[Answered]]], ks: tuple[int, ...]
) -> dict[str, Any]:
    """Each held-out conversation's rates (overall and per category) and their spread."""
    reports = []
    for name, candidate, answered in folds:
        board = Scoreboard(ks)
        for item in answered:
            item.record(board)
        fold: dict[str, Any] = {"held_out": name, "candidate": candidate}
        reports.append(fold | board.report())
    rates = [f"recall_{kind}@{k}" for k in ks for kind in ("any", "all")]
    return {
        "folds": reports,
        "spread": {rate: spread([fold[rate] for fold in reports]) for rate in rates},
    }


def _candidate_rates(
    runs: dict[str, list[list[Answered]]], ks: tuple[int, ...]
) -> list[dict[str, dict[str, float]]]:
    """Every candidate's pipeline rates on every conversation (what each fold chose from)."""
    rates: list[dict[str, dict[str, float]]] = []
    for candidate in range(len(next(iter(runs.values()), []))):
        per_conversation = {}
        for name, answered in runs.items():
            board = Scoreboard(ks)
            for item in answered[candidate]:
                item.record(board)
            per_conversation[name] = (
                board.overall["pipeline"].rates() if answered[candidate] else {}
            )
        rates.append(per_conversation)
    return rates


def _overrides(policy: RankingPolicy) -> dict[str, object]:
    """The fields of ``policy`` that differ from the default policy."""
    default = RankingPolicy()
    return {
        f.name: getattr(policy, f.name)
        for f in fields(policy)
        if getattr(policy, f.name) != getattr(default, f.name)
    }


async def _evaluate_one(
    conversation: Conversation,
    stack_dir: Path,
    embedder: Embedder,
    options: LocomoOptions,
    ks: tuple[int, ...],
    timings: _Timings,
    progress: Progress | None,
) -> tuple[list[list[Answered]], int]:
    """Retain one conversation into a fresh stack and ask its questions with every candidate.

    Returns what each candidate answered, and how many questions were skipped.
    """
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
    services = [
        MemoryService(bus=bus, archive=archive, index=index, embedder=embedder, policy=policy)
        for policy in options.policies()
    ]
    service = services[0]
    try:
        await worker.prepare()
        running = asyncio.create_task(worker.run(stop, on_batch=ingested.record))
        began = time.perf_counter()
        await _retain_all(service, bank_id, conversation, options.captions, progress)
        await _until_indexed(ingested, index, bank_id, progress, conversation.sample_id)
        timings.ingest_s += time.perf_counter() - began
        return await _ask_all(
            services,
            index,
            embedder,
            bank_id,
            conversation,
            turns,
            ks,
            timings,
            progress,
        )
    finally:
        stop.set()
        if running is not None:
            await running
        for each in services:
            await each.drain()
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
    services: Sequence[MemoryService],
    index: MemoryIndex,
    embedder: Embedder,
    bank_id: str,
    conversation: Conversation,
    turns: dict[str, Turn],
    ks: tuple[int, ...],
    timings: _Timings,
    progress: Progress | None,
) -> tuple[list[list[Answered]], int]:
    known = {turn.dia_id for turn in conversation.turns}
    asked = [q for q in conversation.questions if q.category != ADVERSARIAL_CATEGORY]
    task = _task(progress, f"ask {conversation.sample_id}", len(asked))
    filters = SearchFilters(bank_id=bank_id)
    size = max(ks)
    answered: list[list[Answered]] = [[] for _ in services]
    skipped = 0

    def dia_ids(memory_ids: Sequence[str]) -> tuple[str, ...]:
        return tuple(turns[m].dia_id for m in memory_ids if m in turns)

    for question in asked:
        _advance(progress, task, 1)
        evidence = tuple(e for e in question.evidence if e in known)
        if not evidence:
            skipped += 1  # no turn of this conversation answers it: nothing to find
            continue
        began = time.perf_counter()
        (vector,) = await embedder.embed([question.question])
        timings.embed_ms.append((time.perf_counter() - began) * 1000)
        text_hits = await index.search_text(question.question, filters, size=size)
        vector_hits = await index.search_vector(vector, filters, size=size)
        bm25 = dia_ids([h.document.event_id for h in text_hits])
        cosine = dia_ids([h.document.event_id for h in vector_hits])
        for service, into in zip(services, answered, strict=True):
            ranked = await _timed_recall(service, bank_id, question.question, size, timings)
            into.append(Answered(str(question.category), evidence, dia_ids(ranked), bm25, cosine))
    return answered, skipped


async def _timed_recall(
    service: MemoryService, bank_id: str, query: str, size: int, timings: _Timings
) -> list[str]:
    """The memory ids recall returns (the question's own embedding is cached by then)."""
    began = time.perf_counter()
    response = await service.recall(bank_id, RecallRequest(query=query, k=size, reinforce=False))
    timings.recall_ms.append((time.perf_counter() - began) * 1000)
    return [r.id for r in response.results]


def _task(progress: Progress | None, description: str, total: int) -> TaskID | None:
    return None if progress is None else progress.add_task(description, total=total)


def _advance(progress: Progress | None, task: TaskID | None, steps: int) -> None:
    if progress is not None and task is not None:
        progress.update(task, advance=steps)
