"""Rate limits per key: the token bucket under an injected clock; the middleware over the app."""

from __future__ import annotations

import hashlib
import math
from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.datastructures import Headers
from starlette.types import Message, Receive, Scope, Send

from cogsub.api import ApiKeys, ApiLimits, create_app
from cogsub.api.ratelimit import (
    EXEMPT_PATHS,
    RateLimiter,
    RateLimitMiddleware,
    TokenBucket,
    bearer_key,
    caller_of,
)
from cogsub.core.errors import ConfigurationError
from tests.services.api.conftest import KEY_A, KEY_B, assert_error
from tests.services.recall.stack import LiveStack


class Clock:
    """Seconds that move only when a test says so."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


# -- the bucket ---------------------------------------------------------------------------


def test_a_full_bucket_grants_the_burst_then_says_how_long_to_wait() -> None:
    bucket = TokenBucket.full(rate_per_s=4.0, burst=3, now=0.0)
    assert [bucket.take(0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(0.0) == pytest.approx(0.25)
    # Half-way to the next token: the wait halves.
    assert bucket.take(0.125) == pytest.approx(0.125)
    assert bucket.take(0.25) == 0.0
    assert bucket.take(0.25) == pytest.approx(0.25)


def test_refill_follows_the_rate_and_stops_at_the_burst() -> None:
    bucket = TokenBucket.full(rate_per_s=10.0, burst=5, now=0.0)
    for _ in range(5):
        assert bucket.take(0.0) == 0.0
    granted = sum(bucket.take(0.3) == 0.0 for _ in range(10))
    assert granted == 3  # 0.3 s at 10/s, however the float sum of 0.3 * 10 rounds
    # A long idle period refills to the burst, never beyond it.
    granted = sum(bucket.take(3_600.0) == 0.0 for _ in range(20))
    assert granted == 5


def test_a_clock_stepping_backwards_refills_nothing() -> None:
    bucket = TokenBucket.full(rate_per_s=1.0, burst=1, now=100.0)
    assert bucket.take(100.0) == 0.0
    assert bucket.take(50.0) == pytest.approx(1.0)  # no refill, no negative elapsed time
    assert bucket.take(100.5) == pytest.approx(0.5)  # the stamp stayed at 100
    assert bucket.take(101.0) == 0.0


@pytest.mark.parametrize(
    ("rate", "burst"), [(0.0, 1), (-1.0, 1), (math.inf, 1), (math.nan, 1), (1.0, 0), (1.0, -5)]
)
def test_a_bucket_that_could_not_work_is_a_configuration_error(rate: float, burst: int) -> None:
    with pytest.raises(ConfigurationError):
        TokenBucket.full(rate_per_s=rate, burst=burst, now=0.0)
    with pytest.raises(ConfigurationError):
        RateLimiter(rate_per_s=rate, burst=burst)


def test_a_limiter_must_track_someone() -> None:
    with pytest.raises(ConfigurationError):
        RateLimiter(rate_per_s=1.0, burst=1, max_callers=0)


@settings(max_examples=300, deadline=None)
@given(
    rate=st.floats(min_value=0.1, max_value=1_000.0),
    burst=st.integers(min_value=1, max_value=50),
    gaps=st.lists(st.floats(min_value=0.0, max_value=2.0), min_size=1, max_size=200),
)
def test_no_window_grants_more_than_burst_plus_rate_times_its_length(
    rate: float, burst: int, gaps: list[float]
) -> None:
    bucket = TokenBucket.full(rate_per_s=rate, burst=burst, now=0.0)
    now = 0.0
    grants: list[float] = []
    for gap in gaps:
        now += gap
        wait = bucket.take(now)
        assert wait >= 0.0
        if wait == 0.0:
            grants.append(now)
        else:
            # The promise behind Retry-After: waiting that long is enough for one token.
            probe = TokenBucket(rate, burst, bucket.tokens, bucket.stamp)
            assert probe.take(now + wait + 1e-9) == 0.0
    # Every window [grants[i], grants[j]] holds at most burst + rate * length grants.
    for i, start in enumerate(grants):
        for j in range(i, len(grants)):
            assert j - i + 1 <= burst + rate * (grants[j] - start) + 1e-6


@settings(max_examples=100, deadline=None)
@given(
    rate=st.floats(min_value=0.5, max_value=100.0),
    burst=st.integers(min_value=1, max_value=20),
    idle=st.floats(min_value=0.0, max_value=10.0),
)
def test_an_idle_caller_gets_back_what_it_earned(rate: float, burst: int, idle: float) -> None:
    bucket = TokenBucket.full(rate_per_s=rate, burst=burst, now=0.0)
    while bucket.take(0.0) == 0.0:
        pass
    granted = 0
    while bucket.take(idle) == 0.0:
        granted += 1
    earned = min(burst, idle * rate)
    assert math.floor(earned - 1e-6) <= granted <= math.floor(earned + 1e-6)


# -- the limiter: one bucket per caller, bounded --------------------------------------------


def test_callers_have_their_own_buckets() -> None:
    clock = Clock()
    limiter = RateLimiter(rate_per_s=1.0, burst=2, clock=clock)
    assert [limiter.take("a") for _ in range(2)] == [0.0, 0.0]
    assert limiter.take("a") > 0
    assert limiter.take("b") == 0.0
    clock.advance(1.0)
    assert limiter.take("a") == 0.0


def test_the_least_recently_seen_caller_is_dropped_at_the_cap() -> None:
    clock = Clock()
    limiter = RateLimiter(rate_per_s=1.0, burst=1, max_callers=3, clock=clock)
    for caller in ("a", "b", "c"):
        limiter.take(caller)
    limiter.take("a")  # a is now the most recently seen; b the least
    limiter.take("d")
    assert len(limiter) == 3
    assert "b" not in limiter and {"a", "c", "d"} == {c for c in "abcd" if c in limiter}


@settings(max_examples=50, deadline=None)
@given(
    callers=st.lists(st.text(min_size=1, max_size=4), max_size=300),
    cap=st.integers(min_value=1, max_value=20),
)
def test_memory_stays_bounded_whatever_callers_arrive(callers: list[str], cap: int) -> None:
    limiter = RateLimiter(rate_per_s=1.0, burst=1, max_callers=cap, clock=Clock())
    for caller in callers:
        limiter.take(caller)
        assert len(limiter) <= cap
        assert caller in limiter  # the caller just seen is never the one dropped
    # The survivors are exactly the most recently seen distinct callers.
    recent = list(dict.fromkeys(reversed(callers)))[:cap]
    assert all(caller in limiter for caller in recent)


# -- who the caller is ---------------------------------------------------------------------


def _scope(headers: dict[str, str], client: tuple[str, int] | None = ("10.0.0.7", 5000)) -> Scope:
    raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return {"type": "http", "path": "/v1/banks/x/recall", "headers": raw, "client": client}


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("BEARER   abc  ", "abc"),
        ("Basic dXNlcjpwYXNz", None),
        ("Bearer ", None),
        ("Bearer", None),
        ("", None),
    ],
)
def test_only_bearer_tokens_are_keys(header: str, token: str | None) -> None:
    assert bearer_key(Headers({"authorization": header})) == token


def test_a_known_key_is_its_digest_and_anything_else_is_the_client_host() -> None:
    keys = ApiKeys({KEY_A: ["a"]})
    digest = hashlib.sha256(KEY_A.encode()).hexdigest()
    assert caller_of(_scope({"Authorization": f"Bearer {KEY_A}"}), keys) == f"key:{digest}"
    assert caller_of(_scope({"Authorization": f"Bearer {KEY_A}"}), None) == f"key:{digest}"
    # Inventing keys buys nothing: unknown keys share the host's bucket.
    assert caller_of(_scope({"Authorization": "Bearer made-up-0123456789"}), keys) == (
        "host:10.0.0.7"
    )
    assert caller_of(_scope({}), keys) == "host:10.0.0.7"
    assert caller_of(_scope({}, client=None), None) == "host:unknown"


# -- the middleware over the real app ----------------------------------------------------------

Limited = Callable[..., httpx.AsyncClient]


@pytest.fixture
async def limited(stack: LiveStack) -> AsyncIterator[Limited]:
    """In-process clients of ``create_app`` wrapped in the rate limiter; closed at the end."""
    opened: list[httpx.AsyncClient] = []

    def make(
        middleware: RateLimitMiddleware, *, key: str | None = None, host: str = "127.0.0.1"
    ) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        transport = httpx.ASGITransport(app=middleware, client=(host, 40_000))
        client = httpx.AsyncClient(transport=transport, base_url="http://api", headers=headers)
        opened.append(client)
        return client

    yield make
    for client in opened:
        await client.aclose()


def _app(
    stack: LiveStack,
    keys: ApiKeys | None,
    clock: Clock,
    *,
    rate_per_s: float,
    burst: int,
    max_callers: int = 100,
) -> RateLimitMiddleware:
    """``create_app`` with ``keys``, wrapped the way ``create_app`` would wrap itself."""
    app = create_app(service=stack.service, auth=keys, limits=ApiLimits(max_body_bytes=4_096))
    return RateLimitMiddleware(
        app, rate_per_s=rate_per_s, burst=burst, keys=keys, max_callers=max_callers, clock=clock
    )


def assert_limited(response: httpx.Response, retry_after: int) -> None:
    error = assert_error(response, 429, "rate_limited")
    assert "per second" in error["message"]
    assert response.headers["retry-after"] == str(retry_after)


async def test_a_key_over_its_rate_gets_429_and_other_keys_do_not(
    limited: Limited, stack: LiveStack, banks: tuple[str, str], keys: ApiKeys
) -> None:
    bank_a, bank_b = banks
    clock = Clock()
    app = _app(stack, keys, clock, rate_per_s=0.5, burst=3)
    api_a, api_b = limited(app, key=KEY_A), limited(app, key=KEY_B)
    for _ in range(3):
        assert (await api_a.get(f"/v1/banks/{bank_a}/memories/nope")).status_code == 404
    assert_limited(await api_a.get(f"/v1/banks/{bank_a}/memories/nope"), retry_after=2)
    assert_limited(await api_a.post(f"/v1/banks/{bank_a}/recall", json={"query": "x"}), 2)
    assert (await api_b.get(f"/v1/banks/{bank_b}/memories/nope")).status_code == 404
    clock.advance(1.0)
    assert_limited(await api_a.get(f"/v1/banks/{bank_a}/memories/nope"), retry_after=1)
    clock.advance(1.0)
    assert (await api_a.get(f"/v1/banks/{bank_a}/memories/nope")).status_code == 404


async def test_health_probes_are_never_limited(limited: Limited, stack: LiveStack) -> None:
    assert {"/healthz", "/readyz"} == EXEMPT_PATHS
    app = _app(stack, None, Clock(), rate_per_s=1.0, burst=1)
    api = limited(app)
    assert (await api.get("/v1/banks/b/memories/nope")).status_code == 404
    assert_limited(await api.get("/v1/banks/b/memories/nope"), retry_after=1)
    for _ in range(5):
        assert (await api.get("/healthz")).status_code == 200
        assert (await api.get("/readyz")).status_code == 200


async def test_rotating_made_up_keys_does_not_escape_the_limit(
    limited: Limited, stack: LiveStack, banks: tuple[str, str], keys: ApiKeys
) -> None:
    bank_a, _ = banks
    app = _app(stack, keys, Clock(), rate_per_s=1.0, burst=2)
    statuses = []
    for n in range(6):
        api = limited(app, key=f"made-up-key-number-{n:04d}")
        statuses.append((await api.get(f"/v1/banks/{bank_a}/memories/x")).status_code)
    assert statuses == [401, 401, 429, 429, 429, 429]
    # Another host, and the real key from the same host, still have their own budgets.
    path = f"/v1/banks/{bank_a}/memories/x"
    assert (await limited(app, host="10.9.9.9").get(path)).status_code == 401
    assert (await limited(app, key=KEY_A).get(path)).status_code == 404
    assert len(app.limiter) == 3


async def test_without_keys_callers_are_told_apart_by_host(
    limited: Limited, stack: LiveStack
) -> None:
    app = _app(stack, None, Clock(), rate_per_s=1.0, burst=1)
    here, there = limited(app, host="127.0.0.1"), limited(app, host="127.0.0.2")
    assert (await here.get("/v1/banks/b/memories/x")).status_code == 404
    assert (await here.get("/v1/banks/b/memories/x")).status_code == 429
    assert (await there.get("/v1/banks/b/memories/x")).status_code == 404


async def test_the_table_of_callers_stays_bounded(
    limited: Limited, stack: LiveStack, keys: ApiKeys
) -> None:
    app = _app(stack, None, Clock(), rate_per_s=1.0, burst=1, max_callers=4)
    for n in range(12):
        await limited(app, host=f"10.0.0.{n}").get("/v1/banks/b/memories/x")
    assert len(app.limiter) == 4
    assert "host:10.0.0.11" in app.limiter and "host:10.0.0.0" not in app.limiter


async def test_a_refused_request_never_reaches_the_app_nor_its_body() -> None:
    calls: list[str] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        calls.append(scope["type"])
        if scope["type"] == "http":
            await receive()
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b""})

    received = 0

    async def receive() -> Message:
        nonlocal received
        received += 1
        return {"type": "http.request", "body": b"x" * 10, "more_body": False}

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    middleware = RateLimitMiddleware(app, rate_per_s=1.0, burst=1, clock=Clock())
    await middleware({"type": "lifespan"}, receive, send)  # not HTTP: passed through
    scope = _scope({})
    await middleware(scope, receive, send)
    assert calls == ["lifespan", "http"] and received == 1
    await middleware(scope, receive, send)
    assert calls == ["lifespan", "http"] and received == 1
    assert sent[-2]["status"] == 429
    headers = dict(sent[-2]["headers"])
    assert headers[b"retry-after"] == b"1"
    assert headers[b"content-type"] == b"application/json"
