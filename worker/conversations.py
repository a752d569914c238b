"""Sessions: every `ga run` and `ga chat` conversation, kept so that it can go on later.

A session is one worker history (history.jsonl, in the run directory `ga run` creates) plus a
record in <GA_HOME>/sessions/<id>.json: its first task, model, working directory, turns, usage and
last activity. A follow-up continues the same history: the request the model saw last, its answer,
then the new user message, with the same context control. A session whose first turn failed before
any reply (no model, a bad one, Ctrl-C) has nothing to continue: its next message starts it afresh.
"""
from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Optional

from pydantic import BaseModel

from configs import Settings
from configs.idprefix import by_prefix
from memory_shared.fsutil import Unsafe, atomic_replace
from worker.agent import Worker
from worker.history import read_text, replay
from worker.model import LLMClient
from worker.modelconfig import nested_model_env, resolve_model
from worker.record import TaskRecord
from worker.runlog import run_log
from worker.taskspec import Runtime, TaskSpec
from worker.usage import Usage

PERSON = ("run", "chat")  # the origins of a person's sessions: `last` means the latest of these


class SessionError(ValueError):
    """No such session, or its history cannot be continued; one line."""


class Session(BaseModel):
    id: str
    created: float
    updated: float
    first_task: str
    model: Optional[str] = None
    workdir: str
    history: str  # history.jsonl of the session's worker
    turns: int = 0
    replies: Optional[int] = None  # model replies recorded in the history (None: a record from before it was kept)
    exchanges: int = 0  # tasks and follow-ups asked
    status: str = ""
    last_answer: str = ""
    usage: dict[str, Any] = {}  # what its exchanges spent, the fan-outs they started included
    origin: str = "run"  # who asked: `run` or `chat` (a person), or the trigger (`reflect`, `schedule`)

    @property
    def history_path(self) -> Path:
        return Path(self.history)

    @property
    def run_dir(self) -> Path:
        """runs/<id>/: the history is tasks/<id>/history.jsonl in it, the log file ga.log."""
        return self.history_path.parents[2]

    @property
    def answered(self) -> bool:
        """At least one of the model's replies is in the history (a completed turn)."""
        return (self.replies if self.replies is not None else self.turns) > 0


def sessions_dir(settings: Settings) -> Path:
    return settings.home_dir / "sessions"


def new_session(settings: Settings, session_id: str, task: str, model: Optional[str], workdir: Path,
                history: Path, origin: str = "run") -> Session:
    now = time.time()
    if model and model.startswith("scripted:"):  # a script file relative to here must be found from anywhere later
        model = "scripted:" + str(Path(model[len("scripted:"):]).expanduser().resolve())
    return Session(id=session_id, created=now, updated=now, first_task=task, model=model, workdir=str(workdir),
                   history=str(history), origin=origin)


def save(settings: Settings, session: Session) -> None:
    folder = sessions_dir(settings)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_replace(folder / f"{session.id}.json", session.model_dump_json(indent=1).encode("utf-8"))


