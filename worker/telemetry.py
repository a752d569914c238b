"""OpenTelemetry traces: on when `telemetry.otlp_endpoint` is set (needs the `ga[otel]` extra).

Spans follow the OpenTelemetry semantic conventions for generative AI:

    run <name>                 a fan-out, in its driver
      invoke_agent ga          one task attempt (Worker.run), in a worker process
        chat <model>           one model call: tokens in / out / cached, finish reason
        execute_tool <name>    one tool call; a nested fan-out in its code_run joins here

Processes hand the trace on as a W3C traceparent in the environment (TRACEPARENT): the driver puts
the run's into every job, and code_run children get the current tool call's. Prompts, completions
and tool arguments and results go on spans only with `telemetry.capture_content: true`, always
through the logs' secret redaction. With no endpoint every function here is a pass-through.
"""
from __future__ import annotations

import functools
import json
import os
import threading
from contextlib import contextmanager
from contextvars import Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Optional, Protocol

import structlog

from configs.logs import redact_text

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, SpanKind, Status, Tracer
    from opentelemetry.util.types import AttributeValue

    from configs import Settings
    from worker.model import ChatMessage, Model, Reply, ToolCall, ToolSchema
    from worker.modelconfig import ModelConfig
    from worker.record import TaskRecord
    from worker.types import ToolResult
    from worker.usage import Usage

log = structlog.get_logger("ga.telemetry")
CONTENT_CHARS = 8000  # of each captured content attribute
_lock = threading.Lock()


class _Otel(Protocol):
    """What this module calls of worker/otel.py (the module itself is one)."""

    def provider(self, service_name: str, endpoint: str) -> TracerProvider: ...
    def in_span(self) -> bool: ...
    def context_of(self, traceparent: str) -> Context: ...
    def span_kind(self, client: bool) -> SpanKind: ...
    def attach(self, traceparent: str) -> Token[Context]: ...
    def detach(self, token: Token[Context]) -> None: ...
    def error(self, text: str) -> Status: ...
    def current_traceparent(self) -> Optional[str]: ...


@dataclass
class _State:
    endpoint: Optional[str] = None
    capture: bool = False
    provider: Optional[TracerProvider] = None
    tracer: Optional[Tracer] = None
    warned: bool = False
    otel: Optional[_Otel] = None  # worker/otel.py once a tracer is set up (every other function runs only after that)


_state = _State()


def tracer(settings: Settings) -> Optional[Tracer]:
    """The tracer for `settings.telemetry`, set up once per process and endpoint; None when off."""
    config = getattr(settings, "telemetry", None)
    endpoint = getattr(config, "otlp_endpoint", None)
    if not endpoint or config is None:
        return None
    with _lock:
        _state.capture = bool(config.capture_content)
        if _state.endpoint == endpoint:
            return _state.tracer
        try:
            from worker import otel  # optional: OpenTelemetry, the `ga[otel]` extra, only with an endpoint
        except ImportError:
            if not _state.warned:
                log.warning("telemetry_unavailable", endpoint=endpoint,
                            fix="telemetry.otlp_endpoint is set but OpenTelemetry is not installed: pip install 'ga[otel]'")
                _state.warned = True
            return None
        provider = otel.provider(config.service_name, endpoint)
        if _state.provider is not None:
            _state.provider.shutdown()
        _state.endpoint, _state.provider, _state.otel = endpoint, provider, otel
        _state.tracer = provider.get_tracer("ga")
        return _state.tracer


@contextmanager
def span(settings: Settings, name: str, *, client: bool = False, parent: Optional[str] = None,
         attributes: Optional[Mapping[str, AttributeValue]] = None) -> Iterator[Optional[Span]]:
    """A span named `name`, the child of the current one, else of `parent` (a traceparent), else of the
    TRACEPARENT in the environment; yields None when telemetry is off."""
    active, otel = tracer(settings), _state.otel
    if active is None or otel is None:
        yield None
        return
    context = None
    if not otel.in_span():
        carrier = parent or os.environ.get("TRACEPARENT")
        context = otel.context_of(carrier) if carrier else None
    with active.start_as_current_span(name, context=context, kind=otel.span_kind(client),
                                      attributes=_clean(attributes or {})) as current:
        yield current


@contextmanager
def joined(traceparent: Optional[str]) -> Iterator[None]:
    """Spans started inside are children of `traceparent` (a span of another thread, handed over as text)."""
    otel = _state.otel
    if not traceparent or _state.tracer is None or otel is None:
        yield
        return
    token = otel.attach(traceparent)
    try:
        yield
    finally:
        otel.detach(token)


def annotate(current: Optional[Span], attributes: Mapping[str, AttributeValue], error: str = "") -> None:
    """Set attributes (and an error status) on a span from `span()`; nothing when it is None."""
    if current is None:
        return
    current.set_attributes(_clean(attributes))
    if error and _state.otel is not None:
        current.set_status(_state.otel.error(redact_text(error)[:300]))


def content(settings: Settings, value: object) -> Optional[str]:
    """`value` as a redacted, bounded JSON string when content capture is on, else None."""
    if not getattr(getattr(settings, "telemetry", None), "capture_content", False):
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return redact_text(text)[:CONTENT_CHARS]


