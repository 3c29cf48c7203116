"""The latest consolidation rounds this process ran, kept in memory for the console."""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime

from cogsub.core.memory import ConsolidationReport
from cogsub.core.operations import MAX_ROUNDS, PipelineLag, RecordedRound

DEFAULT_CAPACITY = 200


class RoundLog:
    """A bounded, newest-last record of finished rounds (older ones fall off)."""

    def __init__(
        self, capacity: int = DEFAULT_CAPACITY, clock: Callable[[], datetime] | None = None
    ) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self._rounds: deque[RecordedRound] = deque(maxlen=capacity)
        self._clock = clock or (lambda: datetime.now(UTC))

    def record(self, report: ConsolidationReport) -> None:
        finished = self._clock().astimezone(UTC).isoformat().replace("+00:00", "Z")
        self._rounds.append(RecordedRound(finished_at=finished, report=report))

    def beside(
        self, other: Callable[[ConsolidationReport], None]
    ) -> Callable[[ConsolidationReport], None]:
        """A round hook that calls ``other`` (e.g. metrics), then records the round."""

        def both(report: ConsolidationReport) -> None:
            other(report)
            self.record(report)

        return both

    def latest(
        self, *, banks: Collection[str] | None, bank_id: str | None = None, limit: int = 20
    ) -> list[RecordedRound]:
        """Newest first, only rounds of ``banks`` (None: every bank) and of ``bank_id`` if given."""
        if not 1 <= limit <= MAX_ROUNDS:
            raise ValueError(f"limit must be 1..{MAX_ROUNDS}, got {limit}")
        found: list[RecordedRound] = []
        for entry in reversed(self._rounds):
            bank = entry.report.bank_id
            if (banks is None or bank in banks) and bank_id in (None, bank):
                found.append(entry)
                if len(found) == limit:
                    break
        return found

    def banks(self) -> list[str]:
        """Every bank a recorded round was of, sorted."""
        return sorted({entry.report.bank_id for entry in self._rounds})


@dataclass(frozen=True)
class OperationsSources:
    """What ``/v1/operations`` reads: the round log and how far behind each stage is."""

    rounds: RoundLog
    lag: Callable[[], Awaitable[PipelineLag]]
