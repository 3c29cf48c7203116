"""The adapter's one translation of opensearch-py errors (no server needed)."""

from __future__ import annotations

import opensearchpy
import pytest

from cogsub.core.errors import (
    CogsubError,
    ConfigurationError,
    ConflictError,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
)
from cogsub.index import opensearch_queries as q
from cogsub.index.opensearch_errors import raise_for_failures, translated


def _raise(exc: Exception, **options: type[CogsubError]) -> CogsubError:
    with pytest.raises(CogsubError) as caught, translated("test", **options):
        raise exc
    return caught.value


@pytest.mark.parametrize(
    ("vendor", "ours"),
    [
        (opensearchpy.ConnectionError("N/A", "refused", OSError()), UnavailableError),
        (opensearchpy.ConnectionTimeout("TIMEOUT", "slow", TimeoutError()), UnavailableError),
        (opensearchpy.TransportError(429, "too_many_requests", {}), UnavailableError),
        (opensearchpy.TransportError(503, "unavailable", {}), UnavailableError),
        (opensearchpy.TransportError(500, "internal", {}), UnavailableError),
        (opensearchpy.AuthenticationException(401, "security_exception", {}), ConfigurationError),
        (opensearchpy.AuthorizationException(403, "security_exception", {}), ConfigurationError),
        (opensearchpy.NotFoundError(404, "index_not_found_exception", {}), NotFoundError),
        (opensearchpy.ConflictError(409, "version_conflict", {}), ConflictError),
        (opensearchpy.RequestError(400, "parsing_exception", {}), CogsubError),
        (opensearchpy.TransportError(413, "too_large", {}), CogsubError),
        (opensearchpy.SerializationError("bad"), CogsubError),
    ],
)
def test_vendor_errors_map_by_type(vendor: Exception, ours: type[CogsubError]) -> None:
    error = _raise(vendor)
    assert type(error) is ours
    assert error.__cause__ is vendor
    assert error.retryable == (ours is UnavailableError)


def test_bad_request_class_is_the_callers_choice() -> None:
    vendor = opensearchpy.RequestError(400, "mapper_parsing_exception", {})
    assert isinstance(_raise(vendor, bad_request=ConfigurationError), ConfigurationError)
    invalid = _raise(vendor, bad_request=InvalidInputError)
    assert isinstance(invalid, InvalidInputError) and invalid.problems[0].field == "request"


def _failure(position: int, status: int) -> q.BulkFailure:
    return q.BulkFailure(position, status, "some_exception", "why")


@pytest.mark.parametrize(
    ("statuses", "ours"),
    [
        ([400, 400], InvalidInputError),
        ([400, 429], UnavailableError),  # retryable wins: redelivery can fix it
        ([503], UnavailableError),
        ([409], ConflictError),
        ([400, 409], CogsubError),
        ([404], CogsubError),
    ],
)
def test_bulk_item_failures_raise(statuses: list[int], ours: type[CogsubError]) -> None:
    with pytest.raises(CogsubError) as caught:
        raise_for_failures([_failure(i, s) for i, s in enumerate(statuses)])
    assert type(caught.value) is ours


def test_no_bulk_failures_raise_nothing() -> None:
    raise_for_failures([])
