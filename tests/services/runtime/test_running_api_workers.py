"""A running stack whose workers both fail reports the failure once, and leaves no task unheard."""

from __future__ import annotations

import asyncio
import gc
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from cogsub.core.errors import ConfigurationError
from cogsub.runtime.settings import Settings
from cogsub.runtime.wiring import embedded_settings, running_api

LIVE_PID = 1  # init: alive on every host, so a lease naming it is never taken over


def _hand_every_lease_to_another_process(bus_path: Path) -> None:
    with sqlite3.connect(bus_path) as bus:
        bus.execute("UPDATE group_leases SET owner = ?", (f"elsewhere:{LIVE_PID}:x",))


async def _run_until_both_workers_fail(settings: Settings) -> str:
    """What leaving the running stack raised, as text: no frame or task outlives this call."""
    try:
        async with running_api(settings, with_worker=True) as running:
            assert running.worker is not None and running.consolidation is not None
            while not (running.worker.done() and running.consolidation.done()):
                # Leases are taken at first poll and renewed every few seconds.
                _hand_every_lease_to_another_process(settings.bus_path)
                await asyncio.sleep(0.2)
    except ConfigurationError as exc:
        return str(exc)
    return "nothing raised"


@pytest.mark.timeout(60)
async def test_both_workers_failing_are_both_awaited_and_the_first_failure_raised(
    tmp_path: Path,
) -> None:
    unheard: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: unheard.append(context))
    try:
        raised = await _run_until_both_workers_fail(embedded_settings(tmp_path, embedder="hash"))
        gc.collect()  # a failed task nobody awaited reports itself when collected
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert "already has a live consumer" in raised
    assert [c["message"] for c in unheard] == []
