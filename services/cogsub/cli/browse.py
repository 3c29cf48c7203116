"""`cogsub banks` and `cogsub memories list|show|history`: what the banks hold, and why.

All go where `cogsub recall` goes: ``--url``, else a `cogsub run` serving the
data directory, else the embedded stack in this process (see
:mod:`cogsub.cli.memory`). `memories list` prints one page, newest first, and
the cursor of the next (``--cursor``), or every page with ``--all``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from itertools import islice
from typing import TypeVar

from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from cogsub.cli.memory import fact_types, open_client
from cogsub.core.history import LinkedMemory, MemoryHistory
from cogsub.core.listing import DEFAULT_PAGE_LIMIT, MAX_PAGE_LIMIT, BankPage, MemoryPage
from cogsub.core.memory import MemoryRecord
from cogsub.runtime import Settings

_PREVIEW = 80
M = TypeVar("M", bound=BaseModel)


def _page_limit(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= MAX_PAGE_LIMIT:
        raise argparse.ArgumentTypeError(f"a number from 1 to {MAX_PAGE_LIMIT}")
    return int(text)


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``banks`` and ``memories`` to the ``cogsub`` subcommands."""
    banks = subparsers.add_parser("banks", help="the banks you may use: counts by type, newest")
    banks.add_argument("--cursor", help="the next_cursor a previous page printed")
    banks.add_argument("--json", action="store_true", help="print the page as JSON")
    banks.add_argument("--url", help="the API to use (default: see `cogsub recall --help`)")
    memories = subparsers.add_parser("memories", help="list, show and trace a bank's memories")
    actions = memories.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="a bank's memories, newest first")
    listing.add_argument("bank", help="the bank id")
    listing.add_argument("--types", type=fact_types, help="e.g. world,experience")
    listing.add_argument("--tag", dest="tags", action="append", help="any of these (repeatable)")
    listing.add_argument("--since", help="ISO-8601 with a timezone, inclusive")
    listing.add_argument("--until", help="ISO-8601 with a timezone, exclusive")
    listing.add_argument("--include-superseded", action="store_true", help="old versions too")
    listing.add_argument("--limit", type=_page_limit, default=DEFAULT_PAGE_LIMIT, help="per page")
    listing.add_argument("--cursor", help="the next_cursor a previous page printed")
    listing.add_argument("--all", action="store_true", help="every page, not one")
    for name, about in (("show", "one memory and its archived event"), ("history", "lineage")):
        action = actions.add_parser(name, help=about)
        action.add_argument("bank", help="the bank id")
        action.add_argument("memory_id", help="the memory id")
    for action in (listing, actions.choices["show"], actions.choices["history"]):
        action.add_argument("--json", action="store_true", help="print the answer as JSON")
        action.add_argument("--url", help="the API to use (default: see `cogsub recall --help`)")


def run(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Run ``cogsub banks`` or ``cogsub memories …``."""
    notes = Console(file=sys.stderr, highlight=False, soft_wrap=True)
    with open_client(args, settings, notes) as (client, _):
        if args.command == "banks":
            page = client.list_banks(cursor=args.cursor)
            _print(args, page, console, print_banks)
        elif args.action == "list":
            pages = client.memory_pages(
                args.bank,
                args.types,
                args.tags,
                args.since,
                args.until,
                include_superseded=args.include_superseded,
                cursor=args.cursor,
                limit=args.limit,
            )
            for listed in pages if args.all else islice(pages, 1):
                _print(args, listed, console, print_memories)
        elif args.action == "show":
            _print(args, client.get_memory(args.bank, args.memory_id), console, print_memory)
        else:
            _print(args, client.history(args.bank, args.memory_id), console, print_history)
    return 0


def _print(
    args: argparse.Namespace, answer: M, console: Console, pretty: Callable[[M, Console], None]
) -> None:
    if args.json:
        print(answer.model_dump_json())
    else:
        pretty(answer, console)


def print_banks(page: BankPage, console: Console) -> None:
    table = Table(title="banks")
    for column in ("bank", "memories", "by type", "newest"):
        table.add_column(column, overflow="fold")
    for bank in page.banks:
        counts = ", ".join(f"{fact.value} {n}" for fact, n in sorted(bank.counts.items()))
        table.add_row(bank.bank_id, str(bank.total), counts, bank.newest_at or "-")
    console.print(table)
    _next(page.next_cursor, console)


def print_memories(page: MemoryPage, console: Console) -> None:
    table = Table()
    for column in ("time", "type", "memory", "id"):
        table.add_column(column, overflow="fold")
    for memory in page.memories:
        kind = memory.fact_type.value if memory.fact_type else "experience (raw)"
        table.add_row(memory.timestamp, kind, _preview(memory.text), memory.id)
    console.print(table)
    _next(page.next_cursor, console)


def print_memory(memory: MemoryRecord, console: Console) -> None:
    kind = memory.fact_type.value if memory.fact_type else "experience (raw)"
    console.print(f"{memory.id} in {memory.bank_id}: {kind}, {memory.timestamp}", markup=False)
    console.print(memory.text, markup=False)
    if memory.tags:
        console.print(f"tags: {', '.join(memory.tags)}", markup=False)
    console.print(f"archived at {memory.object_storage_key}", markup=False)


def print_history(history: MemoryHistory, console: Console) -> None:
    print_memory(history.memory, console)
    if history.kind:
        console.print(f"derived by consolidation as a {history.kind}", markup=False)
    if len(history.versions) > 1:
        console.print("versions:", markup=False)
        for version in history.versions:
            mark = " (current)" if version.current else ""
            text = _preview(version.text or "(forgotten)")
            console.print(f"  v{version.version} {version.memory_id}{mark}: {text}", markup=False)
    if history.superseded_by is not None:
        replaced = history.superseded_by
        console.print(f"superseded by {replaced.superseded_by} ({replaced.rule})", markup=False)
    for record in history.supersedes:
        console.print(f"supersedes {record.memory_id} ({record.rule})", markup=False)
    _links("sources", history.sources, console)
    _links("evidence", history.evidence, console)
    _links("corrections", history.corrections, console)
    if history.signals is not None:
        s = history.signals
        proof = f", proof {s.proof_count}" if s.proof_count is not None else ""
        console.print(
            f"signals: importance {s.importance_score:.2f}, decay {s.decay_factor:.2f},"
            f" retrievals {s.retrieval_count}{proof}",
            markup=False,
        )


def _links(title: str, links: list[LinkedMemory], console: Console) -> None:
    if not links:
        return
    console.print(f"{title}:", markup=False)
    for link in links:
        event = f" (event {link.event_id})" if link.event_id not in (None, link.memory_id) else ""
        console.print(
            f"  {link.memory_id}{event}: {_preview(link.text or '(forgotten)')}", markup=False
        )


def _next(cursor: str | None, console: Console) -> None:
    if cursor is not None:
        console.print(f"next page: --cursor {cursor}", markup=False)


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _PREVIEW else flat[: _PREVIEW - 1] + "…"
