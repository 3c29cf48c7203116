"""Rate limits per API key: a token bucket per caller, enforced before anything else runs.

Each caller has a bucket of ``burst`` tokens that refills at ``rate_per_s``; a
request takes one token or is refused with a JSON 429 and ``Retry-After`` (the
whole seconds until a token is back). The caller is the SHA-256 digest of a
known bearer key, so one key is one budget wherever it calls from. A missing or
unknown key counts against the client host instead: otherwise inventing a new
bogus key per request would buy a fresh bucket every time.

Memory is bounded: at most ``max_callers`` buckets are kept, and the least
recently seen one is dropped to make room. A dropped caller starts again with a
full bucket, which is what it would have refilled to anyway unless it was seen
within the last ``burst / rate_per_s`` seconds.

Health probes (``/healthz``, ``/readyz``) are never limited: an orchestrator
must not mistake a busy API for a dead one.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from cogsub.api.auth import ApiKeys, key_digest
from cogsub.api.auth import bearer_key as bearer_of
from cogsub.api.errors import error_response
from cogsub.core.errors import ConfigurationError

DEFAULT_MAX_CALLERS = 10_000
EXEMPT_PATHS = frozenset({"/healthz", "/readyz"})
# Refills are float sums; a token that is 1e-12 short of whole is a whole token.
_EPSILON = 1e-9


@dataclass
class TokenBucket:
    """``tokens`` left at time ``stamp``; refills at ``rate_per_s`` up to ``burst``.

    Pure: the caller passes the time, so tests drive it with any clock.
    """

    rate_per_s: float
    burst: int
    tokens: float
    stamp: float

    @classmethod
    def full(cls, *, rate_per_s: float, burst: int, now: float) -> TokenBucket:
        """A bucket holding ``burst`` tokens at ``now``."""
        if not (rate_per_s > 0 and math.isfinite(rate_per_s)) or burst < 1:
            raise ConfigurationError("a rate limit needs rate_per_s > 0 and burst >= 1")
        return cls(rate_per_s=rate_per_s, burst=burst, tokens=float(burst), stamp=now)

    def take(self, now: float) -> float:
        """Take one token at ``now``: 0.0 if granted, else the seconds until one is back.

        A clock that steps backwards refills nothing (and takes nothing back).
        """
        elapsed = max(0.0, now - self.stamp)
        self.tokens = min(float(self.burst), self.tokens + elapsed * self.rate_per_s)
        self.stamp = max(self.stamp, now)
        if self.tokens >= 1.0 - _EPSILON:
            self.tokens = max(0.0, self.tokens - 1.0)
            return 0.0
        return (1.0 - self.tokens) / self.rate_per_s


class RateLimiter:
    """One token bucket per caller, at most ``max_callers`` of them (least recently seen go)."""

    def __init__(
        self,
        *,
        rate_per_s: float,
        burst: int,
        max_callers: int = DEFAULT_MAX_CALLERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_callers < 1:
            raise ConfigurationError("a rate limiter must track at least one caller")
        TokenBucket.full(rate_per_s=rate_per_s, burst=burst, now=0.0)  # checks the pair
        self.rate_per_s = rate_per_s
        self.burst = burst
        self.max_callers = max_callers
        self._clock = clock
        self._buckets: OrderedDict[str, TokenBucket] = OrderedDict()

    def __len__(self) -> int:
        return len(self._buckets)

    def __contains__(self, caller: object) -> bool:
        return caller in self._buckets

    def take(self, caller: str) -> float:
        """One token of ``caller``'s bucket: 0.0 if granted, else seconds to wait."""
        now = self._clock()
        bucket = self._buckets.get(caller)
        if bucket is None:
            bucket = TokenBucket.full(rate_per_s=self.rate_per_s, burst=self.burst, now=now)
            self._buckets[caller] = bucket
            while len(self._buckets) > self.max_callers:
                self._buckets.popitem(last=False)
        else:
            self._buckets.move_to_end(caller)
        return bucket.take(now)


def bearer_key(headers: Headers) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, if there is one."""
    return bearer_of(headers.get("authorization"))


def caller_of(scope: Scope, keys: ApiKeys | None) -> str:
    """Whose bucket a request draws on: its key's digest, else its client host.

    With ``keys`` given, only a key it knows gets a bucket of its own.
    """
    key = bearer_key(Headers(scope=scope))
    if key is not None and (keys is None or keys.banks_for(key) is not None):
        # The digest, never the key: the table of callers holds nothing worth stealing.
        return "key:" + key_digest(key).hex()
    client = scope.get("client")
    host = client[0] if client else "unknown"
    return f"host:{host}"


class RateLimitMiddleware:
    """Refuses a caller over its rate with a JSON 429 and ``Retry-After``, before the app runs.

    Args:
        app: The ASGI app to protect.
        rate_per_s: Sustained requests per second per caller.
        burst: Requests a caller may send at once after being idle.
        keys: The API's keys; with them, unknown keys are limited by client host.
        max_callers: Buckets kept at most (least recently seen are dropped).
        clock: Seconds, monotonic; injectable for tests.
        exempt: Paths never limited.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        rate_per_s: float,
        burst: int,
        keys: ApiKeys | None = None,
        max_callers: int = DEFAULT_MAX_CALLERS,
        clock: Callable[[], float] = time.monotonic,
        exempt: frozenset[str] = EXEMPT_PATHS,
    ) -> None:
        self.app = app
        self.keys = keys
        self.exempt = exempt
        self.limiter = RateLimiter(
            rate_per_s=rate_per_s, burst=burst, max_callers=max_callers, clock=clock
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in self.exempt:
            await self.app(scope, receive, send)
            return
        wait_s = self.limiter.take(caller_of(scope, self.keys))
        if wait_s <= 0.0:
            await self.app(scope, receive, send)
            return
        retry_after = max(1, math.ceil(wait_s))
        response = error_response(
            429,
            "rate_limited",
            f"too many requests: at most {self.limiter.rate_per_s:g} per second "
            f"(bursts of {self.limiter.burst}); retry after {retry_after} s",
            headers={"Retry-After": str(retry_after)},
        )
        await response(scope, receive, send)
