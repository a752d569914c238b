"""The root of the `ga` command: its global flags, the order of its commands, the one place a user-caused
error becomes a line. Each command group lives in its own module of this package (see cli/__init__.py).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Optional

import typer
import typer.core

from cli import explore, fakellm, triggers, work
from cli.errors import describe_user_error
from cli.kit import Invocation, fail_lines, settings
from cli.memory import memory_app
from cli.runs import runs_app
from cli.sessions import sessions_app
from cli.skills import skills_app
from configs.logs import setup_logging
from configs.version import ga_version
from orchestrator.triggers.activity import record_activity

# The order `ga --help` lists the commands in; a command missing here comes last.
ORDER = ("run", "chat", "fake-llm", "fanout", "replay", "reflect", "schedule", "explore", "memory", "sessions", "runs",
         "skills")


class _UserErrors(typer.core.TyperGroup):
    """The one place a user-caused error (cli/errors.py) becomes `error:` lines and exit 2."""

    # ctx: typer's own copy of click's Context, which typer does not export by name
    def invoke(self, ctx: Any) -> object:
        try:
            return super().invoke(ctx)
        except Exception as exc:
            text = None if os.environ.get("GA_TRACEBACK") else describe_user_error(exc)
            if text is None:
                raise
            fail_lines(text)

    def list_commands(self, ctx: Any) -> list[str]:
        names = super().list_commands(ctx)
        return sorted(names, key=lambda name: ORDER.index(name) if name in ORDER else len(ORDER))


app = typer.Typer(cls=_UserErrors, no_args_is_help=True, add_completion=False,
                  help="Run GenericAgent-style LLM workers in parallel.")
for group in (work.commands, fakellm.commands, triggers.commands, explore.commands):
    app.registered_commands += group.registered_commands  # older Typer drops a nameless add_typer
app.add_typer(memory_app, name="memory")
app.add_typer(sessions_app, name="sessions")
app.add_typer(runs_app, name="runs")
app.add_typer(skills_app, name="skills")


def show_version(value: bool) -> None:
    if value:
        typer.echo(f"ga {ga_version()}")
        raise typer.Exit()


@app.callback()
def main(
    ctx: typer.Context,
    log_level: Optional[str] = typer.Option(None, help="What stderr shows: warning (the default), info, debug or "
                                            "error; each run's ga.log gets info and up"),
    log_json: Optional[Path] = typer.Option(None, help="Also write the log lines (info and up) to this file as JSON"),
    home: Optional[Path] = typer.Option(None, help="GA home directory (memory, activity); default ~/.ga"),
    version: bool = typer.Option(False, "--version", is_eager=True, callback=show_version, help="Print ga's version"),
) -> None:
    ctx.obj = Invocation({"log.level": log_level, "log.json_file": log_json, "home": home})
    current = settings(ctx)
    setup_logging(current.log.level, current.log.json_file)
    record_activity(current.home_dir, ctx.invoked_subcommand)  # GA_HOME/activity: read by the idle test
