"""Vendor errors of the OpenSearch adapter turned into the project's, by exception type.

    opensearchpy.ConnectionError / ConnectionTimeout  -> UnavailableError
    TransportError 429 or 5xx                          -> UnavailableError
    AuthenticationException / AuthorizationException  -> ConfigurationError
    NotFoundError (404)                                -> NotFoundError
    ConflictError (409)                                -> ConflictError
    RequestError (400)                                 -> the caller's ``bad_request`` class
    any other OpenSearchException                      -> CogsubError

and refused items of a ``_bulk`` or an ``mget``, which answer 200 as a whole, and a
stored document that is no longer an ``IndexDocument``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import opensearchpy
from pydantic import ValidationError

from cogsub.core.documents import IndexDocument
from cogsub.core.errors import (
    CogsubError,
    ConfigurationError,
    ConflictError,
    FieldProblem,
    InvalidInputError,
    NotFoundError,
    UnavailableError,
)
from cogsub.index import opensearch_queries as queries


@contextmanager
def translated(operation: str, *, bad_request: type[CogsubError] = CogsubError) -> Iterator[None]:
    """Raise our error for any opensearch-py error escaping the block."""
    try:
        yield
    except opensearchpy.ConnectionError as exc:  # ConnectionTimeout and SSLError included
        message = f"opensearch {operation}: cannot reach the cluster ({exc.error})"
        raise UnavailableError(message) from exc
    except (opensearchpy.AuthenticationException, opensearchpy.AuthorizationException) as exc:
        message = f"opensearch {operation}: credentials refused ({exc.status_code})"
        raise ConfigurationError(message) from exc
    except opensearchpy.NotFoundError as exc:
        raise NotFoundError(f"opensearch {operation}: {exc.error}") from exc
    except opensearchpy.ConflictError as exc:
        raise ConflictError(f"opensearch {operation}: {exc.error}") from exc
    except opensearchpy.RequestError as exc:
        detail = f"opensearch {operation} rejected: {exc}"
        if issubclass(bad_request, InvalidInputError):
            raise bad_request([FieldProblem("request", detail)]) from exc
        raise bad_request(detail) from exc
    except opensearchpy.TransportError as exc:
        status = exc.status_code
        message = f"opensearch {operation}: status {status} ({exc.error})"
        if isinstance(status, int) and (status == 429 or status >= 500):
            raise UnavailableError(message) from exc
        raise CogsubError(message) from exc
    except opensearchpy.OpenSearchException as exc:
        raise CogsubError(f"opensearch {operation}: {exc}") from exc


# Item errors of an mget that a later read may not meet: the shard or node, not the id.
_TRANSIENT_ITEM_ERRORS = frozenset(
    {
        "no_shard_available_action_exception",
        "unavailable_shards_exception",
        "node_not_connected_exception",
        "node_disconnected_exception",
        "circuit_breaking_exception",
        "rejected_execution_exception",
        "opensearch_rejected_execution_exception",
        "timeout_exception",
    }
)


def mget_item_error(doc: Mapping[str, Any]) -> CogsubError:
    """The error for an ``mget`` item that holds one: retryable where a shard could not answer."""
    error = doc.get("error")
    kind = str(error.get("type", "")) if isinstance(error, Mapping) else str(error)
    reason = error.get("reason", "") if isinstance(error, Mapping) else ""
    message = f"opensearch mget of {doc.get('_id')!r}: {kind} ({reason})"
    return UnavailableError(message) if kind in _TRANSIENT_ITEM_ERRORS else CogsubError(message)


def raise_for_failures(failures: list[queries.BulkFailure]) -> None:
    """Raise for refused bulk items: retryable first, so a redelivery can fix them."""
    if not failures:
        return
    retryable = [f for f in failures if f.retryable]
    first = (retryable or failures)[0]
    summary = (
        f"opensearch bulk: {len(retryable or failures)} documents refused, first "
        f"documents[{first.position}] status {first.status} ({first.error_type}: {first.reason})"
    )
    if retryable:
        raise UnavailableError(summary)
    if all(f.status == 400 for f in failures):
        raise InvalidInputError(
            [
                FieldProblem(f"documents[{f.position}]", f"{f.error_type}: {f.reason}")
                for f in failures
            ]
        )
    if all(f.status == 409 for f in failures):
        raise ConflictError(summary)
    raise CogsubError(summary)


def stored_document(source: Mapping[str, Any]) -> IndexDocument:
    try:
        return IndexDocument.model_validate(source)
    except ValidationError as exc:
        where = f"{source.get('event_id')!r} of bank {source.get('bank_id')!r}"
        raise CogsubError(f"stored document {where} is not an IndexDocument: {exc}") from exc
