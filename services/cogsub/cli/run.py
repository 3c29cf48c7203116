"""`cogsub run`, `cogsub ingest` and `cogsub serve`: the stack in one process until Ctrl-C.

- ``run``: the ingestion worker and the HTTP API together, in one event loop.
  On the embedded backend it also seeds the shipped sample events on first
  start, prints what was archived and indexed, and leaves ``DATA_DIR/api.json``
  while it serves so that `cogsub retain/recall` find it.
- ``ingest``: only the worker (a fleet replica).
- ``serve``: only the API (a fleet's API replicas on the distributed backend;
  on the embedded backend, beside a `cogsub ingest` that ingests what it retains).

Ctrl-C or SIGTERM stops the API first (in-flight requests finish), then the
worker finishes and commits the batches in hand; both are done before exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console

from cogsub.api import ApiServer
from cogsub.api.auth import HostGuard
from cogsub.bus.ports import EventBus
from cogsub.cli.events_file import parse_events_text
from cogsub.cli.memory import API_FILE, process_alive, read_api_file
from cogsub.cli.publish import print_report, publish_events
from cogsub.core import EXPERIENCE_RAW
from cogsub.ingestion import BatchOutcome
from cogsub.recall.collector import settle_collector
from cogsub.runtime import Settings
from cogsub.runtime.wiring import (
    RunningApi,
    build_worker,
    claim_groups,
    ingestion_lag,
    observed,
    open_stack,
    running_api,
)

SAMPLES = Path(__file__).resolve().parents[3] / "samples" / "experience-events.jsonl"


@contextlib.contextmanager
def _stop_on_signals(stop: asyncio.Event) -> Iterator[None]:
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        yield
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def _show_batch(console: Console, outcome: BatchOutcome) -> None:
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


async def run_stack(
    settings: Settings, console: Console, *, samples: str | None, serve_api: bool = True
) -> None:
    """Run ingestion (and the API) until SIGINT/SIGTERM; the batch in hand is committed first.

    ``samples`` is JSON-lines text published once, when experience.raw is still empty.
    """
    if not serve_api:
        await _ingest_only(settings, console)
        return
    stop = asyncio.Event()
    with _stop_on_signals(stop):
        async with running_api(
            settings, with_worker=True, on_batch=lambda o: _show_batch(console, o)
        ) as running:
            _print_banner(settings, running, console)
            if samples is not None and await _is_empty(running.stack.bus):
                lines = list(parse_events_text(samples))
                report = await publish_events(running.stack.bus, lines, console)
                console.print("published the shipped sample events: ", end="")
                print_report(report, console)
            await _serve_until_stopped(settings, running, stop, console, announce=True)
    console.print("stopped; every acknowledged event is committed or will be redelivered.")


async def serve_api(settings: Settings, console: Console) -> None:
    """Serve the API alone until SIGINT/SIGTERM."""
    stop = asyncio.Event()
    with _stop_on_signals(stop):
        async with running_api(settings, with_worker=False) as running:
            _print_banner(settings, running, console)
            if settings.backend == "embedded":
                console.print(
                    "note: no ingestion worker in this process; run `cogsub ingest` beside it "
                    "(or use `cogsub run`) so that retained memories become recallable."
                )
            await _serve_until_stopped(settings, running, stop, console, announce=False)
    console.print("stopped.")


def _print_banner(settings: Settings, running: RunningApi, console: Console) -> None:
    embedder = running.stack.embedder
    console.print(
        f"cogsub: backend={settings.backend} data_dir={settings.data_dir} "
        f"embedder={embedder.name} ({embedder.dimension}-d)"
    )


async def _serve_until_stopped(
    settings: Settings,
    running: RunningApi,
    stop: asyncio.Event,
    console: Console,
    *,
    announce: bool,
) -> None:
    api = settings.api
    guard = HostGuard.for_api(api.host, running.keys, api.allowed_hosts)
    server = ApiServer(running.app, host=api.host, port=api.port, host_guard=guard)
    await server.start()
    settle_collector()  # startup's objects out of every later collection (recall's tail)
    keys = "API keys required" if running.keys is not None else "no API keys"
    console.print(f"API on {server.url} (docs {server.url}/docs, {keys}). Ctrl-C to stop.")
    if announce:
        console.print("ingesting; retain with `cogsub retain BANK TEXT` from another terminal.")
    with _api_file(settings, server.url):
        workers = {t for t in (running.worker, running.consolidation) if t is not None}
        waiters = {asyncio.create_task(stop.wait()), server.task, *workers}
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            await server.stop()  # no new requests; in-flight ones finish
            for task in waiters:
                if task is not server.task and task not in workers:
                    task.cancel()
    running.raise_if_worker_failed()


@contextlib.contextmanager
def _api_file(settings: Settings, url: str) -> Iterator[None]:
    """``DATA_DIR/api.json`` names this process's API while it serves (embedded only)."""
    if settings.backend != "embedded":
        yield
        return
    path = settings.data_dir / API_FILE
    owner = read_api_file(settings.data_dir)
    if owner is not None and owner[1] != os.getpid() and process_alive(owner[1]):
        yield  # another live process serves this data directory; never take its file
        return
    path.write_text(json.dumps({"url": url, "pid": os.getpid()}))
    try:
        yield
    finally:
        owner = read_api_file(settings.data_dir)
        if owner is not None and owner[1] == os.getpid():
            path.unlink(missing_ok=True)


async def _ingest_only(settings: Settings, console: Console) -> None:
    stack = open_stack(settings)
    stop = asyncio.Event()
    with _stop_on_signals(stop):
        try:
            console.print(
                f"cogsub: backend={settings.backend} data_dir={settings.data_dir} "
                f"embedder={stack.embedder.name} ({stack.embedder.dimension}-d)"
            )
            worker = build_worker(stack)
            await stack.prepare()
            await worker.prepare()
            await claim_groups(stack, ingestion_lag(settings))

            def report(outcome: BatchOutcome) -> None:
                stack.metrics.record_batch(outcome)
                _show_batch(console, outcome)

            async with observed(stack, ingestion_lag(settings), endpoint=True):
                console.print("ingesting. Ctrl-C to stop.")
                await worker.run(stop, on_batch=report)
            console.print("stopped; every acknowledged event is committed or will be redelivered.")
        finally:
            await stack.aclose()


async def _is_empty(bus: EventBus) -> bool:
    stats = await bus.topic_stats(EXPERIENCE_RAW)
    return stats.end_offset == 0
