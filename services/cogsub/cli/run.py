"""`cogsub run`: the whole stack in one process until Ctrl-C.

On the embedded backend it also seeds the bank with the shipped sample
events on first start, and prints what was archived and indexed.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from rich.console import Console

from cogsub.bus.ports import EventBus
from cogsub.cli.events_file import parse_events_text
from cogsub.cli.publish import print_report, publish_events
from cogsub.core import EXPERIENCE_RAW
from cogsub.ingestion import BatchOutcome, IngestionWorker
from cogsub.runtime import Settings, open_stack

SAMPLES = Path(__file__).resolve().parents[3] / "samples" / "experience-events.jsonl"


async def run_stack(settings: Settings, console: Console, *, samples: str | None) -> None:
    """Run ingestion until SIGINT/SIGTERM; the batch in hand is committed first.

    ``samples`` is JSON-lines text published once, when experience.raw is still empty.
    """
    stack = open_stack(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        console.print(
            f"cogsub: backend={settings.backend} data_dir={settings.data_dir} "
            f"embedder={stack.embedder.name} ({stack.embedder.dimension}-d)"
        )
        worker = IngestionWorker(
            bus=stack.bus,
            archive=stack.archive,
            index=stack.index,
            embedder=stack.embedder,
            group=settings.ingestion.group,
            batch_size=settings.ingestion.batch_size,
            poll_timeout_s=settings.ingestion.poll_timeout_s,
            messaging_system=stack.messaging_system,
        )
        await stack.prepare()
        await worker.prepare()
        if samples is not None and await _is_empty(stack.bus):
            report = await publish_events(stack.bus, list(parse_events_text(samples)), console)
            console.print("published the shipped sample events: ", end="")
            print_report(report, console)

        def show(outcome: BatchOutcome) -> None:
            for doc in outcome.indexed:
                console.print(
                    f"  archived {doc.object_storage_key}  indexed {doc.event_id} "
                    f"bank={doc.bank_id} type={doc.fact_type or doc.event_type} "
                    f"importance={doc.importance_score}",
                    markup=False,
                    highlight=False,
                )
            for rejection in outcome.rejected:
                console.print(f"  dead-lettered ({rejection.kind}): {rejection.reason}")

        console.print(
            "ingesting; publish more with `cogsub publish FILE` from another terminal. "
            "Ctrl-C to stop."
        )
        await worker.run(stop, on_batch=show)
        console.print("stopped; every acknowledged event is committed or will be redelivered.")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        await stack.aclose()


async def _is_empty(bus: EventBus) -> bool:
    stats = await bus.topic_stats(EXPERIENCE_RAW)
    return stats.end_offset == 0
