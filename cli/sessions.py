"""`ga sessions ...`: the sessions of `ga run` and `ga chat`, listed and shown."""
from __future__ import annotations

import typer

from cli.kit import console, emit_json, fail, settings
from orchestrator.views.conversation import print_session
from worker.chatview import sessions_table
from worker.sessionfiles import SessionError, find, list_sessions

sessions_app = typer.Typer(no_args_is_help=True, help="Sessions of `ga run` and `ga chat`: list them, show one; "
                                                      "continue one with `ga chat --resume ID` or `ga run --continue "
                                                      "ID`.")


@sessions_app.command("list")
def sessions_list(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON"),
                  everything: bool = typer.Option(False, "--all", help="Also sessions whose first turn got no reply")) -> None:
    """The sessions with a completed turn, the latest activity first: first task, turns, cost, last activity."""
    rows = list_sessions(settings(ctx), everything)
    if as_json:
        emit_json([row.model_dump() for row in rows])
    elif rows:
        console.print(sessions_table(rows))
    else:
        hidden = len(list_sessions(settings(ctx))) if not everything else 0
        console.print("no sessions yet: `ga run \"TASK\"` or `ga chat` starts one"
                      + (f" ({hidden} without a reply: `ga sessions list --all`)" if hidden else ""), highlight=False)


@sessions_app.command("show")
def sessions_show(ctx: typer.Context,
                  session_id: str = typer.Argument(..., help="A session id (see `ga sessions list`), a unique prefix "
                                                   "of one, or `last`"),
                  as_json: bool = typer.Option(False, "--json", help="Print the session's record as JSON")) -> None:
    """A session's transcript: what was asked at each exchange and every turn that answered it."""
    try:
        session = find(settings(ctx), session_id)
    except SessionError as exc:
        fail(str(exc))
    if as_json:
        emit_json(session.model_dump())
    else:
        print_session(console, session)
