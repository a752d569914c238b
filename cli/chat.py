"""`ga chat`: a conversation with the parent agent (worker/chat.py), each turn shown live.

It loads the agent loop (worker.chat) at the top: cli/root.py imports this module only when `ga chat` runs or
shows its help.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cli.kit import console, fail, settings
from cli.turns import ToolClock, model_problem, preflight_run, text_stream, turn_printer
from orchestrator.views.runview import runs_of_session
from worker.chat import Chat
from worker.modelconfig import model_override
from worker.sessionfiles import SessionError, find

commands = typer.Typer()


@commands.command()
def chat(
    ctx: typer.Context,
    resume: Optional[str] = typer.Option(None, "--resume", help="Continue a session: its id (or a prefix of it), "
                                         "or `last` (the latest with a completed turn)"),
    model: Optional[str] = typer.Option(None, help="A name from configs/models.yaml or scripted:FILE"),
    no_preflight: bool = typer.Option(False, "--no-preflight", help="Skip the GET /models probe of the endpoint"),
) -> None:
    """A conversation with the parent agent: follow-ups, /help, /runs, /cost, /model, /resume, /quit; Ctrl-C stops
    a turn. The model (and its endpoint) is checked before the first message."""
    current = settings(ctx, **{"worker.model": model})
    try:
        session = find(current, resume, answered=True) if resume else None
    except SessionError as exc:
        fail(str(exc))
    model = model_override(model)
    if not no_preflight:
        preflight_run(model or (session.model if session else None), None, current)
    stream = text_stream()
    clock = ToolClock(stream)
    try:
        Chat(current, console, session, model, show_turn=turn_printer(stream, clock), stream=stream,
             list_runs=lambda session_id: [dict(row) for row in runs_of_session(Path(current.fanout.runs_dir), session_id)],
             show_tool=clock.start, check_model=lambda name: model_problem(name, current)).loop()
    finally:
        clock.stop()
