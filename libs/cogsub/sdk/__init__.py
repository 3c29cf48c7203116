"""The Python SDK of the memory API: ``MemoryClient`` and ``AsyncMemoryClient``.

Both speak HTTP to a running API, or run the whole embedded stack in this
process (``MemoryClient.embedded(data_dir)``), and return the core models.
Importing this package never imports the services.
"""

from cogsub.core.context import Answer, ContextBlock
from cogsub.core.errors import (
    AuthenticationError,
    NotConfiguredError,
    PermissionDeniedError,
    RejectedConflictError,
    RejectedError,
    RejectedInputError,
    ServerError,
)
from cogsub.core.memory import (
    ConsolidationReport,
    FeedbackResult,
    MemoryHit,
    MemoryRecord,
    RecallResponse,
    RetainContext,
    RetainResult,
    ScoreBreakdown,
)
from cogsub.sdk._base import ForgetBankResult, ForgetResult, ImportResult
from cogsub.sdk.async_client import AsyncMemoryClient
from cogsub.sdk.client import MemoryClient

__all__ = [
    "Answer",
    "AsyncMemoryClient",
    "AuthenticationError",
    "ConsolidationReport",
    "ContextBlock",
    "FeedbackResult",
    "ForgetBankResult",
    "ForgetResult",
    "ImportResult",
    "MemoryClient",
    "MemoryHit",
    "MemoryRecord",
    "NotConfiguredError",
    "PermissionDeniedError",
    "RecallResponse",
    "RejectedConflictError",
    "RejectedError",
    "RejectedInputError",
    "RetainContext",
    "RetainResult",
    "ScoreBreakdown",
    "ServerError",
]
