"""Smoke test of a running fleet: publish events, recall them through the API, find a trace.

After ``make up`` (the compose fleet, as CI runs it)::

    .venv/bin/python -m scripts.fleet_smoke

1. publishes a few events of a fresh bank with ``cogsub publish`` (by default in a one-off
   container of the compose ``ingestion`` service, since the broker advertises its compose
   host name, ``kafka:9092``, which only the compose network resolves);
2. recalls them through the HTTP API until every one is found (by default an API started for
   the run, ``cogsub serve`` in a one-off container published on a free 127.0.0.1 port with
   a fresh key, removed afterwards; ``--api-url`` uses one that already runs);
3. finds the first event's trace in Tempo's HTTP API (TraceQL on ``cog.event.id``) and checks
   it holds the producer's ``experience.publish`` and the worker's ``experience.ingest`` spans.

Against any other stack, e.g. ``cogsub run`` on this machine::

    .venv/bin/python -m scripts.fleet_smoke --api-url http://127.0.0.1:8470 \\
        --publish-cmd ".venv/bin/cogsub publish -" --no-trace

Exit 0 when every step passed; 1 naming the step that failed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import secrets
import shlex
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import httpx

from cogsub.core.errors import UnavailableError
from cogsub.sdk import MemoryClient

DEFAULT_PUBLISH = "docker compose run --rm --no-deps -T ingestion cogsub publish -"
DEFAULT_TEMPO = "http://127.0.0.1:3200"
REQUIRED_SPANS = frozenset({"experience.publish", "experience.ingest"})
POLL_S = 2.0
T = TypeVar("T")


class SmokeFailure(RuntimeError):
    """One step of the smoke test failed; the message names it."""


@dataclass(frozen=True)
class SmokeRun:
    """One run's unique bank, marker word and events."""

    run_id: str
    events: list[dict[str, Any]]

    @property
    def bank_id(self) -> str:
        return f"smoke-{self.run_id}"

    @property
    def query(self) -> str:
        return f"fleet smoke check {self.run_id}"

    @property
    def event_ids(self) -> list[str]:
        return [str(event["eventId"]) for event in self.events]


def smoke_run(run_id: str, count: int, now: datetime) -> SmokeRun:
    """``count`` experience events of bank ``smoke-<run_id>``, each naming the run's marker."""
    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    stamp = now.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    events = [
        {
            "eventId": f"smoke-{run_id}-{n}",
            "timestamp": stamp,
            "type": "agent_action",
            "bankId": f"smoke-{run_id}",
            "context": {"sessionId": f"smoke-{run_id}"},
            "input": {"text": f"Fleet smoke check {run_id}: step {n} of the deploy checklist."},
            "tags": ["smoke"],
        }
        for n in range(1, count + 1)
    ]
    return SmokeRun(run_id, events)


def publish_report(output: str) -> tuple[int, int]:
    """``(accepted, rejected)`` from ``cogsub publish``'s summary line."""
    for line in output.splitlines():
        words = line.replace(",", " ").split()
        if len(words) == 4 and words[0] == "accepted" and words[2] == "rejected":
            return int(words[1]), int(words[3])
    raise SmokeFailure(f"publish: no 'accepted N, rejected M' line in its output:\n{output}")


def traceql(event_id: str) -> str:
    """The TraceQL query for the spans that carry ``event_id``."""
    quoted = event_id.replace("\\", "\\\\").replace('"', '\\"')
    return f'{{ span.cog.event.id = "{quoted}" }}'


def trace_ids(search: Mapping[str, Any]) -> list[str]:
    """The trace ids a Tempo ``/api/search`` answer lists."""
    return [str(trace["traceID"]) for trace in search.get("traces") or () if "traceID" in trace]


def span_names(trace: object) -> set[str]:
    """Every span name in a Tempo trace answer, whichever of its JSON shapes it has."""
    names: set[str] = set()
    if isinstance(trace, dict):
        if "spanId" in trace and isinstance(trace.get("name"), str):
            names.add(trace["name"])
        for value in trace.values():
            names |= span_names(value)
    elif isinstance(trace, list):
        for item in trace:
            names |= span_names(item)
    return names


