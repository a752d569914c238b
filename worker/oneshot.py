"""`ga run`: one worker on one task (or a follow-up in a session), with a run directory like a one-task fan-out."""
from __future__ import annotations

import secrets
import shutil
import threading
import time
from pathlib import Path
from typing import Callable, Optional

from configs import Settings
from configs.logs import in_context
from memory_shared import MemoryStore
from worker import conversations, sessionfiles
from worker.agent import Worker
from worker.record import NestedUsage, TaskRecord
from worker.taskspec import Runtime


class Abandoned(Exception):
    """A second Ctrl-C while the task stopped: the process leaves at once; the session (its id) is kept."""

    def __init__(self, session_id: str):
        super().__init__(session_id)
        self.session_id = session_id


def new_id(prefix: str) -> str:
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def open_store(settings: Settings) -> MemoryStore:
    return MemoryStore(settings.memory_root, create=True, l1_max_lines=settings.memory.l1_max_lines,
                       l1_max_chars=settings.memory.l1_max_chars)


def run_one(task: str, settings: Settings, *, model_name: Optional[str] = None, workdir: Optional[Path] = None,
            interactive: bool = False, ask: Optional[Callable[[str, list[str]], str]] = None,
            on_turn: Optional[Callable[[dict], None]] = None, continue_session: Optional[str] = None,
            on_text: Optional[Callable[[str], None]] = None, on_tool_start: Optional[Callable[[dict], None]] = None,
            on_interrupt: Optional[Callable[[], None]] = None, origin: str = "run") -> TaskRecord:
    """Run `task` in `workdir` (default: the current directory) as a new session (history under
    <runs_dir>/<id>/), or as a follow-up in the session `continue_session` (an id, a prefix of one, or
    `last`: its directory and model, unless `model_name` names another). `origin` says who asked: `run` (a
    person), or the trigger (`reflect`, `schedule`) whose sessions `last` never means.

    With `on_interrupt`, Ctrl-C stops the task instead of the process: the worker is cancelled, `on_interrupt()`
    is told, and the record (stop: cancelled) is kept in the session like any other."""
    session = None
    if continue_session is not None:
        session = sessionfiles.find(settings, continue_session)
        if model_name:
            session = session.model_copy(update={"model": model_name})
    runtime = Runtime(store=open_store(settings), interactive=interactive, ask=ask, on_turn=on_turn,
                      on_tool_start=on_tool_start)
    session, worker = open_exchange(settings, task, session, runtime, model_name=model_name, workdir=workdir,
                                    on_text=on_text, origin=origin)
    with sessionfiles.session_log(session):
        try:
            result = run_interruptibly(worker, on_interrupt) if on_interrupt else worker.run()
        except KeyboardInterrupt:
            raise Abandoned(session.id) from None
    with_nested_usage(result, worker)
    sessionfiles.record(settings, session, result)
    worker.history.write_beside("answer.md", result.answer + "\n")
    return result


def run_interruptibly(worker: Worker, on_interrupt: Callable[[], None], patient: bool = False) -> TaskRecord:
    """The worker's run in a thread of its own, so that Ctrl-C cancels the task (its processes killed) rather than
    the process; a second Ctrl-C while it stops is let through (`patient`: it only cancels again)."""
    outcome: dict[str, TaskRecord] = {}
    done = threading.Event()  # not Thread.join: a Ctrl-C inside join can make the thread look finished

    def work() -> None:
        try:
            outcome["result"] = worker.run()
        finally:
            done.set()

    threading.Thread(target=in_context(work), daemon=True, name="ga-exchange").start()
    interrupted = False
    while not done.is_set():
        try:
            done.wait(0.2)
        except KeyboardInterrupt:
            if interrupted and not patient:
                raise
            interrupted = True
            on_interrupt()
            worker.cancel()
    if "result" not in outcome:
        raise RuntimeError("the worker ended without a result")  # it raised: its traceback is on stderr
    return outcome["result"]


def with_nested_usage(result: TaskRecord, worker: Worker) -> TaskRecord:
    """The record with what the fan-outs its code_run started spent (run by this process, through the gateway):
    one count of tokens, as a fan-out's task record has it."""
    account = worker.account
    if account.runs:
        result.nested_usage = NestedUsage.model_validate({**account.nested.model_dump(), "runs": account.runs})
        result.usage_with_nested = result.usage + account.nested
    return result


def open_exchange(settings: Settings, task: str, session: Optional[sessionfiles.Session], runtime: Runtime, *,
                  model_name: Optional[str] = None, workdir: Optional[Path] = None, session_id: Optional[str] = None,
                  origin: str = "run", on_text: Optional[Callable[[str], None]] = None,
                  ) -> tuple[sessionfiles.Session, Worker]:
    """The session (a new one when None, its first task `task`, its id `session_id` or a new one) and the worker
    for its next exchange, served by `runtime`, the session saved so that it can go on even if this process dies.
    When the worker cannot be made (a bad model, home or store) nothing ran: a new session leaves nothing behind,
    an old one is unchanged."""
    new = session is None
    if session is None:
        session = start_session(settings, task, model_name, workdir, session_id, origin)
    try:
        worker = conversations.prepare(settings, task, session, runtime, resume=not new, on_text=on_text)
    except BaseException:
        if new:
            shutil.rmtree(session.run_dir, ignore_errors=True)
        raise
    sessionfiles.save(settings, session)
    return session, worker


def start_session(settings: Settings, task: str, model_name: Optional[str], workdir: Optional[Path],
                  session_id: Optional[str] = None, origin: str = "run") -> sessionfiles.Session:
    """A new session (not saved yet: open_exchange saves it once its worker could be made)."""
    session_id = session_id or new_id(origin if origin in sessionfiles.PERSON else "run")
    history = Path(settings.fanout.runs_dir).resolve() / session_id / "tasks" / session_id / "history.jsonl"
    return sessionfiles.new_session(settings, session_id, task, model_name or settings.worker.model,
                                     (workdir or Path.cwd()).resolve(), history, origin)