def child_env() -> dict[str, str]:
    """TRACEPARENT of the current span and the telemetry settings, for a child process (empty when no span
    is recording)."""
    otel = _state.otel
    if _state.tracer is None or otel is None or _state.endpoint is None:
        return {}
    traceparent = otel.current_traceparent() if otel.in_span() else None
    if traceparent is None:
        return {}
    # the child exports where this process does (a nested fan-out loads its settings from the environment)
    return {"TRACEPARENT": traceparent, "GA_TELEMETRY__OTLP_ENDPOINT": _state.endpoint,
            "GA_TELEMETRY__CAPTURE_CONTENT": "true" if _state.capture else "false"}


def flush() -> None:
    """Export what is buffered now (a worker process may be killed at any time after a task)."""
    if _state.provider is not None:
        _state.provider.force_flush(timeout_millis=5000)


# ---- the worker's spans ----

class TracedWorker(Protocol):
    """What the worker's spans read of the loop (worker.agent.Worker)."""

    @property
    def settings(self) -> Settings: ...
    @property
    def env(self) -> dict[str, str]: ...
    @property
    def task_id(self) -> str: ...
    @property
    def task(self) -> str: ...
    @property
    def model(self) -> Model: ...



def traced_agent(run: Callable[[], TaskRecord], worker: TracedWorker) -> Callable[[], TaskRecord]:
    """A worker's run() as an `invoke_agent` span, joined to the job's trace through the worker's env; `run` itself
    when telemetry is off (like traced_model, decided once per worker)."""
    if tracer(worker.settings) is None:
        return run

    @functools.wraps(run)
    def wrapper() -> TaskRecord:
        with span(worker.settings, "invoke_agent ga", parent=worker.env.get("TRACEPARENT"), attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "ga", "gen_ai.agent.id": worker.task_id,
                "gen_ai.request.model": model_name(worker.model),
                "gen_ai.input.messages": content(worker.settings, worker.task)}) as current:
            result = run()
            annotate(current, {"ga.task.status": result.status, "ga.task.turns": result.turns,
                               **usage_attributes(result.usage),
                               "gen_ai.output.messages": content(worker.settings, result.answer)},
                     error="" if result.status == "succeeded" else f"{result.status}: {result.reason}")
        flush()
        return result

    return wrapper


def traced_tool_calls(dispatch: Callable[[ToolCall, int], tuple[ToolResult, bool]], settings: Settings,
                      ) -> Callable[[ToolCall, int], tuple[ToolResult, bool]]:
    """A worker's dispatch(call, turn) with every call an `execute_tool` span; `dispatch` itself when telemetry
    is off (like traced_model, decided once per worker)."""
    if tracer(settings) is None:
        return dispatch

    @functools.wraps(dispatch)
    def wrapper(call: ToolCall, turn: int) -> tuple[ToolResult, bool]:
        with span(settings, f"execute_tool {call.name}", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name, "gen_ai.tool.call.id": call.id,
                "gen_ai.tool.type": "function", "ga.turn": turn,
                "gen_ai.tool.call.arguments": content(settings, call.arguments)}) as current:
            result, well_formed = dispatch(call, turn)
            annotate(current, {"ga.tool.ok": result.ok, "ga.tool.output_chars": len(result.output),
                               "gen_ai.tool.call.result": content(settings, result.output)},
                     error="" if result.ok else result.output.splitlines()[0] if result.output else "failed")
        return result, well_formed

    return wrapper


class TracedModel:
    """A Model whose every chat is a `chat <model>` client span with its token usage."""

    def __init__(self, inner: Model, settings: Settings):
        self.inner, self.settings = inner, settings

    @property
    def config(self) -> Optional[ModelConfig]:
        return self.inner.config

    def chat(self, messages: list[ChatMessage], tools: list[ToolSchema]) -> Reply:
        name = model_name(self.inner)
        with span(self.settings, f"chat {name}", client=True, attributes={
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": name,
                "gen_ai.input.messages": content(self.settings, messages)}) as current:
            reply = self.inner.chat(messages, tools)
            annotate(current, {**usage_attributes(reply.usage), "gen_ai.response.model": name,
                               "gen_ai.response.finish_reasons": ["tool_calls" if reply.tool_calls else "stop"],
                               "ga.latency_seconds": round(reply.latency, 4),
                               "gen_ai.output.messages": content(self.settings, [reply.message])})
        return reply


def traced_model(model: Model, settings: Settings) -> Model:
    return TracedModel(model, settings) if tracer(settings) is not None else model


def model_name(model: Model) -> str:
    config = model.config
    return str(config.model or config.name) if config is not None else ""


def usage_attributes(usage: Usage) -> dict[str, float]:
    return {"gen_ai.usage.input_tokens": usage.prompt, "gen_ai.usage.output_tokens": usage.completion,
            "gen_ai.usage.cache_read.input_tokens": usage.cached, "ga.cost_usd": usage.cost}


def _clean(attributes: Mapping[str, AttributeValue]) -> dict[str, AttributeValue]:
    return {k: v for k, v in attributes.items() if v is not None}
