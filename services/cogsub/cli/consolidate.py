"""`cogsub consolidate --bank BANK`: one consolidation round now, and what it produced.

It goes where `cogsub recall` goes (``--url``, a `cogsub run` serving the data
directory, or the embedded stack in-process) and runs one bounded round:
observations, corrections distilled into preferences and procedure repairs,
the conflict rule, and one epoch of decay. A second run over the same memories
produces nothing new.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from cogsub.cli.memory import open_client
from cogsub.runtime import Settings


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``consolidate`` to the ``cogsub`` subcommands."""
    command = subparsers.add_parser(
        "consolidate", help="run one consolidation round of a bank and show what it produced"
    )
    command.add_argument("--bank", required=True, help="the bank id")
    command.add_argument("--json", action="store_true", help="print the report as JSON")
    command.add_argument("--url", help="the API to use (default: see `cogsub recall --help`)")


def run(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Run ``cogsub consolidate``."""
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
