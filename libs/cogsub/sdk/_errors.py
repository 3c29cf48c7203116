"""HTTP answers and transport failures turned back into ``cogsub.core.errors``.

The API sends every error as ``{"error": {"type", "message", "problems"}}``; the
client raises the domain error the server raised, carrying the server's message:

    CogsubError
    ├── InvalidInputError        422, 413 (``problems`` rebuilt as FieldProblem)
    │   └── RejectedInputError   422 ``rejected``: ingestion refused it (a RejectedError too)
    ├── NotFoundError            404
    ├── ConflictError            409
    │   ├── RejectedConflictError  409 ``rejected``: it clashes with what is archived
    │   └── NotConfiguredError     409 ``not_configured``: the server lacks a setting
    ├── UnavailableError         503, 502, 504, connection failures, timeouts (retryable)
    ├── AuthenticationError      401: no key, or a key the server does not know
    └── PermissionDeniedError    403: the key does not grant that bank

The error types are ``cogsub.core.errors``'s, shared with the API that raises them.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping

import httpx

from cogsub.core.errors import (
    AuthenticationError,
    CogsubError,
    ConflictError,
    FieldProblem,
    InvalidInputError,
    NotConfiguredError,
    NotFoundError,
    PermissionDeniedError,
    RejectedConflictError,
    RejectedError,
    RejectedInputError,
    ServerError,
    UnavailableError,
)

_BY_STATUS: Mapping[int, type[CogsubError]] = {
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    502: UnavailableError,
    503: UnavailableError,
    504: UnavailableError,
}


def _body(content: bytes) -> tuple[str | None, str | None, list[FieldProblem]]:
    """The server's error type, message and problems; ``(None, None, [])`` if not ours."""
    try:
        error = json.loads(content)["error"]
        message = str(error["message"])
        problems = [
            FieldProblem(str(p["field"]), str(p["rule"])) for p in error.get("problems") or []
        ]
        kind = error.get("type")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None, None, []
    return (kind if isinstance(kind, str) else None), message, problems


def _rejected(status_code: int, text: str, problems: list[FieldProblem]) -> RejectedError:
    if status_code == 409:
        return RejectedConflictError(text)
    error = RejectedInputError(problems or [FieldProblem("(ingestion)", text)])
    error.args = (text,)
    return error


def error_for(status_code: int, content: bytes) -> CogsubError:
    """The domain error for an HTTP error answer (``status_code`` ≥ 400)."""
    kind_name, message, problems = _body(content)
    text = message or f"HTTP {status_code}"
    if kind_name == RejectedError.error_type and 400 <= status_code < 500:
        return _rejected(status_code, text, problems)
    if kind_name == NotConfiguredError.error_type and status_code == 409:
        return NotConfiguredError(text)
    if status_code in (413, 422) or (400 <= status_code < 500 and problems):
        if status_code == 413 and not problems:
            problems = [FieldProblem("(body)", text)]
        error = InvalidInputError(problems or [FieldProblem("(request)", text)])
        if message is not None:
            error.args = (message,)  # the server's own wording, not a re-joined one
        return error
    kind = _BY_STATUS.get(status_code)
    if kind is not None:
        return kind(text)
    if status_code >= 500:
        return ServerError(text)
    return CogsubError(text)


@contextlib.contextmanager
def mapped_transport_errors() -> Iterator[None]:
    """httpx's network failures as UnavailableError: the same call may succeed later."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise UnavailableError(f"the memory API did not answer in time: {exc}") from exc
    except httpx.TransportError as exc:
        raise UnavailableError(f"cannot reach the memory API: {exc}") from exc
