"""`ga chat`: a conversation with the parent agent on a terminal.

Each message is a task for the same worker loop and tools as `ga run`; a follow-up continues the
session's history (conversations.py), so the agent sees what it said and did before. Line editing and
history come from readline. Ctrl-C stops the current turn, not the session; Ctrl-D or /quit leaves.
"""
from __future__ import annotations

import atexit
from pathlib import Path
from typing import Callable, Optional, Protocol

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from configs import Settings
from worker import sessionfiles
from worker.chatview import TextStream, sessions_table
from worker.oneshot import new_id, open_exchange, open_store, run_interruptibly, with_nested_usage
from worker.record import Stop
from worker.taskspec import Runtime
from worker.usage import Usage

try:
    import readline  # line editing and a history, where this Python has readline (optional)
except ImportError:
    readline = None

COMMANDS = (("/help", "these commands"), ("/cost", "tokens and cost so far, its fan-outs' included"),
            ("/runs", "the fan-outs this session started"), ("/model NAME", "switch the model"),
            ("/sessions", "the latest sessions"), ("/resume ID", "continue another session"),
            ("/quit", "leave (Ctrl-D too); Ctrl-C stops a turn, not the session"))
HINT = "/help lists the commands · Ctrl-C stops a turn · /quit or Ctrl-D leaves"


