"""`make bench-ingest`: events/s through the whole ingestion pipeline.

Embedded backend: 10,000 events through the SQLite log, the filesystem archive
and the SQLite index, once with the hash embedder and once with MiniLM, each
beside the bare embedder's batched throughput on the same texts, measured in
the same run. The ratio is pipeline / bare embedder.

Distributed backend: the same with the hash embedder through noida-db
(Kafka protocol), SeaweedFS (S3) and osmem-server (OpenSearch API), beside the
raw concurrent S3 put rate and Kafka produce rate measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.results import record
from cogsub.core import EXPERIENCE_RAW, STAGE1_TOPICS
from cogsub.embeddings.ports import Embedder
from cogsub.ingestion import BatchOutcome, IngestionWorker
from cogsub.runtime import Settings, build_embedder, open_stack

_SUBJECTS = ["billing", "checkout", "search", "auth", "payments", "inventory", "notifications"]
_VERBS = ["deployed", "rolled back", "investigated", "paged on", "migrated", "load tested"]
_DETAILS = [
    "after the schema migration finished and health checks were green in staging",
    "because p99 latency regressed by forty percent during the evening peak",
    "while the on-call engineer drained the pods one by one before restart",
    "and recorded the new runbook steps for the next release train",
    "following a customer report that invoices were generated twice",
]


def make_events(count: int, *, seed: int = 7) -> list[dict[str, Any]]:
    """Realistic, varied experience events (texts of roughly 80-200 characters)."""
    rng = random.Random(seed)
    events = []
    for i in range(count):
        text = (
            f"Agent {rng.choice(_VERBS)} the {rng.choice(_SUBJECTS)} service "
            f"{rng.choice(_DETAILS)} (ticket {rng.randint(1000, 9999)})."
        )
        events.append(
            {
                "eventId": f"bench-{i:06d}",
                "timestamp": f"2026-05-{1 + i % 28:02d}T{i % 24:02d}:00:00.000Z",
                "type": rng.choice(["user_input", "tool_result", "agent_action"]),
                "bankId": f"bank-{i % 10}",
                "context": {"sessionId": f"session-{i % 50}"},
                "input": {"text": text},
                "action": {"tool": "shell", "reasoning": "part of the benchmark workload"},
                "result": {"output": "ok", "success": rng.random() > 0.2, "latencyMs": 12},
                "tags": rng.sample(_SUBJECTS, 2),
            }
        )
    return events


async def bare_embedder_rate(embedder: Embedder, texts: Sequence[str], batch: int = 64) -> float:
    """Texts/s of the embedder alone, in batches, on the same texts."""
    await embedder.embed(texts[:batch])  # load the model outside the timing
    started = time.perf_counter()
    for start in range(0, len(texts), batch):
        await embedder.embed(texts[start : start + batch])
    return len(texts) / (time.perf_counter() - started)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds a process (all its threads) has used, from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def pipeline_rate(
    settings: Settings, events: list[dict[str, Any]], servers: dict[str, int] | None = None
) -> dict[str, float]:
    """Publish ``events`` (timed separately), then time the worker until all are indexed.

    ``servers`` (name → PID) adds each one's CPU seconds over the worker's run as
    ``cpu_s_<name>``, so a result says where a shared machine's cores went.
    """
    stack = open_stack(settings)
    try:
        await stack.prepare()
        await stack.bus.ensure_topics(STAGE1_TOPICS)
        started = time.perf_counter()
        bodies = [json.dumps(e).encode() for e in events]
        for start in range(0, len(bodies), 1000):
            await asyncio.gather(
                *(stack.bus.publish(EXPERIENCE_RAW, b) for b in bodies[start : start + 1000])
            )
        publish_s = time.perf_counter() - started
        worker = IngestionWorker(
            bus=stack.bus,
            archive=stack.archive,
            index=stack.index,
            embedder=stack.embedder,
            batch_size=settings.ingestion.batch_size,
            poll_timeout_s=0.05,
            finishing_depth=settings.ingestion.finishing_depth,
            messaging_system=stack.messaging_system,
        )
        await worker.prepare()
        await stack.embedder.embed(["warm up the model before timing"])
        stop = asyncio.Event()
        done = 0

        def count(outcome: BatchOutcome) -> None:
            nonlocal done
            done += len(outcome.indexed) + len(outcome.rejected)
            if done >= len(events):
                stop.set()

        watched = servers or {}
        cpu_before = {name: process_cpu_s(pid) for name, pid in watched.items()}
        before = resource.getrusage(resource.RUSAGE_SELF)
        started = time.perf_counter()
        await worker.run(stop, on_batch=count)
        ingest_s = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_SELF)
        servers_cpu = {
            f"cpu_s_{name}": process_cpu_s(pid) - cpu_before[name] for name, pid in watched.items()
        }
        return {
            **servers_cpu,
            "cpu_s_worker": after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime,
            "wall_s": ingest_s,
            "events_per_s": len(events) / ingest_s,
            "publish_per_s": len(events) / publish_s,
            # Where the worker's CPU went: the kernel share is mostly file creation.
            "user_ms_per_event": (after.ru_utime - before.ru_utime) * 1000 / len(events),
            "sys_ms_per_event": (after.ru_stime - before.ru_stime) * 1000 / len(events),
        }
    finally:
        await stack.aclose()


async def bench_embedded(
    count: int, embedders: Sequence[str], workdir: Path | None = None
) -> list[dict[str, Any]]:
    """Each embedder's run in a fresh data directory under ``workdir`` (default: the temp dir).

    The archive creates one file per event, and on ext4 a file's creation costs
    more where many files were deleted in the last minutes (the allocator steps
    over recently freed inodes), so where the data lives moves the figure.
    """
    events = make_events(count)
    texts = [e["input"]["text"] for e in events]
    rows = []
    for kind in embedders:
        with tempfile.TemporaryDirectory(prefix="cogsub-bench-", dir=workdir) as tmp:
            settings = Settings(data_dir=Path(tmp), embedder={"kind": kind})
            bare_embedder = build_embedder(settings.embedder)
            try:
                bare = await bare_embedder_rate(bare_embedder, texts)
            finally:
                await bare_embedder.close()
            measured = await pipeline_rate(settings, events)
        rows.append(
            {
                "backend": "embedded",
                "embedder": kind,
                "events": count,
                "pipeline_events_per_s": round(measured["events_per_s"], 1),
                "bare_embedder_texts_per_s": round(bare, 1),
                "ratio": round(measured["events_per_s"] / bare, 3),
                "publish_events_per_s": round(measured["publish_per_s"], 1),
                "worker_user_ms_per_event": round(measured["user_ms_per_event"], 3),
                "worker_sys_ms_per_event": round(measured["sys_ms_per_event"], 3),
            }
        )
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    columns = list(rows[0])
    print(" | ".join(columns))
    print(" | ".join("---" for _ in columns))
    for row in rows:
        print(" | ".join(str(row[c]) for c in columns))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench-ingest")
    parser.add_argument("--backend", choices=["embedded", "distributed"], default="embedded")
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--embedder", action="append", choices=["hash", "minilm"])
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--workdir", type=Path, help="parent of the run's data directory (default: temp dir)"
    )
    args = parser.parse_args(argv)
    if args.backend == "distributed":
        from benchmarks.ingest_distributed import bench_distributed

        rows = asyncio.run(bench_distributed(args.events))
    else:
        embedders = args.embedder or ["hash", "minilm"]
        rows = asyncio.run(bench_embedded(args.events, embedders, args.workdir))
    record(f"ingest_{args.backend}", rows, argv, module="ingest")
    if args.json:
        print(json.dumps(rows))
    else:
        print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
