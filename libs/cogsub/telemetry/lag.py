"""Consumer lag as a gauge: a background task asks the bus where each group stands.

Lag is what the broker knows (end offsets minus the group's commits), not what
one worker saw, so every replica of a group reports the same value; dashboards
take ``max by (topic, group)``. The sampler needs one question of the bus, so
it names that question (:class:`LagSource`) rather than the bus port: every
``EventBus`` answers it, and telemetry stays below the bus.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import structlog

from cogsub.core.errors import ConfigurationError
from cogsub.telemetry.metrics import Metrics

log = structlog.get_logger("cogsub.telemetry")

MIN_INTERVAL_S = 0.05


class GroupPosition(Protocol):
    """Where a group stands on a topic: how many records it has not committed yet."""

    @property
    def lag(self) -> int: ...


class LagSource(Protocol):
    """What the sampler asks the bus (``EventBus.topic_stats``)."""

    async def topic_stats(self, topic: str, *, group: str | None = None) -> GroupPosition: ...


@dataclass(frozen=True)
class LagTarget:
    """One topic read by one consumer group."""

    topic: str
    group: str


class LagSampler:
    """Refreshes ``cogsub_consumer_lag{topic,group}`` every ``interval_s`` until stopped.

    Each question to the bus is bounded by ``timeout_s``. A target that cannot be
    measured (the bus is down, the question times out) loses its series until the
    next sample succeeds, so a dashboard shows a gap rather than a stale number.
    The bus is the caller's: the sampler never closes it.
    """

    def __init__(
        self,
        *,
        bus: LagSource,
        metrics: Metrics,
        targets: Sequence[LagTarget],
        interval_s: float = 15.0,
        timeout_s: float = 5.0,
    ) -> None:
        if interval_s < MIN_INTERVAL_S or timeout_s <= 0:
            raise ConfigurationError(
                f"lag sampling needs interval_s >= {MIN_INTERVAL_S} and timeout_s > 0, "
                f"got {interval_s} and {timeout_s}"
            )
        self._bus = bus
        self._metrics = metrics
        self._targets = tuple(dict.fromkeys(targets))
        self._interval_s = interval_s
        self._timeout_s = timeout_s

    @property
    def targets(self) -> tuple[LagTarget, ...]:
        return self._targets

    async def sample_once(self) -> dict[LagTarget, int | None]:
        """Measure every target now and set its gauge; None where it could not be measured."""
        found = await asyncio.gather(*(self._sample(t) for t in self._targets))
        return dict(zip(self._targets, found, strict=True))

    async def run(self, stop: asyncio.Event) -> None:
        """Sample, then wait ``interval_s`` or until ``stop`` is set; returns once it is."""
        while not stop.is_set():
            await self.sample_once()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self._interval_s)

    async def _sample(self, target: LagTarget) -> int | None:
        try:
            stats = await asyncio.wait_for(
                self._bus.topic_stats(target.topic, group=target.group), timeout=self._timeout_s
            )
        except Exception as exc:  # any failure to measure means "unknown", never a stop
            log.warning(
                "consumer_lag_unavailable",
                topic=target.topic,
                group=target.group,
                error_type=type(exc).__name__,
                error=str(exc),
            )
            self._metrics.forget_lag(target.topic, target.group)
            return None
        self._metrics.set_lag(target.topic, target.group, stats.lag)
        return stats.lag
