"""OpenTelemetry's side of worker/telemetry.py, the one module that imports it: loaded only when
`telemetry.otlp_endpoint` is set, and then an ImportError says the `ga[otel]` extra is missing.
"""
from __future__ import annotations

from contextvars import Token
from typing import Optional

from opentelemetry import context, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator


def provider(service_name: str, endpoint: str) -> TracerProvider:
    """A tracer provider exporting to the OTLP/HTTP collector at `endpoint` in batches."""
    made = TracerProvider(resource=Resource.create({"service.name": service_name}))
    made.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint.rstrip("/") + "/v1/traces")))
    return made


def in_span() -> bool:
    """Whether a span is current in this thread."""
    return trace.get_current_span().get_span_context().is_valid


def context_of(traceparent: str) -> context.Context:
    """The context a W3C traceparent names: spans started in it are its children."""
    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


def span_kind(client: bool) -> trace.SpanKind:
    return trace.SpanKind.CLIENT if client else trace.SpanKind.INTERNAL


def attach(traceparent: str) -> Token[context.Context]:
    """Make `traceparent` the current context; the token `detach` takes."""
    return context.attach(context_of(traceparent))


def detach(token: Token[context.Context]) -> None:
    context.detach(token)


def error(text: str) -> Status:
    return Status(StatusCode.ERROR, text)


def current_traceparent() -> Optional[str]:
    """The current span's W3C traceparent, None when it has none."""
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    return carrier.get("traceparent")
