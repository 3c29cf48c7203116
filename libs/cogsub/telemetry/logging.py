"""structlog configuration: human-readable on a terminal, JSON lines otherwise.

``configure_logging`` is for cogsub's own processes (the CLI, benchmarks).
``configure_library_logging`` is for cogsub inside someone else's program (the
embedded SDK): warnings and errors on stderr unless the program configured
structlog itself, and never anything on the program's standard output.
"""

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
    use_console = format == "console" or (format == "auto" and _seen_on_a_terminal(out))
    renderer: structlog.types.Processor = (
        structlog.dev.ConsoleRenderer(
            colors=format == "console" or _isatty(out),  # no escape codes into a file
            exception_formatter=_traceback_formatter(),
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


def configure_library_logging() -> None:
    """Warnings and errors on stderr, nothing else, unless the program configured structlog.

    structlog's own default writes every event, info included, to standard
    output, where it mixes into the program's output. A program that wants more
    configures structlog itself before the first embedded client; that is kept.
    Unlike ``configure_logging`` this leaves the program's ``logging`` setup alone.
    """
    if structlog.is_configured():
        return
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            add_trace_ids,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.dev.ConsoleRenderer(colors=False, exception_formatter=_traceback_formatter()),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        logger_factory=_factory(None),
        cache_logger_on_first_use=False,
    )


def _seen_on_a_terminal(out: object) -> bool:
    """Whether a person reads ``out`` on a terminal.

    Standard error counts as seen when either standard stream is a terminal:
    launchers and IDE consoles often capture stderr through a pipe that ends on
    the same screen as the terminal stdout.
    """
    if _isatty(out):
        return True
    return out is sys.stderr and _isatty(sys.stdout)


def _isatty(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    return callable(isatty) and bool(isatty())


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
