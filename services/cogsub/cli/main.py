"""Argument parsing and dispatch; each command lives in its own module.

Optional command modules (``PLUGIN_MODULES``, e.g. `cogsub eval`) are registered
when they are installed: each exposes ``add_parser(subparsers)`` and
``run(args, settings, console) -> int``.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console

from cogsub.cli.memory import add_parsers as add_memory_parsers
from cogsub.cli.memory import run_recall, run_retain
from cogsub.core import CogsubError
from cogsub.runtime import Settings
from cogsub.runtime.allocator import fix_mmap_threshold
from cogsub.telemetry import configure_logging, configure_tracing

PLUGIN_MODULES = (
    "cogsub.cli.eval",
    "cogsub.cli.replay",
    "cogsub.cli.consolidate",
    "cogsub.cli.lifecycle",
    "cogsub.cli.dlq",
    "cogsub.cli.mcp",
    "cogsub.cli.context",
    "cogsub.cli.browse",
)
Handler = Callable[[argparse.Namespace, Settings, Console], int]


def _add_plugins(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register each installed plugin module; the commands it adds dispatch to its ``run``."""
    for name in PLUGIN_MODULES:
        if importlib.util.find_spec(name) is None:
            continue
        module = importlib.import_module(name)
        before = set(sub.choices)
        module.add_parser(sub)
        for command in set(sub.choices) - before:
            sub.choices[command].set_defaults(plugin_run=module.run)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cogsub", description="Cognitive Substrate memory.")
    parser.add_argument("--data-dir", type=Path, help="embedded data directory (default ./data)")
    parser.add_argument(
        "--embedder", choices=["minilm", "hash", "openai"], help="override COGSUB_EMBEDDER__KIND"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="the seed's Stage 1 demo, writing artifacts to --out")
    demo.add_argument("--out", type=Path, default=Path("out"), help="artifact directory")
    run = sub.add_parser("run", help="run the ingestion worker and the HTTP API until Ctrl-C")
    run.add_argument("--no-samples", action="store_true", help="do not seed the sample events")
    _add_listen_options(run)
    sub.add_parser("ingest", help="run only the ingestion worker (a fleet replica)")
    serve = sub.add_parser(
        "serve",
        help="run only the HTTP API (distributed: an API replica; "
        "embedded: beside `cogsub ingest`)",
    )
    _add_listen_options(serve)
    publish = sub.add_parser("publish", help="publish events (JSON array or JSON lines)")
    publish.add_argument("source", help="a file path, or - for standard input")
    status = sub.add_parser("status", help="offsets, lag, archive and index counts")
    status.add_argument("--json", action="store_true", help="print one JSON object")
    add_memory_parsers(sub)
    _add_plugins(sub)
    return parser


def _port(text: str) -> int:
    if not text.isdigit() or int(text) > 65_535:
        raise argparse.ArgumentTypeError("must be a TCP port, 0 to 65535 (0: any free port)")
    return int(text)


def _add_listen_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="override COGSUB_API__HOST (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, help="override COGSUB_API__PORT (default 8470)")


def _settings(args: argparse.Namespace) -> Settings:
    settings = Settings()
    update: dict[str, object] = {}
    if args.data_dir is not None:
        update["data_dir"] = args.data_dir
    if args.embedder is not None:
        update["embedder"] = settings.embedder.model_copy(update={"kind": args.embedder})
    listen = {
        name: value for name in ("host", "port") if (value := getattr(args, name, None)) is not None
    }
    if listen:
        update["api"] = settings.api.model_copy(update=listen)
    return settings.model_copy(update=update)


# A lean install (`make run`) leaves the distributed backend's clients out (pyproject.toml).
_DISTRIBUTED_CLIENTS = frozenset({"aiokafka", "boto3", "botocore", "opensearchpy", "aiohttp"})
_MISSING_CLIENT = (
    "the distributed backend needs {}, which this install leaves out: "
    "pip install 'cognitive-substrate[distributed]' (or make setup-distributed)"
)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `cogsub` console script; returns the exit code."""
    args = _parser().parse_args(argv)
    console = Console(highlight=False, soft_wrap=True)
    try:
        settings = _settings(args)
    except ValidationError as exc:
        print(f"cogsub: invalid settings: {exc}", file=sys.stderr)
        return 2
    configure_logging(format=settings.log_format, level=settings.log_level)
    fix_mmap_threshold()
    provider = configure_tracing(f"cogsub-{args.command}")
    try:
        plugin: Handler | None = getattr(args, "plugin_run", None)
        if plugin is not None:
            return plugin(args, settings, console)
        return _dispatch(args, settings, console)
    except CogsubError as exc:
        print(f"cogsub: {exc}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.partition(".")[0] not in _DISTRIBUTED_CLIENTS:
            raise
        print(f"cogsub: {_MISSING_CLIENT.format(exc.name)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    finally:
        if provider is not None:
            provider.shutdown()  # flush spans still waiting in the batch processor


def _dispatch(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    if args.command == "demo":
        from cogsub.cli.demo import run_demo

        summary = run_demo(args.out)
        console.print_json(json.dumps(summary))
        console.print(f"artifacts written to {args.out}/")
        return 0 if summary["ok"] else 1
    if args.command in ("run", "ingest"):
        from cogsub.cli.run import SAMPLES, run_stack

        wants_samples = args.command == "run" and not args.no_samples
        samples = SAMPLES.read_text() if wants_samples and SAMPLES.exists() else None
        serve = args.command == "run"
        asyncio.run(run_stack(settings, console, samples=samples, serve_api=serve))
        return 0
    if args.command == "serve":
        from cogsub.cli.run import serve_api

        asyncio.run(serve_api(settings, console))
        return 0
    if args.command == "retain":
        return run_retain(args, settings, console)
    if args.command == "recall":
        return run_recall(args, settings, console)
    if args.command == "publish":
        return asyncio.run(_publish(settings, args.source, console))
    if args.command == "status":
        from cogsub.cli.status import show_status

        quiet = Console(file=sys.stderr) if args.json else console
        result = asyncio.run(show_status(settings, quiet))
        if args.json:
            print(json.dumps(result))
        return 0
    raise AssertionError(args.command)


async def _publish(settings: Settings, source: str, console: Console) -> int:
    from cogsub.cli.events_file import parse_events_text
    from cogsub.cli.publish import print_report, publish_events, read_source
    from cogsub.runtime.adapters import build_bus

    try:
        text = read_source(source)
    except OSError as exc:
        print(f"cogsub: cannot read {source}: {exc.strerror}", file=sys.stderr)
        return 2
    bus = build_bus(settings)
    try:
        report = await publish_events(bus, list(parse_events_text(text)), console)
    finally:
        await bus.close()
    print_report(report, console)
    return 0 if not report.rejected else 3


if __name__ == "__main__":
    raise SystemExit(main())
