"""structlog set-up: readable lines on a terminal, JSON lines to a file when asked, secrets masked."""
from __future__ import annotations

import logging
import re
import sys
from pathlib import Path
from typing import Any, Optional

import structlog

SECRET_KEY = re.compile(r"(api[_-]?key|token(?!s)|secret|password|authorization|bearer)", re.I)
SECRET_VALUE = re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,}|Bearer\s+[A-Za-z0-9._\-]{8,})")


def redact_text(text: str) -> str:
    """Mask anything shaped like an API key or bearer token."""
    return SECRET_VALUE.sub("[redacted]", text)


def _redact(value: Any, key: str = "") -> Any:
    if key and SECRET_KEY.search(key) and isinstance(value, str):
        return "[redacted]"
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {k: _redact(v, str(k)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redact(v) for v in value]
    return value


def redact_processor(_logger: Any, _name: str, event: dict) -> dict:
    return {k: _redact(v, k) for k, v in event.items()}


class _Tee:
    """Writes every rendered line to the console and, as JSON, to a file."""

    def __init__(self, console: Any, json_file: Optional[Path]):
        self.console = console
        self.json = structlog.processors.JSONRenderer()
        self.file = open(json_file, "a", encoding="utf-8") if json_file else None

    def __call__(self, logger: Any, name: str, event: dict) -> str:
        if self.file:
            self.file.write(self.json(logger, name, dict(event)) + "\n")
            self.file.flush()
        return self.console(logger, name, event)


class _CurrentStderr:
    """Whatever sys.stderr is at write time (test runners swap and close it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


def setup_logging(level: str = "info", json_file: Optional[Path] = None) -> None:
    """Configure structlog once per process; stderr so stdout stays for results."""
    json_file = Path(json_file).expanduser() if json_file else None
    if json_file:
        json_file.parent.mkdir(parents=True, exist_ok=True)
    console = (
        structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
        if sys.stderr.isatty()
        else structlog.processors.JSONRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact_processor,
            _Tee(console, json_file),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(getattr(logging, level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=_CurrentStderr()),
        cache_logger_on_first_use=False,
    )
