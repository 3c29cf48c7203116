"""`cogsub context BANK QUERY` and `cogsub answer BANK QUESTION`: memory ready for a prompt.

Both go where `cogsub recall` goes: ``--url``, else a `cogsub run` serving the
data directory, else the embedded stack in this process (see
:mod:`cogsub.cli.memory`). `context` prints the markdown block as it would go
into a prompt (``--format json``: the block as JSON); `answer` prints the
configured chat model's answer and the memories it cites.
"""

from __future__ import annotations

import argparse
import sys

from rich.console import Console

from cogsub.cli.memory import fact_types, open_client
from cogsub.core.context import (
    DEFAULT_ANSWER_TOKENS,
    DEFAULT_CONTEXT_TOKENS,
    Answer,
    ContextFormat,
)
from cogsub.runtime import Settings


def _common(command: argparse.ArgumentParser, budget: int) -> None:
    command.add_argument("bank", help="the bank id")
    command.add_argument(
        "--max-tokens", type=int, default=budget, help=f"the block's budget (default {budget})"
    )
    command.add_argument("--types", type=fact_types, help="e.g. procedure,preference")
    command.add_argument("--tag", dest="tags", action="append", help="any of these (repeatable)")
    command.add_argument("--session-id", help="rank what this session has already seen lower")
    command.add_argument("--url", help="the API to use (default: see `cogsub recall --help`)")


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``context`` and ``answer`` to the ``cogsub`` subcommands."""
    context = subparsers.add_parser(
        "context",
        help="one recall laid out for a prompt: rules, procedures, profile, facts, reasoning",
    )
    _common(context, DEFAULT_CONTEXT_TOKENS)
    context.add_argument("query", help="what the agent is about to do or asks about")
    context.add_argument(
        "--format", choices=[f.value for f in ContextFormat], default=ContextFormat.MARKDOWN.value
    )
    answer = subparsers.add_parser(
        "answer", help="answer a question from a bank's memories with the configured chat model"
    )
    _common(answer, DEFAULT_ANSWER_TOKENS)
    answer.add_argument("question", help="what to answer")
    answer.add_argument("--json", action="store_true", help="print the answer as JSON")


def run(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Run ``cogsub context`` or ``cogsub answer``."""
    notes = Console(file=sys.stderr, highlight=False, soft_wrap=True)
    with open_client(args, settings, notes) as (client, _):
        if args.command == "context":
            block = client.context(
                args.bank,
                args.query,
                args.max_tokens,
                args.types,
                format=args.format,
                tags=args.tags,
                session_id=args.session_id,
            )
            print(block.model_dump_json() if args.format == "json" else block.text)
            if args.format != "json":
                notes.print(f"cogsub: {block.tokens} of {block.max_tokens} tokens", markup=False)
            return 0
        answered = client.answer(
            args.bank,
            args.question,
            args.max_tokens,
            args.types,
            tags=args.tags,
            session_id=args.session_id,
        )
    if args.json:
        print(answered.model_dump_json())
    else:
        print_answer(answered, console)
    return 0


def print_answer(answered: Answer, console: Console) -> None:
    """The answer, then each cited memory's id and section."""
    console.print(answered.answer, markup=False)
    by_id = {
        item.memory_id: section.name.value
        for section in answered.context.sections
        for item in section.items
    }
    for memory_id in answered.cited:
        console.print(f"  cited: {memory_id} ({by_id.get(memory_id, '?')})", markup=False)
