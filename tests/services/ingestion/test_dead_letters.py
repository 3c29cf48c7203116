"""Ingestion's own dead letters (``invalid``, ``conflict``) go through the consumer runtime."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from cogsub.bus.dead_letters import DLQ_KIND_HEADER, DLQ_REASON_HEADER, DLQ_SOURCE_HEADER
from cogsub.bus.middleware import ConsumerMetrics
from cogsub.core import EXPERIENCE_RAW, EXPERIENCE_RAW_DLQ, UnavailableError
from cogsub.ingestion import RetryPolicy, Stage
from cogsub.telemetry.metrics import Metrics
from tests.services.ingestion.harness import Harness, event_body


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    h = Harness(tmp_path)
    yield h
    await h.close()


def _letters(metrics: Metrics, kind: str) -> float:
    labels = {"group": "ingestion", "topic": EXPERIENCE_RAW, "kind": kind}
    return metrics.registry.get_sample_value("cogsub_consumer_dead_letters_total", labels) or 0.0


async def test_invalid_and_conflicting_records_are_counted_by_the_runtimes_metrics(
    harness: Harness,
) -> None:
    metrics = Metrics()
    counted = [ConsumerMetrics(metrics, group="ingestion")]
    await harness.publish([event_body(1), b"{poison"])
    bus = harness.bus()
    await harness.drain(harness.worker(bus=bus, middlewares=counted), bus)
    assert (_letters(metrics, "invalid"), _letters(metrics, "conflict")) == (1.0, 0.0)

    await harness.publish([event_body(1, text="a rewritten history")])
    await harness.drain(harness.worker(bus=bus, middlewares=counted), bus)
    assert (_letters(metrics, "invalid"), _letters(metrics, "conflict")) == (1.0, 1.0)

    (poison,) = [r for r in await harness.read_topic(EXPERIENCE_RAW) if r.value == b"{poison"]
    invalid, conflict = await harness.dead_letters()
    assert invalid.value == b"{poison"
    assert invalid.header(DLQ_KIND_HEADER) == b"invalid"
    assert (invalid.header(DLQ_REASON_HEADER) or b"").startswith(b"(event): must be JSON")
    assert invalid.header(DLQ_SOURCE_HEADER) == (
        f"{EXPERIENCE_RAW}/{poison.partition}/{poison.offset}".encode()
    )
    assert conflict.header(DLQ_KIND_HEADER) == b"conflict"
    assert json.loads(conflict.value)["input"]["text"] == "a rewritten history"


class _SecondLetterRefused:
    """A real bus that refuses the second publish to experience.raw.dlq once, retryably."""

    def __init__(self, bus: Any) -> None:
        self._bus, self.letters, self.refused = bus, 0, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._bus, name)

    async def publish(self, topic: str, value: bytes, **kwargs: Any) -> Any:
        if topic == EXPERIENCE_RAW_DLQ:
            self.letters += 1
            if self.letters == 2:
                self.refused += 1
                raise UnavailableError("dead-letter topic briefly unavailable")
        return await self._bus.publish(topic, value, **kwargs)


async def test_a_retried_finish_sends_each_letter_once(harness: Harness) -> None:
    await harness.publish([b"{first", event_body(1), b"{second"])
    bus = harness.bus()
    refusing = _SecondLetterRefused(bus)
    worker = harness.worker(bus=refusing, retry=RetryPolicy(0.001, 0.01))
    await worker.prepare()
    stop = asyncio.Event()
    # The running runtime retries the finish alone, which goes on from the letter it failed.
    await asyncio.wait_for(worker.run(stop, on_batch=lambda _: stop.set()), timeout=10)
    assert refusing.refused == 1
    assert sorted(d.value for d in await harness.dead_letters()) == [b"{first", b"{second"]
    assert await harness.announced() == {"ev-00001"}
    assert (await bus.topic_stats(EXPERIENCE_RAW, group="ingestion")).lag == 0


class _Crash(BaseException):
    """Stands for the process dying right after the letters went out."""


async def test_letters_are_sent_before_the_batch_commits(harness: Harness) -> None:
    await harness.publish([event_body(1), b"{poison"])
    bus = harness.bus()

    def die_at_index(stage: Stage, ids: Sequence[str]) -> None:
        if stage is Stage.INDEX:
            raise _Crash

    with pytest.raises(_Crash):
        await harness.drain(harness.worker(bus=bus, observer=die_at_index), bus)
    assert (await bus.topic_stats(EXPERIENCE_RAW, group="ingestion")).lag == 2
    assert [d.value for d in await harness.dead_letters()] == [b"{poison"]
