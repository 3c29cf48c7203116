"""How long ``forget_bank`` takes on the embedded stack (not a test: run it by hand).

    .venv/bin/python -m tests.services.lifecycle.bench_forget_bank [--docs 4000] [--runs 3]

Each run builds a fresh embedded stack in a temporary directory (filesystem archive,
SQLite index, SQLite bus, as ``open_stack`` wires them), writes ``--docs`` raw events
to the archive and their 384-dimensional documents to the index, then times
``Lifecycle.forget_bank`` of that bank, and separately the time spent inside the
index's delete calls. A second bank of 500 documents sits beside it and must survive.
For a before/after on one machine, run it with ``PYTHONPATH`` naming an older tree's
``libs`` and ``services`` first (``git archive`` of that commit): it measures whatever
``cogsub`` it imports, ``delete`` or ``delete_many``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from cogsub.core.documents import IndexDocument
from cogsub.index.ports import MemoryIndex
from cogsub.lifecycle import Lifecycle
from cogsub.runtime.wiring import embedded_settings, open_stack

DIMENSION = 384
BANK = "bench-forget"
OTHER = "bench-kept"


class TimedIndex:
    """The index, with the seconds spent in ``delete``/``delete_many`` added up."""

    def __init__(self, inner: MemoryIndex) -> None:
        self._inner = inner
        self.delete_s = 0.0
        self.delete_calls = 0

    async def delete(self, bank_id: str, event_id: str) -> bool:
        began = time.perf_counter()
        try:
            return await self._inner.delete(bank_id, event_id)
        finally:
            self.delete_s += time.perf_counter() - began
            self.delete_calls += 1

    async def delete_many(self, bank_id: str, event_ids: Sequence[str]) -> int:
        began = time.perf_counter()
        try:
            return await self._inner.delete_many(bank_id, event_ids)
        finally:
            self.delete_s += time.perf_counter() - began
            self.delete_calls += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _documents(bank_id: str, count: int, rng: np.random.Generator) -> list[IndexDocument]:
    vectors = rng.standard_normal((count, DIMENSION)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return [
        IndexDocument(
            event_id=f"{bank_id}-{i:06d}",
            timestamp="2026-05-08T22:31:25.237Z",
            event_type="user_input",
            session_id=f"{bank_id}-session",
            summary=f"memory number {i} about kiwi orchards and billing deploys",
            embedding=vectors[i].tolist(),
            importance_score=0.5,
            reward_score=0.5,
            confidence=0.5,
            object_storage_key=f"events/2026/05/08/{bank_id}-{i:06d}.json",
            tags=["bench"],
            bank_id=bank_id,
        )
        for i in range(count)
    ]


async def _populate(archive: Any, index: MemoryIndex, docs: list[IndexDocument]) -> None:
    for start in range(0, len(docs), 500):
        part = docs[start : start + 500]
        await index.upsert(part)
        bodies = [
            (
                d.object_storage_key,
                json.dumps({"eventId": d.event_id, "bankId": d.bank_id}).encode(),
            )
            for d in part
        ]
        await asyncio.gather(*(archive.put_once(key, body) for key, body in bodies))


async def one_run(docs: int, seed: int) -> tuple[float, float, int]:
    """Seconds for forget_bank, seconds inside index deletes, and delete calls."""
    with tempfile.TemporaryDirectory(prefix="bench-forget-") as tmp:
        stack = open_stack(embedded_settings(Path(tmp) / "data", embedder="hash"))
        try:
            await stack.prepare()
            await stack.index.ensure(dimension=DIMENSION)
            rng = np.random.default_rng(seed)
            await _populate(stack.archive, stack.index, _documents(BANK, docs, rng))
            await _populate(stack.archive, stack.index, _documents(OTHER, 500, rng))
            timed = TimedIndex(stack.index)
            lifecycle = Lifecycle(archive=stack.archive, index=timed)
            began = time.perf_counter()
            report = await lifecycle.forget_bank(BANK, actor="bench")
            elapsed = time.perf_counter() - began
            assert report.index_documents == docs, report
            assert await stack.index.count(BANK) == 0
            assert await stack.index.count(OTHER) == 500
            return elapsed, timed.delete_s, timed.delete_calls
        finally:
            await stack.aclose()


async def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=4000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    totals, deletes = [], []
    for run in range(args.runs):
        total, in_deletes, calls = await one_run(args.docs, seed=run)
        totals.append(total)
        deletes.append(in_deletes)
        print(
            f"run {run + 1}: forget_bank {total:.2f} s, index deletes {in_deletes:.2f} s"
            f" in {calls} calls"
        )
    print(
        f"median of {args.runs}: forget_bank {statistics.median(totals):.2f} s,"
        f" index deletes {statistics.median(deletes):.2f} s ({args.docs} documents)"
    )


if __name__ == "__main__":
    asyncio.run(main())
