"""Faults survived: each scenario of ``benchmarks.faults``, short, with its invariants.

The same code as `make faults` runs here with 600 events and 3-second outages:
nothing acknowledged is lost, nothing is archived or indexed twice, everything
but the dead letters is archived and indexed, and the backlog drains once the
fault clears. The broker restart runs on Tansu with its log in SeaweedFS: noida-db
loses acknowledged records now and then when it is stopped under load, which
would fail the "nothing lost" check for the broker's sake (docs/reliability.md,
finding 3). The consolidator scenarios run with 3 kills and a 3-second index outage.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest
from benchmarks.fault_drive import Options, Row
from benchmarks.faults import run_scenario

from cogsub.bus.ports import Consumer, Record
from cogsub.core import EXPERIENCE_RAW, UnavailableError
from cogsub.ingestion import BatchOutcome
from tests.services.ingestion.harness import Harness, event_body

pytestmark = [pytest.mark.connected, pytest.mark.slow]

SHORT = Options(events=600, outage_s=3.0, kills=5, drain_timeout_s=45.0)


def _check(row: Row) -> None:
    if row.skipped:
        pytest.skip(row.skipped)
    report = json.dumps({k: v for k, v in asdict(row).items() if k != "kill_points"}, indent=1)
    assert row.worker_deaths == 0, report
    assert row.drained, report
    assert row.lost == 0, report
    assert row.unfinished == 0, report
    assert row.duplicates == 0, report
    assert row.dead_lettered == SHORT.events // 300, report  # exactly the poison records
    assert row.archived == row.indexed == row.produced - row.dead_lettered == SHORT.events, report


@pytest.mark.timeout(90)
def test_s3_outage(tmp_path: Path) -> None:
    row = asyncio.run(run_scenario("s3-outage", SHORT, tmp_path))
    _check(row)
    assert row.worker_retries > 0  # the workers saw the outage and backed off
    assert row.max_lag is not None and row.max_lag > 0 and row.final_lag == 0


@pytest.mark.timeout(90)
def test_index_outage(tmp_path: Path) -> None:
    row = asyncio.run(run_scenario("index-outage", SHORT, tmp_path))
    _check(row)
    during = row.readyz.split(" → ")[1]
    assert "503" in during, row.readyz  # readiness reported the frozen index
    assert row.readyz.split(" → ")[2].startswith("200"), row.readyz
    assert row.final_lag == 0


@pytest.mark.timeout(90)
def test_broker_restart(tmp_path: Path) -> None:
    _check(asyncio.run(run_scenario("broker-restart-tansu", SHORT, tmp_path)))


@pytest.mark.timeout(180)
def test_sigkill_workers(tmp_path: Path) -> None:
    row = asyncio.run(run_scenario("sigkill-20", SHORT, tmp_path))
    _check(row)
    assert row.kills == SHORT.kills


@pytest.mark.timeout(90)
def test_disk_full(tmp_path: Path) -> None:
    row = asyncio.run(run_scenario("disk-full", SHORT, tmp_path))
    _check(row)
    assert row.worker_retries > 0  # the worker met ENOSPC and backed off
    assert row.final_lag == 0


@pytest.mark.timeout(150)
def test_consolidator_sigkill(tmp_path: Path) -> None:
    options = replace(SHORT, consolidator_kills=3)
    row = asyncio.run(run_scenario("consolidator-sigkill", options, tmp_path))
    _check(row)
    figures = row.consolidator
    assert figures is not None
    # Observations a kill left archived, never indexed, are no defect as long as a replay
    # of the archive rebuilds the running index's live observations (part of ``ok``).
    assert figures.ok, figures.problems()
    assert figures.replay_differs == 0
    assert figures.kills == 3
    # The checks had something to check: facts with proofs, observations that grew.
    assert figures.facts.expected > 0 and figures.facts.expected < SHORT.events
    assert figures.observations > 0 and figures.superseded > 0


@pytest.mark.timeout(150)
def test_consolidator_index_outage(tmp_path: Path) -> None:
    row = asyncio.run(run_scenario("consolidator-index-outage", SHORT, tmp_path))
    _check(row)
    figures = row.consolidator
    assert figures is not None
    assert figures.ok, figures.problems()  # nobody is killed: every guarantee holds
    assert figures.facts.expected > 0 and figures.observations > 0


class _FailingCommits:
    """A consumer whose first commits fail as they do while a broker restarts or rebalances."""

    def __init__(self, inner: Consumer, failures: int) -> None:
        self._inner = inner
        self.failures = failures

    async def poll(self, *, max_records: int, timeout_s: float) -> list[Record]:
        return await self._inner.poll(max_records=max_records, timeout_s=timeout_s)

    async def commit(self, records: Sequence[Record]) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise UnavailableError("kafka is unavailable: CommitFailedError (the group rebalanced)")
        await self._inner.commit(records)

    async def close(self) -> None:
        await self._inner.close()


class _Bus:
    """The embedded bus, handing out consumers whose commits fail at first."""

    def __init__(self, inner: Any, failures: int) -> None:
        self._inner = inner
        self._failures = failures

    def consumer(self, topics: Sequence[str], *, group: str) -> Consumer:
        return _FailingCommits(self._inner.consumer(topics, group=group), self._failures)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@pytest.mark.timeout(30)
async def test_a_failed_commit_does_not_end_the_worker(tmp_path: Path) -> None:
    harness = Harness(tmp_path, batch_size=5)
    try:
        await harness.publish([event_body(i) for i in range(20)])
        worker = harness.worker(bus=_Bus(harness.bus(), failures=2))
        await worker.prepare()
        indexed: set[str] = set()
        all_in = asyncio.Event()

        def seen(outcome: BatchOutcome) -> None:
            indexed.update(doc.event_id for doc in outcome.indexed)
            if len(indexed) == 20:
                all_in.set()

        stop = asyncio.Event()
        running = asyncio.create_task(worker.run(stop, on_batch=seen))
        waiting = asyncio.create_task(all_in.wait())
        done, _ = await asyncio.wait({running, waiting}, timeout=20, return_when="FIRST_COMPLETED")
        if running in done:
            waiting.cancel()
            running.result()  # raises what ended the worker
        assert waiting in done, "the worker did not index the 20 events in time"
        stop.set()
        await running
        # Whatever the failed commits left uncommitted is delivered again, idempotently.
        bus = harness.bus()
        await harness.drain(harness.worker(bus=bus), bus)
        assert (await bus.topic_stats(EXPERIENCE_RAW, group="ingestion")).lag == 0
        keys = await harness.archived_keys()
        assert len(keys) == len(set(keys)) == 20
        assert await harness.indexed_ids() == 20
        assert len(await harness.announced()) == 20
    finally:
        await harness.close()
