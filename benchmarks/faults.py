"""`make faults`: faults survived — nothing acknowledged lost, nothing archived or indexed twice.

``python -m benchmarks.faults [--scenario NAME ...] [--events N] [--outage-s S] [--json]``

Each scenario starts its own servers (own temp dirs, loopback, free ports), two
ingestion workers as `cogsub ingest` subprocesses and an API replica as `cogsub
serve`, produces N experience events (plus one undecodable record after every
300th, which must be dead-lettered) at a steady rate, injects its fault a quarter
of the way in, clears it, waits (bounded) for the backlog to drain, then counts
what the stores hold (see ``benchmarks.fault_drive``). Scenarios:

- ``s3-outage``: SeaweedFS stopped (SIGTERM) for the outage, then restarted on the
  same ports and data directory.
- ``index-outage``: osmem-server frozen with SIGSTOP, then SIGCONT. It keeps its
  data in memory only, so a kill would lose the index; a frozen server is the
  outage a hung, unreachable cluster gives.
- ``broker-restart``: noida-db stopped (SIGTERM) for the outage, then restarted on
  the same port and data directory.
- ``broker-restart-tansu``: the same with Tansu keeping its log in SeaweedFS (noida-db
  never evicts the group members a restart leaves behind, Tansu does).
- ``sigkill-20``: one of the two workers SIGKILLed at a random point (seeded),
  restarted, 20 times in one run (Tansu, which evicts a killed group member).
- ``disk-full``: the embedded stack (`cogsub ingest` + `cogsub serve`) with its
  data directory on a small tmpfs, filled by a filler file, then the filler deleted.
- ``consolidator-sigkill``: the embedded stack plus a `cogsub consolidator`, which is
  SIGKILLed at random points (seeded) and restarted, 10 times; the consolidator's own
  guarantees are checked besides ingestion's (see ``benchmarks.fault_consolidator``).
- ``consolidator-index-outage``: the index outage above with a `cogsub consolidator`
  beside the ingestion fleet (noida-db: nobody is killed, so its offsets are exact and
  no member needs evicting), checked as ``consolidator-sigkill`` is.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, replace
from pathlib import Path

from benchmarks.fault_consolidator import (
    DISTRIBUTED_SCHEDULE_S,
    SCHEDULE_S,
    ConsolidatorCheck,
    ConsolidatorKills,
    statement_events,
)
from benchmarks.fault_counts import Stores
from benchmarks.fault_drive import BANKS, KillSeries, Options, Outage, Row, Run, drive
from benchmarks.fault_stack import (
    BUCKET,
    INDEX,
    DistributedServers,
    Fleet,
    MountRefused,
    base_env,
    distributed_servers,
    fill_disk,
    tmpfs,
)
from benchmarks.results import record
from cogsub.telemetry import configure_logging

SCENARIOS = (
    "s3-outage",
    "index-outage",
    "broker-restart",
    "broker-restart-tansu",
    "sigkill-20",
    "disk-full",
    "consolidator-sigkill",
    "consolidator-index-outage",
)
BROKERS = {"sigkill-20": "tansu", "broker-restart-tansu": "tansu-s3"}
WORKERS = 2


def distributed_stores(servers: DistributedServers) -> Stores:
    """The suite's own adapters on the scenario's servers, for producing and counting."""
    from cogsub.archive.s3 import S3Archive
    from cogsub.bus.kafka import KafkaEventBus, KafkaSettings
    from cogsub.index.opensearch import OpenSearchMemoryIndex

    endpoint = servers.seaweed.endpoint
    return Stores(
        bus=KafkaEventBus(
            bootstrap_servers=servers.broker.bootstrap,
            settings=KafkaSettings(enable_idempotence=servers.idempotent),
        ),
        archive=S3Archive(
            bucket=BUCKET,
            endpoint_url=endpoint.endpoint_url,
            region=endpoint.region,
            access_key_id=endpoint.access_key_id,
            secret_access_key=endpoint.secret_access_key,
        ),
        index=OpenSearchMemoryIndex(url=servers.search.url, index=INDEX),
    )


def embedded_stores(data_dir: Path) -> Stores:
    """Adapters on an embedded data directory (the suite shares it with the workers)."""
    from cogsub.archive.filesystem import FilesystemArchive
    from cogsub.bus.sqlite import SqliteEventBus
    from cogsub.index.sqlite import SqliteMemoryIndex

    return Stores(
        bus=SqliteEventBus(data_dir / "bus.sqlite3"),
        archive=FilesystemArchive(data_dir / "archive"),
        index=SqliteMemoryIndex(data_dir / "index.sqlite3"),
    )


async def _start_fleet(fleet: Fleet, *, workers: int) -> None:
    """The first worker creates topics, bucket and index; the rest start beside the API."""
    await asyncio.to_thread(fleet.start_worker)
    await asyncio.gather(
        *(asyncio.to_thread(fleet.start_worker) for _ in range(workers - 1)),
        asyncio.to_thread(fleet.start_api),
    )


@contextlib.contextmanager
def _fleet(env: dict[str, str], logs: Path) -> Iterator[Fleet]:
    fleet = Fleet(env, logs)
    try:
        yield fleet
    finally:
        fleet.stop_all()


def _signal(pid: int, sig: signal.Signals) -> Callable[[], None]:
    return lambda: os.kill(pid, sig)


async def run_scenario(name: str, options: Options, workdir: Path) -> Row:
    """Run one scenario in ``workdir`` (servers, data and logs); every process is stopped."""
    if name not in SCENARIOS:
        raise ValueError(f"unknown scenario {name!r}; choose from {', '.join(SCENARIOS)}")
    if name == "disk-full":
        return await _disk_full(options, workdir)
    if name == "consolidator-sigkill":
        return await _consolidator_sigkill(options, workdir)
    broker = BROKERS.get(name, "noida")
    with distributed_servers(workdir / "servers", broker=broker) as servers:
        # Tansu evicts a SIGKILLed member after the session timeout: keep it short there.
        session_ms = 3000 if name == "sigkill-20" else 6000
        env = servers.env(batch_size=options.batch_size, session_timeout_ms=session_ms)
        consolidating = name == "consolidator-index-outage"
        if consolidating:
            env["COGSUB_CONSOLIDATION__SCHEDULE_S"] = str(DISTRIBUTED_SCHEDULE_S)
        with _fleet(env, workdir / "logs") as fleet:
            await _start_fleet(fleet, workers=WORKERS)
            if consolidating:
                await asyncio.to_thread(fleet.start_consolidator)
            fault, notes = _fault_for(name, servers, fleet, options)
            if broker != "noida":
                # Tansu reports wrong end offsets for multi-record batches (DESIGN.md), so
                # the drain is judged by the index alone and lag figures are indicative.
                notes.append("Tansu broker: end offsets (lag, DLQ end) are not exact")
            run = Run(
                name,
                options,
                env,
                fleet,
                fault,
                lambda: distributed_stores(servers),
                lag_reliable=broker == "noida",
                notes=notes,
            )
            if consolidating:
                check = ConsolidatorCheck(
                    fleet, BANKS, seed=options.seed, request_every_s=DISTRIBUTED_SCHEDULE_S
                )
                run = replace(run, make_events=statement_events, consolidator=check)
            row = await drive(run)
            if row.consolidator is not None:
                row.notes.append(row.consolidator.summary())
            if isinstance(fault, KillSeries):
                row.kills = fault.done
                row.notes.append(f"{fault.mid_stream} of {fault.done} kills mid-stream")
                row.kill_points = fault.points
            return row


def _fault_for(
    name: str, servers: DistributedServers, fleet: Fleet, options: Options
) -> tuple[Outage | KillSeries, list[str]]:
    """The fault of a distributed scenario, and what the report should say about it."""
    if name == "s3-outage":
        return Outage(servers.seaweed.stop, servers.seaweed.start, options.outage_s), []
    if name in ("index-outage", "consolidator-index-outage"):
        pid = servers.search.pid
        thaw = _signal(pid, signal.SIGCONT)
        outage = Outage(_signal(pid, signal.SIGSTOP), thaw, options.outage_s, release=thaw)
        return outage, ["osmem-server is in-memory: frozen (SIGSTOP/SIGCONT), not killed"]
    if name in ("broker-restart", "broker-restart-tansu"):
        return Outage(servers.broker.stop, servers.broker.start, options.outage_s), []
    return KillSeries(fleet, kills=options.kills, seed=options.seed), []


async def _disk_full(options: Options, workdir: Path) -> Row:
    logs = workdir / "logs"  # outside the tmpfs, so that logging never fails for lack of space
    with contextlib.ExitStack() as mounted:
        try:
            mount = mounted.enter_context(tmpfs(workdir / "mnt", size_mb=options.tmpfs_mb))
        except MountRefused as exc:
            return Row("disk-full", skipped=f"skipped: {exc}")
        data = mount / "data"
        data.mkdir()
        env = base_env(batch_size=options.batch_size)
        env.update({"COGSUB_BACKEND": "embedded", "COGSUB_DATA_DIR": str(data)})
        filler = mount / "filler"
        filled: list[int] = []
        with _fleet(env, logs) as fleet:
            # One worker: the embedded log leases a group to one consumer at a time.
            await _start_fleet(fleet, workers=1)
            fault = Outage(
                lambda: filled.append(fill_disk(filler)),
                lambda: filler.unlink(missing_ok=True),
                options.outage_s,
                release=lambda: filler.unlink(missing_ok=True),
            )
            run = Run("disk-full", options, env, fleet, fault, lambda: embedded_stores(data))
            row = await drive(run)
        mib = sum(filled) / (1 << 20)
        row.notes.append(f"tmpfs {options.tmpfs_mb} MiB, filler {mib:.1f} MiB until ENOSPC")
        return row


async def _consolidator_sigkill(options: Options, workdir: Path) -> Row:
    """Ingestion as in disk-full, plus a consolidator killed and restarted (embedded)."""
    data = workdir / "data"
    data.mkdir(parents=True)
    env = base_env(batch_size=options.batch_size)
    env.update(
        {
            "COGSUB_BACKEND": "embedded",
            "COGSUB_DATA_DIR": str(data),
            "COGSUB_CONSOLIDATION__SCHEDULE_S": str(SCHEDULE_S),
            "COGSUB_CONSOLIDATION__EXTRACTOR": "offline",
        }
    )
    kills_bus = embedded_stores(data)
    try:
        with _fleet(env, workdir / "logs") as fleet:
            # One worker: the embedded log leases a group to one consumer at a time.
            await _start_fleet(fleet, workers=1)
            await asyncio.to_thread(fleet.start_consolidator)
            fault = ConsolidatorKills(
                fleet, kills_bus.bus, kills=options.consolidator_kills, seed=options.seed
            )
            check = ConsolidatorCheck(fleet, BANKS, seed=options.seed, kills=fault)
            run = Run(
                "consolidator-sigkill",
                options,
                env,
                fleet,
                fault,
                lambda: embedded_stores(data),
                make_events=statement_events,
                consolidator=check,
            )
            row = await drive(run)
            row.kills = fault.done
            row.kill_points = fault.points
            row.notes.append(f"{fault.mid_stream} of {fault.done} kills mid-stream")
            if row.consolidator is not None:
                row.notes.append(row.consolidator.summary())
            return row
    finally:
        await kills_bus.aclose()


_COLUMNS = (
    ("scenario", "scenario"),
    ("produced", "produced"),
    ("archived", "archived"),
    ("indexed", "indexed"),
    ("dead-lettered", "dead_lettered"),
    ("duplicates", "duplicates"),
    ("lost", "lost"),
    ("unfinished", "unfinished"),
    ("fault s", "fault_s"),
    ("drained in s", "drain_s"),
    ("/readyz before → during → after", "readyz"),
    ("`cogsub status` during", "status_during"),
    ("max lag", "max_lag"),
    ("final lag", "final_lag"),
    ("worker retries (max backoff s)", "worker_retries"),
    ("worker deaths", "worker_deaths"),
)


def _cell(row: Row, attribute: str) -> str:
    value = getattr(row, attribute)
    if attribute == "worker_retries":
        return f"{row.worker_retries} ({row.max_backoff_s})"
    if attribute == "drain_s" and not row.drained:
        return "**not drained**"
    if attribute == "scenario" and row.kills:
        return f"{row.scenario} ({row.kills} kills)"
    return "-" if value is None else str(value)


def table(rows: Sequence[Row]) -> str:
    """A Markdown table of the rows, then each scenario's verdict and notes."""
    lines = [
        "| " + " | ".join(title for title, _ in _COLUMNS) + " |",
        "|" + "---|" * len(_COLUMNS),
    ]
    for row in rows:
        if row.skipped is None:
            lines.append("| " + " | ".join(_cell(row, a) for _, a in _COLUMNS) + " |")
    lines.append("")
    for row in rows:
        verdict = row.skipped or ("ok" if row.ok else "**FAILED**")
        lines.append(f"- {row.scenario}: {verdict}" + "".join(f"; {n}" for n in row.notes))
    return "\n".join(lines)


