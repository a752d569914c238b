"""What `ga run` and `ga chat` share while they work: the model checked before they start, each turn shown as a
line (with the running tool's clock on a terminal), and the person asked a question.
"""
from __future__ import annotations

import sys
import threading
import time
from typing import Callable, Optional

from rich.live import Live
from rich.prompt import Prompt
from rich.text import Text

from cli.kit import console, err_console, fail
from configs import Settings
from orchestrator.executor import TaskProgress
from orchestrator.preflight import invalid_url, probe, unreachable
from orchestrator.views.printable import printable
from orchestrator.views.progress import doing
from worker.chatview import TextStream
from worker.modelconfig import ModelConfigError, resolve_model
from worker.sessionfiles import SessionError, find


def check_model(model: Optional[str], current: Settings, needed_by: str = "") -> None:
    """--model (or worker.model) names a usable model, or one line says why not."""
    try:
        resolve_model(model, current)
    except ModelConfigError as exc:
        fail(f"{needed_by}{exc}")


def preflight_run(model: Optional[str], continue_session: Optional[str], current: Settings) -> None:
    """`ga run`'s and `ga chat`'s pre-flight, as a fan-out's: the model (`model`, else the continued session's, else
    the configured one) resolves and its endpoint answers, or one line says why not and nothing starts."""
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
    try:
        config = resolve_model(name, current)
    except ModelConfigError as exc:
        return str(exc)
    try:
        reason = probe(config.base_url)
    except ValueError as exc:
        return invalid_url(config.name, config.base_url, exc)
    return unreachable(config.name, config.base_url, reason) if reason else ""


def text_stream() -> TextStream:
    return TextStream(lambda text: sys.stdout.write(printable(text)), sys.stdout.flush)  # shown, never obeyed


class ToolClock:
    """While a tool runs: its name and the seconds it has run, redrawn in place on stderr (as the fan-out's live
    view shows them), and gone when its turn line is printed. Only on a terminal: elsewhere it draws nothing."""

    def __init__(self, stream: Optional[TextStream] = None) -> None:
        self.stream = stream  # the model's streamed text: its line is ended before the clock draws
        self.live: Optional[Live] = None
        self.event: TaskProgress = {}
        self.lock = threading.Lock()

    def start(self, event: dict) -> None:
        """on_tool_start: a tool call begins."""
        if not err_console.is_terminal:
            return
        with self.lock:
            self._stop()
            if self.stream is not None:
                self.stream.close()
            self.event = TaskProgress(turn=event.get("turn", 0), tool=event.get("tool", ""), since=time.time())
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


def turn_printer(stream: Optional[TextStream], clock: Optional[ToolClock] = None) -> Callable[[dict], None]:
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
