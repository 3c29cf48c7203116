"""`cogsub retain` and `cogsub recall`: typed memory from the command line.

Where the commands send their requests:

- ``--url URL``: to the API at URL, and nowhere else.
- distributed backend: to the API at ``COGSUB_API__HOST``/``COGSUB_API__PORT``
  (default http://127.0.0.1:8470).
- embedded backend: to the `cogsub run` serving the same data directory, if one
  is up (it leaves ``DATA_DIR/api.json`` while it serves); otherwise the whole
  embedded stack runs in this process for the one command. In-process, `retain`
  always waits until the memory is recallable, since the ingestion worker in
  this process stops when the command ends.

Both paths go through the same API app, so they answer alike.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from cogsub.core.events import FactType
from cogsub.core.memory import RecallResponse
from cogsub.runtime import Settings
from cogsub.sdk import MemoryClient

API_FILE = "api.json"
PROBE_TIMEOUT_S = 1.0
_TYPES = [t.value for t in FactType]


def fact_types(text: str) -> list[str]:
    """A ``--types`` argument: comma-separated fact types, each one of ``FactType``."""
    types = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in types if t not in _TYPES]
    if unknown or not types:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(_TYPES)} (comma-separated)")
    return types


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `retain` and `recall`."""
    retain = sub.add_parser("retain", help="keep a memory in a bank")
    retain.add_argument("bank", help="the bank id")
    retain.add_argument("text", help="what to remember (typed blocks are kept verbatim)")
    retain.add_argument("--type", dest="fact_type", choices=_TYPES, help="the fact type")
    retain.add_argument("--tag", dest="tags", action="append", default=[], help="repeatable")
    retain.add_argument("--wait", action="store_true", help="return once recall finds it")
    retain.add_argument("--json", action="store_true", help="print the result as JSON")
    retain.add_argument("--url", help="the API to use (default: see `cogsub recall --help`)")
    recall = sub.add_parser(
        "recall",
        help="recall memories of a bank",
        description="Uses --url, else a `cogsub run` serving the data directory, else "
        "runs the embedded stack in-process (distributed backend: the configured API).",
    )
    recall.add_argument("bank", help="the bank id")
    recall.add_argument("query", help="what the agent is about to do or asks about")
    recall.add_argument("--types", type=fact_types, help="e.g. procedure,preference")
    recall.add_argument("--k", type=int, default=10, help="at most this many results")
    recall.add_argument("--max-tokens", type=int, help="token budget of the results")
    recall.add_argument("--json", action="store_true", help="print the response as JSON")
    recall.add_argument("--url", help="the API to use")


def read_api_file(data_dir: Path) -> tuple[str, int] | None:
    """(url, pid) from ``DATA_DIR/api.json``, or None if absent or unreadable."""
    try:
        found = json.loads((data_dir / API_FILE).read_text())
        return str(found["url"]), int(found["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def process_alive(pid: int) -> bool:
    """Whether a process with ``pid`` exists on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists; it is just not ours
    return True


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=PROBE_TIMEOUT_S).status_code == 200
    except httpx.HTTPError:
        return False


def _running_api(settings: Settings) -> str | None:
    """The URL of a live `cogsub run` serving ``settings.data_dir``, if there is one."""
    found = read_api_file(settings.data_dir)
    if found is None or not process_alive(found[1]):
        return None
    return found[0] if _answers(found[0]) else None


@contextlib.contextmanager
def open_client(
    args: argparse.Namespace, settings: Settings, notes: Console
) -> Iterator[tuple[MemoryClient, bool]]:
    """The client these settings call for, and whether it runs the stack in-process."""
    key = settings.api.client_key.get_secret_value() if settings.api.client_key else None
    url = args.url
    if url is None and settings.backend == "distributed":
        url = settings.api.url
    if url is None:
        url = _running_api(settings)
    if url is not None:
        notes.print(f"cogsub: using the API at {url}")
        with MemoryClient(url, api_key=key) as client:
            yield client, False
        return
    # The embedded stack is the service layer; it loads only when no API is up.
    from cogsub.runtime.embedded_client import EmbeddedTransport

    notes.print(f"cogsub: no API serves {settings.data_dir}; running the embedded stack here")
    with MemoryClient("http://embedded.cogsub", transport=EmbeddedTransport(settings)) as client:
        yield client, True


def run_retain(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """`cogsub retain BANK TEXT`."""
    notes = Console(file=sys.stderr, highlight=False, soft_wrap=True)
    with open_client(args, settings, notes) as (client, in_process):
        result = client.retain(
            args.bank, args.text, args.fact_type, args.tags, wait=args.wait or in_process
        )
    if args.json:
        print(result.model_dump_json())
        return 0
    state = "recallable" if result.recallable else "accepted, not recallable yet"
    kind = result.fact_type.value if result.fact_type else "experience (raw)"
    console.print(
        f"retained {result.memory_id} in bank {result.bank_id}: {kind}, {state}",
        markup=False,
    )
    return 0


def run_recall(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """`cogsub recall BANK QUERY`."""
    notes = Console(file=sys.stderr, highlight=False, soft_wrap=True)
    with open_client(args, settings, notes) as (client, _):
        response = client.recall(args.bank, args.query, args.types, args.k, args.max_tokens)
    if args.json:
        print(response.model_dump_json())
        return 0
    print_recall(response, console)
    return 0


def print_recall(response: RecallResponse, console: Console) -> None:
    """The results as a table, best first, with each final score."""
    if not response.results:
        console.print(f"no memories in bank {response.bank_id} match.", markup=False)
        return
    table = Table(title=f"recall {response.query!r} in {response.bank_id}")
    for column in ("#", "score", "type", "memory", "id"):
        table.add_column(column, overflow="fold")
    for rank, hit in enumerate(response.results, start=1):
        kind = hit.fact_type.value if hit.fact_type else hit.event_type
        if hit.version is not None:
            kind = f"{kind} v{hit.version}"
        table.add_row(str(rank), f"{hit.score:.3f}", kind, hit.text, hit.id)
    console.print(table)
    console.print(
        f"{len(response.results)} of {response.candidates} candidates, {response.tokens} tokens",
        markup=False,
    )
