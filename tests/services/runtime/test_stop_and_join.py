"""Stopping background tasks: every one is awaited, the first failure is raised."""

from __future__ import annotations

import asyncio

import pytest

from cogsub.runtime.wiring import stop_and_join


async def test_one_failure_does_not_leave_the_other_tasks_unawaited() -> None:
    stop = asyncio.Event()
    finished: list[str] = []

    async def fails_at_stop() -> None:
        await stop.wait()
        raise RuntimeError("sampler broke")

    async def cleans_up_at_stop(name: str) -> None:
        await stop.wait()
        await asyncio.sleep(0.01)  # still running when the first task has failed
        finished.append(name)

    tasks = [
        asyncio.create_task(fails_at_stop()),
        asyncio.create_task(cleans_up_at_stop("trimmer")),
        None,
        asyncio.create_task(cleans_up_at_stop("watcher")),
    ]
    with pytest.raises(RuntimeError, match="sampler broke"):
        await stop_and_join(stop, *tasks)
    assert stop.is_set()
    assert finished == ["trimmer", "watcher"]
    assert all(task is None or task.done() for task in tasks)


async def test_no_tasks_only_sets_stop() -> None:
    stop = asyncio.Event()
    await stop_and_join(stop, None, None)
    assert stop.is_set()
