"""Pin the public names of ``cogsub.sdk``, and keep the services out of its import."""

from __future__ import annotations

import subprocess
import sys

import cogsub.sdk


def test_public_names_are_pinned_and_sorted() -> None:
    assert cogsub.sdk.__all__ == [
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
    assert cogsub.sdk.__all__ == sorted(cogsub.sdk.__all__)
    assert all(hasattr(cogsub.sdk, name) for name in cogsub.sdk.__all__)


def test_importing_the_sdk_loads_no_service_module() -> None:
    probe = (
        "import sys, cogsub.sdk, cogsub.sdk.embedded, cogsub.sdk.client; "
        "print(sorted(m for m in sys.modules if m.split('.')[:2] != ['cogsub', 'core'] "
        "and m.startswith('cogsub.') and not m.startswith('cogsub.sdk')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=30, check=True
    )
    assert done.stdout.strip() == "[]"
