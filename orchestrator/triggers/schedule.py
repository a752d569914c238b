"""`ga schedule`: tick, decide (orchestrator.triggers.jobrules), run, persist — one scheduler per GA_HOME.

<home>/schedule/state.json     per job: the newest handled slot, the last run; replaced atomically
                               (temp + fsync + rename) before and after every run, so a restart
                               neither repeats nor skips a slot
<home>/schedule/history.jsonl  one line per run, skip or interrupted run ("why": the rule that decided it;
                               "reason": why a run failed)
<home>/schedule/lock           flock held by the running scheduler

A run that was under way when the scheduler died is not repeated (at most once): it is recorded as
interrupted on the next start.
"""
from __future__ import annotations

import json
import os
import threading
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable, Iterator, Optional

import structlog

from configs import Settings
from memory_shared import Archive, MemoryStore, MemoryStoreError
from memory_shared.fsutil import HeldElsewhere, atomic_replace, single_instance
from memory_shared.jsontypes import JSONObject
from orchestrator.triggers.activity import Clock, local_now
from orchestrator.triggers.authority import writable_by_tasks, writable_problem
from orchestrator.triggers.jobrules import JobState, after_run_started, after_skip, decide
from orchestrator.triggers.jobs import ArchiveCompressArgs, Job, JobsError, load_jobs
from orchestrator.triggers.worktask import DaemonRecord, TriggeredRun, append_jsonl, run_task

log = structlog.get_logger("ga.schedule")
STATE_VERSION = 1


class ScheduleError(ValueError):
    """A user-caused problem (busy, corrupt state); str() is one line with the fix."""


@dataclass
class StoredJob:
    state: JobState = field(default_factory=JobState)
    last_status: Optional[str] = None
    last_end: Optional[datetime] = None
    running_pid: Optional[int] = None  # set while a run is under way


@dataclass
class ScheduleSummary:
    ticks: int = 0
    records: list[DaemonRecord] = field(default_factory=list)


def schedule_dir(home: Path) -> Path:
    return Path(home).expanduser() / "schedule"


# ---- state ---------------------------------------------------------------------------------------

