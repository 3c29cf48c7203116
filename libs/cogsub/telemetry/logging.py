"""structlog configuration: human-readable on a terminal, JSON lines otherwise."""

from __future__ import annotations

import importlib.util
import logging
import sys
from collections.abc import Callable
from typing import Literal

import structlog

from cogsub.telemetry.tracing import add_trace_ids

LogFormat = Literal["auto", "console", "json"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}


def configure_logging(
    *, format: LogFormat = "auto", level: str = "info", stream: object = None
) -> None:
    """Route structlog (and stdlib logging) to ``stream`` (default stderr)."""
    out = stream if stream is not None else sys.stderr
    use_console = format == "console" or (
        format == "auto" and hasattr(out, "isatty") and out.isatty()
    )
    renderer: structlog.types.Processor = (
        structlog.dev.ConsoleRenderer(
            colors=use_console and format != "json", exception_formatter=_traceback_formatter()
        )
        if use_console
        else structlog.processors.JSONRenderer()
    )
    numeric = _LEVELS.get(level, logging.ERROR if level == "error" else logging.INFO)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            add_trace_ids,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            # The console renderer formats exceptions itself and warns if they arrive pre-formatted.
            *([] if use_console else [structlog.processors.format_exc_info]),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=_factory(stream),
        cache_logger_on_first_use=False,
    )
    logging.basicConfig(level=max(numeric, logging.WARNING), stream=out)  # type: ignore[arg-type]


def _traceback_formatter() -> structlog.typing.ExceptionRenderer:
    """Tracebacks without local variables.

    rich's formatter prints every frame's locals by default, and frames hold
    secrets: httpx's ``post`` frame keeps the request headers (a bearer key) as a
    plain dict. Only the frames and the exception chain's messages are shown.
    """
    if importlib.util.find_spec("rich") is not None:
        return structlog.dev.RichTracebackFormatter(show_locals=False)
    return structlog.dev.plain_traceback


def _factory(stream: object) -> Callable[..., structlog.PrintLogger]:
    """Loggers that write to ``stream``, or to whatever ``sys.stderr`` is at the time."""

    def make(*_: object) -> structlog.PrintLogger:
        return structlog.PrintLogger(file=stream if stream is not None else sys.stderr)  # type: ignore[arg-type]

    return make
