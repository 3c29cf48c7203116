"""Decay per epoch: memories nobody uses lose priority, never their archive (pure).

Every epoch multiplies a memory's ``decay_factor`` by ``rate``, down to
``floor`` (``cogsub.index.ports.DecayStep``, which the index applies in place);
using a memory (feedback ``used`` / ``helpful``) restores it to 1.
Ranking reads priority as ``importance_score × decay_factor``, so an unused
memory sinks but stays recallable, and the archive object is never touched.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EPOCH_ORIGIN = datetime(2020, 1, 1, tzinfo=UTC)


def epoch_of(moment: datetime, length: timedelta) -> int:
    """The epoch number ``moment`` falls in (epochs of ``length`` from 2020-01-01 UTC)."""
    return int((moment - EPOCH_ORIGIN) / length)


def epoch_start(epoch: int, length: timedelta) -> datetime:
    """When epoch number ``epoch`` begins."""
    return EPOCH_ORIGIN + epoch * length