def _parser() -> argparse.ArgumentParser:
    defaults = Options()
    parser = argparse.ArgumentParser(prog="python -m benchmarks.faults", description=__doc__)
    parser.add_argument("--scenario", action="append", choices=SCENARIOS, help="repeatable")
    parser.add_argument("--events", type=int, default=defaults.events)
    parser.add_argument("--outage-s", type=float, default=defaults.outage_s)
    parser.add_argument("--kills", type=int, default=defaults.kills, help="for sigkill-20")
    parser.add_argument(
        "--consolidator-kills",
        type=int,
        default=defaults.consolidator_kills,
        help="for consolidator-sigkill",
    )
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--drain-timeout-s", type=float, default=defaults.drain_timeout_s)
    parser.add_argument("--workdir", type=Path, help="keep servers' data and logs here")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the chosen scenarios one after another; exit 1 if any failed."""
    args = _parser().parse_args(argv)
    # The suite's own producer and probes reconnect through outages on purpose; aiokafka
    # logs every failed attempt at ERROR, which would bury the table.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    configure_logging(level="warning", stream=sys.stderr)  # stdout carries the table or JSON
    options = replace(
        Options(),
        events=args.events,
        outage_s=args.outage_s,
        kills=args.kills,
        consolidator_kills=args.consolidator_kills,
        seed=args.seed,
        batch_size=args.batch_size,
        drain_timeout_s=args.drain_timeout_s,
    )
    rows: list[Row] = []
    for name in args.scenario or SCENARIOS:
        print(f"running {name} ...", file=sys.stderr, flush=True)
        with _scenario_dir(args.workdir, name) as workdir:
            try:
                row = asyncio.run(run_scenario(name, options, workdir))
            except Exception as exc:  # one broken scenario must not hide the others' figures
                row = Row(name, notes=[f"error: {type(exc).__name__}: {exc}"])
        rows.append(row)
        print(f"  {name}: {'ok' if row.ok else row.skipped or 'FAILED'}", file=sys.stderr)
    rows_json = [{**asdict(row), "ok": row.ok} for row in rows]
    record("faults", rows_json, argv)
    if args.json:
        print(json.dumps(rows_json, indent=2, ensure_ascii=False))
    else:
        print(table(rows))
    return 0 if all(row.ok or row.skipped for row in rows) else 1


@contextlib.contextmanager
def _scenario_dir(root: Path | None, name: str) -> Iterator[Path]:
    if root is not None:
        path = root / name
        path.mkdir(parents=True, exist_ok=False)
        yield path
        return
    with tempfile.TemporaryDirectory(prefix=f"cogsub-faults-{name}-") as tmp:
        yield Path(tmp)


if __name__ == "__main__":
    raise SystemExit(main())
