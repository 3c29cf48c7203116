"""`cogsub replay`: rebuild the index from the archive (resumable, idempotent)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from cogsub.replay import ReplayFilter, ReplayReport, fill_detail, replay
from cogsub.runtime import Settings
from cogsub.runtime.adapters import build_archive, build_bus, build_embedder, build_index
from cogsub.runtime.index_versions import new_index_version


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``replay`` to the ``cogsub`` subcommands."""
    command = subparsers.add_parser("replay", help="re-derive the index from the archive alone")
    command.add_argument("--bank", help="only this bank")
    command.add_argument("--since", type=_when, help="ISO date/time, inclusive")
    command.add_argument("--until", type=_when, help="ISO date/time, exclusive")
    command.add_argument("--after-key", help="resume after this archive key (printed as it goes)")
    command.add_argument("--announce", action="store_true", help="re-publish memory.indexed")
    command.add_argument(
        "--fill-detail",
        action="store_true",
        help="only give indexed memories the searchable text past their summary that an older "
        "index lacks, keeping their retrieval counts and decay (docs/operations.md)",
    )
    command.add_argument(
        "--reembed",
        choices=["minilm", "hash", "openai"],
        help="embed every text again with this embedder into a new index version, and switch "
        "over only once it is complete (then set COGSUB_EMBEDDER__KIND to the same)",
    )


def run(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Run ``cogsub replay``; prints progress with the key to resume after."""
    if args.command != "replay":
        return 2
    if args.fill_detail and (args.announce or args.reembed is not None):
        console.print("cogsub replay: --fill-detail goes alone; drop --announce and --reembed")
        return 2
    if args.fill_detail:
        report = asyncio.run(_replay(args, settings, console))
        console.print(
            f"filled: {report.indexed} memories given their detail, "
            f"{report.scanned} archived objects scanned"
        )
        return 0
    if args.reembed is not None:
        return _reembed(args, settings, console)
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

        only = ReplayFilter(bank_id=args.bank, since=args.since, until=args.until)
        with _progress(console) as progress:
            if args.fill_detail:
                return await fill_detail(
                    archive, index, only=only, after_key=args.after_key, on_progress=progress
                )
            return await replay(
                archive,
                index,
                only=only,
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


def _reembed(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    partial = [f for f in ("bank", "since", "until", "after_key") if getattr(args, f) is not None]
    if partial:
        flags = ", ".join("--" + f.replace("_", "-") for f in partial)
        console.print(f"cogsub replay: --reembed rebuilds the whole index; drop {flags}")
        return 2
    if settings.backend == "embedded" and _served(settings):
        console.print(
            f"cogsub replay: a `cogsub run` serves {settings.data_dir}; stop it first "
            "(the new index version replaces the file it has open)"
        )
        return 2
    report = asyncio.run(_new_version(args, settings, console))
    console.print(
        f"re-embedded: {report.indexed} memories with {args.reembed} into a new index version, "
        f"now live; set COGSUB_EMBEDDER__KIND={args.reembed} for every process"
    )
    return 0


def _served(settings: Settings) -> bool:
    from cogsub.cli.memory import process_alive, read_api_file

    found = read_api_file(settings.data_dir)
    return found is not None and process_alive(found[1])


async def _new_version(
    args: argparse.Namespace, settings: Settings, console: Console
) -> ReplayReport:
    embedder = build_embedder(settings.embedder.model_copy(update={"kind": args.reembed}))
    stamp = datetime.now(UTC).strftime("%Y%m%dt%H%M%S")
    version = new_index_version(settings, f"{args.reembed}-{stamp}")
    archive, bootstrap = build_archive(settings)
    try:
        if bootstrap is not None:
            await bootstrap()
        await version.index.ensure(dimension=embedder.dimension)
        console.print(f"building index version {version.name} ...", markup=False)
        with _progress(console) as progress:
            report = await replay(archive, version.index, reembed=embedder, on_progress=progress)
    finally:
        await version.index.close()
        await archive.close()
        await embedder.close()
    await version.promote()  # only now: an interrupted rebuild leaves the live index as it was
    return report


@contextlib.contextmanager
def _progress(console: Console) -> Iterator[Callable[[ReplayReport], None]]:
    """A live progress bar on a terminal; elsewhere a line per batch (with the resume key)."""

    def line(report: ReplayReport) -> None:
        console.print(
            f"  {report.indexed} indexed, {report.scanned} scanned; "
            f"resume with --after-key {report.last_key}",
            markup=False,
            highlight=False,
        )

    if not console.is_terminal:
        yield line
        return
    columns = (SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        task = bar.add_task("replaying the archive", total=None)

        def update(report: ReplayReport) -> None:
            bar.update(
                task,
                description=f"{report.indexed} indexed, {report.scanned} scanned "
                f"(resume after {report.last_key})",
            )

        yield update
