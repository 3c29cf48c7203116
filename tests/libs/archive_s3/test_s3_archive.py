"""S3Archive against a real SeaweedFS: write-once, races, restarts, outages, credentials."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import subprocess
import time
import traceback
import uuid
from collections.abc import AsyncIterator
from typing import Any

import botocore.exceptions as boto_errors
import pytest

from cogsub.archive.s3 import S3Archive, S3Retries, build_s3_client, s3_client_config
from cogsub.core.errors import (
    ConfigurationError,
    ConflictError,
    ObjectExistsError,
    UnavailableError,
)
from tests.fixtures.s3 import S3Endpoint, S3Location, SeaweedFS

pytestmark = pytest.mark.connected


def _archive(
    endpoint: S3Endpoint,
    bucket: str,
    prefix: str = "",
    *,
    retries: S3Retries | None = None,
    pool: int = 16,
    secret: str | None = None,
    access_key: str | None = None,
) -> S3Archive:
    return S3Archive(
        bucket=bucket,
        prefix=prefix,
        endpoint_url=endpoint.endpoint_url,
        region=endpoint.region,
        access_key_id=access_key or endpoint.access_key_id,
        secret_access_key=secret or endpoint.secret_access_key,
        max_pool_connections=pool,
        retries=retries,
    )


def _archive_client(endpoint: S3Endpoint) -> Any:
    """A boto3 client configured as the archive's own (what goes on the wire is the archive's)."""
    return build_s3_client(
        endpoint_url=endpoint.endpoint_url,
        config=s3_client_config(endpoint_url=endpoint.endpoint_url, region=endpoint.region),
        access_key_id=endpoint.access_key_id,
        secret_access_key=endpoint.secret_access_key,
    )


@pytest.fixture
async def archive(s3_bucket: S3Location) -> AsyncIterator[S3Archive]:
    store = _archive(s3_bucket.endpoint, s3_bucket.bucket, s3_bucket.prefix)
    try:
        yield store
    finally:
        await store.close()


async def test_second_conditional_put_is_refused_and_original_kept(
    archive: S3Archive, s3_bucket: S3Location
) -> None:
    key = "events/2024/05/01/e1.json"
    await archive.put_once(key, b'{"v": 1}')

    # The server itself refuses: the raw call gets HTTP 412, not just our adapter.
    raw = s3_bucket.endpoint.client()
    try:
        with pytest.raises(boto_errors.ClientError) as caught:
            raw.put_object(
                Bucket=s3_bucket.bucket, Key=s3_bucket.prefix + key, Body=b"x", IfNoneMatch="*"
            )
        assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    finally:
        raw.close()

    with pytest.raises(ObjectExistsError) as refused:
        await archive.put_once(key, b'{"v": 2}')
    assert refused.value.key == key
    assert await archive.get(key) == b'{"v": 1}'


def test_small_puts_skip_the_continue_handshake_large_ones_keep_it(s3_bucket: S3Location) -> None:
    client = _archive_client(s3_bucket.endpoint)
    sent: dict[str, bytes | None] = {}

    def record(request: Any, **_: Any) -> None:  # after signing: what goes on the wire
        sent[request.url.rsplit("/", 1)[-1]] = request.headers.get("Expect")

    client.meta.events.register("before-send.s3.PutObject", record)
    try:
        for name, size in (("small", 4096), ("large", 2 << 20)):
            key = f"{s3_bucket.prefix}{name}"
            client.put_object(Bucket=s3_bucket.bucket, Key=key, Body=b"x" * size, IfNoneMatch="*")
            stored = client.get_object(Bucket=s3_bucket.bucket, Key=key)["Body"].read()
            assert len(stored) == size
        with pytest.raises(boto_errors.ClientError) as refused:
            client.put_object(
                Bucket=s3_bucket.bucket, Key=f"{s3_bucket.prefix}small", Body=b"y", IfNoneMatch="*"
            )
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    finally:
        client.close()
    assert sent["small"] is None
    assert sent["large"] == b"100-continue"


def test_a_put_is_covered_by_its_signed_body_hash_without_an_extra_checksum(
    s3_bucket: S3Location,
) -> None:
    client = _archive_client(s3_bucket.endpoint)
    sent: dict[str, Any] = {}
    client.meta.events.register(
        "before-send.s3.PutObject", lambda request, **_: sent.update(request.headers)
    )
    body = b'{"eventId": "signed"}' * 50
    try:
        client.put_object(
            Bucket=s3_bucket.bucket, Key=f"{s3_bucket.prefix}signed", Body=body, IfNoneMatch="*"
        )
    finally:
        client.close()
    assert sent["X-Amz-Content-SHA256"] == hashlib.sha256(body).hexdigest().encode()
    assert not [name for name in sent if name.lower().startswith("x-amz-checksum")]


async def test_concurrent_put_once_on_one_key_has_exactly_one_winner(archive: S3Archive) -> None:
    key = "events/2024/05/01/race.json"
    bodies = [f'{{"writer": {i}}}'.encode() for i in range(200)]
    results = await asyncio.gather(
        *(archive.put_once(key, body) for body in bodies), return_exceptions=True
    )
    winners = [bodies[i] for i, r in enumerate(results) if r is None]
    losers = [r for r in results if r is not None]
    assert len(winners) == 1
    assert all(isinstance(r, ObjectExistsError) for r in losers), {type(r) for r in losers}
    assert await archive.get(key) == winners[0]


async def test_listing_is_lexicographic_where_the_server_is_not(archive: S3Archive) -> None:
    # SeaweedFS lists depth-first ("a/b/c" before "a/b.json"); the port promises byte order.
    keys = ["a/b", "a/b/c", "a/b.json", "a/b c", "a-b", "a0", "a/a", "A", "a/é", "ab/x/y"]
    for key in keys:
        await archive.put_once(key, b"1")
    expected = sorted(keys, key=str.encode)
    assert [k async for k in archive.list()] == expected
    assert [k async for k in archive.list("a/")] == [k for k in expected if k.startswith("a/")]
    assert [k async for k in archive.list("a/b")] == [k for k in expected if k.startswith("a/b")]
    assert [k async for k in archive.list("zz")] == []


async def test_prefixes_isolate_archives_in_one_bucket(s3_bucket: S3Location) -> None:
    left = _archive(s3_bucket.endpoint, s3_bucket.bucket, s3_bucket.prefix + "left")
    right = _archive(s3_bucket.endpoint, s3_bucket.bucket, s3_bucket.prefix + "right")
    try:
        await left.put_once("k.json", b"L")
        await right.put_once("k.json", b"R")
        assert [k async for k in left.list()] == ["k.json"]
        assert await left.get("k.json") == b"L"
        assert await right.get("k.json") == b"R"
    finally:
        await left.close()
        await right.close()


async def test_key_that_is_a_directory_elsewhere_is_a_conflict_not_an_existing_object(
    archive: S3Archive,
) -> None:
    await archive.put_once("x/y/z.json", b"1")
    try:
        await archive.put_once("x/y", b"2")
    except ConflictError as exc:
        # SeaweedFS answers 412 for a "directory"; nothing is stored, so never ObjectExists.
        assert not isinstance(exc, ObjectExistsError)
        assert not await archive.exists("x/y")
    else:  # servers with a flat key space (AWS, moto) just store it
        assert await archive.get("x/y") == b"2"


async def test_ensure_bucket_is_idempotent(s3_endpoint: S3Endpoint) -> None:
    bucket = f"cogsub-boot-{uuid.uuid4().hex[:10]}"
    store = _archive(s3_endpoint, bucket)
    other = _archive(s3_endpoint, bucket)
    try:
        with pytest.raises(ConfigurationError):
            await store.get("k.json")  # NoSuchBucket is a set-up problem, not a missing object
        await asyncio.gather(store.ensure_bucket(), other.ensure_bucket())
        await store.ensure_bucket()
        await store.put_once("k.json", b"boot")
        await other.ensure_bucket()  # an existing, non-empty bucket is left alone
        assert await other.get("k.json") == b"boot"
    finally:
        await store.delete("k.json")
        await store.close()
        await other.close()
        raw = s3_endpoint.client()
        try:
            raw.delete_bucket(Bucket=bucket)
        finally:
            raw.close()


def _full_text(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc)) + repr(exc)


async def test_credentials_never_appear_in_errors(s3_bucket: S3Location) -> None:
    endpoint = s3_bucket.endpoint
    wrong_secret = "wrong-" + endpoint.secret_access_key[::-1]
    cases = [
        _archive(endpoint, s3_bucket.bucket, secret=wrong_secret),
        _archive(endpoint, s3_bucket.bucket, access_key="AKUNKNOWN0000", secret=wrong_secret),
    ]
    try:
        for store in cases:
            with pytest.raises(ConfigurationError) as caught:
                await store.put_once("k.json", b"1")
            text = _full_text(caught.value)
            assert wrong_secret not in text
            assert endpoint.secret_access_key not in text
            assert endpoint.access_key_id not in text
            assert s3_bucket.bucket in str(caught.value)
    finally:
        for store in cases:
            await store.close()


@pytest.mark.slow
async def test_data_survives_a_server_restart(seaweedfs_server: SeaweedFS) -> None:
    endpoint = seaweedfs_server.endpoint
    store = _archive(endpoint, "restart")
    try:
        await store.ensure_bucket()
        await store.put_once("events/2024/05/01/keep.json", b"durable")
        old_pid = seaweedfs_server.pid
        seaweedfs_server.restart()
        assert seaweedfs_server.pid != old_pid
        assert await store.get("events/2024/05/01/keep.json") == b"durable"
        with pytest.raises(ObjectExistsError):
            await store.put_once("events/2024/05/01/keep.json", b"overwrite?")
        assert [k async for k in store.list("events/")] == ["events/2024/05/01/keep.json"]
    finally:
        await store.close()


@pytest.mark.slow
async def test_stopped_server_is_unavailable_and_retryable(seaweedfs_server: SeaweedFS) -> None:
    endpoint = seaweedfs_server.endpoint
    quick = S3Retries(max_attempts=2, connect_timeout=0.5, read_timeout=1.0)
    store = _archive(endpoint, "outage", retries=quick)
    try:
        await store.ensure_bucket()
        await store.put_once("before.json", b"1")
        seaweedfs_server.stop()
        started = time.monotonic()
        for call in (
            store.put_once("after.json", b"2"),
            store.get("before.json"),
            store.exists("before.json"),
            store.delete("before.json"),
        ):
            with pytest.raises(UnavailableError) as caught:
                await call
            assert caught.value.retryable is True
            assert endpoint.secret_access_key not in _full_text(caught.value)
        with pytest.raises(UnavailableError):
            async for _ in store.list():
                pass
        assert time.monotonic() - started < 15
        seaweedfs_server.start()
        assert await store.get("before.json") == b"1"  # the same archive recovers
    finally:
        await store.close()


@pytest.mark.slow
async def test_concurrent_put_rate(s3_bucket: S3Location) -> None:
    """2,000 distinct 2 KB put_once calls through 32 threads; prints the rate."""
    store = _archive(s3_bucket.endpoint, s3_bucket.bucket, s3_bucket.prefix + "rate", pool=32)
    body = b"x" * 2048
    try:
        started = time.perf_counter()
        await asyncio.gather(*(store.put_once(f"p/{i:05d}.json", body) for i in range(2000)))
        elapsed = time.perf_counter() - started
        listed = [k async for k in store.list("p/")]
        assert listed == [f"p/{i:05d}.json" for i in range(2000)]
        print(f"\nS3Archive put_once: 2000 x 2 KB, 32 threads: {2000 / elapsed:.0f} puts/s")
    finally:
        await store.close()


def _listeners(ss: str, pid: int | None) -> list[str]:
    out = subprocess.run([ss, "-Hlntup"], capture_output=True, text=True, check=True).stdout
    # Columns: netid state recv-q send-q local-address:port peer-address:port process
    return [line.split()[4] for line in out.splitlines() if f"pid={pid}," in line]


def test_seaweedfs_listens_on_loopback_only_on_pinned_ports(seaweedfs_server: SeaweedFS) -> None:
    ss = shutil.which("ss")
    if ss is None:
        pytest.skip("ss (iproute2) is not installed")
    pinned = set(seaweedfs_server.ports.values())
    # The admin server binds a moment after S3 answers: poll until every port is up.
    deadline = time.monotonic() + 10
    while True:
        local = _listeners(ss, seaweedfs_server.pid)
        ports = {int(addr.rsplit(":", 1)[1]) for addr in local}
        if ports == pinned or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert all(addr.startswith("127.0.0.1:") for addr in local), local
    assert ports == pinned, (sorted(ports), seaweedfs_server.ports)
