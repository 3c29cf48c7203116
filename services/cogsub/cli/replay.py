"""`cogsub replay`: rebuild the index from the archive (resumable, idempotent)."""

from __future__ import annotations

import argparse
import asyncio
from datetime import datetime

from rich.console import Console

from cogsub.replay import ReplayFilter, ReplayReport, replay
from cogsub.runtime import Settings
from cogsub.runtime.wiring import build_archive, build_bus, build_index


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``replay`` to the ``cogsub`` subcommands."""
    command = subparsers.add_parser("replay", help="re-derive the index from the archive alone")
    command.add_argument("--bank", help="only this bank")
    command.add_argument("--since", type=_when, help="ISO date/time, inclusive")
    command.add_argument("--until", type=_when, help="ISO date/time, exclusive")
    command.add_argument("--after-key", help="resume after this archive key (printed as it goes)")
    command.add_argument("--announce", action="store_true", help="re-publish memory.indexed")


def run(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Run ``cogsub replay``; prints progress with the key to resume after."""
    if args.command != "replay":
        return 2
    report = asyncio.run(_replay(args, settings, console))
    console.print(f"replayed: {report.indexed} indexed, {report.scanned} archived objects scanned")
    return 0


async def _replay(args: argparse.Namespace, settings: Settings, console: Console) -> ReplayReport:
    archive, bootstrap = build_archive(settings)
    index = build_index(settings)
    bus = build_bus(settings) if args.announce else None
    try:
        if bootstrap is not None:
            await bootstrap()

        def progress(report: ReplayReport) -> None:
            console.print(
                f"  {report.indexed} indexed, {report.scanned} scanned; "
                f"resume with --after-key {report.last_key}",
                markup=False,
                highlight=False,
            )

        return await replay(
            archive,
            index,
            only=ReplayFilter(bank_id=args.bank, since=args.since, until=args.until),
            after_key=args.after_key,
            announce_to=bus,
            on_progress=progress,
        )
    finally:
        if bus is not None:
            await bus.close()
        await index.close()
        await archive.close()


def _when(text: str) -> datetime:
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r}: give a timezone, e.g. {text}Z")
    return value
