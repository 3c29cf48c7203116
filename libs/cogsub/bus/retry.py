"""Waiting out a backend that is down: capped exponential backoff with jitter, stop-aware.

An error says how to handle it (``CogsubError.retryable``, and a server's
``retry_after`` hint when it gave one); a step that fails any other way is
not retried here.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import structlog

from cogsub.core.errors import CogsubError

T = TypeVar("T")


class Stopping(BaseException):
    """Raised instead of another retry once the consumer is asked to stop.

    A BaseException, so that paths isolating a bad record (which catch
    Exception) never mistake a shutdown for one.
    """


@dataclass(frozen=True)
class Backoff:
    """How long to wait before attempt ``attempt + 1`` of a step that failed retryably."""

    initial_s: float = 0.1
    max_s: float = 5.0
    multiplier: float = 2.0
    jitter: Callable[[], float] = field(default=random.random, compare=False, repr=False)

    def delay(self, attempt: int, *, retry_after: float | None = None) -> float:
        """A server's hint is honoured up to ``max_s``; otherwise exponential, jittered.

        The jitter keeps the members of a group from retrying in step after an outage.
        """
        if retry_after is not None:
            return min(self.max_s, max(0.0, retry_after))
        base = min(self.max_s, self.initial_s * self.multiplier**attempt)
        return base * (0.5 + self.jitter() / 2)


def retry_hint(error: CogsubError) -> float | None:
    """The seconds a server asked us to wait, when the error carries them."""
    hint = getattr(error, "retry_after", None)
    return float(hint) if isinstance(hint, int | float) else None


async def retrying(
    step: Callable[[], Awaitable[T]],
    *,
    backoff: Backoff,
    stop: asyncio.Event | None,
    log: structlog.typing.FilteringBoundLogger,
    event: str,
) -> T:
    """Run ``step`` until it succeeds, fails for good, or ``stop`` is set (``Stopping``)."""
    attempt = 0
    while True:
        try:
            return await step()
        except CogsubError as exc:
            if not exc.retryable:
                raise
            if stop is not None and stop.is_set():
                raise Stopping from exc
            delay = backoff.delay(attempt, retry_after=retry_hint(exc))
            log.warning(event, error=str(exc), attempt=attempt, delay_s=delay)
            attempt += 1
            await pause(delay, stop)


async def pause(seconds: float, stop: asyncio.Event | None) -> None:
    """Sleep ``seconds``, or less when ``stop`` is set meanwhile."""
    if stop is None:
        await asyncio.sleep(seconds)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)
