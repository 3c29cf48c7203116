"""OpenTelemetry setup and W3C trace-context propagation through record headers.

Without an SDK provider the OpenTelemetry API does nothing, so libraries and
services always create spans; only entrypoints call :func:`configure_tracing`.
Propagation lives here and only here: :func:`context_from_headers` on consume,
:func:`headers_with_context` on publish.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, MutableMapping

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from cogsub.core.headers import Headers

TRACER_NAME = "cogsub"
_PROPAGATOR = TraceContextTextMapPropagator()
_HEX = frozenset("0123456789abcdef")


def tracer() -> trace.Tracer:
    """The project's tracer (a no-op until a provider is configured)."""
    return trace.get_tracer(TRACER_NAME)


def configure_tracing(
    service_name: str, *, processor: SpanProcessor | None = None
) -> TracerProvider | None:
    """Install an SDK provider when ``OTEL_*`` variables ask for export (or a processor is given).

    The OTLP/HTTP exporter reads the standard variables itself
    (``OTEL_EXPORTER_OTLP_ENDPOINT``, ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, headers, timeout).
    """
    wants_export = os.environ.get("OTEL_TRACES_EXPORTER", "").lower() not in ("", "none") or any(
        os.environ.get(name)
        for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )
    if processor is None and not wants_export:
        return None
    name = os.environ.get("OTEL_SERVICE_NAME", service_name)
    provider = TracerProvider(resource=Resource.create({"service.name": name}))
    if processor is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter: SpanExporter = OTLPSpanExporter()
        processor = BatchSpanProcessor(exporter)
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return provider


class _HeaderCarrier(MutableMapping[str, str]):
    """Record headers seen as the text map the W3C propagator reads and writes."""

    def __init__(self, headers: Headers = ()) -> None:
        self.items_: dict[str, str] = {}
        for key, value in headers:
            if key.lower() in ("traceparent", "tracestate"):
                self.items_[key.lower()] = value.decode("latin-1")

    def __getitem__(self, key: str) -> str:
        return self.items_[key]

    def __setitem__(self, key: str, value: str) -> None:
        self.items_[key] = value

    def __delitem__(self, key: str) -> None:
        del self.items_[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.items_)

    def __len__(self) -> int:
        return len(self.items_)


def context_from_headers(
    headers: Headers, *, trace_id: str | None = None, span_id: str | None = None
) -> Context | None:
    """The producer's context: ``traceparent`` header first, else the event's own ids."""
    carrier = _HeaderCarrier(headers)
    if "traceparent" in carrier:
        extracted = _PROPAGATOR.extract(carrier)
        if trace.get_current_span(extracted).get_span_context().is_valid:
            return extracted
    if trace_id and span_id and _is_hex(trace_id, 32) and _is_hex(span_id, 16):
        parent = SpanContext(
            trace_id=int(trace_id, 16),
            span_id=int(span_id, 16),
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        return trace.set_span_in_context(NonRecordingSpan(parent))
    return None


def headers_with_context(headers: Headers = (), context: Context | None = None) -> Headers:
    """``headers`` plus ``traceparent``/``tracestate`` for ``context`` (default: current)."""
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=context)
    kept = tuple((k, v) for k, v in headers if k.lower() not in ("traceparent", "tracestate"))
    return kept + tuple((k, v.encode("latin-1")) for k, v in carrier.items())


def _is_hex(value: str, length: int) -> bool:
    lowered = value.lower()
    return len(lowered) == length and set(lowered) <= _HEX and set(lowered) != {"0"}


def add_trace_ids(_: object, __: str, event_dict: Mapping[str, object]) -> Mapping[str, object]:
    """structlog processor: the current span's trace_id and span_id on every line."""
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        return {
            **event_dict,
            "trace_id": format(context.trace_id, "032x"),
            "span_id": format(context.span_id, "016x"),
        }
    return event_dict
