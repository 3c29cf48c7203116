"""`cogsub dlq list|show|retry`: the dead letters of experience.raw and consolidation.

Without ``--url`` the command reads the bus of these settings directly (it joins
no consumer group, so it disturbs no worker, and works beside `cogsub run`);
with ``--url`` it asks that API's ``/v1/dead-letters`` routes, sending
``COGSUB_API__CLIENT_KEY`` (which must grant every bank, ``*``, when keys are on).

A letter is named ``topic:partition:offset``, e.g. ``experience.raw.dlq:0:12``.
`retry` publishes each named letter back to the topic it came from; the letter
stays listed (a topic is append-only), and a letter refused again comes back as a
new one.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
from rich.console import Console

from cogsub.api.dead_letters import DeadLetterPage, DeadLetterView, RetryResult
from cogsub.deadletters.desk import MAX_PAGE, DeadLetterDesk
from cogsub.deadletters.letters import Position
from cogsub.runtime import Settings
from cogsub.runtime.adapters import build_bus
from cogsub.sdk._errors import error_for, mapped_transport_errors

T = TypeVar("T")
REASON_CHARS = 100
ROUTE = "/v1/dead-letters"


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``dlq`` and its ``list``, ``show`` and ``retry`` to the subcommands."""
    dlq = subparsers.add_parser("dlq", help="list, show and retry dead letters")
    actions = dlq.add_subparsers(dest="dlq_command", required=True)
    url_help = "go through this API instead of reading the bus directly"
    listing = actions.add_parser("list", help="dead letters, oldest first per partition")
    listing.add_argument("--topic", help="experience.raw.dlq or consolidation.dlq only")
    listing.add_argument("--after", help="continue from a previous page's next")
    listing.add_argument("--limit", type=int, default=50, help=f"at most this many (≤ {MAX_PAGE})")
    show = actions.add_parser("show", help="one dead letter with its original bytes")
    show.add_argument("id", help="topic:partition:offset")
    retry = actions.add_parser("retry", help="publish dead letters back to their source topic")
    retry.add_argument("ids", nargs="+", metavar="id", help="topic:partition:offset")
    for action in (listing, show, retry):
        action.add_argument("--json", action="store_true", help="print JSON")
        action.add_argument("--url", help=url_help)


def run(args: argparse.Namespace, settings: Settings, console: Console) -> int:
    """Run ``dlq list``, ``show`` or ``retry``; returns the exit code."""
    if args.dlq_command == "list":
        page = _page(args, settings)
        _print_page(console, page, as_json=args.json)
    elif args.dlq_command == "show":
        letter = _show(args, settings)
        _print_letter(console, letter, as_json=args.json)
    else:
        for result in _retry(args, settings):
            if args.json:
                print(result.model_dump_json())
            else:
                console.print(f"retried {result.id} -> {result.republished_to}", markup=False)
    return 0


def _direct(settings: Settings, work: Callable[[DeadLetterDesk], Awaitable[T]]) -> T:
    async def go() -> T:
        bus = build_bus(settings)
        try:
            return await work(DeadLetterDesk(bus))
        finally:
            await bus.close()

    return asyncio.run(go())


def _over_http(
    args: argparse.Namespace, settings: Settings, method: str, path: str, **kw: Any
) -> Any:
    key = settings.api.client_key.get_secret_value() if settings.api.client_key else None
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with mapped_transport_errors(), httpx.Client(base_url=args.url, headers=headers) as client:
        response = client.request(method, path, **kw)
    if response.status_code >= 400:
        raise error_for(response.status_code, response.content)
    return response.json()


def _page(args: argparse.Namespace, settings: Settings) -> DeadLetterPage:
    if args.url:
        params = {"limit": args.limit, "topic": args.topic, "after": args.after}
        found = {k: v for k, v in params.items() if v is not None}
        return DeadLetterPage.model_validate(_over_http(args, settings, "GET", ROUTE, params=found))
    after = Position.parse(args.after, field="after") if args.after else None

    async def read(desk: DeadLetterDesk) -> DeadLetterPage:
        page = await desk.page(topic=args.topic, after=after, limit=args.limit)
        return DeadLetterPage(
            dead_letters=[DeadLetterView.of(letter) for letter in page.letters],
            next=str(page.next) if page.next is not None else None,
        )

    return _direct(settings, read)


def _show(args: argparse.Namespace, settings: Settings) -> DeadLetterView:
    at = Position.parse(args.id)
    if args.url:
        return DeadLetterView.model_validate(_over_http(args, settings, "GET", f"{ROUTE}/{at}"))

    async def read(desk: DeadLetterDesk) -> DeadLetterView:
        return DeadLetterView.of(await desk.show(at))

    return _direct(settings, read)


def _retry(args: argparse.Namespace, settings: Settings) -> list[RetryResult]:
    positions = [Position.parse(text) for text in args.ids]  # every id checked before any goes
    if args.url:
        return [
            RetryResult.model_validate(_over_http(args, settings, "POST", f"{ROUTE}/{at}/retry"))
            for at in positions
        ]

    async def send(desk: DeadLetterDesk) -> list[RetryResult]:
        results = []
        for at in positions:
            retried = await desk.retry(at)
            results.append(RetryResult(id=str(at), republished_to=str(retried.published)))
        return results

    return _direct(settings, send)


def _print_page(console: Console, page: DeadLetterPage, *, as_json: bool) -> None:
    if as_json:
        print(page.model_dump_json())
        return
    for letter in page.dead_letters:
        where = f"{letter.bank_id}/{letter.event_id}" if letter.event_id else "-"
        console.print(
            f"{letter.id}  {letter.time:%Y-%m-%d %H:%M:%S}  {letter.kind}  {where}  "
            f"{letter.reason[:REASON_CHARS]}",
            markup=False,
        )
    count = len(page.dead_letters)
    more = f"; more: --after {page.next}" if page.next else ""
    console.print(f"{count} dead letter{'s' if count != 1 else ''}{more}", markup=False)


def _print_letter(console: Console, letter: DeadLetterView, *, as_json: bool) -> None:
    if as_json:
        print(letter.model_dump_json())
        return
    fields = letter.model_dump(mode="json", exclude={"value_text", "value_base64"})
    for name, value in fields.items():
        console.print(f"{name}: {value}", markup=False)
    if letter.value_text is not None:
        console.print("value:", markup=False)
        console.print(_pretty(letter.value_text), markup=False)
    else:
        console.print(f"value (base64): {letter.value_base64}", markup=False)


def _pretty(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text