class Chat:
    def __init__(self, settings: Settings, console: Console, session: Optional[sessionfiles.Session] = None,
                 model: Optional[str] = None, show_turn: Optional[Callable[[dict], None]] = None,
                 list_runs: Optional[Callable[[str], list[dict[str, object]]]] = None,
                 stream: Optional["TextStream"] = None, show_tool: Optional[Callable[[dict], None]] = None,
                 check_model: Optional[Callable[[str], str]] = None):
        """list_runs(session_id): the fan-outs started from a session (the orchestrator's, handed in by the CLI);
        stream: where the model's text goes as it arrives; show_tool: told when a tool call starts;
        check_model(name): why a model cannot be used ("" when it can), asked before /model switches."""
        self.settings, self.console, self.session, self.show_turn = settings, console, session, show_turn
        self.list_runs, self.stream, self.show_tool, self.check_model = list_runs, stream, show_tool, check_model
        self.model = model or (session.model if session else None)
        self.store = open_store(settings)
        self.new_id = new_id("chat")  # a new session's id, shown before its first message

    @property
    def session_id(self) -> str:
        return self.session.id if self.session else self.new_id

    def loop(self, read: Callable[[str], str] = input) -> None:
        _line_editing(self.settings.home_dir / "sessions" / "chat_history")
        where = f"session {self.session.id}" if self.session else f"session {self.new_id} (new)"
        self.console.print(f"ga chat · {where} · {self.model or self.settings.worker.model or 'default model'}",
                           highlight=False)
        self.console.print(f"[dim]{HINT}[/dim]", highlight=False)
        try:
            self._read_all(read)
        finally:
            self._farewell()

    def _read_all(self, read: Callable[[str], str]) -> None:
        while True:
            try:
                line = read("you> ").strip()
            except EOFError:
                self.console.print()
                return
            except KeyboardInterrupt:
                self.console.print()
                continue
            if not line:
                continue
            if line.startswith("/"):
                if self.command(line) == "quit":
                    return
                continue
            self.ask(line)

    def _farewell(self) -> None:
        """The way back, as the session is left (nothing when no message made one)."""
        if self.session is not None:
            self.console.print(f"continue it: ga chat --resume {self.session.id}", highlight=False, soft_wrap=True)

    def ask(self, text: str) -> None:
        """One exchange: run the worker on `text` in a thread; Ctrl-C cancels it. A first message that cannot
        start (no model, a bad one) leaves no session; one whose turn failed leaves a session the next message
        continues."""
        session = self.session.model_copy(update={"model": self.model or self.session.model}) if self.session else None
        try:
            runtime = Runtime(store=self.store, on_turn=self.show_turn, on_tool_start=self.show_tool)
            session, worker = open_exchange(self.settings, text, session, runtime, model_name=self.model,
                                            workdir=Path.cwd(), on_text=self.stream, session_id=self.new_id,
                                            origin="chat")
        except (sessionfiles.SessionError, ValueError) as exc:
            self.console.print(f"[red]error:[/red] {exc}", highlight=False)
            return
        self.session = session
        with sessionfiles.session_log(session):
            try:
                result = run_interruptibly(worker, lambda: self.console.print("[yellow]stopping this turn…[/yellow]"),
                                           patient=True)
            except RuntimeError:
                self.console.print("[red]the turn ended without a result[/red]")
                return
        with_nested_usage(result, worker)
        self.session = sessionfiles.record(self.settings, session, result)
        streamed = self.stream is not None and self.stream.close()
        if result.status in ("succeeded", "unverified"):
            if not streamed:
                self.console.print(result.answer, markup=False, highlight=False)
            if result.status == "unverified":  # an answer no successful tool run backs: say so, quietly
                self.console.print(Text(f"(unverified: {result.reason})", style="dim"))
        else:
            shown = "stopped" if result.stop == Stop.cancelled else f"{result.status}: {result.reason}"
            self.console.print(Text(shown, style="yellow"))
            if result.answer:
                self.console.print(result.answer, markup=False, highlight=False)

    def command(self, line: str) -> str:
        name, _, argument = line[1:].partition(" ")
        argument = argument.strip()
        if name in ("quit", "exit", "q"):
            return "quit"
        if name in ("help", "h", "?"):
            self._help()
        elif name == "cost":
            usage = Usage.from_dict(self.session.usage) if self.session and self.session.usage else Usage()
            self.console.print(f"{usage.total:,} tokens ({usage.prompt:,} in, {usage.cached:,} of them cached; "
                               f"{usage.completion:,} out) · ${usage.cost:.4f}", highlight=False)
        elif name == "model":
            self._switch_model(argument)
        elif name in ("resume", "sessions"):
            self._resume(argument) if name == "resume" and argument else self._list()
        elif name == "runs":
            self._runs()
        else:
            self.console.print(f"unknown command /{name}; /help lists the commands", highlight=False)
        return ""

    def _help(self) -> None:
        table = Table(box=None, show_header=False, pad_edge=False)
        table.add_column(no_wrap=True, style="bold")
        table.add_column()
        for command, what in COMMANDS:
            table.add_row(command, what)
        self.console.print(table)

    def _switch_model(self, name: str) -> None:
        problem = self.check_model(name) if name and self.check_model else ""
        if problem:
            self.console.print(f"[red]error:[/red] {escape(problem)}; the model stays {self.model}", highlight=False)
            return
        if name:
            self.model = name
        self.console.print(f"model: {self.model or self.settings.worker.model}", highlight=False)

    def _resume(self, key: str) -> None:
        try:
            self.session = sessionfiles.find(self.settings, key, answered=True)
        except sessionfiles.SessionError as exc:
            self.console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False)
            return
        self.model = self.session.model
        self.console.print(f"resumed session {self.session.id}: {self.session.first_task[:60]}", highlight=False)

    def _list(self) -> None:
        self.console.print(sessions_table(sessionfiles.list_sessions(self.settings, everything=False)[:20]))

    def _runs(self) -> None:
        rows = self.list_runs(self.session.id) if self.session and self.list_runs else []
        if not rows:
            self.console.print("no fan-outs started from this session yet", highlight=False)
        for row in rows:
            self.console.print(f"{row['run_id']}  {row['status']}  {row['finished']}/{row['tasks'] or '?'} finished, "
                               f"{row['failed']} failed", highlight=False)


def _line_editing(history_file: Path) -> None:
    """readline: arrow keys, editing and a persistent history of what was typed (where readline exists)."""
    if readline is None:
        return
    history_file.parent.mkdir(parents=True, exist_ok=True)
    try:
        readline.read_history_file(history_file)
    except OSError:
        pass
    editor = readline  # not None here; the lambda would see the module's global, unnarrowed
    atexit.register(lambda: _save_history(editor, history_file))


class _Readline(Protocol):
    """What is used of the readline module."""

    def set_history_length(self, length: int, /) -> None: ...
    def write_history_file(self, filename: str | bytes | Path | None = None, /) -> None: ...


def _save_history(readline: _Readline, path: Path) -> None:
    try:
        readline.set_history_length(1000)
        readline.write_history_file(path)
    except OSError:
        pass
