"""`cogsub consolidate --bank BANK` (one round now) and `cogsub consolidator` (the worker).

`cogsub consolidator` runs only the consolidation worker, as a fleet replica:
extraction on ``experience.enriched``, rounds on ``consolidation.request`` and
on its schedule, until SIGINT/SIGTERM (what it polled is finished and committed).

It goes where `cogsub recall` goes (``--url``, a `cogsub run` serving the data
directory, or the embedded stack in-process) and, once everything acknowledged
before it is ingested and extracted, runs one bounded round:
observations, corrections distilled into preferences and procedure repairs,
the conflict rule, and one epoch of decay. A second run over the same memories
produces nothing new.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from rich.console import Console

from cogsub.cli.memory import open_client
from cogsub.runtime import Settings
from cogsub.runtime.wiring import build_consolidation, consolidation_lag, observed, open_stack


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``consolidate`` to the ``cogsub`` subcommands."""
    command = subparsers.add_parser(
        "consolidate", help="run one consolidation round of a bank and show what it produced"
    )
    command.add_argument("--bank", required=True, help="the bank id")
    command.add_argument("--json", action="store_true", help="print the report as JSON")
    command.add_argument("--url", help="the API to use (default: see `cogsub recall --help`)")
    subparsers.add_parser(
        "consolidator",
        help="run only the consolidation worker (extraction, scheduled rounds; a fleet replica)",
    )


def run(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Run ``cogsub consolidate`` or ``cogsub consolidator``."""
    if args.command == "consolidator":
        asyncio.run(_work(settings, console))
        return 0
    if args.command != "consolidate":
        return 2
    notes = Console(file=sys.stderr, highlight=False, soft_wrap=True)
    with open_client(args, settings, notes) as (client, _):
        report = client.consolidate(args.bank)
    if args.json:
        print(report.model_dump_json())
        return 0
    for label, ids in (
        ("observations", report.observations),
        ("preferences", report.preferences),
        ("procedure versions", report.procedures),
        ("superseded", report.superseded),
    ):
        console.print(f"{label}: {len(ids)}" + (f"  {' '.join(ids)}" if ids else ""), markup=False)
    console.print(
        f"scanned {report.scanned} memories, reinforced {report.reinforced} sources, "
        f"decayed {report.decayed}; {'complete' if report.complete else 'more next round'}",
        markup=False,
    )
    return 0


async def _work(settings: Settings, console: Console) -> None:
    stack = open_stack(settings)
    consolidation = build_consolidation(stack)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    try:
        await stack.prepare()
        extractor = consolidation.extractor.name if consolidation.extractor else "none"
        console.print(
            f"cogsub: consolidating (backend={settings.backend}, extractor={extractor}, "
            f"rounds every {settings.consolidation.schedule_s:g} s). Ctrl-C to stop.",
            markup=False,
        )
        await consolidation.worker.prepare()  # the topics exist before their lag is asked
        async with observed(stack, consolidation_lag(settings), endpoint=True):
            await consolidation.worker.run(stop)
        console.print("stopped; every polled record is committed or will be redelivered.")
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        await consolidation.aclose()
        await stack.aclose()
