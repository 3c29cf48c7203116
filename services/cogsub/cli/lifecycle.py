"""`cogsub forget`, `cogsub forget-bank`, `cogsub export` and `cogsub import`.

Without ``--url`` each command opens the archive and the index of these settings
directly (as `cogsub replay` does), so exports and imports have no size limit
and the audit records name ``cli``; with ``--url`` it goes through that API (and
its body limit), whose audit records name the API key.

`cogsub export --bank B > bank.jsonl` writes JSON lines, and only them, to
standard output (or ``--output``); progress goes to standard error.
`cogsub import FILE|-` reports how many objects were imported, already present,
conflicting or invalid, and exits 3 if any line was not taken or the file was
cut short.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import IO, Any

from rich.console import Console

from cogsub.lifecycle import ImportReport, Lifecycle
from cogsub.lifecycle.bundle import parse_header
from cogsub.runtime import Settings
from cogsub.runtime.adapters import build_archive, build_embedder, build_index
from cogsub.sdk import MemoryClient

ACTOR = "cli"
WRITE_LINES = 200
READ_HINT_BYTES = 1_048_576
COMMANDS = ("forget", "forget-bank", "export", "import")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``forget``, ``forget-bank``, ``export`` and ``import`` to the subcommands."""
    url_help = "go through this API instead of opening the stores directly"
    forget = subparsers.add_parser(
        "forget", help="forget a memory, and what was derived from it, for good (audited)"
    )
    forget.add_argument("bank", help="the bank id")
    forget.add_argument("memory_id", help="the memory id")
    forget.add_argument("--json", action="store_true", help="print the report as JSON")
    forget.add_argument("--url", help=url_help)
    bank = subparsers.add_parser("forget-bank", help="forget every memory of a bank (audited)")
    bank.add_argument("bank", help="the bank id")
    bank.add_argument("--yes", action="store_true", help="required: yes, erase the whole bank")
    bank.add_argument(
        "--scan-archive",
        action="store_true",
        help="also read every raw event for ones the index lacks (slow)",
    )
    bank.add_argument("--json", action="store_true", help="print the report as JSON")
    bank.add_argument("--url", help=url_help)
    export = subparsers.add_parser("export", help="write a bank as JSON lines (to stdout)")
    export.add_argument("--bank", required=True, help="the bank id")
    export.add_argument("--output", "-o", type=Path, help="a file instead of standard output")
    export.add_argument("--url", help=url_help)
    load = subparsers.add_parser("import", help="import a bank export (never overwrites)")
    load.add_argument("source", help="an export file, or - for standard input")
    load.add_argument("--bank", help="refuse an export of any other bank")
    load.add_argument("--json", action="store_true", help="print the report as JSON")
    load.add_argument("--url", help=url_help)


