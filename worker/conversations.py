"""Sessions: every `ga run` and `ga chat` conversation, kept so that it can go on later.

A session is one worker history (history.jsonl, in the run directory `ga run` creates) plus a
record in <GA_HOME>/sessions/<id>.json (worker/sessionfiles.py): its first task, model, working directory, turns,
usage and last activity. A follow-up continues the same history: the request the model saw last, its answer,
then the new user message, with the same context control. A session whose first turn failed before
any reply (no model, a bad one, Ctrl-C) has nothing to continue: its next message starts it afresh.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Callable, Optional

from configs import Settings
from memory_shared.fsutil import Unsafe
from memory_shared.jsontypes import JSONObject
from worker.agent import Worker
from worker.history import read_text, replay
from worker.model import ChatMessage, LLMClient
from worker.model.messages import is_messages
from worker.modelconfig import nested_model_env, resolve_model
from worker.sessionfiles import Session, SessionError
from worker.taskspec import Runtime, TaskSpec


def continuation(session: Session, follow_up: str) -> Optional[tuple[list[ChatMessage], list[ChatMessage]]]:
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
    request, received = requests[-1], [last["received"]]
    if not is_messages(request) or not is_messages(received):
        raise SessionError(f"session {session.id}: its history {path} holds messages that are not chat messages; "
                           "start a new session")
    reply = received[0]
    results = {r.get("id"): r for r in last.get("tool_results") or []}
    answered: list[ChatMessage] = [{"role": "tool", "tool_call_id": call["id"],
                                    "content": str(results[call["id"]].get("output", "")) if call["id"] in results
                                    else "not run: the task stopped"}
                                   for call in reply.get("tool_calls") or []]  # a turn stopped mid-way leaves no call unanswered
    return request, [reply, *answered, {"role": "user", "content": follow_up}]


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


def _last_record(path: Path) -> Optional[JSONObject]:
    last = None
    for line in read_text(path).splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if "sent" in record:
            last = record
    return last
