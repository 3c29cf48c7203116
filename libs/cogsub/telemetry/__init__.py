"""Logging and tracing setup shared by every process."""

from cogsub.telemetry.logging import LogFormat, configure_logging
from cogsub.telemetry.tracing import (
    TRACER_NAME,
    configure_tracing,
    context_from_headers,
    headers_with_context,
    tracer,
)

__all__ = [
    "TRACER_NAME",
    "LogFormat",
    "configure_logging",
    "configure_tracing",
    "context_from_headers",
    "headers_with_context",
    "tracer",
]
