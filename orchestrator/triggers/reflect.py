"""`ga reflect TRIGGER.py`: poll a user's check() and hand each task it returns to a worker.

A trigger file defines

    INTERVAL = 1800          # seconds between two check() calls (default 60)
    ONCE = False             # stop after the first task (default False)
    def check() -> str | None:
        return "a task for the agent" or None

The file is reloaded when it changes (a broken edit is logged and the previous version kept). It runs with the
person's rights, so it may not lie where its tasks write (orchestrator/triggers/authority.py).
Every task's result goes to structlog and to <home>/reflect/<trigger name>.jsonl.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Optional

import structlog

from configs import Settings
from configs.logs import redact_text
from orchestrator.triggers.activity import Clock, local_now
from orchestrator.triggers.authority import writable_by_tasks, writable_problem
from orchestrator.triggers.pyfile import PyFileError, load_python_file
from orchestrator.triggers.worktask import DaemonRecord, append_jsonl, run_task

log = structlog.get_logger("ga.reflect")
DEFAULT_INTERVAL = 60.0
CHECK_HOW = "def check() -> str | None: return a task for the agent, or None"


class TriggerError(PyFileError):
    """A trigger file that cannot be used; str() is one line naming the file and the fix."""


@dataclass
class Trigger:
    path: Path
    check: Callable[[], object]  # the trigger file's: a task, or None (checked when it answers)
    interval: float
    once: bool
    stamp: tuple[int, int]

    @property
    def name(self) -> str:
        return self.path.stem


@dataclass
class ReflectSummary:
    trigger: Path
    log_path: Path
    cycles: int = 0
    records: list[DaemonRecord] = field(default_factory=list)
    stopped_by: str = ""  # once | max_cycles | signal


def load_trigger(path: Path, writable: Iterable[Path] = ()) -> Trigger:
    """Load and validate a trigger file; TriggerError (one line) if it cannot be used, or lies in `writable`
    (where its tasks may write)."""
    path = Path(path)
    problem = writable_problem(path, "reflect trigger", writable)
    if problem:
        raise TriggerError(problem)
    try:
        module = load_python_file(path, "reflect trigger", required={"check": CHECK_HOW})
    except PyFileError as exc:
        raise TriggerError(str(exc)) from None
    interval = getattr(module, "INTERVAL", DEFAULT_INTERVAL)
    once = getattr(module, "ONCE", False)
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval < 0:
        raise TriggerError(f"{path}: INTERVAL = {interval!r} is not a number of seconds >= 0; "
                           "write e.g. INTERVAL = 1800")
    if not isinstance(once, bool):
        raise TriggerError(f"{path}: ONCE = {once!r} is not True or False; write ONCE = True or ONCE = False")
    return Trigger(path, module.check, float(interval), once, _stamp(path))


def reflect_log_path(home: Path, trigger: Path) -> Path:
    return Path(home).expanduser() / "reflect" / f"{Path(trigger).stem}.jsonl"


def reflect(trigger_path: Path, settings: Settings, *, model_name: Optional[str] = None,
            workdir: Optional[Path] = None, max_cycles: Optional[int] = None,
            stop: Optional[threading.Event] = None, now: Optional[Clock] = None,
            on_record: Optional[Callable[[DaemonRecord], None]] = None) -> ReflectSummary:
    """Call check() every INTERVAL seconds and run the tasks it returns, until ONCE, max_cycles or `stop`."""
    clock = now or local_now
    stop = stop or threading.Event()
    writable = writable_by_tasks(settings, [workdir])
    trigger = load_trigger(trigger_path, writable)
    summary = ReflectSummary(trigger.path, reflect_log_path(settings.home_dir, trigger.path))

    def note(record: DaemonRecord) -> None:
        record = {"time": clock().isoformat(), "trigger": str(trigger.path), "cycle": summary.cycles, **record}
        append_jsonl(summary.log_path, record)
        summary.records.append(record)
        if on_record:
            on_record(record)

    log.info("reflect_started", trigger=str(trigger.path), interval=trigger.interval, once=trigger.once)
    while not stop.is_set():
        trigger = _reloaded(trigger, note, writable)
        summary.cycles += 1
        task = _check(trigger, note)
        if task is not None:
            log.info("reflect_task", trigger=trigger.name, cycle=summary.cycles, task=redact_text(task[:200]))
            result = run_task(task, settings, kind="reflect", model_name=model_name, workdir=workdir, now=clock)
            note({"event": "task", "task": redact_text(task), **result})
            log.info("reflect_result", trigger=trigger.name, status=result["status"], turns=result.get("turns"),
                     tokens=result.get("tokens"), reason=result.get("reason") or None)
            if trigger.once:
                summary.stopped_by = "once"
                break
        if max_cycles is not None and summary.cycles >= max_cycles:
            summary.stopped_by = "max_cycles"
            break
        stop.wait(trigger.interval)
    else:
        summary.stopped_by = "signal"
    log.info("reflect_stopped", trigger=str(trigger.path), cycles=summary.cycles, why=summary.stopped_by)
    return summary


def _check(trigger: Trigger, note: Callable[[DaemonRecord], None]) -> Optional[str]:
    try:
        task = trigger.check()
    except Exception as exc:  # the user's code: report it and keep polling
        note({"event": "check_failed", "error": f"{type(exc).__name__}: {exc}"})
        log.error("reflect_check_failed", trigger=str(trigger.path), error=f"{type(exc).__name__}: {exc}")
        return None
    if task is None or (isinstance(task, str) and not task.strip()):
        return None
    if not isinstance(task, str):
        note({"event": "check_failed", "error": f"check() returned {type(task).__name__}, not a str or None"})
        log.error("reflect_check_bad_return", trigger=str(trigger.path), returned=type(task).__name__,
                  fix="return a task string or None")
        return None
    return task


def _reloaded(trigger: Trigger, note: Callable[[DaemonRecord], None], writable: Iterable[Path]) -> Trigger:
    stamp = _stamp(trigger.path)
    if stamp == trigger.stamp:
        return trigger
    try:
        fresh = load_trigger(trigger.path, writable)
    except TriggerError as exc:
        trigger.stamp = stamp  # report a broken edit once, keep running the last good version
        note({"event": "reload_failed", "error": str(exc)})
        log.error("reflect_reload_failed", error=str(exc), kept="the previous version")
        return trigger
    note({"event": "reloaded", "interval": fresh.interval, "once": fresh.once})
    log.info("reflect_reloaded", trigger=str(fresh.path), interval=fresh.interval, once=fresh.once)
    return fresh


def _stamp(path: Path) -> tuple[int, int]:
    try:
        stat = path.stat()
    except FileNotFoundError:
        return (0, -1)
    return (stat.st_mtime_ns, stat.st_size)
