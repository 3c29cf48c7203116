"""The latest consolidation rounds this process ran, kept in memory for the console.

Consolidation writes no record of a round anywhere durable (its report is logged and
returned), so an API process knows only the rounds it ran or was asked for: in a
fleet, the rounds `cogsub consolidator` schedules are not among them.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime

from cogsub.core.memory import ConsolidationReport
from cogsub.core.operations import MAX_ROUNDS, PipelineLag, RecordedRound

DEFAULT_PER_BANK = 20
DEFAULT_BANKS = 1_000


class RoundLog:
    """The latest finished rounds of each bank, bounded per bank and in banks.

    Bounded per bank, not overall, so that one busy tenant's rounds never push
    another bank's out of what that bank's key is shown; when more banks than
    ``banks`` have had rounds, the bank whose last round is oldest is dropped.
    """

    def __init__(
        self,
        per_bank: int = DEFAULT_PER_BANK,
        *,
        banks: int = DEFAULT_BANKS,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if per_bank < 1:
            raise ValueError(f"per_bank must be at least 1, got {per_bank}")
        if banks < 1:
            raise ValueError(f"banks must be at least 1, got {banks}")
        self._per_bank = per_bank
        self._max_banks = banks
        # Per bank, (sequence, round) newest last; the sequence orders rounds across banks.
        self._rounds: OrderedDict[str, deque[tuple[int, RecordedRound]]] = OrderedDict()
        self._recorded = 0
        self._clock = clock or (lambda: datetime.now(UTC))

    def record(self, report: ConsolidationReport) -> None:
        finished = self._clock().astimezone(UTC).isoformat().replace("+00:00", "Z")
        self._recorded += 1
        bank = report.bank_id
        kept = self._rounds.setdefault(bank, deque(maxlen=self._per_bank))
        kept.append((self._recorded, RecordedRound(finished_at=finished, report=report)))
        self._rounds.move_to_end(bank)
        if len(self._rounds) > self._max_banks:
            self._rounds.popitem(last=False)

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
        chosen = [
            kept
            for bank, kept in self._rounds.items()
            if (banks is None or bank in banks) and bank_id in (None, bank)
        ]
        newest = heapq.nlargest(limit, (entry for kept in chosen for entry in kept))
        return [entry for _, entry in newest]

    def banks(self) -> list[str]:
        """Every bank a kept round was of, sorted."""
        return sorted(self._rounds)


@dataclass(frozen=True)
class OperationsSources:
    """What ``/v1/operations`` reads: the round log and how far behind each stage is."""

    rounds: RoundLog
    lag: Callable[[], Awaitable[PipelineLag]]