def load_state(path: Path) -> dict[str, StoredJob]:
    """Read state.json (missing: empty); ScheduleError if it is unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {name: _stored_from(body) for name, body in data["jobs"].items()}
    except FileNotFoundError:
        return {}
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ScheduleError(f"{path}: unreadable scheduler state ({type(exc).__name__}: {exc}); move it aside "
                            "to start afresh (each job then runs at its next slot, or catches up its last one)") from None


def save_state(path: Path, jobs: dict[str, StoredJob]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"version": STATE_VERSION, "jobs": {name: _stored_to(stored) for name, stored in sorted(jobs.items())}}
    atomic_replace(path, json.dumps(body, indent=1).encode())


def _stored_to(stored: StoredJob) -> dict[str, object]:
    state = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in asdict(stored.state).items()}
    return {**state, "last_status": stored.last_status, "running_pid": stored.running_pid,
            "last_end": stored.last_end.isoformat() if stored.last_end else None}


def _stored_from(body: JSONObject) -> StoredJob:
    def when(key: str) -> Optional[datetime]:
        return datetime.fromisoformat(body[key]) if body.get(key) else None

    state = JobState(last_slot=when("last_slot"), last_run=when("last_run"), runs=int(body.get("runs", 0)),
                     skips=int(body.get("skips", 0)))
    return StoredJob(state, body.get("last_status"), when("last_end"), body.get("running_pid"))


@contextmanager
def scheduler_lock(home: Path) -> Iterator[None]:
    """One scheduler per GA_HOME: two would both run every job."""
    folder = schedule_dir(home)
    try:
        with single_instance(folder / "lock"):
            yield
    except HeldElsewhere as held:
        raise ScheduleError(f"{folder}: another `ga schedule` (pid {held.holder}) is running with this GA_HOME; "
                            "stop it first, or use another --home") from None


# ---- running -------------------------------------------------------------------------------------

def run_schedule(jobs_path: Path, settings: Settings, *, once: bool = False, tick: float = 30.0,
                 max_ticks: Optional[int] = None, stop: Optional[threading.Event] = None,
                 now: Optional[Clock] = None, model_name: Optional[str] = None,
                 on_record: Optional[Callable[[DaemonRecord], None]] = None) -> ScheduleSummary:
    """Run due jobs every `tick` seconds until `stop` (or after one pass with `once`)."""
    clock = now or local_now
    stop = stop or threading.Event()
    folder = schedule_dir(settings.home_dir)
    state_path, history = folder / "state.json", folder / "history.jsonl"
    jobs = checked_jobs(jobs_path, settings)
    stamp = _stamp(jobs_path)
    summary = ScheduleSummary()

    def note(record: DaemonRecord) -> None:
        record = {"time": clock().isoformat(), **record}
        append_jsonl(history, record)
        summary.records.append(record)
        if on_record:
            on_record(record)

    with scheduler_lock(settings.home_dir):
        stored = load_state(state_path)
        _note_interrupted(stored, state_path, note)
        log.info("schedule_started", jobs=[job.name for job in jobs], file=str(jobs_path), once=once)
        while not stop.is_set():
            if _stamp(jobs_path) != stamp:
                stamp = _stamp(jobs_path)
                jobs = _reloaded(jobs_path, jobs, note, settings)
            for job in jobs:
                if stop.is_set():
                    break
                stored.setdefault(job.name, StoredJob())
                decision = decide(job, stored[job.name].state, clock())
                slot = decision.slot  # set for "skip" and "run"
                if decision.action == "skip" and slot is not None:
                    _skip(job, slot, decision.reason, stored, state_path, note)
                elif decision.action == "run" and slot is not None:
                    _run(job, slot, decision.reason, stored, state_path, settings, clock, model_name, note)
            summary.ticks += 1
            if once or (max_ticks is not None and summary.ticks >= max_ticks):
                break
            stop.wait(tick)
    log.info("schedule_stopped", ticks=summary.ticks, records=len(summary.records))
    return summary


def _skip(job: Job, slot: datetime, reason: str, stored: dict[str, StoredJob], state_path: Path,
          note: Callable[[DaemonRecord], None]) -> None:
    entry = stored[job.name]
    entry.state = after_skip(entry.state, slot)
    save_state(state_path, stored)
    note({"job": job.name, "event": "skipped", "slot": slot.isoformat(), "why": reason})
    log.warning("job_skipped", job=job.name, reason=reason)


def _run(job: Job, slot: datetime, reason: str, stored: dict[str, StoredJob], state_path: Path, settings: Settings,
         clock: Clock, model_name: Optional[str], note: Callable[[DaemonRecord], None]) -> None:
    entry = stored[job.name]
    started = clock()
    entry.state = after_run_started(entry.state, slot, started)
    entry.running_pid = os.getpid()
    save_state(state_path, stored)  # before the run: a crash during it must not repeat it
    log.info("job_started", job=job.name, reason=reason)
    if job.builtin is not None:
        result = run_builtin(job, settings, clock)
    elif job.task is not None:
        result = run_task(job.task, settings, kind="schedule", model_name=job.model or model_name,
                          workdir=job.workdir, now=clock)
    else:  # Job's validator refuses a job with neither
        raise JobsError(f"job {job.name}: give 'task' or 'builtin'")
    entry.running_pid, entry.last_status, entry.last_end = None, result["status"], clock()
    save_state(state_path, stored)
    note({"job": job.name, "event": "ran", "slot": slot.isoformat(), "why": reason, **result})
    log.info("job_finished", job=job.name, status=result["status"], reason=result.get("reason") or None)


def run_builtin(job: Job, settings: Settings, clock: Clock) -> TriggeredRun:
    """The built-in jobs; a failure a user can fix is a failed status, never an exception."""
    started = clock()
    try:
        if job.builtin == "archive_compress":
            if not MemoryStore.exists(settings.memory_root):
                return {"status": "failed", "started": started.isoformat(),
                        "reason": f"no memory store at {settings.memory_root}; run `ga memory init` or set GA_HOME"}
            args = ArchiveCompressArgs.model_validate(job.args)
            archive = Archive(settings.memory_root, keep_months=settings.memory.archive_keep_months)
            done = archive.compress(older_than_days=args.older_than_days, now=started)
            compressed, months_dropped = len(done["compressed"]), done["months_dropped"]
        else:  # the schema admits no other name
            raise AssertionError(job.builtin)
    except (MemoryStoreError, OSError) as exc:
        return {"status": "failed", "reason": str(exc), "started": started.isoformat()}
    return {"status": "succeeded", "builtin": job.builtin, "compressed": compressed, "months_dropped": months_dropped,
            "started": started.isoformat(), "seconds": round((clock() - started).total_seconds(), 3)}


def _note_interrupted(stored: dict[str, StoredJob], state_path: Path, note: Callable[[DaemonRecord], None]) -> None:
    """Runs left under way by a scheduler that died: record them, never repeat them."""
    interrupted = [name for name, entry in stored.items() if entry.running_pid is not None]
    for name in interrupted:
        entry = stored[name]
        note({"job": name, "event": "interrupted", "pid": entry.running_pid,
              "slot": entry.state.last_slot.isoformat() if entry.state.last_slot else None,
              "why": "the scheduler stopped during this run; it is not repeated"})
        log.warning("job_interrupted", job=name, pid=entry.running_pid)
        entry.running_pid, entry.last_status = None, "interrupted"
    if interrupted:
        save_state(state_path, stored)


def checked_jobs(path: Path, settings: Settings) -> list[Job]:
    """The jobs of `path`; JobsError (one line) also when the file lies where its task jobs may write: it says
    what runs next, in which directory and with which model (orchestrator/triggers/authority.py)."""
    jobs = load_jobs(path)
    workdirs = [None, *(job.workdir for job in jobs if job.task)]
    problem = writable_problem(path, "jobs file", writable_by_tasks(settings, workdirs))
    if problem:
        raise JobsError(problem)
    return jobs


def _reloaded(path: Path, current: list[Job], note: Callable[[DaemonRecord], None], settings: Settings) -> list[Job]:
    try:
        jobs = checked_jobs(path, settings)
    except JobsError as exc:
        note({"event": "reload_failed", "error": str(exc)})
        log.error("schedule_reload_failed", error=str(exc), kept="the previous jobs")
        return current
    note({"event": "reloaded", "jobs": [job.name for job in jobs]})
    log.info("schedule_reloaded", jobs=[job.name for job in jobs])
    return jobs


def _stamp(path: Path) -> tuple[int, int]:
    try:
        stat = Path(path).stat()
    except FileNotFoundError:
        return (0, -1)
    return (stat.st_mtime_ns, stat.st_size)
