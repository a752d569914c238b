"""Sessions on disk: the record of every `ga run` and `ga chat` conversation in <GA_HOME>/sessions/<id>.json (its
first task, model, working directory, turns, usage and last activity), found by id, prefix or `last`.

What it takes to go on with one (its history continued by a new worker) is worker/conversations.py; this module
loads no agent loop, so that `ga sessions list` and the checks before `ga run --continue` stay cheap.
"""
from __future__ import annotations

import time
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Optional

from pydantic import BaseModel

from configs import Settings
from configs.idprefix import by_prefix
from memory_shared.fsutil import Unsafe, atomic_replace
from worker.history import read_text
from worker.record import TaskRecord
from worker.runlog import run_log
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
    usage: dict[str, object] = {}  # what its exchanges spent, the fan-outs they started included
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


def session_log(session: Session) -> AbstractContextManager[Optional[Path]]:
    """While an exchange runs: the process's log lines go to the session's ga.log too."""
    return run_log(session.run_dir)
