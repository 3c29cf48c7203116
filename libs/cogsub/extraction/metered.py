"""A FactExtractor that counts rejected extractions, wrapped around any other.

The consolidation worker dead-letters every extraction that raises
``ExtractionRejected`` (never retryable), so counting the raises here counts
those dead letters without the worker knowing about metrics.
"""

from __future__ import annotations

from cogsub.extraction.ports import (
    ExtractedFact,
    ExtractionInput,
    ExtractionRejected,
    FactExtractor,
)
from cogsub.telemetry.metrics import Metrics


class MeteredExtractor:
    """Delegates to ``inner``; each ``ExtractionRejected`` bumps ``cogsub_extraction_rejected``."""

    def __init__(self, inner: FactExtractor, metrics: Metrics) -> None:
        self._inner = inner
        self._metrics = metrics

    @property
    def name(self) -> str:
        return self._inner.name

    async def extract(self, item: ExtractionInput) -> list[ExtractedFact]:
        try:
            return await self._inner.extract(item)
        except ExtractionRejected:
            self._metrics.record_extraction_rejected()
            raise

    async def close(self) -> None:
        await self._inner.close()