def run(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Run one of the four commands; returns the exit code."""
    notes = Console(file=sys.stderr, highlight=False, soft_wrap=True)
    if args.command == "forget":
        return _forget(args, settings, console)
    if args.command == "forget-bank":
        if not args.yes:
            notes.print(f"cogsub: forget-bank erases all of bank {args.bank}; add --yes to do it")
            return 2
        return _forget_bank(args, settings, console, notes)
    if args.command == "export":
        return _export(args, settings, notes)
    if args.command == "import":
        return _import(args, settings, console, notes)
    return 2


@contextlib.asynccontextmanager
async def open_lifecycle(settings: Settings) -> AsyncIterator[Lifecycle]:
    """A Lifecycle over the stores these settings name, closed on exit."""
    archive, bootstrap = build_archive(settings)
    index = build_index(settings)
    embedder = build_embedder(settings.embedder)  # only its dimension is needed: never loaded
    try:
        if bootstrap is not None:
            await bootstrap()
        yield Lifecycle(archive=archive, index=index, dimension=embedder.dimension)
    finally:
        await embedder.close()
        await index.close()
        await archive.close()


def _client(args: argparse.Namespace, settings: Settings) -> MemoryClient:
    key = settings.api.client_key.get_secret_value() if settings.api.client_key else None
    return MemoryClient(args.url, api_key=key, actor=ACTOR)


def _print(console: Console, report: Any, *, as_json: bool, text: str) -> None:
    if as_json:
        print(report.model_dump_json())
    else:
        console.print(text, markup=False)


def _forget(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    if args.url:
        with _client(args, settings) as client:
            report: Any = client.forget(args.bank, args.memory_id)
    else:

        async def direct() -> Any:
            async with open_lifecycle(settings) as lifecycle:
                return await lifecycle.forget(args.bank, args.memory_id, actor=ACTOR)

        report = asyncio.run(direct())
    derived = len(report.forgotten) - 1
    _print(
        console,
        report,
        as_json=args.json,
        text=f"forgot {args.memory_id} in bank {args.bank} and {derived} memories derived "
        f"from it; {report.archive_objects} archive objects erased; audit: {report.audit_key}",
    )
    return 0


def _forget_bank(
    args: argparse.Namespace, settings: Settings, console: Console, notes: Console
) -> int:
    if args.url:
        with _client(args, settings) as client:
            report: Any = client.forget_bank(args.bank, confirm=args.bank)
    else:

        async def direct() -> Any:
            async with open_lifecycle(settings) as lifecycle:
                return await lifecycle.forget_bank(
                    args.bank,
                    actor=ACTOR,
                    scan_archive=args.scan_archive,
                    on_progress=lambda r: notes.print(
                        f"  {r.index_documents} documents, {r.memory_objects} memory objects, "
                        f"{r.consolidation_objects} consolidation objects erased",
                        markup=False,
                    ),
                )

        report = asyncio.run(direct())
    _print(
        console,
        report,
        as_json=args.json,
        text=f"forgot bank {args.bank}: {report.index_documents} index documents, "
        f"{report.memory_objects + report.consolidation_objects} archive objects; "
        f"audit: {report.audit_key}",
    )
    return 0


@contextlib.contextmanager
def _destination(path: Path | None) -> Iterator[IO[bytes]]:
    if path is None:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    with path.open("wb") as file:
        yield file


def _export(args: argparse.Namespace, settings: Settings, notes: Console) -> int:
    with _destination(args.output) as out:
        if args.url:
            with _client(args, settings) as client:
                for line in client.export_bank(args.bank):
                    out.write(line.encode() + b"\n")
            return 0

        async def direct() -> None:
            async with open_lifecycle(settings) as lifecycle:

                def progress(count: int) -> None:
                    notes.print(f"  {count} objects exported", markup=False)

                pending: list[bytes] = []
                async for line in lifecycle.export_bank(args.bank, on_progress=progress):
                    pending.append(line)
                    if len(pending) >= WRITE_LINES:  # a slow reader of the pipe waits a thread
                        await asyncio.to_thread(out.writelines, pending)
                        pending = []
                await asyncio.to_thread(out.writelines, pending)

        asyncio.run(direct())
    notes.print(f"cogsub: exported bank {args.bank}", markup=False)
    return 0


@contextlib.contextmanager
def _source(source: str) -> Iterator[IO[bytes]]:
    if source == "-":
        yield sys.stdin.buffer
        return
    with Path(source).open("rb") as file:
        yield file


def _import(args: argparse.Namespace, settings: Settings, console: Console, notes: Console) -> int:
    try:
        with _source(args.source) as lines:
            if args.url:
                body = lines.read()
                bank = args.bank or parse_header(body.split(b"\n", 1)[0]).bank_id
                with _client(args, settings) as client:
                    report: Any = client.import_bank(bank, body)
            else:

                async def direct() -> ImportReport:
                    async with open_lifecycle(settings) as lifecycle:
                        return await lifecycle.import_bank(
                            _read_lines(lines),
                            bank_id=args.bank,
                            on_progress=lambda r: notes.print(
                                f"  {r.lines} lines read", markup=False
                            ),
                        )

                report = asyncio.run(direct())
    except OSError as exc:
        notes.print(f"cogsub: cannot read {args.source}: {exc.strerror}", markup=False)
        return 2
    for problem in report.problems:
        notes.print(
            f"  line {problem.line}: {problem.problem} {problem.key or ''}: {problem.reason}",
            markup=False,
        )
    _print(
        console,
        report,
        as_json=args.json,
        text=f"bank {report.bank_id}: {report.imported} imported, {report.present} already "
        f"present, {report.conflicts} conflicting, {report.invalid} invalid; "
        f"{report.indexed} indexed" + ("" if report.complete else "; the file was cut short"),
    )
    taken = report.complete and not report.conflicts and not report.invalid
    return 0 if taken else 3


async def _read_lines(stream: IO[bytes]) -> AsyncIterator[bytes]:
    """The stream's lines, read a megabyte at a time off the event loop."""
    while lines := await asyncio.to_thread(stream.readlines, READ_HINT_BYTES):
        for line in lines:
            yield line
