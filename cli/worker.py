"""`ga fake-llm`, `ga sessions ...`, and the turn-by-turn display `ga run` and `ga chat` share.

Modules that load the agent loop (worker.agent: the tools, playwright) or the scripted server (~25 ms)
are imported inside the command that runs them, so that `ga --help` does not pay for them.
"""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path
from typing import Any, Optional

import typer
from rich.live import Live
from rich.prompt import Prompt
from rich.text import Text

from cli.kit import console, emit_json, err_console, fail, settings
from configs import Settings
from orchestrator.views.progress import doing
from worker.modelconfig import ModelConfigError, resolve_model

commands = typer.Typer()
sessions_app = typer.Typer(no_args_is_help=True, help="Sessions of `ga run` and `ga chat`: list them, show one; "
                                                      "continue one with `ga chat --resume ID` or `ga run --continue "
                                                      "ID`.")


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


@sessions_app.command("show")
def sessions_show(ctx: typer.Context,
                  session_id: str = typer.Argument(..., help="A session id (see `ga sessions list`), a unique prefix "
                                                   "of one, or `last`"),
                  as_json: bool = typer.Option(False, "--json", help="Print the session's record as JSON")) -> None:
    """A session's transcript: what was asked at each exchange and every turn that answered it."""
    from orchestrator.views.conversation import print_session
    from worker.conversations import SessionError, find

    try:
        session = find(settings(ctx), session_id)
    except SessionError as exc:
        fail(str(exc))
    if as_json:
        emit_json(session.model_dump())
    else:
        print_session(console, session)


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
    """`ga run`'s and `ga chat`'s pre-flight, as a fan-out's: the model (`model`, else the continued session's, else
    the configured one) resolves and its endpoint answers, or one line says why not and nothing starts."""
    from worker.conversations import SessionError, find

    try:
        name = model or (find(current, continue_session).model if continue_session else None)
    except SessionError as exc:
        fail(str(exc))
    problem = model_problem(name, current)
    if problem:
        fail(problem)


def model_problem(name: Optional[str], current: Settings) -> str:
    """Why the model `name` (None: the configured one) cannot be used: it does not resolve, or its endpoint does not
    answer; "" when it can."""
    from orchestrator.preflight import invalid_url, probe, unreachable

    try:
        config = resolve_model(name, current)
    except ModelConfigError as exc:
        return str(exc)
    try:
        reason = probe(config.base_url)
    except ValueError as exc:
        return invalid_url(config.name, config.base_url, exc)
    return unreachable(config.name, config.base_url, reason) if reason else ""


def text_stream() -> Any:
    from worker.chat import TextStream  # the agent loop: see the module's docstring

    return TextStream(sys.stdout.write, sys.stdout.flush)


class ToolClock:
    """While a tool runs: its name and the seconds it has run, redrawn in place on stderr (as the fan-out's live
    view shows them), and gone when its turn line is printed. Only on a terminal: elsewhere it draws nothing."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream  # the model's streamed text: its line is ended before the clock draws
        self.live: Optional[Live] = None
        self.event: dict[str, Any] = {}
        self.lock = threading.Lock()

    def start(self, event: dict) -> None:
        """on_tool_start: a tool call begins."""
        if not err_console.is_terminal:
            return
        with self.lock:
            self._stop()
            if self.stream is not None:
                self.stream.close()
            self.event = {**event, "since": time.time()}
            self.live = Live(console=err_console, get_renderable=self._render, refresh_per_second=2, transient=True,
                             redirect_stdout=False, redirect_stderr=False)
            self.live.start()

    def stop(self) -> None:
        with self.lock:
            self._stop()

    def _stop(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None

    def _render(self) -> Text:
        return Text(f"t{self.event.get('turn', 0):<3} {doing(self.event, time.time())}", style="dim")


def turn_printer(stream: Any, clock: Optional[ToolClock] = None) -> Any:
    """The on_turn callback: a tool line, after ending any text the model streamed (and the tool's clock)."""
    def show(event: dict) -> None:
        if clock is not None:
            clock.stop()
        if stream is not None:
            stream.close()
        show_turn(event)
    return show


def show_turn(event: dict) -> None:
    """One line on stderr per tool call: progress, not the result; its arguments cut to fit the width."""
    mark, style = ("ok", "green") if event["ok"] else ("error", "red")
    head = f"t{event['turn']:<3} {event['tool']} "
    spent = f" {event['result_chars']:,} chars · {event['tokens']:,} tokens"
    room = min(62, err_console.width - 1 - len(head) - len(f" -> {mark}{spent}"))  # one column spare
    shown = repr(" ".join(str(event["arguments"]).split()))
    shown = "" if room < 10 else (shown if len(shown) <= room else shown[:room - 1] + "…") + " "
    err_console.print(Text.assemble((f"t{event['turn']:<3} ", "dim"), (event["tool"], "bold"), f" {shown}-> ",
                                    (mark, style), spent), highlight=False, soft_wrap=True)


def ask_person(question: str, candidates: list[str]) -> str:
    return Prompt.ask(question, choices=candidates or None, console=console)
