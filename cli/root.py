"""The root of the `ga` command: its global flags, the order of its commands, the one place a user-caused
error becomes a line. Each command group lives in its own module of this package (see cli/__init__.py), loaded
only when its command runs (or shows its own --help): `ga --help` lists the commands from COMMANDS and loads none.
"""
from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any, NamedTuple, Optional, Union

import typer
import typer.core
import typer.main

from cli.errors import describe_user_error
from cli.kit import Invocation, fail_lines, settings
from configs.logs import setup_logging
from configs.version import ga_version
from orchestrator.triggers.activity import record_activity


class Command(NamedTuple):
    """Where a command is defined (the module and its typer.Typer), and its line in `ga --help`."""

    module: str
    typer_app: str  # a module's `commands` holds top-level commands; any other Typer is a group of its own
    summary: str    # the first paragraph of its help (tests/cli/test_lazy_imports.py checks they agree)


# The commands in the order `ga --help` lists them.
COMMANDS = {
    "run": Command("cli.run", "commands",
                   "Run one worker on TASK and show each turn live (every run is a session that can go on)."),
    "chat": Command("cli.chat", "commands", "A conversation with the parent agent: follow-ups, /help, /runs, /cost, "
                    "/model, /resume, /quit; Ctrl-C stops\na turn. The model (and its endpoint) is checked before "
                    "the first message."),
    "fake-llm": Command("cli.fakellm", "commands",
                        "Serve the scripted OpenAI-compatible model on 127.0.0.1 until Ctrl-C."),
    "fanout": Command("cli.work", "commands", "Run every task of FILE on a pool of workers (in this process, or on "
                      "Ray), then its reduce step."),
    "replay": Command("cli.replay", "commands", "Run RUN's tasks again from their histories with zero model calls; exit "
                      "0 when every request and tool\noutput is as recorded. With --from TURN, fork one task onto a "
                      "live model from that turn."),
    "reflect": Command("cli.triggers", "commands", "Call TRIGGER's check() every INTERVAL seconds and hand each task "
                       "it returns to a worker (Ctrl-C stops)."),
    "schedule": Command("cli.triggers", "commands", "Run the jobs of JOBS_FILE at their times of day or intervals; a "
                        "missed run is caught up once within max_delay."),
    "explore": Command("cli.explore", "commands", "Grow the skill tree: one exploration cycle (--once), or cycles "
                       "while the machine is idle (--when-idle)."),
    "memory": Command("cli.memory", "memory_app", "The shared memory tier: show, log, review, accept, reject, revert, "
                      "diff, verify, repair, gc, archive."),
    "sessions": Command("cli.sessions", "sessions_app", "Sessions of `ga run` and `ga chat`: list them, show one; "
                        "continue one with `ga chat --resume ID` or `ga run --continue ID`."),
    "runs": Command("cli.runs", "runs_app", "Fan-out runs: list, show, report, tail; tell or stop a running task."),
    "skills": Command("cli.skills", "skills_app", "The skill tree: show, plan, report, feedback (weight adaptation)."),
}


def load_command(name: str) -> Union[typer.core.TyperCommand, typer.core.TyperGroup]:
    """The command `name` as its module defines it; the module is imported now."""
    where = COMMANDS[name]
    group = typer.main.get_group(getattr(importlib.import_module(where.module), where.typer_app))
    if where.typer_app != "commands":
        group.name = name
        return group
    command = group.commands[name]
    assert isinstance(command, (typer.core.TyperCommand, typer.core.TyperGroup))  # what typer makes of a function
    return command


class _Root(typer.core.TyperGroup):
    """The root group. Until a command runs it holds stand-ins that only name the command and summarize it (what
    `ga --help` and a mistyped command's suggestion read); the command about to run is loaded in its place. It is
    also the one place a user-caused error (cli/errors.py) becomes `error:` lines and exit 2."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for name, command in COMMANDS.items():
            self.add_command(typer.core.TyperCommand(name, help=command.summary))

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[
            Optional[str], Union[typer.core.TyperCommand, typer.core.TyperGroup, None], list[str]]:
        name, _, rest = super().resolve_command(ctx, args)  # the stand-in, or a usage error that suggests a name
        return name, (load_command(name) if name else None), rest

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
        return list(COMMANDS)


app = typer.Typer(cls=_Root, no_args_is_help=True, add_completion=False,
                  help="Run GenericAgent-style LLM workers in parallel.")


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
