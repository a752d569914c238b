"""`ga fake-llm`, `ga sessions ...`, and the turn-by-turn display `ga run` and `ga chat` share.

Modules that load the agent loop (worker.agent: the tools, playwright) or the scripted server (~25 ms)
are imported inside the command that runs them, so that `ga --help` does not pay for them.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional

import typer
from rich.prompt import Prompt

from cli.kit import console, emit_json, err_console, fail, settings
from configs import Settings
from worker.models import ModelConfigError, resolve_model

commands = typer.Typer()
sessions_app = typer.Typer(no_args_is_help=True, help="Sessions of `ga run` and `ga chat`: list them; continue one "
                                                      "with `ga chat --resume ID` or `ga run --continue ID`.")


@sessions_app.command("list")
def sessions_list(ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print JSON"),
                  everything: bool = typer.Option(False, "--all", help="Also sessions whose first turn got no reply")) -> None:
    """The sessions with a completed turn, the latest activity first: first task, turns, cost, last activity."""
    from worker.chat import sessions_table  # the agent loop: see the module's docstring
    from worker.conversations import list_sessions

    rows = list_sessions(settings(ctx), everything)
    if as_json:
        emit_json([row.model_dump() for row in rows])
    elif rows:
        console.print(sessions_table(rows))
    else:
        hidden = len(list_sessions(settings(ctx))) if not everything else 0
        console.print("no sessions yet: `ga run \"TASK\"` or `ga chat` starts one"
                      + (f" ({hidden} without a reply: `ga sessions list --all`)" if hidden else ""), highlight=False)


@commands.command("fake-llm")
def fake_llm(
    ctx: typer.Context,
    script: Path = typer.Option(..., "--script", help="Script YAML (format: worker/scripted/script.py)"),
    port: int = typer.Option(8765, help="Port on 127.0.0.1 (0: any free port)"),
    log: Optional[Path] = typer.Option(None, "--log", help="Append every request received to this JSONL file"),
) -> None:
    """Serve the scripted OpenAI-compatible model on 127.0.0.1 until Ctrl-C."""
    from worker.scripted import ScriptedServer, ScriptError  # see the module's docstring

    try:
        server = ScriptedServer(script, port=port, log_path=log, keep=0)
        url = server.start()
    except ScriptError as exc:
        fail(str(exc))
    except OSError as exc:
        fail(f"cannot listen on 127.0.0.1:{port} ({exc.strerror}); pass another --port")
    try:  # the line inside: a Ctrl-C that follows it at once (a script that waits for it) is a clean stop too
        console.print(f"scripted model at {url}: use --model scripted@{url} (Ctrl-C stops)", highlight=False,
                      soft_wrap=True)
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


def check_model(model: Optional[str], current: Settings, needed_by: str = "") -> None:
    """--model (or worker.model) names a usable model, or one line says why not."""
    try:
        resolve_model(model, current)
    except ModelConfigError as exc:
        fail(f"{needed_by}{exc}")


def preflight_run(model: Optional[str], continue_session: Optional[str], current: Settings) -> None:
    """`ga run`'s pre-flight, as a fan-out's: the model (`model`, else the continued session's, else the
    configured one) resolves and its endpoint answers, or one line says why not and nothing starts."""
    from orchestrator.preflight import invalid_url, probe, unreachable
    from worker.conversations import SessionError, find

    try:
        name = model or (find(current, continue_session).model if continue_session else None)
        config = resolve_model(name, current)
    except (ModelConfigError, SessionError) as exc:
        fail(str(exc))
    try:
        reason = probe(config.base_url)
    except ValueError as exc:
        fail(invalid_url(config.name, config.base_url, exc))
    if reason:
        fail(unreachable(config.name, config.base_url, reason))


def text_stream() -> Any:
    from worker.chat import TextStream  # the agent loop: see the module's docstring

    return TextStream(sys.stdout.write, sys.stdout.flush)


def turn_printer(stream: Any) -> Any:
    """The on_turn callback: a tool line, after ending any text the model streamed."""
    def show(event: dict) -> None:
        if stream is not None:
            stream.close()
        show_turn(event)
    return show


def show_turn(event: dict) -> None:
    """One line on stderr per turn: progress, not the result."""
    mark = "[green]ok[/]" if event["ok"] else "[red]error[/]"
    err_console.print(f"[dim]t{event['turn']:<3}[/] [bold]{event['tool']}[/] {event['arguments'][:60]!r} -> {mark} "
                  f"{event['result_chars']:,} chars · {event['tokens']:,} tokens", highlight=False)


def ask_person(question: str, candidates: list[str]) -> str:
    return Prompt.ask(question, choices=candidates or None, console=console)
