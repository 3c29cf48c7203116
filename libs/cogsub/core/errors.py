"""The error hierarchy shared by every lib and service.

Errors carry handling semantics: ``retryable`` tells a consumer whether to try
the same message again (after a backoff) or to dead-letter it.

    CogsubError
    ├── InvalidInputError          bad data from outside; names the field and the rule
    │   └── InvalidEventError      an experience event that fails validation
    ├── ConflictError              the same identity with different content
    │   ├── ObjectExistsError      a write-once object is already there
    │   └── NotConfiguredError     a feature whose settings are not set
    ├── NotFoundError              asked for something that does not exist
    ├── UnavailableError           a backend is down or throttling (retryable)
    ├── ConfigurationError         settings that cannot work together
    ├── AuthenticationError        no API key, or one the server does not know
    ├── PermissionDeniedError      the API key does not grant that bank
    ├── RejectedError              ingestion dead-lettered what the API took
    │   ├── RejectedInputError     ... as invalid (also an InvalidInputError)
    │   └── RejectedConflictError  ... as clashing with the archive (also a ConflictError)
    └── ServerError                the API failed in a way it did not classify

The last six are what the API answers with and the SDK raises; they live here,
not in either, so that the API and the SDK both import them from below.
"""

from __future__ import annotations

from dataclasses import dataclass


class CogsubError(Exception):
    """Root of every error this project raises on purpose."""

    retryable: bool = False


@dataclass(frozen=True)
class FieldProblem:
    """One broken rule: ``field`` is the wire path (``context.sessionId``)."""

    field: str
    rule: str

    def __str__(self) -> str:
        return f"{self.field}: {self.rule}"


class InvalidInputError(CogsubError):
    """Input from outside broke one or more rules; nothing was stored."""

    def __init__(self, problems: list[FieldProblem] | tuple[FieldProblem, ...]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(str(p) for p in self.problems) or "invalid input")


class InvalidEventError(InvalidInputError):
    """An experience event that is not JSON or fails the schema."""


class ConflictError(CogsubError):
    """The same identity arrived again with different content."""


class ObjectExistsError(ConflictError):
    """A write-once archive object already exists under ``key``."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"archive object already exists and is never overwritten: {key}")


class NotConfiguredError(ConflictError):
    """A feature was asked for whose settings are not set; the message names them."""

    error_type = "not_configured"


class NotFoundError(CogsubError):
    """The thing asked for does not exist."""


class UnavailableError(CogsubError):
    """A backend cannot serve now; the same call may succeed later."""

    retryable = True


class ConfigurationError(CogsubError):
    """Settings that cannot work (unknown adapter, dimension mismatch...)."""


class AuthenticationError(CogsubError):
    """The request carried no API key, or one the server does not know."""


class PermissionDeniedError(CogsubError):
    """The API key is valid but does not grant the bank asked for."""


class RejectedError(CogsubError):
    """The API took the memory, then ingestion dead-lettered it: it never becomes recallable.

    Raised for ``wait=True`` retains as soon as the dead letter is seen; the message
    says why and where the dead letter is (``cogsub dlq show <that position>``).
    """

    error_type = "rejected"


class RejectedInputError(RejectedError, InvalidInputError):
    """Ingestion found the memory invalid, or could not process it (HTTP 422)."""


class RejectedConflictError(RejectedError, ConflictError):
    """The memory's id is archived with other content (HTTP 409)."""


class ServerError(CogsubError):
    """The server failed in a way it did not classify (HTTP 500)."""
