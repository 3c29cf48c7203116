"""`make bench-index-writes`: what extraction's writes cost the SQLite index, by checkpoint size.

An index of ``--documents`` fact-like memories over ten banks (random ids, as fact ids are
hashes) is built once. Then, on fresh copies of it, ``--batches`` writes like an extraction
batch's are timed: ``--new`` new facts upserted together, then ``--patched`` existing facts'
proof tags patched in one update. Each copy is written with the write-ahead log checkpointed
every 1,000 pages (SQLite's default, the baseline) or every ``WAL_CHECKPOINT_PAGES`` (the
index's setting), alternating, ``--repeats`` times each.

It prints, per setting, the median wall time, CPU time and bytes written to the block device
(``/proc/diskstats``, counted up to the index's close and a sync, so the pages a larger log
holds back are counted too; other writers on the device count too, so run it on a quiet
host), and the ratios of the index's setting to the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.results import record
from cogsub.core import FactType, IndexDocument
from cogsub.index.ports import DocumentPatch
from cogsub.index.sqlite import WAL_CHECKPOINT_PAGES, SqliteMemoryIndex

DIMENSION = 8  # the soak's hash embedder
BANKS = [f"bank-{i}" for i in range(10)]
SQLITE_DEFAULT_PAGES = 1_000
FIGURES = ("wall_s", "cpu_s", "device_mib")  # what each run measures, compared as ratios
# fmt: off
WORDS = (
    "deploy", "rollback", "billing", "service", "latency", "regress", "pods", "restart",
    "invoices", "schema", "migration", "staging", "health", "checks", "runbook", "release",
    "train", "alert", "queue", "cache", "shard", "replica", "index", "timeout", "retry",
    "quota", "budget", "owner", "team", "weekly", "report", "outage", "customer", "ticket",
)
# fmt: on


def fact(rng: random.Random, number: int) -> IndexDocument:
    words = rng.choices(WORDS, k=rng.randint(6, 14))
    return IndexDocument(
        event_id=f"fact-{rng.getrandbits(96):024x}",
        timestamp=f"2026-05-{1 + number % 28:02d}T12:00:00.000Z",
        event_type="user_input",
        session_id=f"s-{number % 997}",
        summary=" ".join(words),
        embedding=[rng.uniform(-1, 1) for _ in range(DIMENSION)],
        importance_score=round(rng.random(), 3),
        reward_score=0.5,
        confidence=0.5,
        object_storage_key=f"consolidation/facts/{number}.json",
        tags=["proof:1", f"entity:{rng.choice(WORDS)}"],
        bank_id=rng.choice(BANKS),
        fact_type=FactType.WORLD,
    )


async def build(path: Path, count: int) -> list[tuple[str, str]]:
    """The base index; returns (bank, id) of every document, for the patches to pick from."""
    rng = random.Random(7)
    index = SqliteMemoryIndex(path)
    await index.ensure(dimension=DIMENSION)
    held: list[tuple[str, str]] = []
    for start in range(0, count, 2_000):
        batch = [fact(rng, n) for n in range(start, min(count, start + 2_000))]
        await index.upsert(batch)
        held += [(doc.bank_id, doc.event_id) for doc in batch]
    await index.close()
    return held


def device_written_bytes(path: Path) -> int | None:
    """Bytes written to the block device holding ``path`` so far (None: not a listed device)."""
    dev = os.stat(path).st_dev
    for line in Path("/proc/diskstats").read_text().splitlines():
        fields = line.split()
        if (int(fields[0]), int(fields[1])) == (os.major(dev), os.minor(dev)):
            return int(fields[9]) * 512
    return None


async def write_batches(
    path: Path, held: Sequence[tuple[str, str]], args: argparse.Namespace, pages: int
) -> dict[str, float | None]:
    """The batches on ``path`` with the log checkpointed every ``pages``; their costs."""
    rng = random.Random(11)  # the same documents and patches for every copy
    batches = [
        ([fact(rng, n) for n in range(args.new)], rng.sample(held, args.patched))
        for _ in range(args.batches)
    ]
    os.sync()  # the copy's own pages are on the device before counting starts
    written, began, cpu = device_written_bytes(path), time.perf_counter(), time.process_time()
    index = SqliteMemoryIndex(path, checkpoint_pages=pages)
    await index.ensure(dimension=DIMENSION)
    for new, patched in batches:
        await index.upsert(new)
        patches: dict[str, dict[str, DocumentPatch]] = {}
        for bank, event_id in patched:
            patches.setdefault(bank, {})[event_id] = DocumentPatch(
                add_tags=(f"proof:{rng.randint(2, 9)}",), drop_tags_under=("proof:",)
            )
        await index.update_across(patches)
    documents = await index.count()
    await index.close()  # its last checkpoint is the setting's cost too
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    os.sync()  # what the page cache still holds of it, on the device before counting
    after = device_written_bytes(path)
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "device_mib": None if written is None or after is None else (after - written) / 2**20,
        "documents": documents,
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="cogsub-index-writes-", dir=args.workdir) as root:
        base = Path(root) / "base.sqlite3"
        print(f"building an index of {args.documents:,} documents…", file=sys.stderr, flush=True)
        held = await build(base, args.documents)
        runs: dict[int, list[dict[str, float | None]]] = {SQLITE_DEFAULT_PAGES: [], args.pages: []}
        for repeat in range(args.repeats):
            # ABBA: the host's drift, and going first or second, hit both settings alike.
            for pages in list(runs)[:: 1 if repeat % 2 == 0 else -1]:
                copy = Path(root) / f"copy-{pages}.sqlite3"
                shutil.copyfile(base, copy)
                runs[pages].append(await write_batches(copy, held, args, pages))
                print(f"repeat {repeat + 1}, {pages} pages: {runs[pages][-1]}", file=sys.stderr)
                _remove(copy)
    medians = {pages: _medians(found) for pages, found in runs.items()}
    ours, baseline = medians[args.pages], medians[SQLITE_DEFAULT_PAGES]
    return {
        "documents": args.documents,
        "batches": args.batches,
        "new_per_batch": args.new,
        "patched_per_batch": args.patched,
        "baseline_pages": SQLITE_DEFAULT_PAGES,
        "pages": args.pages,
        "baseline": baseline,
        "index": ours,
        "ratios": {name: _ratio(ours[name], baseline[name]) for name in FIGURES},
    }


def _ratio(ours: float | None, baseline: float | None) -> float | None:
    return None if ours is None or not baseline else ours / baseline


def _remove(copy: Path) -> None:
    """The copy and its log files."""
    for leftover in copy.parent.glob(f"{copy.name}*"):
        leftover.unlink()


def _medians(found: Sequence[dict[str, float | None]]) -> dict[str, float | None]:
    """Per figure, the median of the runs (None where a run could not measure it)."""
    medians: dict[str, float | None] = {}
    for name in found[0]:
        values = [run[name] for run in found]
        medians[name] = None if None in values else statistics.median(v or 0.0 for v in values)
    return medians


def _report(result: dict[str, Any]) -> None:
    print(
        f"{result['batches']} batches of {result['new_per_batch']} new facts and "
        f"{result['patched_per_batch']} patched, on {result['documents']:,} documents"
    )
    print(f"{'checkpoint every':>18} {'wall s':>8} {'cpu s':>8} {'device MiB':>11}")
    for label, row in (
        (f"{result['baseline_pages']} pages", result["baseline"]),
        (f"{result['pages']} pages", result["index"]),
        ("ratio", result["ratios"]),
    ):
        wall, cpu, device = ("n/a" if row[k] is None else f"{row[k]:.2f}" for k in FIGURES)
        print(f"{label:>18} {wall:>8} {cpu:>8} {device:>11}")


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--new", type=int, default=256, help="new facts per batch")
    parser.add_argument("--patched", type=int, default=16, help="facts patched per batch")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--pages", type=int, default=WAL_CHECKPOINT_PAGES)
    parser.add_argument("--workdir", help="where the copies go (default: the temp directory)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    for name in ("documents", "batches", "new", "repeats", "pages"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, not {getattr(args, name)}")
    if not 0 <= args.patched <= args.documents:
        parser.error(f"--patched must be between 0 and --documents, not {args.patched}")
    if args.pages == SQLITE_DEFAULT_PAGES:
        parser.error(f"--pages {args.pages} is the baseline itself")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    result = asyncio.run(measure(args))
    record("index_writes", result, argv)
    if args.json:
        print(json.dumps(result))
    else:
        _report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
