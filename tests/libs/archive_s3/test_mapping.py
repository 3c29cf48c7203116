"""S3Archive without a server: key rules, constructor checks, the error table."""

from __future__ import annotations

import botocore.exceptions as boto_errors
import pytest

from cogsub.archive.s3 import S3Archive, S3Retries, map_s3_errors
from cogsub.core.errors import (
    ConfigurationError,
    InvalidInputError,
    NotFoundError,
    ObjectExistsError,
    UnavailableError,
)


def _client_error(code: str, status: int, operation: str = "PutObject") -> boto_errors.ClientError:
    response = {
        "Error": {"Code": code, "Message": "server text"},
        "ResponseMetadata": {"HTTPStatusCode": status},
    }
    return boto_errors.ClientError(response, operation)


def _mapped(exc: Exception, *, key: str | None = "events/a.json") -> BaseException:
    with pytest.raises(Exception) as caught, map_s3_errors(bucket="b", key=key):
        raise exc
    return caught.value


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("PreconditionFailed", 412, ObjectExistsError),
        ("ConditionalRequestConflict", 409, ObjectExistsError),
        ("NoSuchKey", 404, NotFoundError),
        ("404", 404, NotFoundError),
        ("NoSuchBucket", 404, ConfigurationError),
        ("AccessDenied", 403, ConfigurationError),
        ("InvalidAccessKeyId", 403, ConfigurationError),
        ("SignatureDoesNotMatch", 403, ConfigurationError),
        ("SlowDown", 503, UnavailableError),
        ("Throttling", 400, UnavailableError),
        ("RequestTimeout", 400, UnavailableError),
        ("InternalError", 500, UnavailableError),
        ("SomethingNew", 502, UnavailableError),
        ("TooManyRequests", 429, UnavailableError),
        ("InvalidArgument", 400, ConfigurationError),
    ],
)
def test_client_errors_map_by_code_and_status(
    code: str, status: int, expected: type[Exception]
) -> None:
    error = _mapped(_client_error(code, status))
    assert type(error) is expected
    assert error.__cause__ is not None


def test_object_exists_names_the_key() -> None:
    error = _mapped(_client_error("PreconditionFailed", 412), key="events/x.json")
    assert isinstance(error, ObjectExistsError)
    assert error.key == "events/x.json"


@pytest.mark.parametrize(
    "exc",
    [
        boto_errors.EndpointConnectionError(endpoint_url="http://127.0.0.1:1"),
        boto_errors.ConnectTimeoutError(endpoint_url="http://127.0.0.1:1"),
        boto_errors.ReadTimeoutError(endpoint_url="http://127.0.0.1:1"),
        boto_errors.ConnectionClosedError(endpoint_url="http://127.0.0.1:1"),
    ],
)
def test_transport_failures_are_retryable(exc: Exception) -> None:
    error = _mapped(exc)
    assert isinstance(error, UnavailableError)
    assert error.retryable is True


def test_missing_credentials_are_configuration() -> None:
    error = _mapped(boto_errors.NoCredentialsError())
    assert isinstance(error, ConfigurationError)
    assert error.retryable is False


def test_unrelated_exceptions_pass_through() -> None:
    with pytest.raises(KeyError), map_s3_errors(bucket="b"):
        raise KeyError("not ours to map")


def _archive(**kwargs: object) -> S3Archive:
    args: dict[str, object] = {"bucket": "b", "endpoint_url": "http://127.0.0.1:1"}
    return S3Archive(**{**args, **kwargs})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "key",
    [
        "",
        "/events/a.json",
        "events/../a.json",
        "events/./a.json",
        "..",
        "a//b",
        "a/",
        "a\x00b",
        "k" * 1025,
    ],
)
async def test_invalid_keys_are_refused_before_any_call(key: str) -> None:
    archive = _archive()
    try:
        with pytest.raises(InvalidInputError) as caught:
            await archive.put_once(key, b"{}")
        assert caught.value.problems[0].field == "key"
        with pytest.raises(InvalidInputError):
            await archive.get(key)
    finally:
        await archive.close()


@pytest.mark.parametrize("prefix", ["/events", "events/../", "a\nb"])
async def test_invalid_list_prefixes_are_refused(prefix: str) -> None:
    archive = _archive()
    try:
        with pytest.raises(InvalidInputError):
            async for _ in archive.list(prefix):
                pass
    finally:
        await archive.close()


async def test_key_length_counts_the_prefix() -> None:
    archive = _archive(prefix="p" * 24)
    try:
        with pytest.raises(InvalidInputError):
            await archive.put_once("k" * 1000, b"{}")
    finally:
        await archive.close()


def test_damaged_bodies_are_retryable() -> None:
    error = _mapped(boto_errors.FlexibleChecksumError(error_msg="crc32 mismatch"))
    assert isinstance(error, UnavailableError)


def test_constructor_checks() -> None:
    with pytest.raises(ConfigurationError):
        _archive(bucket="")
    with pytest.raises(ConfigurationError):
        _archive(access_key_id="only-half")
    with pytest.raises(ConfigurationError):
        _archive(max_pool_connections=0)
    with pytest.raises(ConfigurationError):
        _archive(retries=S3Retries(max_attempts=0))
    with pytest.raises(InvalidInputError):
        _archive(prefix="/abs")


async def test_prefix_is_normalised_and_repr_hides_credentials() -> None:
    secret = "s3cr3t-never-shown-0123456789"
    archive = _archive(
        prefix="tenant-a", access_key_id="AKIDSHOWNNOWHERE", secret_access_key=secret
    )
    try:
        assert archive.prefix == "tenant-a/"
        text = repr(archive) + str(vars(archive))
        assert secret not in text
        assert "AKIDSHOWNNOWHERE" not in text
    finally:
        await archive.close()


async def test_calls_after_close_fail_loudly() -> None:
    archive = _archive()
    await archive.close()
    await archive.close()  # idempotent
    with pytest.raises(ConfigurationError):
        await archive.exists("events/a.json")
