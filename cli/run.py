"""`ga run`: one worker on TASK, each turn shown live; every run is a session that can go on (`ga run --continue`,
`ga chat --resume`). A user job (orchestrator.triggers.activity) that `ga explore --when-idle` waits for.

It loads the agent loop (worker.oneshot: the tools, the sandbox) at the top: cli/root.py imports this module only
when `ga run` runs or shows its help.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Optional

import typer
from rich.text import Text

from cli.kit import console, emit_json, err_console, fail, invocation, must_be_dir, say, settings
from cli.turns import ToolClock, ask_person, preflight_run, text_stream, turn_printer
from orchestrator.exitcodes import DONE, INTERRUPTED, NOT_DONE, task_exit
from orchestrator.triggers.activity import user_job
from orchestrator.views.outcome import session_workers
from orchestrator.views.progress import status_style
from worker.modelconfig import ModelConfigError, model_override
from worker.oneshot import Abandoned, run_one
from worker.record import TaskRecord
from worker.sessionfiles import SessionError

commands = typer.Typer()


@commands.command()
def run(
    ctx: typer.Context,
    task: str = typer.Argument(..., help="What the agent should do"),
    model: Optional[str] = typer.Option(None, help="A name from configs/models.yaml or scripted:FILE"),
    max_turns: Optional[int] = typer.Option(None, help="Stop after this many turns"),
    workdir: Optional[Path] = typer.Option(None, help="The worker's directory (default: current directory)"),
    continue_session: Optional[str] = typer.Option(None, "--continue", help="A session id (see `ga sessions list`), "
                                                   "a prefix of it, or `last`: TASK is a follow-up in that conversation"),
    as_json: bool = typer.Option(False, "--json", help="Print the result as JSON"),
    no_preflight: bool = typer.Option(False, "--no-preflight", help="Skip the GET /models probe of the endpoint"),
) -> None:
    """Run one worker on TASK and show each turn live (every run is a session that can go on).

    stdout: the answer (or the JSON result); on a terminal the model's text streams there as it comes. stderr: each
    turn and the outcome when it is a terminal; piped, only a line when the task did not succeed."""
    current = settings(ctx, **{"worker.model": model, "worker.max_turns": max_turns})
    must_be_dir("--workdir", workdir)
    model = model_override(model)
    if not no_preflight:
        preflight_run(model, continue_session, current)
    interactive = sys.stdin.isatty() and not as_json
    stream = text_stream() if sys.stdout.isatty() and not as_json else None
    show_turns = sys.stderr.isatty() and not as_json
    clock = ToolClock(stream) if show_turns else None
    started = time.time()
    try:
        with user_job(current.home_dir, "run"):  # `ga explore --when-idle` never starts while this runs
            result = run_one(task, current, model_name=model, workdir=workdir, interactive=interactive, ask=ask_person,
                             on_turn=turn_printer(stream, clock) if show_turns else None,
                             continue_session=continue_session, on_text=stream,
                             on_tool_start=clock.start if clock else None,
                             on_interrupt=lambda: say("stopping… (Ctrl-C again leaves at once)", "yellow", err_console))
    except (ModelConfigError, SessionError) as exc:
        fail(str(exc))
    except Abandoned as left:
        say(f"left at once · session {left.session_id} · continue it: {continue_command(ctx, left.session_id)}",
            "yellow", err_console)
        raise typer.Exit(INTERRUPTED) from None
    finally:
        if clock is not None:
            clock.stop()
    code = task_exit(result, session_workers(Path(current.fanout.runs_dir), result.task_id, started))
    if as_json:
        emit_json({**result.run_json(), "usage": result.spent.model_dump(),
                   **({"nested_usage": result.nested_usage.model_dump()} if result.nested_usage else {}),
                   "exit_code": code})
        raise typer.Exit(code)
    streamed = stream is not None and stream.close()
    if not (streamed and result.status in ("succeeded", "unverified")):  # a streamed answer is on the screen already
        console.print(result.answer, markup=False, highlight=False, soft_wrap=True)
    if code == INTERRUPTED:
        say(f"stopped after {_turns(result.turns)}, {result.spent.total:,} tokens · session {result.task_id}", "yellow",
            err_console)
        say(f"continue it: {continue_command(ctx, result.task_id)}", to=err_console)
    elif show_turns or code != DONE or result.status != "succeeded":  # piped: a label that is not plain success
        say(outcome_line(result, code), to=err_console)
    raise typer.Exit(code)


def outcome_line(result: TaskRecord, code: int) -> Text:
    """`succeeded after 2 turns, 12,927 tokens (3,533 its own, 9,394 in 1 fan-out) · session ID`: the label, the
    one count of tokens, why it is not done."""
    spent, nested = result.spent, result.nested_usage
    split = (f" ({result.usage.total:,} its own, {spent.total - result.usage.total:,} in {nested.runs} "
             f"fan-out{'s' if nested.runs > 1 else ''})" if nested else "")
    why = f" ({result.reason})" if result.reason else ""
    if code == NOT_DONE and result.status in ("succeeded", "unverified") and not result.reason:
        why = " (none of the workers it started got done)"
    return Text.assemble((result.status, status_style(result.status)), f" after {_turns(result.turns)}, "
                         f"{spent.total:,} tokens{split}{why} · session {result.task_id}")


def _turns(count: int) -> str:
    return f"{count} turn{'' if count == 1 else 's'}"


def continue_command(ctx: typer.Context, session_id: str) -> str:
    """The command that goes on with a session, with the flags that find it again (`--home`)."""
    home = invocation(ctx).overrides.get("home")
    return f"ga {f'--home {home} ' if home else ''}run --continue {session_id} \"go on\""