def list_sessions(settings: Settings, everything: bool = True) -> list[Session]:
    """The sessions, the latest activity first: every one, or (`everything` False) those with a completed turn."""
    found = []
    for path in sessions_dir(settings).glob("*.json"):
        try:
            found.append(Session.model_validate_json(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue  # a record being replaced, or not ours: skip it
    return sorted((s for s in found if everything or s.answered), key=lambda s: s.updated, reverse=True)


def find(settings: Settings, key: Optional[str], answered: bool = False) -> Session:
    """The session named `key` (an id or a unique prefix of one), or, when `key` is None or `last`, the person's
    latest (`ga run` or `ga chat`, never a trigger's; with `answered`: the latest with a completed turn)."""
    sessions = list_sessions(settings)
    if key in (None, "last"):
        mine = [s for s in sessions if s.origin in PERSON]
        latest = [s for s in mine if s.answered] if answered else mine
        if not latest:
            some = " with a completed turn" if answered and mine else ""
            raise SessionError(f"no sessions{some} in {sessions_dir(settings)}; start one with `ga run \"TASK\"` "
                               "or `ga chat`")
        return latest[0]
    try:
        found = by_prefix(key, [s.id for s in sessions], "session")
    except ValueError as exc:  # a prefix of several
        raise SessionError(str(exc)) from None
    if found is None:
        raise SessionError(f"no session named '{key}'; see `ga sessions list --all`")
    return next(s for s in sessions if s.id == found)


def continuation(session: Session, follow_up: str) -> Optional[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """What a follow-up continues from: the last request the model saw, and the messages after it (its
    reply, the results of any calls in it, the new user message). None when the model never replied
    (the first turn failed): the follow-up then starts the session afresh."""
    path = session.history_path
    try:
        last = _last_record(path) if path.is_file() else None
        if last is None or not last.get("received"):
            if session.answered and not path.is_file():  # it had replies: starting afresh would lose them silently
                raise SessionError(f"session {session.id}: its history {path} is gone; start a new session")
            return None
        requests = replay(path)
    except Unsafe as exc:  # the session's directory is writable by its own scripts
        raise SessionError(f"session {session.id}: {exc}") from None
    reply = last["received"]
    results = {r.get("id"): r for r in last.get("tool_results") or []}
    answered = [{"role": "tool", "tool_call_id": call["id"],
                 "content": str(results[call["id"]].get("output", "")) if call["id"] in results
                 else "not run: the task stopped"}
                for call in reply.get("tool_calls") or []]  # a turn stopped mid-way leaves no call unanswered
    return requests[-1], [reply, *answered, {"role": "user", "content": follow_up}]


def prepare(settings: Settings, task: str, session: Session, runtime: Runtime, *, resume: bool,
            on_text: Optional[Callable[[str], None]] = None) -> Worker:
    """The worker for the session's next exchange (its first task, or a follow-up when `resume`), served by
    `runtime` with the session's model (unless `runtime` brings one) and environment; `on_text` streams the
    model's text to it as it arrives."""
    continued = continuation(session, task) if resume else None
    previous, new = continued or ([], [])
    model = runtime.model or LLMClient(resolve_model(session.model, settings))
    if on_text is not None and isinstance(model, LLMClient):
        model.on_text = on_text
    env = {**nested_model_env(session.model or settings.worker.model, model.config), **runtime.env,
           "GA_SESSION": session.id}
    spec = TaskSpec(task, task_id=session.id, workdir=Path(session.workdir), settings=settings,
                    history_path=session.history_path, model_name=session.model,
                    messages=previous + new if continued is not None else None)
    try:
        worker = Worker(spec, replace(runtime, model=model, env=env))
    except Unsafe as exc:  # its history's place holds what the session's scripts put there
        raise SessionError(f"session {session.id}: {exc}") from None
    if continued is not None:
        worker.history.resume(previous)
    return worker


def record(settings: Settings, session: Session, result: TaskRecord) -> Session:
    """The session after an exchange: counts, usage (its fan-outs' included) and the answer, saved."""
    usage = Usage.from_dict(session.usage) + result.spent if session.usage else result.spent
    try:
        replies = sum(1 for line in read_text(session.history_path).splitlines() if line.strip())
    except FileNotFoundError:
        replies = 0
    except Unsafe:  # its scripts swapped the history for a link: the next exchange refuses it, in one line
        replies = session.replies
    updated = session.model_copy(update={
        "updated": time.time(), "turns": session.turns + result.turns, "exchanges": session.exchanges + 1,
        "replies": replies, "status": result.status, "last_answer": result.answer[:2000], "usage": usage.to_dict()})
    save(settings, updated)
    return updated


def session_log(session: Session) -> Any:
    """While an exchange runs: the process's log lines go to the session's ga.log too."""
    return run_log(session.run_dir)


def _last_record(path: Path) -> Optional[dict[str, Any]]:
    last = None
    for line in read_text(path).splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if "sent" in record:
            last = record
    return last
