"""Bounded concurrent archive reads: order kept, erased objects skipped, the bound held."""

from __future__ import annotations

import asyncio

from cogsub.archive.memory import InMemoryArchive
from cogsub.lifecycle.archive_reads import bounded, chunks, read_many


async def test_read_many_keeps_the_order_and_skips_what_is_gone() -> None:
    archive = InMemoryArchive(objects={"a": b"1", "c": b"3", "b": b"2"})
    bodies = await read_many(archive, ["c", "gone", "a"])
    assert list(bodies.items()) == [("c", b"3"), ("a", b"1")]


async def test_bounded_runs_at_most_limit_at_once_and_answers_in_order() -> None:
    running = peak = 0

    async def slow_double(n: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.01 * (10 - n))  # later items finish first
        running -= 1
        return 2 * n

    assert await bounded(range(10), slow_double, limit=3) == [2 * n for n in range(10)]
    assert peak == 3


def test_chunks_cut_the_last_one_short() -> None:
    assert chunks(list(range(7)), 3) == [[0, 1, 2], [3, 4, 5], [6]]
    assert chunks([], 3) == []
