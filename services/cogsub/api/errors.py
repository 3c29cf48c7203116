"""Domain errors to HTTP answers: every error is one JSON body, never a stack trace.

    {"error": {"type": "invalid_input", "message": "...", "problems": [{"field", "rule"}]}}

| raised                                   | status | type              |
|------------------------------------------|--------|-------------------|
| InvalidInputError, RequestValidationError | 422    | invalid_input     |
| RejectedError (ingestion dead-lettered it) | 409 conflict, else 422 | rejected |
| a JSON body that cannot be read          | 400    | bad_request       |
| AuthenticationError                      | 401    | unauthenticated   |
| PermissionDeniedError                    | 403    | forbidden         |
| NotFoundError, unknown route             | 404    | not_found         |
| NotConfiguredError (e.g. no chat model)  | 409    | not_configured    |
| ConflictError                            | 409    | conflict          |
| body over the limit                      | 413    | payload_too_large |
| UnavailableError                         | 503    | unavailable (+ Retry-After) |
| anything else                            | 500    | internal          |
"""

from __future__ import annotations

import math
import traceback
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cogsub.api.readiness import NotReadyError
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
    UnavailableError,
)

log = structlog.get_logger("cogsub.api")

DEFAULT_RETRY_AFTER_S = 1
_PARAM_SOURCES = frozenset({"body", "path", "query", "header", "cookie"})
_BY_CLASS: tuple[tuple[type[CogsubError], int, str], ...] = (
    # Ingestion dead-lettered what the API took: a 409 or 422 of its own type.
    (RejectedConflictError, 409, "rejected"),
    (RejectedError, 422, "rejected"),
    (InvalidInputError, 422, "invalid_input"),
    (AuthenticationError, 401, "unauthenticated"),
    (PermissionDeniedError, 403, "forbidden"),
    (NotFoundError, 404, "not_found"),
    (NotConfiguredError, 409, "not_configured"),
    (ConflictError, 409, "conflict"),
    (UnavailableError, 503, "unavailable"),
)
_BY_STATUS = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
}


class Problem(BaseModel):
    field: str
    rule: str


class ErrorDetail(BaseModel):
    type: str
    message: str
    problems: list[Problem] = []


class ErrorBody(BaseModel):
    """The body of every error answer."""

    error: ErrorDetail


def _described(text: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": text}


# For OpenAPI: the error answers any bank route may give.
BANK_ERRORS: dict[int | str, dict[str, Any]] = {
    401: _described("No API key, or an unknown one"),
    403: _described("The API key does not grant this bank"),
    413: _described("The request body is over the limit"),
    422: _described("A field breaks a rule; `problems` names each field and rule"),
    429: _described("Over this key's request rate; retry after `Retry-After` seconds"),
    503: _described("A backend is briefly unavailable; retry after `Retry-After` seconds"),
}
# For OpenAPI: what an operation that parses a JSON body may answer besides.
BODY_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _described("The body cannot be read as JSON (not UTF-8, too deep, a number too long)"),
}
#: The rule a body breaks when FastAPI cannot even decode it (its 400, not a 422).
UNREADABLE_BODY = FieldProblem(
    "(body)", "must be readable JSON: UTF-8, not nested too deeply, no number over 4300 digits"
)


def error_response(
    status: int,
    kind: str,
    message: str,
    problems: tuple[FieldProblem, ...] | list[FieldProblem] = (),
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body = ErrorBody(
        error=ErrorDetail(
            type=kind,
            message=message,
            problems=[Problem(field=p.field, rule=p.rule) for p in problems],
        )
    )
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


async def _domain_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, CogsubError)
    for kind, status, name in _BY_CLASS:
        if isinstance(exc, kind):
            if isinstance(exc, InvalidInputError):
                return error_response(status, name, str(exc), exc.problems)
            headers = None
            problems: tuple[FieldProblem, ...] = ()
            if isinstance(exc, UnavailableError):
                after = getattr(exc, "retry_after_s", None) or DEFAULT_RETRY_AFTER_S
                headers = {"Retry-After": str(max(1, math.ceil(after)))}
            if isinstance(exc, NotReadyError):
                problems = exc.problems
            if isinstance(exc, AuthenticationError):
                headers = {"WWW-Authenticate": "Bearer"}
            return error_response(status, name, str(exc), problems, headers=headers)
    # ConfigurationError and the rest are the server's problem; their text stays in the log.
    log.error(
        "api_request_failed",
        path=request.url.path,
        error_type=type(exc).__name__,
        error=str(exc),
    )
    return error_response(500, "internal", "internal error; the server log has the details")


def _problems(exc: RequestValidationError) -> list[FieldProblem]:
    problems = []
    for error in exc.errors():
        loc = [str(part) for part in error.get("loc", ())]
        if loc and loc[0] in _PARAM_SOURCES:
            loc = loc[1:]
        if error.get("type") == "json_invalid":
            detail = (error.get("ctx") or {}).get("error", "")
            problems.append(FieldProblem("(body)", f"must be valid JSON ({detail})"))
            continue
        problems.append(FieldProblem(".".join(loc) or "(body)", str(error.get("msg", "invalid"))))
    return problems


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = _problems(exc)
    message = "; ".join(str(p) for p in problems) or "invalid input"
    return error_response(422, "invalid_input", message, problems)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    kind = _BY_STATUS.get(exc.status_code, "internal" if exc.status_code >= 500 else "http_error")
    headers = dict(exc.headers) if exc.headers else None
    if exc.status_code == 400 and isinstance(exc.__cause__, ValueError | RecursionError):
        # FastAPI's "There was an error parsing the body" says nothing of why; the
        # decoder's own error (bad UTF-8, int digit limit, recursion) is behind it.
        problem = UNREADABLE_BODY
        return error_response(400, kind, str(problem), [problem], headers=headers)
    return error_response(exc.status_code, kind, str(exc.detail), headers=headers)


def install_error_handlers(app: FastAPI) -> None:
    """Register the mapping above on ``app``."""
    app.add_exception_handler(CogsubError, _domain_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)


class CatchAllMiddleware:
    """Turns an unexpected exception into a JSON 500; the traceback goes to the log only.

    Starlette's own last-resort handler re-raises after answering, which would
    crash an in-process (ASGITransport) client; this one stops the exception here.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking)
        except Exception as exc:
            # A plain traceback, never exc_info: a rich renderer would print every frame's
            # locals, and the ASGI scope among them carries the caller's Authorization header.
            log.error(
                "api_request_crashed",
                path=scope.get("path"),
                method=scope.get("method"),
                error_type=type(exc).__name__,
                traceback="".join(traceback.format_exception(exc)),
            )
            if started:
                raise  # half an answer is out; only dropping the connection is honest now
            response = error_response(500, "internal", "internal error; the server log has it")
            await response(scope, receive, send)