def poll(what: str, attempt: Callable[[], T | None], timeout_s: float) -> T:
    """``attempt()``'s first non-None value, or a failure naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last_error = "no answer yet"
    while True:
        try:
            value = attempt()
        # UnavailableError: the SDK's "not reachable yet" (an API still starting, say).
        except (httpx.HTTPError, OSError, ValueError, UnavailableError) as exc:
            value, last_error = None, f"{type(exc).__name__}: {exc}"
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise SmokeFailure(f"{what}: not done in {timeout_s:.0f}s ({last_error})")
        time.sleep(POLL_S)  # the fleet works asynchronously; nothing to wait on but the result


def publish(run: SmokeRun, command: Sequence[str]) -> None:
    lines = "".join(json.dumps(event) + "\n" for event in run.events)
    done = subprocess.run(command, input=lines, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SmokeFailure(
            f"publish: {shlex.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}"
        )
    accepted, rejected = publish_report(done.stdout)
    if (accepted, rejected) != (len(run.events), 0):
        raise SmokeFailure(f"publish: accepted {accepted}, rejected {rejected}:\n{done.stdout}")


def recall_all(run: SmokeRun, api_url: str, api_key: str | None, timeout_s: float) -> list[str]:
    """Recall until every event of the run is among the hits; their memory ids."""
    wanted = set(run.event_ids)

    def attempt() -> list[str] | None:
        with MemoryClient(api_url, api_key=api_key) as client:
            hits = client.recall(run.bank_id, run.query, k=len(wanted) + 5).results
        found = {hit.source_event_id: hit.id for hit in hits if hit.source_event_id in wanted}
        return [found[event_id] for event_id in run.event_ids] if set(found) == wanted else None

    return poll(f"recall of {sorted(wanted)} in bank {run.bank_id}", attempt, timeout_s)


def find_trace(event_id: str, tempo_url: str, since: float, timeout_s: float) -> set[str]:
    """The span names of ``event_id``'s trace once Tempo holds the publish and ingest spans."""

    def attempt() -> set[str] | None:
        with httpx.Client(base_url=tempo_url, timeout=10.0, trust_env=False) as http:
            params: dict[str, str | int] = {
                "q": traceql(event_id),
                "start": int(since) - 60,
                "end": int(time.time()) + 60,
            }
            found = trace_ids(http.get("/api/search", params=params).raise_for_status().json())
            if not found:
                return None
            names = span_names(http.get(f"/api/traces/{found[0]}").raise_for_status().json())
        return names if names >= REQUIRED_SPANS else None

    return poll(f"Tempo trace of {event_id} with {sorted(REQUIRED_SPANS)}", attempt, timeout_s)


def free_loopback_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def compose_api(timeout_s: float) -> Iterator[tuple[str, str]]:
    """``cogsub serve`` in a one-off compose container on loopback: ``(url, key)``, then removed."""
    port, key = free_loopback_port(), secrets.token_urlsafe(24)
    name = f"cogsub-smoke-api-{uuid.uuid4().hex[:8]}"
    command = ["docker", "compose", "run", "-d", "--no-deps", "--name", name]
    command += [
        "-p",
        f"127.0.0.1:{port}:8470",
        "-e",
        "COGSUB_API__KEYS=" + json.dumps({key: ["*"]}),
    ]
    command += ["-e", "OTEL_SERVICE_NAME=cogsub-api", "ingestion"]
    command += ["cogsub", "serve", "--host", "0.0.0.0", "--port", "8470"]
    started = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if started.returncode != 0:
        raise SmokeFailure(
            f"API: {shlex.join(command[:8])} ... exited {started.returncode}:\n{started.stderr}"
        )
    url = f"http://127.0.0.1:{port}"
    try:
        poll("API /readyz", lambda: True if _ready(url) else None, timeout_s)
        yield url, key
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, timeout=60)


def _ready(url: str) -> bool:
    return httpx.get(f"{url}/readyz", timeout=5.0, trust_env=False).status_code == 200


def smoke(args: argparse.Namespace) -> None:
    started = time.time()
    run = smoke_run(uuid.uuid4().hex[:10], args.events, datetime.now(UTC))
    publish(run, shlex.split(args.publish_cmd))
    print(f"published {len(run.events)} events to bank {run.bank_id}")
    with contextlib.ExitStack() as stack:
        api_url, api_key = args.api_url, args.api_key
        if not api_url:
            api_url, api_key = stack.enter_context(compose_api(args.timeout_s))
        ids = recall_all(run, api_url, api_key, args.timeout_s)
        print(f"recalled all {len(ids)} through {api_url}")
    if args.no_trace:
        print("trace: skipped (--no-trace)")
        return
    names = find_trace(run.event_ids[0], args.tempo_url, started, args.timeout_s)
    print(f"trace of {run.event_ids[0]} in Tempo: {', '.join(sorted(names))}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--events", type=int, default=3, help="events to publish (default 3)")
    parser.add_argument("--publish-cmd", default=DEFAULT_PUBLISH, help="reads events on stdin")
    parser.add_argument("--api-url", help="an API that runs already (default: start one)")
    parser.add_argument("--api-key", help="its key, if it needs one")
    parser.add_argument("--tempo-url", default=DEFAULT_TEMPO)
    parser.add_argument("--no-trace", action="store_true", help="skip the Tempo step")
    parser.add_argument("--timeout-s", type=float, default=180.0, help="per step (default 180)")
    args = parser.parse_args(argv)
    if args.events < 1:
        parser.error(f"--events must be at least 1, got {args.events}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        smoke(args)
    except (SmokeFailure, subprocess.SubprocessError) as exc:
        print(f"fleet smoke FAILED: {exc}", file=sys.stderr)
        return 1
    print("fleet smoke passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
