"""Logging and tracing setup shared by every process."""

from cogsub.telemetry.logging import LogFormat, configure_logging

__all__ = ["LogFormat", "configure_logging"]
