"""A command module shaped like `cogsub.cli.eval`, to test how main.py registers plugins."""

from __future__ import annotations

import argparse

from rich.console import Console

from cogsub.runtime import Settings


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    subparsers.add_parser("hello", help="say hello").add_argument("who")


def run(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    console.print(f"hello {args.who} from {settings.data_dir.name}")
    return 7
