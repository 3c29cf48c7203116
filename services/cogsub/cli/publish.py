"""`cogsub publish FILE|-`: validate events and publish the good ones to experience.raw."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry.trace import SpanKind
from rich.console import Console
from rich.progress import Progress

from cogsub.bus.ports import EventBus
from cogsub.cli.events_file import ParsedLine
from cogsub.core import EXPERIENCE_RAW, STAGE1_TOPICS, ExperienceEvent
from cogsub.telemetry import attributes as attr
from cogsub.telemetry import headers_with_context, tracer

CHUNK = 500
PROGRESS_THRESHOLD = 1_000
SHOWN_REJECTIONS = 20


@dataclass
class PublishReport:
    accepted: int = 0
    rejected: list[tuple[int, str]] = field(default_factory=list)


def read_source(source: str) -> str:
    return sys.stdin.read() if source == "-" else Path(source).read_text()


async def publish_events(bus: EventBus, lines: list[ParsedLine], console: Console) -> PublishReport:
    """Publish every valid event (key = eventId), reporting the invalid ones by position."""
    await bus.ensure_topics(STAGE1_TOPICS)
    report = PublishReport()
    events: list[ExperienceEvent] = []
    for line in lines:
        if line.event is not None:
            events.append(line.event)
        else:
            report.rejected.append((line.position, line.error or "invalid"))
    show = len(lines) >= PROGRESS_THRESHOLD and console.is_terminal
    with Progress(console=console, disable=not show, transient=True) as progress:
        task = progress.add_task("publishing", total=len(events))
        for start in range(0, len(events), CHUNK):
            chunk = events[start : start + CHUNK]
            await asyncio.gather(*(_publish_one(bus, event) for event in chunk))
            report.accepted += len(chunk)
            progress.update(task, advance=len(chunk))
    return report


async def _publish_one(bus: EventBus, event: ExperienceEvent) -> None:
    body = json.dumps(event.to_wire(), ensure_ascii=False, separators=(",", ":")).encode()
    attributes = {
        attr.MESSAGING_DESTINATION_NAME: EXPERIENCE_RAW,
        attr.MESSAGING_OPERATION_TYPE: "send",
        attr.COG_EVENT_ID: event.event_id,
    }
    with tracer().start_as_current_span(
        "experience.publish", kind=SpanKind.PRODUCER, attributes=attributes
    ):
        await bus.publish(
            EXPERIENCE_RAW, body, key=event.event_id.encode(), headers=headers_with_context()
        )


def print_report(report: PublishReport, console: Console) -> None:
    console.print(f"accepted {report.accepted}, rejected {len(report.rejected)}")
    for position, reason in report.rejected[:SHOWN_REJECTIONS]:
        console.print(f"  item {position}: {reason}", markup=False, highlight=False)
    if len(report.rejected) > SHOWN_REJECTIONS:
        console.print(f"  … and {len(report.rejected) - SHOWN_REJECTIONS} more")
