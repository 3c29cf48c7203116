"""Extraction never counts a statement as proof of one a detail apart."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from cogsub.consolidation import FactStage
from cogsub.core.memory import RetainRequest
from cogsub.core.topics import EXPERIENCE_ENRICHED
from cogsub.extraction.offline import OfflineExtractor
from tests.services.consolidation.stack import ConsolidationStack, consolidation_stack

BANK = "ops"
WHEN = datetime(2026, 5, 8, 9, 0, tzinfo=UTC)


async def _extracted(stack: ConsolidationStack, facts: FactStage, *texts: str) -> list[str]:
    """Retain ``texts`` one by one and extract each; the facts' proof tags, oldest first."""
    consumer = stack.bus.consumer([EXPERIENCE_ENRICHED], group="test-reader")
    created: list[str] = []
    try:
        for n, text in enumerate(texts):
            request = RetainRequest(content=text, timestamp=WHEN, memory_id=f"t-{n}", wait=True)
            await stack.service.retain(BANK, request)
            (record,) = await consumer.poll(max_records=1, timeout_s=2.0)
            created += (await facts.handle(record.value)).created
    finally:
        await consumer.close()
    proofs = []
    for fact_id in created:
        doc = await stack.index.get(BANK, fact_id)
        assert doc is not None
        proofs += [t for t in doc.tags if t.startswith("proof:")]
    return proofs


def _stage(stack: ConsolidationStack, *, semantic: bool) -> FactStage:
    return FactStage(
        archive=stack.archive,
        index=stack.index,
        embedder=stack.embedder,
        extractor=OfflineExtractor(),
        writer=stack.writer,
        semantic=semantic,
    )


async def test_a_negated_statement_is_its_own_fact(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        proofs = await _extracted(
            stack, _stage(stack, semantic=False), "Bob eats meat.", "Bob doesn't eat meat."
        )
        assert proofs == ["proof:1", "proof:1"]


async def test_a_near_duplicate_with_another_address_is_not_its_proof(tmp_path: Path) -> None:
    async with consolidation_stack(tmp_path) as stack:
        said = "The staging server at {} runs the nightly billing export job for finance."
        proofs = await _extracted(
            stack,
            _stage(stack, semantic=True),
            said.format("10.0.0.5"),
            said.format("10.0.0.6"),
        )
        assert proofs == ["proof:1", "proof:1"]
