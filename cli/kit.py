"""What every `ga` command module shares: the consoles, one-line errors, JSON output, this invocation's settings.

The root callback (cli.root.main) puts an `Invocation` in Typer's context (ctx.obj, inherited by each command's
context); `settings(ctx)` layers its global flags under a command's own flags, so nothing global survives
from one invocation to the next.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn, Optional

import typer
from rich.console import Console
from rich.text import Text

from configs.settings import ConfigError, Settings, load_settings
from orchestrator.views.columns import Paragraph
from orchestrator.views.printable import guard, printable

console = guard(Console())  # text a model wrote is shown, never obeyed (orchestrator/views/printable.py)
err_console = guard(Console(stderr=True))
NOW_HELP = "Pretend it is this ISO time (for tests and replays)"


@dataclass
class Invocation:
    """The global flags of one `ga` invocation (`--log-level`, `--log-json`, `--home`) as settings overrides."""

    overrides: dict[str, object] = field(default_factory=dict)


def invocation(ctx: typer.Context) -> Invocation:
    """The Invocation the root callback stored in ctx.obj (an empty one for a command run on its own)."""
    return ctx.obj if isinstance(ctx.obj, Invocation) else Invocation()


def say(text: str | Text, style: str = "", to: Optional[Console] = None) -> None:
    """A summary line or a hint, broken at the width between its ` · ` parts and words: ids and commands whole."""
    (to or console).print(Paragraph(text, style))


def fail(message: str, code: int = 2) -> NoReturn:
    """A user-caused error: one line, no traceback."""
    err_console.print(f"[red]error:[/red] {message}", highlight=False, markup=True, soft_wrap=True)  # never wrapped
    raise typer.Exit(code)


def fail_lines(text: str, code: int = 2) -> NoReturn:
    """Every problem on its own `error:` line (a tasks file can have several)."""
    for line in [line for line in str(text).splitlines() if line.strip()] or ["unknown error"]:
        err_console.print("[red]error:[/red]", Text(line), highlight=False, soft_wrap=True)  # never wrapped
    raise typer.Exit(code)


def settings(ctx: typer.Context, **flags: object) -> Settings:
    """This invocation's settings: defaults, config files, environment, global flags, then `flags`."""
    try:
        return load_settings({**invocation(ctx).overrides, **flags})
    except ConfigError as exc:
        fail(str(exc))


def emit_json(data: object, indent: Optional[int] = 2) -> None:
    sys.stdout.write(json.dumps(data, indent=indent, default=str) + "\n")


def emit_json_line(record: dict[str, object]) -> None:
    """One record as one JSON line, flushed (the daemons' --json output)."""
    sys.stdout.write(json.dumps(record, default=str) + "\n")
    sys.stdout.flush()


def must_be_dir(flag: str, path: Optional[Path]) -> None:
    if path is not None and not path.is_dir():
        fail(f"{flag} {path}: not a directory; create it or pass an existing one")


def write_text(text: str) -> None:
    """A file's text (memory, a diff) to stdout: as it is into a pipe or file, printable() on a terminal."""
    sys.stdout.write(printable(text) if sys.stdout.isatty() else text)
