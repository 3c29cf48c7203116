"""`cogsub mcp`: the memory tools as an MCP server on stdio, the line an MCP host's config runs.

Where its tools send their calls, as `cogsub recall` does: ``--url URL``; on
the distributed backend the configured API; a `cogsub run` serving the data
directory, if one is up; otherwise the embedded stack in this process. The key
is ``--api-key``, else ``COGSUB_API_KEY``, else ``COGSUB_API__CLIENT_KEY``.
Standard output carries the protocol alone; every note and log goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from rich.console import Console

from cogsub.cli.memory import _running_api
from cogsub.core.errors import InvalidInputError
from cogsub.core.events import checked_safe_id
from cogsub.runtime import Settings
from cogsub.sdk import AsyncMemoryClient
from cogsub.sdk._base import EMBEDDED_URL

API_KEY_ENV = "COGSUB_API_KEY"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``mcp`` to the ``cogsub`` subcommands."""
    command = subparsers.add_parser(
        "mcp",
        help="serve the memory tools to an MCP host over stdio",
        description="An MCP server on stdin/stdout. Calls go to --url, else a `cogsub run` "
        "serving the data directory, else an embedded stack in this process.",
    )
    command.add_argument(
        "--bank", type=_bank_id, help="pin every tool to this bank (hides the bank argument)"
    )
    command.add_argument("--url", help="the API to call (default: see above)")
    command.add_argument("--api-key", help=f"the API key to send (default ${API_KEY_ENV})")


def _bank_id(text: str) -> str:
    try:
        return checked_safe_id("--bank", text)
    except InvalidInputError as exc:
        raise argparse.ArgumentTypeError(exc.problems[0].rule) from None


def run(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Serve until the host closes stdin."""
    notes = Console(file=sys.stderr, highlight=False, soft_wrap=True)
    client = _client(args, settings, notes)
    from cogsub.mcp import serve_stdio  # the MCP SDK loads only for this command

    async def serve() -> None:
        async with client:
            await serve_stdio(client, bank=args.bank)

    asyncio.run(serve())
    return 0


def _api_key(args: argparse.Namespace, settings: Settings) -> str | None:
    if args.api_key:
        return str(args.api_key)
    if os.environ.get(API_KEY_ENV):
        return os.environ[API_KEY_ENV]
    return settings.api.client_key.get_secret_value() if settings.api.client_key else None


def _client(args: argparse.Namespace, settings: Settings, notes: Console) -> AsyncMemoryClient:
    url = args.url
    if url is None and settings.backend == "distributed":
        url = settings.api.url
    if url is None:
        url = _running_api(settings)
    if url is not None:
        notes.print(f"cogsub mcp: calling the API at {url}", markup=False)
        return AsyncMemoryClient(url, api_key=_api_key(args, settings), actor="mcp")
    # The embedded stack is the service layer; it loads only when no API is up.
    from cogsub.runtime.embedded_client import AsyncEmbeddedTransport

    notes.print(f"cogsub mcp: no API serves {settings.data_dir}; running the embedded stack here")
    return AsyncMemoryClient(EMBEDDED_URL, transport=AsyncEmbeddedTransport(settings))
