"""structlog set-up, once per process, and where log lines go.

- stderr: warnings and errors, one readable line each (`warning: llm.retry model=... attempt=2`); info and
  debug lines too with `--log-level info` (or debug). Results go to stdout, never log lines.
- a log file while a run or a session's exchange lasts (`log_file(handle, run)`, opened by worker.runlog: runs/<id>/ga.log):
  info and up (debug with --log-level debug), one readable line each with its time. Which run a line belongs to is
  structlog's context (`run=`, bound by log_file; `task=`, bound where a task's thread starts, `in_context` carrying
  both into threads): a run's file gets its own run's lines and the lines of no run (the process's own: a shared
  governor, the reaper), never another run's, when two runs share a process. A task's info and debug lines stay off
  stderr (they would break into the live view and into the output a parent's code_run reads); its file keeps them.
- `--log-json FILE`: the same lines as the log file, as JSON.
Secrets are masked in all of them.
"""
from __future__ import annotations

import contextvars
import functools
import json
import logging
import re
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, NoReturn, Optional, TextIO, TypeVar

import structlog
from structlog.typing import EventDict, WrappedLogger

T = TypeVar("T")

SECRET_KEY = re.compile(r"(api[_-]?key|token(?!s)|secret|password|authorization|bearer)", re.I)
SECRET_VALUE = re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,}|Bearer\s+[A-Za-z0-9._\-]{8,})")
LOG_FILE = "ga.log"  # the name of a run's or session's log file


def redact_text(text: str) -> str:
    """Mask anything shaped like an API key or bearer token."""
    return SECRET_VALUE.sub("[redacted]", text)


def _redact(value: object, key: str = "") -> object:
    if key and SECRET_KEY.search(key) and isinstance(value, str):
        return "[redacted]"
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: _redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact(v) for v in value]
    return value


def redact_processor(_logger: WrappedLogger, _name: str, event: EventDict) -> EventDict:
    return {k: _redact(v, k) for k, v in event.items()}


def render_line(event: Mapping[str, object], with_time: bool = False) -> str:
    """`level: event key=value ...` on one line (a traceback keeps only its last line; the JSON file has it whole)."""
    fields = {k: v for k, v in event.items() if k not in ("event", "level", "timestamp")}
    if "exception" in fields:
        fields["exception"] = str(fields["exception"]).strip().splitlines()[-1]
    parts = [f"{k}={_value(v)}" for k, v in fields.items() if v is not None]
    head = (f"{event.get('timestamp', '')} " if with_time else "") + f"{event.get('level', 'info')}: {event.get('event', '')}"
    return " ".join([head, *parts])


def _value(value: object) -> str:
    if not isinstance(value, str):
        return json.dumps(value, default=str, ensure_ascii=False)
    text = " ".join(value.split()) if "\n" in value else value
    return json.dumps(text, ensure_ascii=False) if (not text or any(c in text for c in ' "=')) else text


@dataclass
class _Sink:
    kind: str  # stderr, json (--log-json) or file (log_file)
    level: int
    stream: Callable[[], TextIO]  # looked up at each write: test runners swap and close sys.stderr
    render: Callable[[EventDict], str]
    run: Optional[str] = None  # a file's run: it takes only that run's lines and those of no run

    def takes(self, level: int, context: Mapping[str, object]) -> bool:
        if level < self.level:
            return False
        if self.kind == "file":
            return context.get("run") in (None, self.run)
        return self.kind != "stderr" or level >= logging.WARNING or not context.get("task")


class _Router:
    """The last processor: writes each event to every sink that takes it (its level, its run), then drops it."""

    def __init__(self) -> None:
        self.sinks: list[_Sink] = []
        self.lock = threading.Lock()

    def __call__(self, _logger: WrappedLogger, _name: str, event: EventDict) -> NoReturn:
        level = logging.getLevelName(str(event.get("level", "info")).upper())
        level = level if isinstance(level, int) else logging.INFO
        context = structlog.contextvars.get_contextvars()  # the caller's: the event's run= may name another run
        with self.lock:
            for sink in self.sinks:
                if sink.takes(level, context):
                    stream = sink.stream()
                    stream.write(sink.render(event) + "\n")
                    stream.flush()
        raise structlog.DropEvent


_router = _Router()
_detail = logging.INFO  # the level of log files (and --log-json): info, or debug when asked for


def setup_logging(level: str = "warning", json_file: Optional[Path] = None) -> None:
    """Configure structlog for this process: `level` and up to stderr; `json_file` gets info and up as JSON."""
    global _detail
    stderr_level = getattr(logging, level.upper())
    _detail = min(logging.INFO, stderr_level)
    sinks = [_Sink("stderr", stderr_level, lambda: sys.stderr, render_line),
             *(sink for sink in _router.sinks if sink.kind == "file")]  # a log_file block outlives a set-up again
    if json_file:
        path = Path(json_file).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = open(path, "a", encoding="utf-8")  # open for the rest of the process
        sinks.append(_Sink("json", _detail, lambda: handle,
                           lambda event: json.dumps(event, default=str, ensure_ascii=False)))
    with _router.lock:
        _router.sinks = sinks
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            redact_processor,
            _router,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_detail),
        logger_factory=structlog.ReturnLoggerFactory(),  # the router writes; nothing reaches the logger
        cache_logger_on_first_use=False,
    )


@contextmanager
def log_file(handle: TextIO, run: str) -> Iterator[None]:
    """While the block runs, the lines of `run` (bound in this context) and of no run, info and up, are also appended
    to `handle` (a run's or a session's ga.log, opened by worker.runlog). Logging is set up with the defaults first
    if nobody did."""
    if not structlog.is_configured():
        setup_logging()
    sink = _Sink("file", _detail, lambda: handle, lambda event: render_line(event, with_time=True), run=run)
    with _router.lock:
        _router.sinks.append(sink)
    try:
        with structlog.contextvars.bound_contextvars(run=run):
            yield
    finally:
        with _router.lock:
            _router.sinks.remove(sink)


def in_context(target: Callable[..., T]) -> Callable[..., T]:
    """`target` to run in a copy of the caller's context (its run and task): a new thread starts with an empty one."""
    return functools.partial(contextvars.copy_context().run, target)
