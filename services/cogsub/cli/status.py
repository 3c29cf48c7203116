"""`cogsub status`: where every topic stands, and what the archive and index hold."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from cogsub.core import EVENTS_PREFIX, EXPERIENCE_ENRICHED, EXPERIENCE_RAW, STAGE1_TOPICS
from cogsub.core.derived import CONSOLIDATION_PREFIX, is_derived_memory_key
from cogsub.core.topics import CONSOLIDATION_REQUEST, CONSOLIDATION_TOPICS
from cogsub.runtime import Settings
from cogsub.runtime.adapters import build_archive, build_bus, build_index


async def show_status(settings: Settings, console: Console) -> dict[str, object]:
    """Print and return per-topic offsets and lag, archive objects and index documents."""
    # Status embeds nothing, so it never loads a model.
    bus, (archive, _), index = build_bus(settings), build_archive(settings), build_index(settings)
    try:
        specs = [*STAGE1_TOPICS, *CONSOLIDATION_TOPICS]
        await bus.ensure_topics(specs)
        groups = {
            EXPERIENCE_RAW: settings.ingestion.group,
            EXPERIENCE_ENRICHED: settings.consolidation.group,
            CONSOLIDATION_REQUEST: settings.consolidation.group,
        }
        table = Table(title="topics")
        for column in ("topic", "partitions", "end offset", "consumer group", "lag"):
            table.add_column(column)
        topics: dict[str, object] = {}
        for spec in specs:
            group = groups.get(spec.name)
            stats = await bus.topic_stats(spec.name, group=group)
            lag = stats.lag if group else None
            topics[spec.name] = {"end_offset": stats.end_offset, "lag": lag}
            table.add_row(
                spec.name,
                str(len(stats.partitions)),
                str(stats.end_offset),
                group or "-",
                "-" if lag is None else str(lag),
            )
        archived = 0
        async for _ in archive.list(EVENTS_PREFIX):
            archived += 1
        derived = 0
        async for key in archive.list(CONSOLIDATION_PREFIX):
            derived += is_derived_memory_key(key)
        indexed = await index.count()
        console.print(table)
        console.print(f"archive objects under {EVENTS_PREFIX}: {archived}")
        console.print(f"derived memories under {CONSOLIDATION_PREFIX}: {derived}")
        console.print(f"index documents: {indexed}")
        return {"topics": topics, "archived": archived, "derived": derived, "indexed": indexed}
    finally:
        await index.close()
        await archive.close()
        await bus.close()
