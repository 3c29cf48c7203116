"""A process's metrics report its memory: all of it, and what the embedded index keeps."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from cogsub.index.ports import SearchFilters
from cogsub.index.sqlite import SqliteMemoryIndex
from cogsub.runtime.settings import Settings
from cogsub.runtime.wiring import embedded_settings, open_stack
from tests.contract.index_contract import axis, make_doc


def scraped(text: str) -> dict[str, float]:
    return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}


async def test_an_embedded_stack_reports_its_resident_memory_and_its_index_data(
    tmp_path: Path,
) -> None:
    stack = open_stack(embedded_settings(tmp_path, embedder="hash"))
    try:
        index = stack.index
        assert isinstance(index, SqliteMemoryIndex)
        assert scraped(stack.metrics.exposition().decode())["cogsub_index_resident_data_bytes"] == 0
        await index.ensure(dimension=8)
        await index.upsert([make_doc("b", f"m{i}", dimension=8) for i in range(500)])
        await index.search_vector(axis(8), SearchFilters(bank_id="b"), size=1)
        found = scraped(stack.metrics.exposition().decode())
        assert found["cogsub_index_resident_data_bytes"] == index.resident_data_bytes > 500 * 32
        assert found["process_resident_memory_bytes"] > found["cogsub_index_resident_data_bytes"]
    finally:
        await stack.aclose()


async def test_a_remote_index_reports_no_data_of_its_own(tmp_path: Path) -> None:
    settings = Settings(backend="distributed", data_dir=tmp_path)
    stack = open_stack(settings)  # adapters are built, nothing is connected
    try:
        found = scraped(stack.metrics.exposition().decode())
        assert found["cogsub_index_resident_data_bytes"] == 0
    finally:
        await stack.aclose()
